"""Service faults mid-stream: a Kafka broker restart and ClickHouse down for 30 s lose nothing."""

from __future__ import annotations

import subprocess
import threading
import time

import pytest


from ..conftest import Services
from .harness import registered_pipeline, wait_for_count
from .test_end_to_end import assert_exactly_once, run_worker_thread, send_in_streams
from .test_records_pipeline import training_records

pytestmark = [pytest.mark.services, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

N = 10_000


def deploy(services: Services, script: str, action: str) -> None:
    subprocess.run(["bash", str(services.repo_root / "deploy" / script), action], check=True,
                   stdin=subprocess.DEVNULL, capture_output=True, timeout=300)


@pytest.fixture()
def pipeline(services: Services):
    with registered_pipeline(services) as (settings, client, gateway):
        try:
            yield settings, client, gateway
        finally:
            deploy(services, "services.sh", "up")  # whatever a test stopped is back for the next one


def send_retrying(gateway, batch, **kwargs) -> None:
    """What a logger does: resend a stream the gateway could not get acknowledged."""
    import grpc
    import numpy as np

    for part in np.array_split(np.arange(len(batch)), kwargs.pop("streams")):
        for attempt in range(60):
            try:
                send_in_streams(gateway, batch.take(part), streams=1, **kwargs)
                break
            except grpc.RpcError as error:
                assert error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED), error
                time.sleep(1)
        else:
            raise AssertionError("the gateway never recovered")


def test_clickhouse_down_for_30s_the_worker_retries_and_nothing_is_lost_or_doubled(pipeline, services) -> None:
    settings, client, gateway = pipeline
    sent = training_records(N, seed=41)
    worker, stop, thread = run_worker_thread(settings)
    try:
        send_in_streams(gateway, sent.take(slice(0, N // 2)), streams=2)
        deploy(services, "clickhouse.sh", "down")
        send_in_streams(gateway, sent.take(slice(N // 2, N)), streams=2)  # Kafka still takes them
        time.sleep(30)
        deploy(services, "clickhouse.sh", "up")
        client.disconnect()
        assert_exactly_once(settings, client, sent)
    finally:
        stop.set()
        thread.join(timeout=60)


def test_worker_stopped_while_clickhouse_is_down_commits_nothing_it_did_not_insert(pipeline, services) -> None:
    settings, client, gateway = pipeline
    sent = training_records(N, seed=43)
    table = f"{settings.clickhouse_database}.records"
    worker, stop, thread = run_worker_thread(settings)
    try:
        send_in_streams(gateway, sent.take(slice(0, N // 2)), streams=2)
        assert wait_for_count(client, table, N // 2) == N // 2
        deploy(services, "clickhouse.sh", "down")
        send_in_streams(gateway, sent.take(slice(N // 2, N)), streams=2)
        deadline = time.monotonic() + 60
        while worker.batches_retried == 0:  # the worker holds the second half, unacknowledged
            assert time.monotonic() < deadline, "the worker never took the second half"
            time.sleep(0.2)
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not thread.is_alive()
    deploy(services, "clickhouse.sh", "up")
    client.disconnect()
    # A new worker in the same group resumes from the committed offsets: the abandoned batch is replayed.
    worker, stop, thread = run_worker_thread(settings)
    try:
        assert_exactly_once(settings, client, sent)
    finally:
        stop.set()
        thread.join(timeout=60)


def test_kafka_restart_mid_stream_gateway_and_worker_recover(pipeline, services) -> None:
    settings, client, gateway = pipeline
    sent = training_records(N, seed=42)
    worker, stop, thread = run_worker_thread(settings)
    sender = threading.Thread(target=send_retrying, args=(gateway, sent), kwargs={"streams": 20, "pause_s": 0.3})
    try:
        sender.start()
        time.sleep(2)
        deploy(services, "kafka.sh", "down")
        time.sleep(3)
        deploy(services, "kafka.sh", "up")
        sender.join(timeout=300)
        assert not sender.is_alive()
        assert_exactly_once(settings, client, sent)
    finally:
        stop.set()
        thread.join(timeout=60)
        sender.join(timeout=5)
