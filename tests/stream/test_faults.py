"""Service faults mid-stream: a Kafka broker restart, ClickHouse down for 15 s, a detector that
raises and a publish that fails lose nothing. The module runs on a Kafka and a ClickHouse of its own
(ports and state folder: ``PrivateStack``), so that stopping them disturbs no other test."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY

from sleuth.stream import connect
from sleuth.irregularity import Irregularity, IrregularityKind
from sleuth.sim.chaos.stack import PrivateStack
from sleuth.stream.services.worker import Worker

from ..conftest import REPO_ROOT, Services
from .harness import registered_pipeline, wait_for_count
from .test_end_to_end import assert_exactly_once, run_worker_thread, send_in_streams, worker_thread
from .test_records_pipeline import training_records

pytestmark = [pytest.mark.services, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

N = 10_000
STACK = ("kafka", "clickhouse")  # what the pipeline needs (no Alertmanager)


@pytest.fixture(scope="module")
def own_stack(tmp_path_factory) -> Iterator[PrivateStack]:
    """A Kafka broker and a ClickHouse server of this module's own, stopped with it."""
    stack = PrivateStack.create(REPO_ROOT, tmp_path_factory.mktemp("faults-state"))
    try:
        for name in STACK:
            stack.service(name, "up")
        yield stack
    finally:
        for name in STACK:
            stack.service(name, "down")


@pytest.fixture()
def own_services(own_stack: PrivateStack) -> Services:
    """The addresses of ``own_stack``, where the other stream tests have the session's services."""
    return Services.from_environ(own_stack.env())


@pytest.fixture()
def pipeline(own_services: Services, own_stack: PrivateStack):
    with registered_pipeline(own_services) as (settings, client, gateway):
        try:
            yield settings, client, gateway
        finally:
            for name in STACK:  # whatever a test stopped is back for the next one
                own_stack.service(name, "up")


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


def test_clickhouse_down_for_15s_the_worker_retries_and_nothing_is_lost_or_doubled(pipeline, own_stack) -> None:
    settings, client, gateway = pipeline
    sent = training_records(N, seed=41)
    worker, stop, thread = run_worker_thread(settings)
    try:
        send_in_streams(gateway, sent.take(slice(0, N // 2)), streams=2)
        own_stack.service("clickhouse", "down")
        send_in_streams(gateway, sent.take(slice(N // 2, N)), streams=2)  # Kafka still takes them
        # Longer than the consumer group's session timeout (10 s); the worker's retries reach their 5 s cap.
        time.sleep(15)
        own_stack.service("clickhouse", "up")
        client.disconnect()
        assert_exactly_once(settings, client, sent)
    finally:
        stop.set()
        thread.join(timeout=60)


def test_worker_stopped_while_clickhouse_is_down_commits_nothing_it_did_not_insert(pipeline, own_stack) -> None:
    settings, client, gateway = pipeline
    sent = training_records(N, seed=43)
    table = f"{settings.clickhouse_database}.records"
    worker, stop, thread = run_worker_thread(settings)
    try:
        send_in_streams(gateway, sent.take(slice(0, N // 2)), streams=2)
        assert wait_for_count(client, table, N // 2) == N // 2
        own_stack.service("clickhouse", "down")
        send_in_streams(gateway, sent.take(slice(N // 2, N)), streams=2)
        deadline = time.monotonic() + 60
        while worker.batches_retried == 0:  # the worker holds the second half, unacknowledged
            assert time.monotonic() < deadline, "the worker never took the second half"
            time.sleep(0.2)
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not thread.is_alive()
    own_stack.service("clickhouse", "up")
    client.disconnect()
    # A new worker in the same group resumes from the committed offsets: the abandoned batch is replayed.
    worker, stop, thread = run_worker_thread(settings)
    try:
        assert_exactly_once(settings, client, sent)
    finally:
        stop.set()
        thread.join(timeout=60)


def test_kafka_restart_mid_stream_gateway_and_worker_recover(pipeline, own_stack) -> None:
    settings, client, gateway = pipeline
    sent = training_records(N, seed=42)
    worker, stop, thread = run_worker_thread(settings)
    sender = threading.Thread(target=send_retrying, args=(gateway, sent), kwargs={"streams": 20, "pause_s": 0.3})
    try:
        sender.start()
        time.sleep(2)
        own_stack.service("kafka", "down")
        time.sleep(3)
        own_stack.service("kafka", "up")
        sender.join(timeout=300)
        assert not sender.is_alive()
        assert_exactly_once(settings, client, sent)
    finally:
        stop.set()
        thread.join(timeout=60)
        sender.join(timeout=5)


class FailingDetector:
    """Raises on its first ``failures`` batches; finds one irregular iteration (numbered 1, 2 ...) in every batch."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.batches = 0
        self.found: list[Irregularity] = []

    def update(self, records, iterations, state) -> list[tuple]:
        self.batches += 1
        self.found.append(Irregularity(job="job-a", iteration=self.batches, kind=IrregularityKind.SPIKE,
                                       duration_ns=2_000, baseline_ns=1_000))
        if self.batches <= self.failures:
            raise RuntimeError("a detector bug")
        return []

    def take_irregularities(self) -> list[Irregularity]:
        found, self.found = self.found, []
        return found

    def forget(self, jobs: set[str]) -> None:
        pass


class FailingPublish:
    """Kafka refusing the first ``failures`` publications, then taking them."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0
        self.published: list[Irregularity] = []

    def __call__(self, irregularities: list[Irregularity]) -> None:
        self.calls += 1
        if self.calls <= self.failures:
            raise TimeoutError("Kafka did not acknowledge")
        self.published += irregularities


def test_a_detector_that_raises_and_a_publish_that_fails_lose_neither_records_nor_irregularities(pipeline) -> None:
    settings, client, gateway = pipeline
    sent = training_records(N, seed=47)
    failures_before = REGISTRY.get_sample_value("sleuth_detection_failures_total") or 0.0
    detector, publish = FailingDetector(failures=1), FailingPublish(failures=2)
    worker, stop, thread = worker_thread(Worker(settings, client=connect.clickhouse_client(settings),
                                                detectors=[detector], publish=publish, retry_max_s=0.5))
    try:
        send_in_streams(gateway, sent, streams=4)
        assert_exactly_once(settings, client, sent)  # the batch whose detection raised too
        deadline = time.monotonic() + 30
        while len(publish.published) < detector.batches:
            assert time.monotonic() < deadline, "irregularities were lost"
            time.sleep(0.2)
    finally:
        stop.set()
        thread.join(timeout=60)
    assert sorted(i.iteration for i in publish.published) == list(range(1, detector.batches + 1))
    assert publish.calls > 2 and worker.detection_failures == 1
    assert (REGISTRY.get_sample_value("sleuth_detection_failures_total") or 0.0) == failures_before + 1
