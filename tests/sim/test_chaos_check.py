"""The chaos checker's arithmetic: what counts as lost and what as double counted."""

from __future__ import annotations

import numpy as np

from sleuth.records import RecordBatch
from sleuth.sim.chaos.check import RECORD_KEY, Codes, batch_hashes, compare, incidents_alerted


def records(job: str, seqs) -> RecordBatch:
    n = len(seqs)
    return RecordBatch.from_columns(job=job, rank=[1] * n, comm="tp.0", seq=seqs, op=[1] * n, peer=[-1] * n,
                                    nbytes=[8] * n, iteration=[0] * n, t_issue_ns=seqs, t_start_ns=seqs,
                                    t_end_ns=np.asarray(seqs) + 1)


def hashes(codes: Codes, *batches: RecordBatch) -> np.ndarray:
    return batch_hashes(batches, RECORD_KEY, codes)


def test_a_confirmed_record_missing_is_lost_and_one_stored_twice_or_never_sent_is_double_counted() -> None:
    codes = Codes()
    sent = hashes(codes, records("a", range(10)))
    confirmed = hashes(codes, records("a", range(8)))
    stored = hashes(codes, records("a", [0, 1, 1, 2, 3, 4, 5, 6, 8]), records("b", [0]))  # 7 missing; 1 twice; b never sent
    tally = compare(confirmed, sent, stored)
    assert (tally.confirmed, tally.lost, tally.double_counted) == (8, 1, 2)


def test_a_sent_record_that_landed_without_its_confirmation_is_neither_lost_nor_doubled() -> None:
    codes = Codes()
    sent = hashes(codes, records("a", range(10)))
    tally = compare(hashes(codes, records("a", range(5))), sent, sent)
    assert (tally.confirmed, tally.lost, tally.double_counted) == (5, 0, 0)


def test_the_same_key_hashes_alike_whatever_the_batch_and_another_job_apart() -> None:
    codes = Codes()
    one, other, again = hashes(codes, records("a", [3])), hashes(codes, records("b", [3])), hashes(codes, records("a", [3]))
    assert one[0] == again[0] != other[0]


def test_incidents_are_alerted_by_the_incidents_an_alert_cites() -> None:
    alerts = [{"labels": {"sleuth_job": "a"}, "annotations": {"incidents": "a-1,a-2"}},
              {"labels": {"sleuth_job": "b"}, "annotations": {"incidents": "b-1"}}]
    assert incidents_alerted(alerts) == {("a", "a-1"), ("a", "a-2"), ("b", "b-1")}
