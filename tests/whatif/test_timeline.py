"""The shared replay: exact arithmetic on hand-made chains and groups."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sleuth.errors import RecordError
from sleuth.whatif import _sweep, timeline
from sleuth.whatif.timeline import carry_links, dependencies, downstream, holds_rank, latest_ends, replay

#: The compiled sweep's slot, link and carry when nothing is carried from part to part.
_NOTHING_CARRIED = (np.zeros(0, np.int32), np.zeros(0, np.uint8))


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


def test_an_operator_holds_its_rank_unless_the_next_one_started_before_it_ended() -> None:
    # Rank 0: a blocking send (torch's send, gloo), the receive it waited to post, a batched send and
    # receive starting together, and its last operator. Rank 1: one all-reduce.
    start = np.array([0, 141, 300, 300, 500, 0])
    end = np.array([140, 280, 320, 310, 600, 9])
    last = np.array([False, False, False, False, True, True])
    assert holds_rank(start, end, last).tolist() == [True, True, False, True, True, True]


def test_an_asynchronous_send_does_not_hold_its_rank_and_incomplete_groups_keep_their_own_length() -> None:
    # Rank 0 sends (does not hold: the next operator started before it ended) then computes 4 and
    # runs op 1, whose group has members elsewhere.
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


def random_job(data: st.DataObject):
    """Chains of ranks whose collectives are taken in one global order (so the graph is acyclic):
    each collective picks two or more ranks and is the next operator of each."""
    ranks = data.draw(st.integers(2, 5))
    collectives = data.draw(st.lists(st.lists(st.integers(0, ranks - 1), min_size=2, max_size=ranks, unique=True),
                                     min_size=1, max_size=12))
    chains: list[list[int]] = [[] for _ in range(ranks)]
    for g, members in enumerate(collectives):
        for r in members:
            chains[r].append(g)
    order = [(r, g) for r in range(ranks) for g in chains[r]]
    n = len(order)
    first = np.array([k == 0 or order[k - 1][0] != order[k][0] for k in range(n)])
    group = np.array([g for _, g in order])
    _, group = np.unique(group, return_inverse=True)
    gap = np.array(data.draw(st.lists(st.integers(0, 50), min_size=n, max_size=n)), float)
    transfer = np.array(data.draw(st.lists(st.integers(0, 50), min_size=n, max_size=n)), float)
    return dependencies(first, np.ones(n, bool), group, np.ones(n, bool)), gap, transfer


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_longer_gaps_never_end_anything_earlier_and_add_at_most_their_sum(data: st.DataObject) -> None:
    # The bound the attribution prunes worker variants with: the last end grows by at most what was added.
    deps, gap, transfer = random_job(data)
    n = len(gap)
    added = np.array(data.draw(st.lists(st.integers(0, 30), min_size=n, max_size=n)), float)
    zeros = np.zeros(n)
    _, before = replay(deps, anchor=zeros, gap=gap, transfer=transfer, own=zeros)
    _, after = replay(deps, anchor=zeros, gap=gap + added, transfer=transfer, own=zeros)
    assert deps.acyclic
    assert (after >= before).all()
    assert after.max() - before.max() <= added.sum() + 1e-9


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_replay_of_its_own_gaps_and_transfers_gives_back_the_same_times(data: st.DataObject) -> None:
    deps, gap, transfer = random_job(data)
    zeros = np.zeros(len(gap))
    start, end = replay(deps, anchor=zeros, gap=gap, transfer=transfer, own=zeros)
    # Read the gaps and transfers back off the replayed times, as the attribution reads records.
    clock = np.r_[0.0, end[:-1]]
    gaps = start - np.where(deps.first, 0.0, clock)
    latest = np.zeros(int(deps.group.max()) + 1)
    np.maximum.at(latest, deps.group, start)
    again = replay(deps, anchor=zeros, gap=gaps, transfer=end - latest[deps.group], own=zeros)
    assert np.allclose(again[0], start) and np.allclose(again[1], end)


def kept_variants(data: st.DataObject, deps, gap, transfer):
    """latest_ends' arguments for a random job: ideal lengths, own lengths, anchors, send-like
    operators that do not hold their rank, groups not whole, and up to 20 variants' choices."""
    n = len(gap)
    draw = lambda values: np.array(data.draw(st.lists(values, min_size=n, max_size=n)))  # noqa: E731
    groups = int(deps.group.max()) + 1
    whole = np.array(data.draw(st.lists(st.booleans(), min_size=groups, max_size=groups)))  # a group is whole or not
    deps = dependencies(deps.first, draw(st.booleans()), deps.group, whole[deps.group])
    width = data.draw(st.integers(1, 20))
    keep = [np.array(data.draw(st.lists(st.lists(st.booleans(), min_size=width, max_size=width), min_size=n, max_size=n)))
            for _ in range(2)]
    return dict(deps=deps, anchor=draw(st.integers(0, 9)).astype(float), gap=gap, ideal_gap=gap * 0.5,
                transfer=transfer, ideal_transfer=draw(st.integers(0, 50)).astype(float),
                own=draw(st.integers(0, 40)).astype(float), keep_gap=keep[0], keep_transfer=keep[1])


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_the_compiled_sweep_replays_every_variant_exactly_as_numpy_does(data: st.DataObject) -> None:
    arguments = kept_variants(data, *random_job(data))
    deps = arguments["deps"]
    n = len(arguments["gap"])
    segments = np.unique(np.r_[0, np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=4)), np.int64)])
    leveled = {name: deps.leveled(value) if name != "deps" else value for name, value in arguments.items()}
    compiled = latest_ends(segments=segments, **leveled)
    # One variant at a time through the numpy replay, the reference.
    for v in range(arguments["keep_gap"].shape[1]):
        _, end = replay(deps, anchor=arguments["anchor"], own=arguments["own"],
                        gap=np.where(arguments["keep_gap"][:, v], arguments["gap"], arguments["ideal_gap"]),
                        transfer=np.where(arguments["keep_transfer"][:, v], arguments["transfer"], arguments["ideal_transfer"]))
        assert np.array_equal(compiled[:, v], np.maximum.reduceat(end, segments))
    with mock.patch.object(timeline, "_sweep", None):
        assert np.array_equal(latest_ends(segments=segments, **leveled), compiled)


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_each_level_lists_its_operators_once_in_ascending_order(data: st.DataObject) -> None:
    # What lets a level's frontier be sorted instead of made unique: nothing in it repeats.
    deps = kept_variants(data, *random_job(data))["deps"]
    for ops in deps.op_levels:
        assert (np.diff(ops) > 0).all()
    assert len(np.unique(deps.order)) == len(deps.order)


