"""Members of groups the records lost, filled in from their groups (``sleuth.whatif.lost``)."""

from __future__ import annotations

import numpy as np
import pytest

from sleuth.jobspec import Communicator, JobSpec, RankPlacement
from sleuth.layout import ParallelLayout
from sleuth.records import OpKind, RecordBatch
from sleuth.sim import Emulation, Scenario, parse_fault
from sleuth.topology import generate
from sleuth.whatif.attribution import attribute
from sleuth.whatif.lost import fill_lost_members

_US = 1_000


def _records(rows: list[tuple]) -> RecordBatch:
    """rows: (rank, comm, seq, op, peer, iteration, start µs, end µs), 1 MiB each."""
    rank, comm, seq, op, peer, it, start, end = (list(column) for column in zip(*rows))
    return RecordBatch.from_columns(job="j", rank=rank, comm=comm, seq=seq, op=[int(o) for o in op], peer=peer,
                                    nbytes=[1 << 20] * len(rows), iteration=it, t_issue_ns=[s * _US for s in start],
                                    t_start_ns=[s * _US for s in start], t_end_ns=[e * _US for e in end])


_AR = OpKind.ALL_REDUCE


def _all_reduces(seq: int, starts: dict[int, int], end: int, iteration: int = 0) -> list[tuple]:
    return [(rank, "dp.0", seq, _AR, -1, iteration, start, end) for rank, start in starts.items()]


