"""Each rank's count of steps moved so that a group's members agree on its step."""

from __future__ import annotations

import numpy as np

from sleuth.importers.aligned_steps import aligned_steps


def _job(periods: list[int], steps: int = 6) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Ranks with ``periods`` operators a step; the first 3 and the last of each step are
    collectives of all ranks (group ids by step and index), the rest their own. Returns rank,
    group, the true position along the rank's steps and the true step."""
    rank, group, position, step = [], [], [], []
    lone = 10_000
    for r, period in enumerate(periods):
        for s in range(steps):
            for i in range(period):
                rank.append(r)
                position.append(s * period + i)
                step.append(s)
                if i < 3 or i == period - 1:
                    group.append(s * 4 + min(i, 3))
                else:
                    group.append(lone)
                    lone += 1
    return np.array(rank), np.array(group), np.array(position), np.array(step)


def test_ranks_counted_from_other_operators_are_moved_to_their_peers_steps():
    rank, group, position, step = _job([10, 14, 10])
    counted = position.copy()
    counted[rank == 1] += 2 * 14 + 5  # rank 1 saw 33 more operators before
    counted[rank == 2] -= 7  # rank 2 7 fewer
    periods = np.array([10, 14, 10])
    move = aligned_steps(rank, group, counted, periods)
    assert ((counted + move[rank]) // periods[rank] == step).all()
    assert move[0] == 0


def test_ranks_that_agree_are_not_moved_and_a_rank_without_a_period_is_left_alone():
    rank, group, position, step = _job([10, 10, 12])
    periods = np.array([10, 0, 12])
    move = aligned_steps(rank, group, position, periods)
    assert (move == 0).all()
