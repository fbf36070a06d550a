"""The shared replay: exact arithmetic on hand-made chains and groups."""

from __future__ import annotations

import numpy as np
import pytest

from sleuth.errors import RecordError
from sleuth.whatif.timeline import dependencies, downstream, replay


def two_ranks():
    # Rank 0: compute 10 then all-reduce A (group 0) then all-reduce B (group 1).
    # Rank 1: compute 30 then A, then B. A's transfer 5, B's 7; ops 1 and 3 follow after a gap of 2.
    first = np.array([True, False, True, False])
    holds = np.ones(4, bool)
    group = np.array([0, 1, 0, 1])
    complete = np.ones(4, bool)
    gap = np.array([10.0, 2.0, 30.0, 2.0])
    transfer = np.array([5.0, 7.0, 5.0, 7.0])
    return dependencies(first, holds, group, complete), gap, transfer


def test_a_group_ends_its_transfer_after_its_last_member_started() -> None:
    deps, gap, transfer = two_ranks()
    start, end = replay(deps, anchor=np.zeros(4), gap=gap, transfer=transfer, own=np.zeros(4))
    assert start.tolist() == [10, 37, 30, 37]
    assert end.tolist() == [35, 44, 35, 44]
    assert deps.acyclic and deps.levels == 2


def test_variants_on_a_second_axis_replay_as_one_each() -> None:
    deps, gap, transfer = two_ranks()
    faster = gap.copy()
    faster[2] = 10.0
    both = replay(deps, anchor=np.zeros(4), gap=np.stack([gap, faster], axis=1), transfer=transfer, own=np.zeros(4))
    alone = replay(deps, anchor=np.zeros(4), gap=faster, transfer=transfer, own=np.zeros(4))
    assert np.array_equal(both[1][:, 1], alone[1]) and both[1][:, 1].max() == 24


def test_a_send_does_not_hold_its_rank_and_incomplete_groups_keep_their_own_length() -> None:
    # Rank 0 sends (does not hold) then computes 4 and runs op 1, whose group has members elsewhere.
    first = np.array([True, False, True])
    holds = np.array([False, True, True])
    group = np.array([0, 1, 0])
    complete = np.array([True, False, True])
    start, end = replay(dependencies(first, holds, group, complete), anchor=np.zeros(3),
                        gap=np.array([1.0, 4.0, 9.0]), transfer=np.array([3.0, 0.0, 3.0]), own=np.array([0.0, 6.0, 0.0]))
    assert start.tolist() == [1, 5, 9] and end.tolist() == [12, 11, 12]


def test_chains_that_contradict_their_groups_leave_the_cycle_unsettled() -> None:
    # Rank 0 runs A then B, rank 1 B then A, each holding: no order satisfies both.
    deps = dependencies(np.array([True, False, True, False]), np.ones(4, bool), np.array([0, 1, 1, 0]), np.ones(4, bool))
    assert not deps.acyclic and not deps.settled[[1, 3]].any()


def test_what_waits_on_an_incomplete_group_is_downstream_of_it() -> None:
    # Rank 0: op 0 (group 0, incomplete), op 1 (group 1 with rank 1's op 3); rank 1: op 2 (group 2), op 3.
    first = np.array([True, False, True, False])
    deps = dependencies(first, np.ones(4, bool), np.array([0, 1, 2, 1]), np.array([False, True, True, True]))
    assert downstream(deps, ~deps.complete).tolist() == [True, True, False, True]


def test_arrays_of_different_lengths_are_refused() -> None:
    with pytest.raises(RecordError, match="one value per operator"):
        dependencies(np.ones(2, bool), np.ones(3, bool), np.zeros(2, np.int64), np.ones(2, bool))