def _same_levels(compiled, reference) -> None:
    assert np.array_equal(compiled.settled, reference.settled)
    assert np.array_equal(compiled.part_levels, reference.part_levels)
    for name in ("op_levels", "loose_levels", "member_levels", "member_starts"):
        mine, theirs = getattr(compiled, name), getattr(reference, name)
        assert len(mine) == len(theirs), name
        assert all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(mine, theirs)), name


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_the_compiled_levels_are_numpy_s_level_for_level(data: st.DataObject) -> None:
    deps = kept_variants(data, *random_job(data))["deps"]
    with mock.patch.object(timeline, "_sweep", None):
        reference = dependencies(deps.first, deps.holds, deps.group, deps.complete)
    _same_levels(deps, reference)
    # Group ids need not be dense: ids with gaps between them give the same levels.
    _same_levels(dependencies(deps.first, deps.holds, deps.group * 3, deps.complete), reference)


def test_the_compiled_levels_leave_a_cycle_unsettled_as_numpy_does() -> None:
    arguments = (np.array([True, False, True, False, True]), np.ones(5, bool), np.array([0, 1, 1, 0, 2]),
                 np.array([True, True, True, True, False]))
    compiled = dependencies(*arguments)
    with mock.patch.object(timeline, "_sweep", None):
        reference = dependencies(*arguments)
    assert compiled.settled.tolist() == [True, False, True, False, True]
    _same_levels(compiled, reference)


def test_the_compiled_levels_refuse_a_group_id_outside_the_groups() -> None:
    n = groups = 2
    outputs = [np.empty(n, np.uint8), *(np.empty(n, np.int64), np.empty(n + 1, np.int64)) * 3,
               np.empty(groups, np.int64), np.empty(n + 1, np.int64), np.empty(1, np.int64)]
    flags = np.ones(n, np.uint8)
    with pytest.raises(ValueError, match=r"group id 3 outside \[0, 2\)"):
        _sweep.levels(n, groups, flags, flags, flags, np.array([0, 3]), np.zeros(0, np.int64), *outputs)


