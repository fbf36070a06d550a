"""Sorting and grouping of packed integer keys, cheaper than ``np.unique``/``np.lexsort``, same results.

One ``argsort`` of one int64 key costs about a third of a two-key ``lexsort`` (an indirect merge
sort per key) and half of ``np.unique(..., return_inverse=True)``; ties come out in another order,
so these serve only where tied elements are interchangeable (equal keys, equal values). A sort of
keys that come in runs (a batch's records: a rank's program, rank after rank) is numpy's stable one
(timsort), which merges them instead of partitioning, about twice as quick here as the default sort.
"""

from __future__ import annotations

import numpy as np

__all__ = ["by_group_then_value", "unique_inverse"]


def unique_inverse(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(packed, return_inverse=True)`` of a 1-D integer array."""
    order = np.argsort(packed, kind="stable")
    ordered = packed[order]
    change = np.empty(len(ordered), bool)
    change[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=change[1:])
    inverse = np.empty(len(ordered), np.int64)
    inverse[order] = np.cumsum(change) - 1
    return ordered[change], inverse


def by_group_then_value(group: np.ndarray, values: np.ndarray) -> np.ndarray:
    """An order sorting by ``group`` (non-negative integers), then ``values`` (floats, no NaN), as
    ``np.lexsort((values, group))`` does but for the order among equal (group, value) pairs."""
    n = len(values)
    if not n:
        return np.zeros(0, np.int64)
    top = int(group.max())
    low, high = float(values.min()), float(values.max())
    span = high - low
    # Integer-valued floats (durations in ns) pack beside the group into one key, losslessly. Its
    # values within a group come in no order, which timsort pays for: the default sort, about half the time.
    if span < 2**40 and top < 2**22 and np.array_equal(values, np.floor(values)):
        return np.argsort((group.astype(np.int64) << 40) | (values - low).astype(np.int64))
    rank = np.empty(n, np.int64)
    rank[np.argsort(values, kind="stable")] = np.arange(n)
    return np.argsort(group.astype(np.int64) * n + rank, kind="stable")