def _by_rank(records: RecordBatch, seq: int) -> dict[int, tuple[int, int]]:
    at = records["seq"] == seq
    return {int(r): (int(s) // _US, int(e) // _US)
            for r, s, e in zip(records["rank"][at], records["t_start_ns"][at], records["t_end_ns"][at])}


def test_a_lost_member_of_a_collective_ends_with_its_group_and_starts_with_its_last_member():
    rows = _all_reduces(0, {0: 0, 1: 2, 2: 4, 3: 1}, 10) + _all_reduces(1, {0: 20, 1: 22, 2: 21}, 30)
    filled, count = fill_lost_members(_records(rows))
    assert count == 1
    # the usual transfer (the whole group's: 10 - 4 = 6 µs) after the last present start (22) ends at 28, before 30:
    # the lost member came last, 6 µs before the end
    assert _by_rank(filled, 1)[3] == (24, 30)
    assert _by_rank(filled, 0) == _by_rank(_records(rows), 0)


def test_a_lost_member_that_was_not_the_last_to_arrive_starts_with_the_last_present():
    # 26 + the usual 6 µs is past the end: the last present member was the last to arrive.
    rows = _all_reduces(0, {0: 0, 1: 2, 2: 4, 3: 1}, 10) + _all_reduces(1, {0: 20, 1: 26, 2: 21}, 30)
    filled, _ = fill_lost_members(_records(rows))
    assert _by_rank(filled, 1)[3] == (26, 30)


def test_a_lost_receive_is_the_receive_from_the_sender_and_the_reverse():
    rows = [(0, "pp.0", 5, OpKind.SEND, 1, 0, 10, 14), (1, "pp.0", 5, OpKind.RECV, 0, 0, 9, 14),
            (0, "pp.0", 6, OpKind.SEND, 1, 0, 20, 25), (1, "pp.0", 7, OpKind.RECV, 0, 0, 30, 36)]
    filled, count = fill_lost_members(_records(rows))
    assert count == 2
    lost = filled.take(np.isin(filled["seq"], [6, 7]))
    got = sorted(zip(lost["seq"].tolist(), lost["rank"].tolist(), lost["op"].tolist(), lost["peer"].tolist(),
                     (lost["t_end_ns"] // _US).tolist()))
    assert got == [(6, 0, OpKind.SEND, 1, 25), (6, 1, OpKind.RECV, 0, 25), (7, 0, OpKind.SEND, 1, 36),
                   (7, 1, OpKind.RECV, 0, 36)]


def test_a_lost_early_send_is_placed_before_its_rank_s_next_operator_not_at_its_late_receive():
    # Rank 0 sends to rank 1 (an isend: it ends when the late receive does), then all-reduces with
    # rank 2, in every iteration; in iteration 1 its send was lost.
    rows = []
    for it in range(3):
        at = 100 * it
        if it != 1:
            rows.append((0, "pp.0", it, OpKind.SEND, 1, it, at + 10, at + 35))
        rows += [(0, "tp.0", it, _AR, -1, it, at + 12, at + 20), (2, "tp.0", it, _AR, -1, it, at + 11, at + 20),
                 (1, "pp.0", it, OpKind.RECV, 0, it, at + 30, at + 35)]
    filled, count = fill_lost_members(_records(rows))
    assert count == 1
    send = filled.take((filled["iteration"] == 1) & (filled["op"] == OpKind.SEND))
    # not at the receive's start (130 µs): its rank ran the all-reduce at 112 µs after it
    assert int(send["t_start_ns"][0]) == 112 * _US - 1 and int(send["t_end_ns"][0]) == 135 * _US
    # a stream's newest iteration alone: the iterations held before it show the rank's program
    newest, others = _records([r for r in rows if r[5] == 1]), _records([r for r in rows if r[5] != 1])
    alone = fill_lost_members(newest)[0]
    shown = fill_lost_members(newest, program=others)[0]
    assert int(alone["t_start_ns"][alone["op"] == OpKind.SEND][0]) == 130 * _US
    assert int(shown["t_start_ns"][shown["op"] == OpKind.SEND][0]) == 112 * _US - 1 and len(shown) == len(newest) + 1


def test_a_rank_without_records_in_the_iteration_gets_none_filled_in():
    # Rank 3 recorded iteration 0, nothing of iteration 1: it was not recorded there, not lost from a group.
    rows = _all_reduces(0, {0: 0, 1: 2, 2: 4, 3: 1}, 10) + _all_reduces(1, {0: 20, 1: 22, 2: 21}, 30, iteration=1)
    records = _records(rows)
    filled, count = fill_lost_members(records)
    assert count == 0
    assert filled.equals(records.one_per_identity())


def test_records_sent_twice_are_no_members_of_their_own_group():
    rows = _all_reduces(0, {0: 0, 1: 2, 2: 4, 3: 1}, 10) + _all_reduces(1, {0: 20, 1: 22, 2: 21}, 30)
    twice = RecordBatch.concat([_records(rows), _records(rows[4:6])])
    filled, count = fill_lost_members(twice)
    assert count == 1
    assert len(filled) == 8


def test_a_communicator_whose_groups_hold_different_ranks_is_left_as_it_is():
    # The world's communicator: a barrier of all four, then collectives of two: no membership to go by.
    rows = [(r, "world", 0, _AR, -1, 0, r, 10) for r in range(3)] + [(r, "world", 1, _AR, -1, 0, 20, 30) for r in (0, 1)]
    rows += [(3, "world", 2, _AR, -1, 0, 40, 50)]
    records = _records(rows)
    assert fill_lost_members(records) == (records.one_per_identity(), 0)


def test_the_job_spec_names_the_members_of_a_communicator_whose_only_collective_lost_one():
    # One all-reduce of the data-parallel group in the records, rank 3's lost: only the spec knows it.
    rows = _all_reduces(0, {0: 0, 1: 2, 2: 4}, 10) + [(3, "tp.1", 7, _AR, -1, 0, 0, 9)]
    records = _records(rows)
    spec = JobSpec("j", 4, None, tuple(RankPlacement(r, "h0", r) for r in range(4)),
                   (Communicator("dp.0", "dp", (0, 1, 2, 3)), Communicator("tp.1", "tp", (3,))))
    assert fill_lost_members(records)[1] == 0
    filled, count = fill_lost_members(records, spec)
    assert count == 1 and _by_rank(filled, 0)[3] == (4, 10)


@pytest.mark.parametrize("lost", [0.001, 0.01])
def test_a_job_that_lost_records_at_random_is_attributed_as_the_whole_one(lost):
    # Before: 1% of the records lost left most rank-iterations without program peers, x0.99 for a x1.15 job.
    topology = generate("fattree:hosts=4,gpus=8,pod=2,spines=2")
    scenario = Scenario(topology=topology, layout=ParallelLayout(32, 4, 2, 4, gpus_per_host=8), iterations=30, seed=11,
                        faults=(parse_fault("gpu:h0001/5,slow=1.3"),))
    emulation = Emulation(scenario)
    records, spec = emulation.records(), emulation.job_spec()
    whole = attribute(records, spec).slowdown
    kept = records.take(np.random.default_rng(3).random(len(records)) > lost)
    filled, count = fill_lost_members(kept)
    assert count == len(records) - len(kept)
    assert whole > 1.1
    assert attribute(filled, spec).slowdown == pytest.approx(whole, rel=0.02)
    assert attribute(kept, spec).slowdown < whole - 0.02  # what losing them did
