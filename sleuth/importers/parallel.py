"""Read a tool's files in worker processes: each file (one per rank or process) stands alone,
and parsing JSON or pickles in Python is the import's cost (about 40,000 records/s per core)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from typing import TypeVar

__all__ = ["map_files"]

_Item = TypeVar("_Item")
_Result = TypeVar("_Result")


def map_files(function: Callable[[_Item], _Result], items: Iterable[_Item], *, workers: int) -> list[_Result]:
    """``[function(item) for item in items]``, in ``workers`` processes when there are several;
    the first error a worker raises is raised here, as it was raised."""
    items = list(items)
    if workers <= 1 or len(items) <= 1:
        return [function(item) for item in items]
    with ProcessPoolExecutor(max_workers=min(workers, len(items))) as pool:
        return list(pool.map(function, items))