def parted_job(data: st.DataObject):
    """Random jobs one after another in chain order, each a part (a job's iterations), and where
    each part begins; sometimes one group of a part takes in a group of the next (a collective
    logged in two iterations), so that the parts are not independent."""
    jobs = [kept_variants(data, *random_job(data)) for _ in range(data.draw(st.integers(1, 4)))]
    sizes = [len(job["gap"]) for job in jobs]
    parts = np.r_[0, np.cumsum(sizes)[:-1]].astype(np.int64)
    offsets = np.r_[0, np.cumsum([int(job["deps"].group.max()) + 1 for job in jobs])[:-1]]
    group = np.concatenate([job["deps"].group + offset for job, offset in zip(jobs, offsets)])
    if len(jobs) > 1 and data.draw(st.booleans()):
        group[group == offsets[1]] = 0
    flags = {name: np.concatenate([getattr(job["deps"], name) for job in jobs]) for name in ("first", "holds", "complete")}
    flags["complete"] = np.isin(group, group[flags["complete"]])  # a group is whole for all its members or none
    width = min(job["keep_gap"].shape[1] for job in jobs)  # the variants all parts have
    values = {name: np.concatenate([job[name][:, :width] if job[name].ndim == 2 else job[name] for job in jobs])
              for name in jobs[0] if name != "deps"}
    return flags["first"], flags["holds"], group, flags["complete"], parts, values


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_levels_part_by_part_are_numpy_s_and_replay_every_variant_as_one_part_does(data: st.DataObject) -> None:
    first, holds, group, complete, parts, values = parted_job(data)
    whole = dependencies(first, holds, group, complete)
    parted = dependencies(first, holds, group, complete, parts)
    with mock.patch.object(timeline, "_sweep", None):
        _same_levels(parted, dependencies(first, holds, group, complete, parts))
    merged = np.flatnonzero(group == 0)
    crossing = complete[merged].all() and len(np.unique(np.searchsorted(parts, merged, side="right"))) > 1
    if crossing or len(parts) == 1:
        _same_levels(parted, whole)
    else:
        # Each level is one part's, parts in chain order.
        part_of_level = [np.unique(np.searchsorted(parts, ops, side="right") - 1) for ops in parted.op_levels]
        assert all(len(p) == 1 for p in part_of_level)
        assert (np.diff(np.concatenate(part_of_level)) >= 0).all()
        assert parted.levels == sum(len(dependencies(*(a[b:e] for a in (first, holds, group, complete))).op_levels)
                                    for b, e in zip(parts, np.r_[parts[1:], len(first)]))
    n = len(first)
    segments = np.unique(np.r_[parts, np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=4)), np.int64)])
    ends = [latest_ends(deps, segments=segments, **{name: deps.leveled(value) for name, value in values.items()})
            for deps in (whole, parted)]
    assert np.array_equal(ends[0], ends[1], equal_nan=True)


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_clocks_carried_from_part_to_part_replay_the_parts_as_one_timeline(data: st.DataObject) -> None:
    # Each part's chains are ranks (chain c of a part is slot c) that go on from where their rank
    # stopped in an earlier part: the same ends, each part from the one before's latest end, as one
    # graph whose chains run through every part.
    first, holds, group, complete, parts, values = parted_job(data)
    parted = dependencies(first, holds, group, complete, parts)
    n, width = len(first), values["keep_gap"].shape[1]
    if not parted.by_part:
        with pytest.raises(RecordError, match="do not go part by part"):
            carry_links(parted, np.ones(n, bool))
        return
    assume(parted.acyclic)
    part = np.searchsorted(parts, np.arange(n), side="right") - 1
    chain = np.cumsum(first) - 1
    slot = chain - (np.cumsum(first) - 1)[parts][part] if n else chain  # a chain's place in its part
    link = carry_links(parted, np.ones(n, bool))
    carry = np.zeros((int(slot.max()) + 1, width))
    values["anchor"] = np.zeros(n)
    leveled = {name: parted.leveled(value) for name, value in values.items()}
    ends = latest_ends(parted, segments=parts, **leveled, link=parted.leveled(link), slot=parted.leveled(slot),
                       carry=carry)
    with mock.patch.object(timeline, "_sweep", None):
        again = np.zeros_like(carry)
        assert np.allclose(latest_ends(parted, segments=parts, **leveled, link=parted.leveled(link),
                                       slot=parted.leveled(slot), carry=again), ends)
        assert np.allclose(again, carry)
    # The one timeline: every rank's chains joined in part order.
    order = np.lexsort((np.arange(n), part, slot))
    joined = np.r_[True, slot[order][1:] != slot[order][:-1]]
    whole = dependencies(joined, holds[order], group[order], complete[order])
    assume(whole.acyclic)
    for v in range(width):
        gap = np.where(values["keep_gap"][:, v], values["gap"], values["ideal_gap"])[order]
        transfer = np.where(values["keep_transfer"][:, v], values["transfer"], values["ideal_transfer"])[order]
        _, end = replay(whole, anchor=np.zeros(n), gap=gap, transfer=transfer, own=values["own"][order])
        latest = np.full(len(parts), -np.inf)
        np.maximum.at(latest, part[order], end)
        assert np.allclose(ends[:, v], np.diff(np.r_[0.0, latest]))
        # What is carried out: each rank's clock on the one timeline, less the last part's latest end.
        last = np.r_[joined[1:], True]
        clock = np.where(holds[order][last], end[last], replay(whole, anchor=np.zeros(n), gap=gap, transfer=transfer,
                                                                own=values["own"][order])[0][last])
        assert np.allclose(carry[slot[order][last], v], clock - latest[-1])


