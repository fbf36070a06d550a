"""Rank lists as runs of equal steps: how a large job's member lists travel compactly.

The groups of a regular layout are arithmetic progressions (a tensor-parallel group is 8
consecutive ranks, a data-parallel one every 64th rank, the world 0..n-1), so a list of 16,384
ranks is one run ``(start, count, step)`` while an irregular list costs a run per stretch.
``runs`` keeps the order of the list (a group's ranks are in group-rank order), and
``expand(runs(ranks)) == ranks`` for any list of non-negative ranks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from sleuth.errors import ConfigError
from sleuth.validation import is_int

__all__ = ["Run", "expand", "runs"]

#: (first rank, how many, step between two ranks)
Run = tuple[int, int, int]


def runs(ranks: Sequence[int]) -> list[Run]:
    """The greedy cover of ``ranks``, in order, by runs of one step each (a list of n ranks takes
    O(n) numpy work and O(log n) Python steps a run, so a rank encodes the world group in microseconds)."""
    values = np.asarray(ranks, np.int64)
    n = len(values)
    steps = np.diff(values)
    # Where the step between neighbours changes: a run that starts at i ends at the next change.
    changes = np.flatnonzero(steps[1:] != steps[:-1]) + 1
    out: list[Run] = []
    i = 0
    while i < n:
        step = int(steps[i]) if i + 1 < n else 1
        if i + 1 == n or step < 1:  # the last rank, or a step down or a repeat: one rank alone
            out.append((int(values[i]), 1, 1))
            i += 1
            continue
        k = int(np.searchsorted(changes, i, side="right"))
        last = int(changes[k]) if k < len(changes) else n - 1
        out.append((int(values[i]), last - i + 1, step))
        i = last + 1
    return out


def expand(items: Iterable[Sequence[int]], *, below: int, where: str = "runs") -> tuple[int, ...]:
    """The ranks of ``runs``' output, each under ``below`` (the world; checked before a run is
    expanded, so that a hostile count costs nothing); ``ConfigError`` naming ``where`` and the run."""
    ranks: list[int] = []
    for index, item in enumerate(items):
        if len(item) != 3 or not all(is_int(v) for v in item):
            raise ConfigError(f"{where}[{index}]: expected [start, count, step] integers, got {list(item)!r}")
        start, count, step = (int(v) for v in item)
        if start < 0 or count < 1 or step < 1:
            raise ConfigError(f"{where}[{index}]: start must be >= 0, count and step >= 1, got {list(item)!r}")
        if start + (count - 1) * step >= below:
            raise ConfigError(f"{where}[{index}]: run {list(item)!r} reaches rank {start + (count - 1) * step}, "
                              f"outside the world of {below}")
        ranks.extend(range(start, start + count * step, step))
    return tuple(ranks)
