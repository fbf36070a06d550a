"""Per-job state of the gateway and the workers is dropped once a job is idle for SLEUTH_JOB_IDLE_S
(on an injected clock), kept while it is active, and a job that comes back is served again."""

from __future__ import annotations

import numpy as np
import pytest

from sleuth.errors import ConfigError
from sleuth.jobspec import JobSpec
from sleuth.layout import ParallelLayout
from sleuth.records import IterationBatch, RecordBatch
from sleuth.settings import Settings
from sleuth.stream.idle_jobs import IdleJobs
from sleuth.stream.ingest.job_registry import JobRegistry
from sleuth.stream.detection.rank_state import RankState
from sleuth.stream.services.worker import Worker


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def records(job: str, ranks: list[int], iteration: int) -> RecordBatch:
    n = len(ranks)
    return RecordBatch.from_columns(job=job, rank=ranks, comm="dp.0", seq=[iteration] * n, op=[1] * n,
                                    peer=[-1] * n, nbytes=[8] * n, iteration=[iteration] * n,
                                    t_issue_ns=[10 * iteration] * n, t_start_ns=[10 * iteration] * n,
                                    t_end_ns=[10 * iteration + 5] * n)


def test_a_job_is_expired_once_idle_longer_than_the_setting_and_not_before() -> None:
    idle = IdleJobs(idle_s=100.0)
    idle.seen(["a", "b"], 0.0)
    idle.seen(["b"], 90.0)
    assert idle.expired(100.0) == []  # idle exactly as long: kept
    assert idle.expired(150.0) == ["a"] and "a" not in idle and "b" in idle
    idle.seen(["a"], 150.0)  # it comes back
    assert idle.expired(200.0) == ["b"]  # looked again only idle_s / 8 later
    assert idle.expired(251.0) == ["a"] and len(idle) == 0


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), "60"])
def test_a_bad_idle_time_fails_naming_it(bad) -> None:
    with pytest.raises(ConfigError, match="idle_s"):
        IdleJobs(idle_s=bad)


def test_the_setting_parses_and_refuses_a_non_positive_time() -> None:
    assert Settings.from_env({"SLEUTH_JOB_IDLE_S": "90"}).job_idle_s == 90.0
    with pytest.raises(ConfigError, match="SLEUTH_JOB_IDLE_S"):
        Settings.from_env({"SLEUTH_JOB_IDLE_S": "0"})


def test_the_gateway_drops_an_idle_job_keeps_an_active_one_and_takes_a_returning_one() -> None:
    clock = Clock()
    specs = [JobSpec.from_layout(job, ParallelLayout(8, 4, 1, 2)) for job in ("idle", "busy")]
    registry = JobRegistry(specs, idle_s=60.0, clock=clock)
    clock.now = 30.0
    assert registry.seen(["busy"]) == [] and "idle" in registry
    clock.now = 61.0
    assert registry.seen(["busy"]) == ["idle"]
    assert "idle" not in registry and "busy" in registry and registry.spec("idle") is None
    registry.add(specs[0])  # the logger registers it again (logger.sender)
    assert registry.layout_of("idle") == specs[0].layout
    clock.now = 200.0
    assert registry.seen(["idle"]) == ["busy"] and "idle" in registry


def test_rank_state_forgets_a_job_and_keeps_the_others_rows() -> None:
    state, alone = RankState(), RankState()
    state.update(records("gone", [0, 1, 2], 4))
    for it in (1, 2):
        batch = records("kept", [5, 1], it)
        state.update(batch)
        alone.update(batch)
    state.update_iterations(IterationBatch.from_columns(job="kept", rank=[5], iteration=[2], t_start_ns=[0],
                                                        t_end_ns=[9]))
    alone.update_iterations(IterationBatch.from_columns(job="kept", rank=[5], iteration=[2], t_start_ns=[0],
                                                        t_end_ns=[9]))
    state.forget({"gone", "never-seen"})
    assert len(state) == len(alone) == 2 and state.row("gone", 0) is None
    for rank in (5, 1):
        a, b = state.row("kept", rank), alone.row("kept", rank)
        for name in ("records", "iteration", "t_end_ns", "iterations_done"):
            assert getattr(state, name)[a] == getattr(alone, name)[b]
    state.update(records("gone", [7], 9))  # it comes back: a row of its own again
    assert state.iteration[state.row("gone", 7)] == 9 and len(state) == 3


class Forgetting:
    """A detector that records what it was told to forget."""

    def __init__(self) -> None:
        self.forgotten: list[set[str]] = []

    def update(self, records, iterations, state) -> list[tuple]:
        return []

    def take_irregularities(self) -> list:
        return []

    def forget(self, jobs: set[str]) -> None:
        self.forgotten.append(jobs)


class Message:
    def __init__(self, value: bytes) -> None:
        self.value, self.headers, self.partition, self.offset = value, None, 0, 0


def test_the_worker_drops_the_state_of_jobs_idle_for_the_setting_on_its_clock() -> None:
    from sleuth.stream.ingest import kafka_records

    clock, detector = Clock(), Forgetting()
    worker = Worker(Settings(job_idle_s=60.0), client=None, detectors=[detector], clock=clock)

    def batch(job: str, iteration: int) -> list:
        return [Message(value) for _, value in kafka_records.to_messages(records(job, [0, 1], iteration))]

    worker.prepare(batch("idle", 0) + batch("busy", 0))
    for it, clock.now in enumerate((40.0, 70.0), 1):
        worker.prepare(batch("busy", it))
    assert detector.forgotten == [{"idle"}]
    assert worker.state.row("idle", 0) is None and worker.state.row("busy", 1) is not None
    worker.prepare(batch("idle", 5))  # it comes back
    assert worker.state.iteration[worker.state.row("idle", 1)] == 5
    clock.now = 200.0
    worker.prepare([])
    assert detector.forgotten[1:] == [{"busy", "idle"}] and len(worker.state) == 0


def test_the_gateway_refuses_a_job_dropped_as_idle_until_it_registers_again() -> None:
    import grpc

    from sleuth.proto import codec
    from sleuth.proto import commops_pb2 as pb
    from sleuth.stream.ingest import gateway
    from sleuth.stream.ingest.publisher import Publisher
    from sleuth.stream.ingest.validate import Limits

    from .test_gateway_confirm import Aborted, Context, Send, call

    class Producer:
        def send(self, topic, *, key, value, headers) -> Send:
            return Send(fails=False)

    clock = Clock()
    specs = [JobSpec.from_layout(job, ParallelLayout(8, 8, 1, 1)) for job in ("llama", "other")]
    collector = gateway.Collector(Publisher(Settings(), producer=Producer()), tokens=None, limits=Limits(),
                                  registered=specs, job_idle_s=60.0, clock=clock)

    def stream(job: str) -> Context:
        batch = records(job, [0, 1], 3)
        message = pb.StreamMessage(records=codec.records_to_proto(batch)).SerializeToString()
        context = Context()
        try:
            call(collector.Stream, [message], context)
        except Aborted:
            pass
        return context

    clock.now = 30.0
    assert stream("llama").code is None
    clock.now = 100.0
    assert stream("other").code is None and "llama" not in collector.jobs  # idle 70 s > 60 s
    assert stream("llama").code == grpc.StatusCode.FAILED_PRECONDITION
    call(collector.RegisterJob, codec.jobspec_to_proto(specs[0]), Context())
    assert stream("llama").code is None
