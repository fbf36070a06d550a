"""Steps from each rank's period, placed so that every group's members agree on its step.

A rank's stream gives its steps up to where they start: its operators' positions along its
period's motif (:class:`sleuth.logger.period.PeriodicSteps`) count from the job's first
operator, which a wrapped buffer never saw. Ranks whose history before the buffer differs (a
warm-up on some groups only, an operator outside the pattern every few steps, a stage with more
operators a step) would count their steps from different places, and a collective would fall in
step 40 on one member and 54 on another: the replay then reads every group as split.

A collective is one operation of all its members and a send and its receive one transfer, so
they are in one step. Each rank's count is moved by the number of operators that puts the most
of its groups in the step its already placed peers put them in (the one nearest its own count
where several do), rank by rank outward from the lowest rank through the groups they share.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from sleuth.whatif.keys import ranges

__all__ = ["aligned_steps"]


def aligned_steps(rank: np.ndarray, group: np.ndarray, position: np.ndarray, period: np.ndarray) -> np.ndarray:
    """Each rank's move of its count (operators to add to its positions) so that its operators'
    steps, ``(position + move) // period``, agree with its peers' on their ``group`` (dense ids);
    ``period`` is by rank, 0 where a rank has none (its positions are ignored and its move is 0)."""
    ranks = len(period)
    move = np.zeros(ranks, np.int64)
    counted = period[rank] > 0
    rows = np.flatnonzero(counted)
    if not len(rows):
        return move
    by_rank = rows[np.argsort(rank[rows], kind="stable")]
    rank_starts = np.searchsorted(rank[by_rank], np.arange(ranks + 1))
    by_group = rows[np.argsort(group[rows], kind="stable")]
    group_starts = np.searchsorted(group[by_group], np.arange(int(group.max()) + 2))
    step_of_group = np.full(int(group.max()) + 1, np.iinfo(np.int64).min)
    placed = np.zeros(ranks, bool)
    for seed in np.flatnonzero(period > 0).tolist():
        if placed[seed]:
            continue
        queue = deque([seed])
        placed[seed] = True
        while queue:
            r = queue.popleft()
            mine = by_rank[rank_starts[r]:rank_starts[r + 1]]
            groups = group[mine]
            target = step_of_group[groups]
            known = target != np.iinfo(np.int64).min
            if known.any():
                move[r] = _best_move(target[known] * period[r] - position[mine][known], int(period[r]))
            step = (position[mine] + move[r]) // period[r]
            step_of_group[groups[~known]] = step[~known]
            fresh = np.unique(groups[~known])
            peers = np.unique(rank[by_group[ranges(group_starts[fresh], group_starts[fresh + 1])]])
            for peer in peers[~placed[peers]].tolist():
                placed[peer] = True
                queue.append(peer)
    return move


def _best_move(lowest: np.ndarray, period: int) -> int:
    """The move covered by the most of the ranges [lowest, lowest + period), of those the nearest 0."""
    points = np.r_[lowest, lowest + period]
    change = np.r_[np.ones(len(lowest), np.int64), -np.ones(len(lowest), np.int64)]
    order = np.lexsort((change, points))  # a range's end before another's start at one point
    points, cover = points[order], np.cumsum(change[order])
    best = np.flatnonzero(cover == cover.max())
    low, high = points[best], points[np.minimum(best + 1, len(points) - 1)] - 1
    nearest = np.clip(0, low, high)
    return int(nearest[np.argmin(np.abs(nearest))])