def test_the_compiled_sweep_refuses_a_carried_operator_outside_the_carry() -> None:
    deps = dependencies(np.array([True, True]), np.ones(2, bool), np.array([0, 1]), np.zeros(2, bool),
                        np.array([0, 1]))
    ones, keep = np.ones(2), np.ones((2, 1), np.uint8)
    link = carry_links(deps, np.array([False, True]))
    with pytest.raises(ValueError, match="outside the carry's slots"):
        _sweep.sweep(1, 1, 0, *deps.flat, np.zeros(2, np.int64), *(ones,) * 6, keep, keep, np.array([0, 1], np.int32), link,
                     np.empty(2), np.empty(2), np.empty((2, 1)), np.zeros((1, 1)))


def test_parts_that_do_not_ascend_from_zero_are_refused() -> None:
    flags = np.ones(3, bool)
    for parts in ([1], [0, 2, 2], [0, 3]):
        with pytest.raises(RecordError, match="parts must ascend from 0"):
            dependencies(flags, flags, np.arange(3), flags, np.array(parts))


def test_the_compiled_sweep_leaves_a_cycle_unsettled_as_numpy_does() -> None:
    deps = dependencies(np.array([True, False, True, False, True]), np.ones(5, bool), np.array([0, 1, 1, 0, 2]),
                        np.array([True, True, True, True, False]))
    settled = int(deps.settled.sum())
    keep = np.ones((settled, 3), bool)
    ones = np.ones(settled)
    arguments = dict(segments=np.array([0, 4]), anchor=ones, gap=ones, ideal_gap=ones, transfer=ones,
                     ideal_transfer=ones, own=ones, keep_gap=keep, keep_transfer=keep)
    ends = latest_ends(deps, **arguments)
    assert np.isnan(ends[0]).all() and ends[1].tolist() == [3.0, 3.0, 3.0]
    with mock.patch.object(timeline, "_sweep", None):
        assert np.array_equal(latest_ends(deps, **arguments), ends, equal_nan=True)


def test_the_compiled_sweep_is_built() -> None:
    # pyproject marks it optional for users without a compiler; the project's own install builds it.
    assert timeline._sweep is _sweep and callable(_sweep.sweep)


def test_the_compiled_sweep_refuses_a_graph_that_would_read_what_it_has_not_written() -> None:
    deps = dependencies(np.array([True, False]), np.ones(2, bool), np.array([0, 1]), np.zeros(2, bool))
    flat = list(deps.flat)
    flat[2] = np.array([0, 5])  # the chain's previous operator of position 1: 5 is no position of the graph
    ones, keep = np.ones(2), np.ones((2, 1), np.uint8)
    with pytest.raises(ValueError, match="previous one is not in an earlier level"):
        _sweep.sweep(1, 1, 0, *flat, np.zeros(2, np.int64), *(ones,) * 6, keep, keep, *_NOTHING_CARRIED,
                     np.empty(2), np.empty(2), np.empty((1, 1)), np.zeros(0))


def test_the_compiled_sweep_refuses_a_part_that_reads_another_part_s_rows() -> None:
    # Its scratch holds one part at a time: a chain that crosses into the next part would read a row overwritten.
    deps = dependencies(np.array([True, False, True, False]), np.ones(4, bool), np.arange(4), np.zeros(4, bool),
                        np.array([0, 2]))
    assert deps.part_levels.tolist() == [0, 2]
    flat = list(deps.flat)
    position = {k: p for p, k in enumerate(deps.order)}
    flat[0], flat[2] = flat[0].copy(), flat[2].copy()
    flat[0][position[3]], flat[2][position[3]] = 0, position[1]  # operator 3 continues operator 1's chain
    ones, keep = np.ones(4), np.ones((4, 1), np.uint8)
    with pytest.raises(ValueError, match="not in an earlier level of its part"):
        _sweep.sweep(1, 1, 0, *flat, np.zeros(4, np.int64), *(ones,) * 6, keep, keep, *_NOTHING_CARRIED,
                     np.empty(4), np.empty(4), np.empty((1, 1)), np.zeros(0))
