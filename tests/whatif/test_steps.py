"""Records without an iteration take their group's (``sleuth.whatif.steps``)."""

from __future__ import annotations

import numpy as np

from sleuth.records import OpKind, RecordBatch
from sleuth.whatif.steps import number_from_groups


def batch(rows: list[tuple[int, str, int, int, int, int]]) -> RecordBatch:
    """Records of (rank, comm, seq, op, peer, iteration), each 1 µs long."""
    rank, comm, seq, op, peer, iteration = zip(*rows)
    start = np.arange(len(rows), dtype=np.int64) * 1000
    return RecordBatch.from_columns(job="j", rank=list(rank), comm=list(comm), seq=list(seq), op=list(op), peer=list(peer),
                                    nbytes=[64] * len(rows), iteration=list(iteration), t_issue_ns=start,
                                    t_start_ns=start, t_end_ns=start + 1000)


def test_an_unnumbered_rank_takes_its_collectives_and_transfers_iterations() -> None:
    ar, send, recv = int(OpKind.ALL_REDUCE), int(OpKind.SEND), int(OpKind.RECV)
    records = batch([
        (0, "dp", 0, ar, -1, 3), (1, "dp", 0, ar, -1, 3), (2, "dp", 0, ar, -1, -1),  # rank 2: no period
        (0, "pp", 0, send, 2, 4), (2, "pp", 0, recv, 0, -1),  # its receive: the send's step
        (1, "tp", 7, ar, -1, -1), (2, "tp", 7, ar, -1, -1),  # no member numbered: stays unnumbered
    ])
    numbered, count = number_from_groups(records)
    assert count == 2
    assert numbered["iteration"].tolist() == [3, 3, 3, 4, 4, -1, -1]


def test_the_most_common_iteration_of_the_members_wins_and_ties_take_the_earlier() -> None:
    ar = int(OpKind.ALL_REDUCE)
    records = batch([(0, "w", 0, ar, -1, 5), (1, "w", 0, ar, -1, 6), (2, "w", 0, ar, -1, 6), (3, "w", 0, ar, -1, -1),
                     (0, "w", 1, ar, -1, 7), (1, "w", 1, ar, -1, 8), (2, "w", 1, ar, -1, -1)])
    numbered, count = number_from_groups(records)
    assert count == 2 and numbered["iteration"].tolist() == [5, 6, 6, 6, 7, 8, 7]


def test_records_all_numbered_or_none_numbered_come_back_as_they_are() -> None:
    ar = int(OpKind.ALL_REDUCE)
    every = batch([(0, "w", 0, ar, -1, 1), (1, "w", 0, ar, -1, 1)])
    none = batch([(0, "w", 0, ar, -1, -1), (1, "w", 0, ar, -1, -1)])
    assert number_from_groups(every) == (every, 0) and number_from_groups(none) == (none, 0)
