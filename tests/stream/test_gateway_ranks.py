"""A 16,384-rank job through the real gateway: every rank registers nothing (rank 0's spec covers
the job), opens its own stream, sends one small batch and is confirmed; Kafka then holds every
rank's records exactly once. The ranks are multiplexed over two spawned processes with asyncio
gRPC channels (``sleuth.sim.rank_streams``), as 16,384 loggers on a few hosts would be."""

from __future__ import annotations

import collections

import pytest

from sleuth.jobspec import JobSpec
from sleuth.layout import ParallelLayout
from sleuth.proto import codec
from sleuth.sim import rank_streams
from sleuth.stream.ingest import kafka_records

from ..conftest import Services
from .harness import consume, private_settings, running_gateway, stub

pytestmark = [pytest.mark.services, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

WORLD = 16_384


def test_every_rank_of_a_16k_rank_job_streams_at_once_and_each_batch_is_confirmed_and_in_kafka(
        services: Services) -> None:
    settings = private_settings(services)
    spec = JobSpec.from_layout("big", ParallelLayout(WORLD, 8, 8, WORLD // 64))
    with running_gateway(settings) as (collector, target):
        stub(target).RegisterJob(codec.jobspec_to_proto(spec), timeout=120)
        load = rank_streams.Load(target=target, job="big", comm=spec.communicators[0].comm, batches=1, records=2,
                                 channels=16, give_up_s=300)
        results, _ = rank_streams.run_processes(load, WORLD, processes=2)
        assert [r.error for r in results if r.confirmed_after_s is None] == []
        assert sorted(r.rank for r in results) == list(range(WORLD))
        assert collector.counters.accepted_batches == WORLD
    got = consume(settings, settings.records_topic, expect_records=WORLD * load.records, timeout_s=120)
    held = collections.Counter()
    for message in got:
        if kafka_records.kind_of(message.headers) == kafka_records.RECORDS:
            batch = kafka_records.from_message(message.value)
            held.update(zip(batch["rank"].tolist(), batch["seq"].tolist()))
    # Every rank's records, each once: nothing confirmed is missing, nothing is doubled.
    assert held == collections.Counter({(rank, seq): 1 for rank in range(WORLD) for seq in range(load.records)})


def test_streams_beyond_the_gateways_bound_are_refused_retryably_and_all_get_through(services: Services) -> None:
    settings = private_settings(services, gateway_max_streams=64)
    spec = JobSpec.from_layout("bounded", ParallelLayout(1024, 8, 1, 128))
    with running_gateway(settings) as (collector, target):
        stub(target).RegisterJob(codec.jobspec_to_proto(spec), timeout=60)
        # Each stream stays open half a second, so 1,024 ranks at once cannot all fit under 64.
        load = rank_streams.Load(target=target, job="bounded", comm=spec.communicators[0].comm, stream_s=0.5,
                                 channels=8, backoff_s=(0.05, 0.5), give_up_s=300)
        results, _ = rank_streams.run_processes(load, 1024, processes=1)
        assert [r.error for r in results if r.confirmed_after_s is None] == []
        assert any(r.retried.startswith(("RESOURCE_EXHAUSTED", "CANCELLED")) for r in results)
        assert collector.counters.accepted_batches == 1024
