"""Cross-iteration analysis (Holmes §4.4): how much a root operator drives the iteration time.

The irregularity rate of a root is the Pearson correlation, over the T iterations of the
window, between the root operator's delay series and the iteration-time series. The delay
series is the part of the operator the cause names: its *transfer* for a network root, its
*lateness* (how long the others blocked for the late rank) for a compute root; both from
``sleuth.localizer.timing``. A correlation below zero means the operator does not drive the
iteration time: it is clamped to 0, as is an undefined one (a constant series).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from sleuth.records import IterationBatch
from sleuth.sources import RecordSource

from sleuth.localizer.operators import RankOperators, Window
from sleuth.localizer.search import Cause, Root
from sleuth.localizer.timing import split

__all__ = ["irregularity_rate", "iteration_times", "root_series"]


def iteration_times(source: RecordSource, *, ranks: Sequence[int], window: Window) -> np.ndarray:
    """Per window column, the mean iteration time (ns) of ``ranks``; NaN where none is recorded."""
    batch: IterationBatch = source.iterations(ranks=list(ranks), iterations=window.iterations.tolist())
    times = np.full(len(window), np.nan)
    if not len(batch):
        return times
    col = np.searchsorted(window.iterations, batch["iteration"])
    ok = (col < len(window))
    ok[ok] = window.iterations[col[ok]] == batch["iteration"][ok]
    span = (batch["t_end_ns"] - batch["t_start_ns"]).astype(np.float64)
    total = np.bincount(col[ok], weights=span[ok], minlength=len(window))
    count = np.bincount(col[ok], minlength=len(window))
    seen = count > 0
    times[seen] = total[seen] / count[seen]
    return times


def root_series(root: Root, operators: Mapping[int, RankOperators]) -> np.ndarray:
    """The root operator's delay per window column: transfer (network) or lateness (compute)."""
    if len(root.members) < 2:
        ops = operators[root.members[0]]
        row = root.rows[0]
        return np.where(ops.present[row], ops.end[row] - ops.start[row], np.nan).astype(np.float64)
    timing = split([(operators[m], r) for m, r in zip(root.members, root.rows)])
    return timing.transfer if root.cause is Cause.NETWORK else timing.lateness


def irregularity_rate(series: np.ndarray, times: np.ndarray) -> float:
    """Pearson correlation of ``series`` with ``times`` over columns where both are known, in [0, 1]."""
    both = np.isfinite(series) & np.isfinite(times)
    if both.sum() < 3:
        return 0.0
    x, y = series[both], times[both]
    x = x - x.mean()
    y = y - y.mean()
    denominator = float(np.sqrt((x * x).sum() * (y * y).sum()))
    if denominator == 0.0:
        return 0.0
    return float(min(1.0, max(0.0, (x * y).sum() / denominator)))
