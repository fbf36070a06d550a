"""Loggers over gRPC -> gateway -> Kafka -> workers -> ClickHouse, on the real services.

Every test checks the query results against what was sent: every record once, no more.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from sleuth.proto import codec
from sleuth.proto import commops_pb2 as pb
from sleuth.records import IterationBatch
from sleuth.storage import records_table
from sleuth.stream import connect
from sleuth.stream.services.worker import Worker

from ..conftest import Services
from .harness import record_stream, registered_pipeline, stop_process, wait_for_count, worker_process
from .test_records_pipeline import sorted_by_key, training_records

pytestmark = [pytest.mark.services, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

N = 10_000


@pytest.fixture()
def pipeline(services: Services):
    with registered_pipeline(services) as (settings, client, gateway):
        yield settings, client, gateway


def send_in_streams(gateway, batch, *, streams: int, per_message: int = 250, pause_s: float = 0.0) -> None:
    for part in np.array_split(np.arange(len(batch)), streams):
        summary = gateway.Stream(record_stream(batch.take(part), per_message=per_message))
        assert summary.accepted == -(-len(part) // per_message)
        time.sleep(pause_s)


def assert_exactly_once(settings, client, sent) -> None:
    table = f"{settings.clickhouse_database}.records"
    assert wait_for_count(client, table, len(sent)) == len(sent)
    assert records_table.select_records(client, table).equals(sorted_by_key(sent))


def run_worker_thread(settings, client_settings=None):
    return worker_thread(Worker(settings, client=connect.clickhouse_client(client_settings or settings)))


def worker_thread(worker: Worker):
    """``worker`` running in a thread: (worker, its stop event, the thread)."""
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    return worker, stop, thread


def test_10k_records_and_iterations_exactly_once(pipeline) -> None:
    settings, client, gateway = pipeline
    sent = training_records(N, seed=21)
    iterations = IterationBatch.from_columns(
        job="job-a", rank=np.repeat(np.arange(8), 5), iteration=np.tile(np.arange(5), 8),
        t_start_ns=np.tile(np.arange(5), 8) * 10**9 + 1, t_end_ns=np.tile(np.arange(5), 8) * 10**9 + 9 * 10**8,
    )
    worker, stop, thread = run_worker_thread(settings)
    try:
        send_in_streams(gateway, sent, streams=4)
        gateway.Stream(iter([pb.StreamMessage(iterations=codec.iterations_to_proto(iterations))]))
        assert_exactly_once(settings, client, sent)
        db = settings.clickhouse_database
        assert wait_for_count(client, f"{db}.iterations", len(iterations)) == len(iterations)
        assert client.execute(f"SELECT job, world FROM {db}.jobs FINAL ORDER BY job") == [("job-a", 64), ("job-b", 64)]
        # The per-rank state saw every record once.
        assert int(worker.state.records.sum()) == N
        row = worker.state.row("job-a", 3)
        assert worker.state.iterations_done[row] == 5
    finally:
        stop.set()
        thread.join(timeout=30)


def test_records_the_loggers_lost_reach_clickhouse_once_even_from_a_resent_stream(pipeline) -> None:
    settings, client, gateway = pipeline
    sent = training_records(2_000, seed=24)
    logger = sent.take(np.flatnonzero((sent["rank"] == 3) & (sent.decoded("job") == "job-a")))  # one rank's logger
    halves = np.array_split(np.arange(len(logger)), 2)
    messages = [pb.StreamMessage(records=codec.records_to_proto(logger.take(part).compact(), dropped=lost))
                for part, lost in zip(halves, (5, 7))]
    worker, stop, thread = run_worker_thread(settings)
    try:
        for _ in range(2):  # the logger resends a stream whose answer it did not get
            assert gateway.Stream(iter(messages)).accepted == 2
        db = settings.clickhouse_database
        assert wait_for_count(client, f"{db}.logger_drops", 2) == 2
        assert client.execute(f"SELECT job, rank, sum(dropped), min(before_ns) FROM {db}.logger_drops FINAL "
                              "GROUP BY job, rank") == [("job-a", 3, 12, int(logger["t_start_ns"].min()))]
    finally:
        stop.set()
        thread.join(timeout=30)


def test_worker_killed_mid_stream_and_restarted_loses_and_duplicates_nothing(pipeline, tmp_path) -> None:
    settings, client, gateway = pipeline
    sent = training_records(N, seed=22)
    before, after = sent.take(slice(0, N // 2)), sent.take(slice(N // 2, N))
    table = f"{settings.clickhouse_database}.records"
    worker = worker_process(settings, tmp_path / "worker.log")
    send_in_streams(gateway, before, streams=10)
    # The loggers go on sending while the worker is killed and restarted, however fast it started.
    sender = threading.Thread(target=send_in_streams, args=(gateway, after), kwargs={"streams": 10, "pause_s": 0.25})
    try:
        # Kill once the worker has inserted some records.
        assert wait_for_count(client, table, 1) >= 1
        sender.start()
        worker.kill()  # SIGKILL: no cleanup, no commit of anything in flight
        worker.wait(timeout=10)
        inserted_at_kill = wait_for_count(client, table, 0, timeout_s=1)
        worker = worker_process(settings, tmp_path / "worker.log")
        sender.join(timeout=120)
        assert_exactly_once(settings, client, sent)
        assert inserted_at_kill < N
    finally:
        stop_process(worker)
        if sender.is_alive():
            sender.join(timeout=5)


def test_two_workers_share_four_partitions_and_the_results_are_complete(pipeline) -> None:
    settings, client, gateway = pipeline
    sent = training_records(N, seed=23)
    first = run_worker_thread(settings)
    second = run_worker_thread(settings)
    try:
        # Send only once the group has settled on both members, so that both get records.
        deadline = time.monotonic() + 60
        while not (first[0].assignment() and second[0].assignment()):
            assert time.monotonic() < deadline, "the two workers never shared the partitions"
            time.sleep(0.2)
        send_in_streams(gateway, sent, streams=8)
        assert_exactly_once(settings, client, sent)
        a, b = first[0].assignment(), second[0].assignment()
        assert len(a) + len(b) == 4 and not (a & b) and a and b
        assert first[0].inserted_records + second[0].inserted_records >= N
        assert first[0].inserted_records > 0 and second[0].inserted_records > 0
    finally:
        for _, stop, thread in (first, second):
            stop.set()
        for _, stop, thread in (first, second):
            thread.join(timeout=30)
