"""Chooses the recorder implementation at import: the C extension, else its pure-Python twin.

``SLEUTH_LOGGER_IMPL`` (``c`` or ``python``) forces one; like markupsafe's speedups, this
choice is made once when the module is imported. ``load(name)`` gives either twin explicitly,
which is how the tests run one suite against both.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import numpy as np

__all__ = ["IMPLEMENTATIONS", "RECORD_DTYPE", "impl", "load", "records_from_bytes"]

#: The name of each twin's module.
IMPLEMENTATIONS = {"c": "sleuth.logger._commops", "python": "sleuth.logger._commops_py"}

#: The layout of one record as ``Recorder.drain`` returns it (the C ``Record`` struct).
RECORD_DTYPE = np.dtype(
    {
        "names": ["t_issue_ns", "t_start_ns", "t_end_ns", "seq", "nbytes", "iteration", "comm", "peer", "op"],
        "formats": ["<i8", "<i8", "<i8", "<u8", "<u8", "<i8", "<u4", "<i4", "u1"],
        "offsets": [0, 8, 16, 24, 32, 40, 48, 52, 56],
        "itemsize": 64,
    }
)


def load(name: str) -> ModuleType:
    """The twin called ``name`` (``"c"`` or ``"python"``); ImportError when it cannot load."""
    try:
        return importlib.import_module(IMPLEMENTATIONS[name])
    except KeyError:
        raise ValueError(f"SLEUTH_LOGGER_IMPL={name!r}: expected one of {', '.join(IMPLEMENTATIONS)}") from None


def _choose() -> ModuleType:
    # Read here, at import, because the choice must be made before any recorder exists.
    forced = os.environ.get("SLEUTH_LOGGER_IMPL", "")
    if forced:
        return load(forced)
    try:
        return load("c")
    except ImportError:
        return load("python")


def records_from_bytes(data: bytes) -> np.ndarray:
    """The structured array (``RECORD_DTYPE``) of bytes from ``Recorder.drain``."""
    return np.frombuffer(data, dtype=RECORD_DTYPE)


#: The chosen twin: ``impl.Recorder``, ``impl.now_ns``, ``impl.cuda_available``.
impl: ModuleType = _choose()
