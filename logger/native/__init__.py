"""The logger's process-group hooks in C++, compiled on first use.

torch calls any Python process-group hook through pybind11, which costs about 3.7 us per
operator before the hook does anything (benchmarks/RESULTS.md). The hooks here are C++
``std::function``s that torch calls directly, and no Python runs per operator: a record is begun
and ended in ``_commops``'s ring through its C API, and the group's first operator calls into
Python once to resolve the group.

The source ships in the package (``process_group_hooks.cpp``) and is compiled with torch's
``cpp_extension.load`` against the torch the job runs, into torch's per-user extensions folder
(``TORCH_EXTENSIONS_DIR``, else ``~/.cache/torch_extensions``) under a name made of the torch
version and a hash of the sources, so a new torch or a changed source builds anew and nothing
else does. Ranks that start together build it once: torch's lock file makes the others wait
(a lock left by a builder that died is dropped after ``STALE_LOCK_S``).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import sys
import time
from pathlib import Path
from types import ModuleType

from sleuth.errors import BuildError

__all__ = ["SOURCES", "extension_name", "load"]

_HERE = Path(__file__).resolve().parent
#: A build lock this old is stale: the build takes about a minute on two loaded cores.
STALE_LOCK_S = 600.0
#: What the extension is built from: its source and the recorder's C headers it includes.
SOURCES = (_HERE / "process_group_hooks.cpp", _HERE.parent / "commops_capi.h", _HERE.parent / "commops_record.h")


def extension_name(torch_version: str) -> str:
    """The module's name (and its build folder's): torch version and a hash of the sources and of
    the include folder. torch's JIT hashes its include paths too: two checkouts sharing one name
    would bump each other's build version and rebuild at every job start."""
    digest = hashlib.blake2b(digest_size=6)
    for path in SOURCES:
        digest.update(path.read_bytes())
    digest.update(str(_HERE.parent.resolve()).encode())
    return f"sleuth_pg_hooks_{re.sub(r'[^0-9A-Za-z]', '_', torch_version)}_{digest.hexdigest()}"


def load() -> ModuleType:
    """The compiled extension (built on the first call in a user's cache); BuildError when this
    machine cannot build it. The answer, module or error, is kept for the process: a failed
    build is not retried at every logger start."""
    answer = _build()
    if isinstance(answer, BuildError):
        raise answer
    return answer


@functools.cache
def _build() -> ModuleType | BuildError:
    try:
        import torch
        from torch.utils import cpp_extension
    except ImportError as error:
        return BuildError(f"torch is not importable: {error}")
    _put_pip_ninja_on_path()
    if not cpp_extension.is_ninja_available():
        return BuildError("ninja is not installed (pip install ninja; the `logger` extra has it)")
    name = extension_name(torch.__version__)
    _drop_stale_lock(cpp_extension, name)
    try:
        return cpp_extension.load(
            name=name,
            sources=[str(SOURCES[0])],
            extra_include_paths=[str(_HERE.parent)],
            extra_cflags=["-O2"],
            with_cuda=False,
        )
    except Exception as error:  # a missing compiler or headers, a compile error: all say why
        return BuildError(f"the native hooks did not build: {_reason(error)}")


def _drop_stale_lock(cpp_extension: ModuleType, name: str) -> None:
    """Remove a build lock older than ``STALE_LOCK_S``: its builder died (a rank killed while it
    built), and torch's lock has no timeout, so every later job would wait for it forever."""
    try:
        lock = Path(cpp_extension._get_build_directory(name, verbose=False)) / "lock"
        if time.time() - lock.stat().st_mtime > STALE_LOCK_S:
            lock.unlink()
    except (AttributeError, OSError):  # no lock (the usual case), or a torch that builds elsewhere
        pass


def _put_pip_ninja_on_path() -> None:
    """torch runs ``ninja`` from PATH; a job started as ``.venv/bin/python`` has the venv's
    (from the ``ninja`` wheel) off PATH."""
    if shutil.which("ninja"):
        return
    try:
        import ninja
    except ImportError:
        return
    bin_dir = getattr(ninja, "BIN_DIR", "") or str(Path(sys.executable).parent)
    os.environ["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])


def _reason(error: BaseException) -> str:
    """The compiler's first error line, else the message's last line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    errors = [line for line in lines if "error:" in line]
    return (errors or lines or [repr(error)])[0 if errors else -1]
