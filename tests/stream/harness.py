"""Helpers for tests that run the gateway and workers against the real services."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from contextlib import contextmanager

import grpc

from sleuth.jobspec import JobSpec
from sleuth.layout import ParallelLayout
from sleuth.proto import codec
from sleuth.proto import commops_pb2 as pb
from sleuth.proto import commops_pb2_grpc as pb_grpc
from sleuth.records import RecordBatch
from sleuth.settings import Settings
from sleuth.storage import schema
from sleuth.stream import connect
from sleuth.stream.ingest import gateway, kafka_records

from ..conftest import Services


def private_settings(services: Services, **overrides) -> Settings:
    """Settings with this test's own topics, consumer group and database on the shared services."""
    tag = uuid.uuid4().hex[:10]
    host, port = services.kafka_bootstrap.rsplit(":", 1)
    values = dict(
        kafka_host=host, kafka_port=int(port),
        clickhouse_host=services.clickhouse_host, clickhouse_port=services.clickhouse_port,
        clickhouse_http_port=services.clickhouse_http_port,
        clickhouse_database=f"sleuth_test_{tag}",
        records_topic=f"sleuth-records-{tag}", rejects_topic=f"sleuth-rejects-{tag}", jobs_topic=f"sleuth-jobs-{tag}",
        worker_group=f"sleuth-workers-{tag}", gateway_port=0,
    )
    return dataclasses.replace(Settings(), **(values | overrides))


@contextmanager
def running_gateway(settings: Settings) -> Iterator[tuple[gateway.Collector, str]]:
    """A gateway on an ephemeral loopback port: (servicer, target address)."""
    connect.ensure_gateway_topics(settings)
    server, port, collector = gateway.create(settings)
    server.start()
    try:
        yield collector, f"127.0.0.1:{port}"
    finally:
        server.stop(grace=5)


def job_spec(job: str, world: int = 64) -> pb.JobSpec:
    return codec.jobspec_to_proto(JobSpec.from_layout(job, ParallelLayout(world, 8, 1, world // 8)))


@contextmanager
def registered_pipeline(services: Services) -> Iterator[tuple[Settings, Any, pb_grpc.CollectorStub]]:
    """Private topics and database, a running gateway with job-a and job-b registered:
    (settings, ClickHouse client, gateway stub); the database is dropped afterwards."""
    settings = private_settings(services)
    client = connect.clickhouse_client(settings)
    schema.migrate(client, settings.clickhouse_database)
    try:
        with running_gateway(settings) as (collector, target):
            client_stub = stub(target)
            for job in ("job-a", "job-b"):
                client_stub.RegisterJob(job_spec(job))
            yield settings, client, client_stub
    finally:
        client.execute(f"DROP DATABASE IF EXISTS {settings.clickhouse_database}")
        client.disconnect()


def stub(target: str) -> pb_grpc.CollectorStub:
    return pb_grpc.CollectorStub(grpc.insecure_channel(target))


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


def record_stream(batch: RecordBatch, *, per_message: int) -> Iterator[pb.StreamMessage]:
    for start in range(0, len(batch), per_message):
        yield pb.StreamMessage(records=codec.records_to_proto(batch.take(slice(start, start + per_message)).compact()))


def stream_emulation(settings: Settings, client: Any, emulation: Any, iterations: range) -> int:
    """Register an emulated job with a fresh gateway and stream it iteration by iteration, as loggers
    would; returns the number of records, once the workers have landed them all in ClickHouse."""
    import numpy as np

    records = emulation.records(iterations=iterations)
    with running_gateway(settings) as (_, target):
        gateway = stub(target)
        gateway.RegisterJob(codec.jobspec_to_proto(emulation.job_spec()))
        for it in iterations:
            part = records.take(np.flatnonzero(records["iteration"] == it))
            gateway.Stream(record_stream(part, per_message=5000))
            its = emulation.iterations(iterations=[it])
            gateway.Stream(iter([pb.StreamMessage(iterations=codec.iterations_to_proto(its))]))
        table = f"{settings.clickhouse_database}.records"
        assert wait_for_count(client, table, len(records), timeout_s=300) == len(records)
    return len(records)


def consume(settings: Settings, topic: str, *, expect_records: int | None = None, messages: int | None = None,
            until: Callable[[list], bool] | None = None, timeout_s: float = 60.0) -> list:
    """Kafka messages of ``topic`` from the start until the expected count arrives (or ``until`` holds
    of the messages got), or time runs out."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=settings.kafka_bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, group_id=None)
    got, records = [], 0
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=300).values():
                for message in batch:
                    got.append(message)
                    if kafka_records.kind_of(message.headers) == kafka_records.RECORDS and topic == settings.records_topic:
                        records += len(kafka_records.from_message(message.value))
            if expect_records is not None and records >= expect_records:
                break
            if messages is not None and len(got) >= messages:
                break
            if until is not None and until(got):
                break
    finally:
        consumer.close()
    return got


def worker_process(settings: Settings, log_path) -> "subprocess.Popen":
    """``sleuth worker`` as its own process (so that tests can kill -9 it)."""
    import os
    import subprocess
    import sys

    env = dict(os.environ) | settings.to_env()
    log = open(log_path, "ab")
    return subprocess.Popen([sys.executable, "-m", "sleuth", "worker"], env=env, stdout=log, stderr=log,
                            stdin=subprocess.DEVNULL)


def stop_process(process) -> None:
    """SIGTERM our own child, SIGKILL if it lingers."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except Exception:
            process.kill()
            process.wait(timeout=10)


def wait_for_count(client, table: str, expected: int, *, timeout_s: float = 90.0) -> int:
    """``SELECT count() FROM table FINAL`` once it reaches ``expected`` (or what it is at the deadline)."""
    deadline = time.monotonic() + timeout_s
    count = -1
    while time.monotonic() < deadline:
        try:
            count = client.execute(f"SELECT count() FROM {table} FINAL")[0][0]
        except Exception:  # table not created yet, or ClickHouse restarting
            count = -1
        if count >= expected:
            return count
        time.sleep(0.3)
    return count
