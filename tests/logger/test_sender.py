"""The gRPC sink against a real gRPC server on 127.0.0.1."""

import os
import threading
import time

import grpc
import numpy as np
import pytest

from sleuth.jobspec import JobSpec
from sleuth.layout import ParallelLayout
from sleuth.logger.sender import GrpcSink
from sleuth.logger.spill import Spill
from sleuth.ports import free_port
from sleuth.proto import commops_pb2 as pb
from sleuth.records import IterationBatch, RecordBatch

from tests.logger import collector


def batch(start: int, n: int, rank: int = 3) -> RecordBatch:
    seq = np.arange(start, start + n)
    return RecordBatch.from_columns(
        job="job-s", rank=[rank] * n, comm="c2-aa", seq=seq, op=[1] * n, peer=[-1] * n,
        nbytes=[64] * n, iteration=seq // 10, t_issue_ns=seq, t_start_ns=seq, t_end_ns=seq + 1,
    )


def wait_for(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@pytest.fixture
def server():
    srv, servicer, port = collector.start()
    yield servicer, port
    srv.stop(0)


def sink_for(port, tmp_path, **options):
    options.setdefault("stream_s", 0.5)
    return GrpcSink(f"127.0.0.1:{port}", spill_dir=tmp_path / "spill", **options)


def test_records_iterations_and_spec_arrive(server, tmp_path):
    servicer, port = server
    sink = sink_for(port, tmp_path)
    sink.records(batch(0, 100), dropped=0)
    sink.records(batch(100, 50), dropped=2)
    sink.iterations(IterationBatch.from_columns(job="job-s", rank=[3], iteration=[0], t_start_ns=[1], t_end_ns=[2]))
    spec = JobSpec.from_layout("job-s", ParallelLayout(world=4, tp=2, pp=1, dp=2))
    sink.spec(spec)
    sink.close(10)
    got = servicer.all_records()
    assert got["seq"].tolist() == list(range(150))
    assert servicer.dropped == 2
    assert len(servicer.all_iterations()) == 1
    assert servicer.specs[-1] == spec
    assert sink.stats()["held_bytes"] == 0


def test_collector_down_at_first_then_up_on_the_same_port_loses_nothing(tmp_path):
    port = free_port()
    sink = sink_for(port, tmp_path, backoff_s=(0.05, 0.2), connect_timeout_s=0.2)
    for k in range(20):
        sink.records(batch(k * 10, 10), dropped=0)
    time.sleep(1.0)
    assert sink.stats()["sent_messages"] == 0
    srv, servicer, bound = collector.start(port)
    assert bound == port
    try:
        for k in range(20, 30):
            sink.records(batch(k * 10, 10), dropped=0)
        assert wait_for(lambda: len(servicer.all_records()) == 300)
        sink.close(10)
        assert servicer.all_records()["seq"].tolist() == list(range(300))
        assert servicer.dropped == 0
    finally:
        srv.stop(0)


def test_memory_stays_under_the_bound_by_spilling_and_the_spill_replays(tmp_path):
    port = free_port()
    sink = sink_for(port, tmp_path, buffer_bytes=20_000, spill_bytes=10_000_000,
                    backoff_s=(0.05, 0.2), connect_timeout_s=0.2)
    for k in range(100):
        sink.records(batch(k * 100, 100), dropped=0)
    stats = sink.stats()
    assert stats["peak_bytes"] <= 20_000
    assert stats["spilled_bytes"] > 0
    srv, servicer, _ = collector.start(port)
    try:
        assert wait_for(lambda: len(servicer.all_records()) == 10_000)
        sink.close(10)
        assert servicer.all_records()["seq"].tolist() == list(range(10_000))  # in order, spill first
        assert servicer.dropped == 0
    finally:
        srv.stop(0)


def test_past_the_spill_bound_the_oldest_are_dropped_and_the_gap_is_reported(tmp_path):
    port = free_port()
    sink = sink_for(port, tmp_path, buffer_bytes=20_000, spill_bytes=60_000,
                    backoff_s=(0.05, 0.2), connect_timeout_s=0.2)
    for k in range(100):
        sink.records(batch(k * 100, 100), dropped=0)
    assert sink.stats()["dropped"] > 0
    srv, servicer, _ = collector.start(port)
    try:
        sink.records(batch(10_000, 100), dropped=0)
        sink.close(10)
        got = servicer.all_records()["seq"]
        assert len(got) + servicer.dropped == 10_100
        assert servicer.dropped == sink.stats()["dropped"]
        assert 10_099 in got.tolist()  # the newest survive
        assert 0 not in got.tolist()  # the oldest were dropped
    finally:
        srv.stop(0)


def test_closing_while_the_collector_is_away_keeps_the_records_for_the_next_sender(tmp_path):
    port = free_port()
    sink = sink_for(port, tmp_path, backoff_s=(0.05, 0.2), connect_timeout_s=0.2)
    sink.records(batch(0, 40), dropped=0)
    sink.close(0.5)
    assert Spill(tmp_path / "spill", max_bytes=1 << 20, segment_bytes=1 << 20).records == 40
    srv, servicer, _ = collector.start(port)
    try:
        later = sink_for(port, tmp_path)
        later.close(10)
        assert sorted(servicer.all_records()["seq"].tolist()) == list(range(40))
    finally:
        srv.stop(0)


def test_records_a_crash_tore_from_the_spill_are_counted_and_what_follows_arrives(tmp_path):
    port = free_port()
    sink = sink_for(port, tmp_path, backoff_s=(0.05, 0.2), connect_timeout_s=0.2)
    sink.records(batch(0, 40), dropped=0)
    sink.records(batch(40, 30), dropped=0)
    sink.close(0.5)
    (segment,) = (tmp_path / "spill").glob("seg-*.bin")
    os.truncate(segment, segment.stat().st_size - 5)  # the process died writing the second batch
    srv, servicer, _ = collector.start(port)
    try:
        later = sink_for(port, tmp_path)
        assert wait_for(lambda: len(servicer.all_records()) == 40)  # the spill replayed: nothing on disk
        later.records(batch(70, 10), dropped=0)
        later.close(10)
        assert servicer.all_records()["seq"].tolist() == [*range(40), *range(70, 80)]
        assert servicer.dropped == 30
    finally:
        srv.stop(0)


def test_what_a_sender_leaves_behind_replays_in_order_for_the_next_one(tmp_path):
    port = free_port()
    sink = sink_for(port, tmp_path, buffer_bytes=20_000, spill_bytes=10_000_000,
                    backoff_s=(0.05, 0.2), connect_timeout_s=0.2)
    for k in range(50):
        sink.records(batch(k * 100, 100), dropped=0)
    time.sleep(1.0)  # failed attempts take segments from disk into memory for the next try
    sink.close(0.5)
    srv, servicer, _ = collector.start(port)
    try:
        later = sink_for(port, tmp_path)
        later.close(10)
        assert servicer.all_records()["seq"].tolist() == list(range(5_000))
    finally:
        srv.stop(0)


# -- what the collector refuses ----------------------------------------------------------------

def _seqs(message) -> set[int]:
    return set(message.records.seq) if message.HasField("records") else set()


def refuse_once(code, refusals):
    """A refusal with ``code`` of the first message carrying seq 100 (kept in ``refusals``), then none."""
    def once(message):
        if 100 in _seqs(message) and not refusals:
            refusals.append(message)
            return code
        return None
    return once


PERMANENT = [grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.NOT_FOUND,
             grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.INTERNAL]
TRANSIENT = [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.RESOURCE_EXHAUSTED,
             grpc.StatusCode.ABORTED]


@pytest.mark.parametrize("code", PERMANENT, ids=[c.name for c in PERMANENT])
def test_a_refused_batch_is_dropped_and_counted_and_what_was_confirmed_is_never_resent(tmp_path, code):
    srv, servicer, port = collector.start(refuse=lambda m: code if 100 in _seqs(m) else None)
    try:
        sink = sink_for(port, tmp_path, stream_s=5.0, backoff_s=(0.05, 0.2))
        sink.records(batch(0, 60), dropped=0)
        sink.records(batch(60, 40), dropped=0)
        sink.records(batch(100, 50), dropped=0)  # refused
        sink.records(batch(150, 50), dropped=0)
        started = time.monotonic()
        sink.close(10)
        assert time.monotonic() - started < 5  # nothing left to retry
        got = servicer.all_records()["seq"].tolist()
        assert sorted(got) == list(range(100)) + list(range(150, 200))  # each once: the prefix was not resent
        assert len(servicer.refused) == 1
        stats = sink.stats()
        assert (stats["dropped"], stats["refused"], stats["held_bytes"]) == (50, 1, 0)
        assert servicer.dropped == 50  # the gap travels in the next batch sent
        assert not sink.spill
    finally:
        srv.stop(0)


def test_a_drop_count_pending_when_the_sink_closes_is_reported_by_the_next_sender(tmp_path):
    srv, servicer, port = collector.start(refuse=lambda m: grpc.StatusCode.INVALID_ARGUMENT if 100 in _seqs(m) else None)
    try:
        sink = sink_for(port, tmp_path, stream_s=5.0, backoff_s=(0.05, 0.2))
        sink.records(batch(0, 60), dropped=0)
        sink.records(batch(100, 50), dropped=0)  # refused: the last batch, so no later one reports it
        sink.close(10)
        assert (sink.stats()["dropped"], servicer.dropped) == (50, 0)
        later = sink_for(port, tmp_path)  # the job's next process on this rank
        later.records(batch(200, 10), dropped=0)
        later.close(10)
        assert servicer.dropped == 50
        assert sorted(servicer.all_records()["seq"].tolist()) == [*range(60), *range(200, 210)]
        again = sink_for(port, tmp_path)
        again.records(batch(300, 10), dropped=0)
        again.close(10)
        assert servicer.dropped == 50  # reported once
    finally:
        srv.stop(0)


def test_a_drop_count_with_no_records_rides_the_next_batch_that_has_some(server, tmp_path):
    servicer, port = server
    sink = sink_for(port, tmp_path)
    sink.records(batch(0, 0), dropped=7)  # the ring overflowed and nothing else was ready
    sink.records(batch(0, 10), dropped=0)
    sink.close(10)
    assert servicer.dropped == 7
    # The gateway reports a drop by its batch's first record: a batch with none could not say whose.
    assert [len(b) for b in servicer.records] == [10]


@pytest.mark.parametrize("code", TRANSIENT, ids=[c.name for c in TRANSIENT])
def test_a_batch_refused_with_a_code_that_can_clear_is_sent_again(tmp_path, code):
    refusals = []
    once = refuse_once(code, refusals)

    srv, servicer, port = collector.start(refuse=once)
    try:
        sink = sink_for(port, tmp_path, stream_s=5.0, backoff_s=(0.05, 0.2))
        for start, n in ((0, 60), (60, 40), (100, 50), (150, 50)):
            sink.records(batch(start, n), dropped=0)
        sink.close(10)
        # Once each: what was confirmed before the refusal is not sent again.
        assert sorted(servicer.all_records()["seq"].tolist()) == list(range(200))
        assert len(refusals) == 1
        assert (sink.stats()["dropped"], sink.stats()["refused"], servicer.dropped) == (0, 0, 0)
    finally:
        srv.stop(0)


def test_a_call_refused_as_a_whole_drops_and_counts_its_records_instead_of_retrying_forever(tmp_path):
    srv, servicer, port = collector.start(refuse_call=grpc.StatusCode.UNAUTHENTICATED)
    try:
        sink = sink_for(port, tmp_path, stream_s=5.0, backoff_s=(0.05, 0.2))
        sink.records(batch(0, 30), dropped=0)
        sink.records(batch(30, 20), dropped=0)
        started = time.monotonic()
        sink.close(10)
        assert time.monotonic() - started < 5
        stats = sink.stats()
        assert stats["dropped"] == 50 and stats["refused"] >= 1 and stats["held_bytes"] == 0
        assert not sink.spill and servicer.all_records() == RecordBatch.empty()
    finally:
        srv.stop(0)


def test_a_refused_job_spec_is_not_registered_again_and_records_still_flow(tmp_path):
    srv, servicer, port = collector.start(refuse_register=grpc.StatusCode.INVALID_ARGUMENT)
    try:
        sink = sink_for(port, tmp_path, backoff_s=(0.05, 0.2))
        sink.spec(JobSpec.from_layout("job-s", ParallelLayout(world=4, tp=2, pp=1, dp=2)))
        sink.records(batch(0, 30), dropped=0)
        sink.close(10)
        assert servicer.registrations == 1
        assert servicer.all_records()["seq"].tolist() == list(range(30))
    finally:
        srv.stop(0)


def test_records_of_a_job_not_registered_yet_are_held_until_it_is(tmp_path):
    """Rank 0 registers the job; another rank's first batches may come before: they wait."""
    registered = threading.Event()

    def until_registered(message):
        return None if registered.is_set() else grpc.StatusCode.FAILED_PRECONDITION

    srv, servicer, port = collector.start(refuse=until_registered)
    try:
        sink = sink_for(port, tmp_path, backoff_s=(0.05, 0.2))
        sink.records(batch(0, 60), dropped=0)
        sink.records(batch(60, 40), dropped=0)
        assert wait_for(lambda: len(servicer.refused) >= 3)
        registered.set()
        sink.close(10)
        assert sorted(servicer.all_records()["seq"].tolist()) == list(range(100))
        assert (sink.stats()["dropped"], sink.stats()["refused"]) == (0, 0)
    finally:
        srv.stop(0)


def test_records_of_a_job_never_registered_are_dropped_and_counted_after_the_grace(tmp_path):
    srv, servicer, port = collector.start(refuse=lambda m: grpc.StatusCode.FAILED_PRECONDITION)
    try:
        sink = sink_for(port, tmp_path, backoff_s=(0.05, 0.2), unregistered_grace_s=0.5)
        sink.records(batch(0, 60), dropped=0)
        sink.records(batch(60, 40), dropped=0)
        assert wait_for(lambda: sink.stats()["dropped"] == 100, timeout=10)
        assert len(servicer.refused) > 2  # resent while the grace lasted
        sink.close(5)
        assert sink.stats()["held_bytes"] == 0 and not sink.spill
    finally:
        srv.stop(0)


def test_a_collector_that_forgot_the_job_gets_its_spec_again_and_the_records_flow(tmp_path):
    """A gateway drops a job idle for SLEUTH_JOB_IDLE_S: the rank that holds the spec registers it again."""
    known_after = [0]  # the job is known once more registrations than this arrived

    def unless_known(message):
        return None if servicer.registrations > known_after[0] else grpc.StatusCode.FAILED_PRECONDITION

    srv, servicer, port = collector.start(refuse=unless_known)
    try:
        sink = sink_for(port, tmp_path, backoff_s=(0.05, 0.2))
        sink.spec(JobSpec.from_layout("job-s", ParallelLayout(world=4, tp=2, pp=1, dp=2)))
        sink.records(batch(0, 30), dropped=0)
        assert wait_for(lambda: len(servicer.all_records()) == 30)
        known_after[0] = servicer.registrations  # the collector forgets the job
        sink.records(batch(30, 20), dropped=0)
        sink.close(10)
        assert servicer.registrations == 2
        assert sorted(servicer.all_records()["seq"].tolist()) == list(range(50))
        assert (sink.stats()["dropped"], sink.stats()["refused"]) == (0, 0)
    finally:
        srv.stop(0)


@pytest.mark.parametrize("code", [grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNAVAILABLE], ids=lambda c: c.name)
def test_on_confirmed_hands_over_each_message_the_collector_confirmed_once_and_no_other(tmp_path, code):
    refusals = []
    once = refuse_once(code, refusals)

    confirmed = []
    srv, servicer, port = collector.start(refuse=once)
    try:
        sink = sink_for(port, tmp_path, stream_s=5.0, backoff_s=(0.05, 0.2), on_confirmed=confirmed.extend)
        for start, n in ((0, 60), (60, 40), (100, 50), (150, 50)):
            sink.records(batch(start, n), dropped=0)
        sink.close(10)
        seqs = sorted(s for data in confirmed for s in _seqs(pb.StreamMessage.FromString(data)))
        assert seqs == sorted(servicer.all_records()["seq"].tolist())
        assert (100 in seqs) == (code == grpc.StatusCode.UNAVAILABLE)  # a refused batch is never confirmed
    finally:
        srv.stop(0)
