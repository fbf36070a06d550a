"""How a sleuth process gets the memory of its large arrays: set once, by the process's entry point.

The localizer, the workers and ``sleuth localize`` build and drop arrays of tens to hundreds of MB
every round (a column of a window's records). With the defaults, each of them costs the kernel work
again on every round, which at 8,192 GPUs took more time than the arithmetic
(``benchmarks/RESULTS.md``, "The memory allocator"):

* numpy asks for transparent huge pages on every array of 4 MB or more (``madvise``); under the
  kernel's default defrag policy (``madvise``) such a fault may compact memory synchronously;
* glibc maps every allocation over its dynamic threshold (at most 32 MB) afresh and unmaps it on
  free, so the next round's array is faulted in and zeroed page by page again.

The process's entry point (``sleuth.cli.entry``) calls ``tune_for_large_arrays``, not ``main``:
a library caller, or a training job that imports the logger, keeps its allocator as it was (the
test suite calls it itself, to run sleuth's code as the program runs it). A variable the operator set (``NUMPY_MADVISE_HUGEPAGE``, ``MALLOC_MMAP_THRESHOLD_``,
``MALLOC_TRIM_THRESHOLD_``) wins over these settings.
"""

from __future__ import annotations

import ctypes
import os
import platform
from collections.abc import Mapping

import numpy as np

__all__ = ["HEAP_THRESHOLD", "tune_for_large_arrays"]

#: Allocations up to this size come from the heap and freed heap is kept up to this size: a round's
#: arrays reuse the pages the round before faulted in (mallopt takes a C int, so at most 2 GiB - 1).
HEAP_THRESHOLD = 1 << 30

# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def tune_for_large_arrays(environ: Mapping[str, str] = os.environ) -> list[str]:
    """Keep large arrays' pages in the process and leave numpy's huge-page advice off, except where
    ``environ`` names the setting; returns the settings changed (none off glibc for the heap's)."""
    changed = []
    if "NUMPY_MADVISE_HUGEPAGE" not in environ:
        _numpy_multiarray()._set_madvise_hugepage(False)
        changed.append("numpy huge-page advice off")
    if platform.libc_ver()[0] != "glibc":
        return changed
    mallopt = ctypes.CDLL(None).mallopt
    for name, parameter in (("MALLOC_MMAP_THRESHOLD_", _M_MMAP_THRESHOLD), ("MALLOC_TRIM_THRESHOLD_", _M_TRIM_THRESHOLD)):
        if name not in environ and mallopt(ctypes.c_int(parameter), ctypes.c_int(HEAP_THRESHOLD)) == 1:
            changed.append(f"{name.lower().strip('_')} {HEAP_THRESHOLD}")
    return changed


def _numpy_multiarray():
    """numpy's multiarray module, which holds the huge-page switch (``numpy._core`` from numpy 2)."""
    core = getattr(np, "_core", None)
    return core.multiarray if core is not None else np.core.multiarray
