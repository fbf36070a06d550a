"""sleuth's NCCL profiler plugin, attached to this process's logger so that its records stream.

When ``NCCL_PROFILER_PLUGIN`` names ``libnccl-profiler-sleuth.so`` (a path, or ``sleuth``, from
which NCCL loads ``libnccl-profiler-sleuth.so`` through the library path), the logger loads the
same library with ``dlopen``: one file opened twice is one instance, whether NCCL opens it before
or after, so NCCL's calls and ours meet the same state. It then hands the plugin the C API of its
recorder (the capsule ``_commops._C_API``, functions safe without the GIL) and the recorder: from
then on the plugin puts its records into the logger's ring instead of its files, and the drainer
sends them wherever it sends the rest (``nccl_comms`` maps their communicators). The plugin's
functions are declared in ``logger/nccl_profiler/sleuth_nccl_attach.h``.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sleuth.errors import ConfigError
from sleuth.logger import core
from sleuth.logger.nccl_comms import PluginComm

__all__ = ["LIBRARY", "Plugin", "named"]

#: The file NCCL loads for ``NCCL_PROFILER_PLUGIN=sleuth`` (``libnccl-profiler-<name>.so``).
LIBRARY = "libnccl-profiler-sleuth.so"

_CAPSULE = b"sleuth.logger._commops._C_API"


def named(environ: Mapping[str, str]) -> str | None:
    """What to load when ``NCCL_PROFILER_PLUGIN`` names sleuth's plugin (path or ``sleuth``), else None."""
    plugin = environ.get("NCCL_PROFILER_PLUGIN", "")
    if plugin == "sleuth":
        return LIBRARY
    return plugin if Path(plugin).name.startswith("libnccl-profiler-sleuth") else None


class _Comm(ctypes.Structure):
    """``SleuthNcclComm`` of sleuth_nccl_attach.h."""

    _fields_ = [
        ("hash", ctypes.c_uint64), ("index", ctypes.c_int32), ("nranks", ctypes.c_int32),
        ("rank", ctypes.c_int32), ("nnodes", ctypes.c_int32), ("name", ctypes.c_char * 128),
    ]


class Plugin:
    """The loaded plugin; ConfigError naming the library when it cannot be loaded or lacks the hand-over."""

    def __init__(self, path: str) -> None:
        self.path = path
        where = f"NCCL_PROFILER_PLUGIN names {path}"
        try:
            lib = ctypes.CDLL(path)
        except OSError as error:
            raise ConfigError(f"{where}, which cannot be loaded: {error}") from None
        try:
            self._attach = lib.sleuth_nccl_profiler_attach
            self._detach = lib.sleuth_nccl_profiler_detach
            self._comms = lib.sleuth_nccl_profiler_comms
        except AttributeError:
            raise ConfigError(f"{where}, built without the logger's hand-over (sleuth_nccl_profiler_attach): "
                              "rebuild it (make -C logger/nccl_profiler)") from None
        self._attach.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self._attach.restype = ctypes.c_int
        self._detach.argtypes = []
        self._detach.restype = None
        self._comms.argtypes = [ctypes.c_int, ctypes.POINTER(_Comm), ctypes.c_int]
        self._comms.restype = ctypes.c_int
        self._lib = lib  # kept: the library stays loaded while this process may call it

    def attach(self, recorder: Any) -> None:
        """Records go into ``recorder``'s ring from now on. ``recorder`` is kept alive for good:
        NCCL's threads may record into it until the process ends."""
        if core.impl.IMPLEMENTATION != "c" or not hasattr(core.impl, "_C_API"):
            raise ConfigError(f"the recorder is the pure-Python twin ({core.impl.__name__}): the NCCL plugin "
                              "needs the C one to record into")
        get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
        get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        get_pointer.restype = ctypes.c_void_p
        api = get_pointer(core.impl._C_API, _CAPSULE)
        # One reference never released: the plugin holds the recorder's address (CPython: id()).
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(recorder))
        result = self._attach(api, id(recorder))
        if result != 0:
            ctypes.pythonapi.Py_DecRef(ctypes.py_object(recorder))
            why = "a null argument" if result < 0 else f"it was built for the logger's C API version {result}"
            raise ConfigError(f"{self.path} refused the logger's ring ({why}): rebuild it (make -C logger/nccl_profiler)")

    def detach(self) -> None:
        """Records go to the plugin's files again (when SLEUTH_LOG_DIR is set)."""
        self._detach()

    def comms(self, start: int) -> list[PluginComm]:
        """The plugin's communicator table from index ``start`` on."""
        out: list[PluginComm] = []
        chunk = (_Comm * 64)()
        while True:
            n = self._comms(start + len(out), chunk, len(chunk))
            out += [PluginComm(c.index, c.hash, c.name.decode(errors="replace"), c.nranks, c.rank) for c in chunk[:n]]
            if n < len(chunk):
                return out
