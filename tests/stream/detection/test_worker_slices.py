"""A worker behind takes many iterations in one batch; it judges them a slice of whole iterations at
a time (``stream.services.worker.iteration_slices``, ``DetectionRules.slice_records``): what it
finds is what it finds taking one iteration's messages at a time, and the one insert still holds
every record of the batch, in the order the messages brought them."""

from __future__ import annotations

import numpy as np
import pytest

from sleuth.errors import ConfigError
from sleuth.settings import Settings
from sleuth.stream.detection import StreamDetector
from sleuth.stream.ingest import kafka_records
from sleuth.stream.services.worker import Worker, decode, iteration_slices

from .conftest import emulation, small_model

JOBS = (("gpu:h0001/2,slow=1.5,start=15", 0), ("nic:h0002/0,slow=4,profile=fluctuation,start=10", 4))


class Message:  # what ``decode`` reads of a Kafka message
    def __init__(self, value: bytes, kind: bytes) -> None:
        self.value, self.headers, self.partition, self.offset = value, [(kafka_records.KIND_HEADER, kind)], 0, 0


def iteration_messages(iterations: range, jobs: int = 1) -> list[list[Message]]:
    """Per iteration, the gateway's messages of every rank's records, then of its iteration rows, of
    the first ``jobs`` of ``JOBS``, one job after the other."""
    ems = [emulation(fault, seed=seed, iterations=30) for fault, seed in JOBS[:jobs]]
    out = []
    for it in iterations:
        taken = []
        for em in ems:
            records, rows = em.records(iterations=[it]), em.iterations(iterations=[it])
            taken += [Message(v, kafka_records.RECORDS) for _, v in kafka_records.to_messages(records)]
            taken += [Message(v, kafka_records.ITERATIONS) for _, v in kafka_records.iteration_messages(rows)]
        out.append(taken)
    return out


def worker(**options) -> Worker:
    return Worker(Settings.from_env({}), client=None, detectors=[StreamDetector(small_model(), clock=lambda: 0)], **options)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_backlog_judged_a_slice_at_a_time_finds_what_a_worker_that_kept_up_finds(jobs) -> None:
    taken = iteration_messages(range(30), jobs)
    live, behind = worker(), worker(slice_records=1)  # one iteration a slice: any more records than one
    kept_up = [live.prepare(messages)[1] for messages in taken]
    backlog, found = behind.prepare([m for messages in taken for m in messages])
    abnormal = [row for f in kept_up for row in f.abnormal]
    assert abnormal and sorted(found.abnormal) == sorted(abnormal)
    irregular = [i for f in kept_up for i in f.irregularities]
    assert irregular and found.irregularities == irregular
    whole = decode([m for messages in taken for m in messages])
    assert len(backlog.records) == len(whole.records) and backlog.records.columns.keys() == whole.records.columns.keys()
    assert all(np.array_equal(backlog.records[name], whole.records[name]) for name in whole.records.columns)


def test_slices_cut_between_iterations_keep_every_record_once_and_each_iteration_s_rows_with_it() -> None:
    decoded = decode([m for messages in iteration_messages(range(12)) for m in messages])
    per_iteration = np.bincount(decoded.records["iteration"])
    cap = int(per_iteration.max()) * 3 + 1  # three iterations a slice, the fourth would pass it
    slices = iteration_slices(decoded, max_records=cap)
    assert [sorted(set(s.records["iteration"].tolist())) for s in slices] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]]
    assert all(len(s.records) <= cap for s in slices)
    assert sum(len(s.records) for s in slices) == len(decoded.records)
    for part in slices:
        assert set(part.iterations["iteration"].tolist()) == set(part.records["iteration"].tolist())
        for it in set(part.records["iteration"].tolist()):  # each iteration's records in the order they came
            here = part.records["t_start_ns"][part.records["iteration"] == it]
            assert np.array_equal(here, decoded.records["t_start_ns"][decoded.records["iteration"] == it])
    assert iteration_slices(decoded, max_records=len(decoded.records)) == [decoded]


def test_a_slice_size_that_is_not_a_positive_count_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match="slice_records must be a positive integer"):
        worker(slice_records=0)
