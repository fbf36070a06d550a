"""Cross-iteration analysis (Holmes §4.4): how much a root operator drives the iteration time.

The irregularity rate of a root is the correlation, over the T iterations of the window,
between the root operator's delay series and the iteration-time series. Holmes uses Pearson's
correlation. Here it is the larger of Pearson's and Pearson's on the ranks of both series
(Spearman's), because each misses what the other sees. One outlier the operator does not share
decides Pearson's: a real job's first iteration (warm-up, 20x the others) or one long pause made
a slowed rank's perfectly tracking delay series score 0 on the real CPU job. Ranks drown a
handful of large columns in the others' noise: a device that spikes in 6 iterations of 100,
making exactly those iterations long, scores 0 on ranks and 1 on values. The delay
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
    """The larger of the value and the rank correlation of ``series`` with ``times`` over columns
    where both are known, in [0, 1]."""
    both = np.isfinite(series) & np.isfinite(times)
    if both.sum() < 3:
        return 0.0
    x, y = series[both].astype(np.float64), times[both].astype(np.float64)
    return max(_correlation(x, y), _correlation(_ranks(x), _ranks(y)))


def _correlation(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson's correlation of ``x`` and ``y`` clamped to [0, 1]; 0 where either is constant."""
    x = x - x.mean()
    y = y - y.mean()
    denominator = float(np.sqrt((x * x).sum() * (y * y).sum()))
    if denominator == 0.0:
        return 0.0
    return float(min(1.0, max(0.0, (x * y).sum() / denominator)))


def _ranks(values: np.ndarray) -> np.ndarray:
    """Ranks of ``values``, ties sharing their average rank (so a constant stretch adds no order)."""
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    return ((ends - counts + ends - 1) / 2.0)[inverse.reshape(-1)]
