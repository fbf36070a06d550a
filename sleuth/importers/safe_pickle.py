"""Load a pickle that may only hold builtin containers and scalars: no code runs on load.

``pickle.load`` calls whatever callable a file names (``os.system`` included), so a dump from
an untrusted job must never reach it. This unpickler resolves no global at all, with one
exception that runs no code of the file's choosing: torch's pickler writes typed lists as
``torch.jit._pickle.build_intlist([...])`` (and ``build_doublelist``, ``build_boollist``);
those names resolve to :func:`list` here, without importing torch. Anything else (a class,
a function, a persistent id) is refused with an error that names the file and the global.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

from sleuth.errors import ImportFileError

__all__ = ["load_plain"]

#: The only globals a file may name, and what each becomes: a list of its argument.
_LIST_BUILDERS = {("torch.jit._pickle", name) for name in ("build_intlist", "build_doublelist", "build_boollist")}


class _PlainUnpickler(pickle.Unpickler):
    def __init__(self, data: bytes, source: str) -> None:
        super().__init__(io.BytesIO(data))
        self._source = source

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _LIST_BUILDERS:
            return list
        raise ImportFileError(
            f"{self._source}: the pickle names {module}.{name}; only builtin containers and scalars "
            "are loaded (a pickle that names code would run it)"
        )

    def persistent_load(self, pid: Any) -> Any:
        raise ImportFileError(f"{self._source}: the pickle holds a persistent id ({pid!r}); not loaded")


def load_plain(data: bytes, source: str) -> Any:
    """The object pickled in ``data``, built from builtin containers and scalars only."""
    try:
        return _PlainUnpickler(data, source).load()
    except ImportFileError:
        raise
    except Exception as error:  # a truncated or corrupt pickle: any of pickle's many errors
        raise ImportFileError(f"{source}: not a readable pickle ({type(error).__name__}: {error})") from None
