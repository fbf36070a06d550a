"""The allocator settings of a sleuth process (sleuth.allocator), each checked in a fresh process of its
own: they are process-wide, and the test run's own processes already have them (tests/conftest.py)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import textwrap

import pytest

#: Prints what a fresh process's allocator does with a 256 MB array after ``{setup}``: whether numpy
#: advises huge pages, and where glibc put the array (mallinfo2: the heap's arena or its own mapping).
_PROBE = textwrap.dedent("""
    import ctypes, json, sys
    import numpy as np
    {setup}
    class Info(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in
                    ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
    mallinfo2 = ctypes.CDLL(None).mallinfo2
    mallinfo2.restype = Info
    array = np.ones(256 << 17)  # 256 MB
    info = mallinfo2()
    core = getattr(np, "_core", None) or np.core
    print(json.dumps({{"changed": changed, "huge_pages": bool(core.multiarray._get_madvise_hugepage()),
                      "arena": info.arena, "mapped": info.hblkhd}}))
""")


def _probe(setup: str, **env: str) -> dict:
    environ = {k: v for k, v in os.environ.items() if k not in ("NUMPY_MADVISE_HUGEPAGE", "MALLOC_MMAP_THRESHOLD_",
                                                                "MALLOC_TRIM_THRESHOLD_")}
    done = subprocess.run([sys.executable, "-c", _PROBE.format(setup=setup)], env=environ | env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


_TUNED = "from sleuth.allocator import tune_for_large_arrays; changed = tune_for_large_arrays()"

glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the heap settings are glibc's mallopt")


@glibc_only
def test_a_tuned_process_keeps_a_large_array_on_its_heap_without_huge_page_advice():
    tuned = _probe(_TUNED)
    assert tuned["changed"] == ["numpy huge-page advice off", "malloc_mmap_threshold 1073741824",
                                "malloc_trim_threshold 1073741824"]
    assert not tuned["huge_pages"]
    assert tuned["arena"] >= 256 << 20 and tuned["mapped"] < 256 << 20


@glibc_only
def test_an_untuned_process_maps_the_array_apart_and_advises_huge_pages():
    # The baseline the settings change: without them the probe above would not tell them apart.
    untuned = _probe("changed = []")
    assert untuned["mapped"] >= 256 << 20 and untuned["arena"] < 256 << 20
    assert untuned["huge_pages"] == _kernel_at_least(4, 6)


@glibc_only
def test_what_the_operator_set_in_the_environment_wins():
    chosen = _probe(_TUNED, NUMPY_MADVISE_HUGEPAGE="1", MALLOC_MMAP_THRESHOLD_=str(1 << 20))
    assert chosen["changed"] == ["malloc_trim_threshold 1073741824"]
    assert chosen["huge_pages"]
    assert chosen["mapped"] >= 256 << 20


@glibc_only  # the probe reads glibc's mallinfo2
def test_the_sleuth_program_tunes_its_process_and_main_alone_does_not():
    program = _probe("import sys; sys.argv = ['sleuth', 'version']\n"
                     "from sleuth.cli import entry; entry(); changed = []")
    library = _probe("from sleuth.cli import main; main(['version']); changed = []")
    assert not program["huge_pages"]
    assert library["huge_pages"] == _kernel_at_least(4, 6)


def _kernel_at_least(major: int, minor: int) -> bool:
    """numpy advises huge pages by default on Linux 4.6 and newer."""
    if platform.system() != "Linux":
        return False
    found = tuple(int(part) for part in platform.release().split(".")[:2] if part.isdigit())
    return found >= (major, minor)
