"""The gateway's numbering of a job's rendezvous rounds (``JobRegistry``) and the batches it renames, without
any service: a launcher that restarts its workers when a node joins keeps the job's id."""

from __future__ import annotations

import pytest

from sleuth.errors import BatchRejected, NotRegistered
from sleuth.jobspec import JobSpec
from sleuth.layout import ParallelLayout
from sleuth.proto import commops_pb2 as pb
from sleuth.stream.ingest import job_registry, kafka_records, validate
from sleuth.stream.ingest.job_registry import JobRegistry, Registration

from .test_validate import LIMITS, good_records, records_message

FIRST, JOINED, JOINED_AGAIN = "node-0:29400/8", "node-0:29400/16", "node-0:29400/24"


def spec(job: str, world: int) -> JobSpec:
    return JobSpec.from_layout(job, ParallelLayout(world, 4, 1, world // 4))


def register(registry: JobRegistry, job: str, world: int, rendezvous: str) -> str:
    named = registry.named(spec(job, world), rendezvous)
    registry.add(named)
    return named.job


def test_the_rounds_of_a_job_are_numbered_as_they_register_and_keep_their_numbers() -> None:
    registry = JobRegistry()
    assert register(registry, "train", 8, FIRST) == "train"
    assert registry.in_round("train", JOINED) is None
    assert register(registry, "train", 16, JOINED) == "train.m1"
    assert register(registry, "train", 8, FIRST) == "train"  # rank 0 sends its spec again: the same round
    assert register(registry, "train", 24, JOINED_AGAIN) == "train.m2"
    assert [registry.in_round("train", key) for key in (FIRST, JOINED, JOINED_AGAIN)] == ["train", "train.m1", "train.m2"]
    assert registry.spec("train.m1").world == 16 and registry.spec("train").world == 8
    # A restarted attempt is a job of its own, whose rounds count from its first.
    assert register(registry, "train.r1", 8, "node-0:29400/8") == "train.r1"
    # Without a round (not under torchelastic) a job keeps its id, as before rounds.
    assert register(registry, "other", 8, "") == "other" and registry.in_round("other", "") == "other"


def test_a_gateway_that_reads_the_registered_specs_back_numbers_the_rounds_as_before() -> None:
    first = JobRegistry()
    registered = []
    for world, rendezvous in ((8, FIRST), (16, JOINED)):
        named = first.named(spec("train", world), rendezvous)
        # What the jobs topic holds and ``load_registered`` reads back.
        registered.append(Registration(*kafka_records.registration_from_message(kafka_records.job_message(named, rendezvous)[1])))
    again = JobRegistry(registered)
    assert again.in_round("train", JOINED) == "train.m1"
    assert again.named(spec("train", 24), JOINED_AGAIN).job == "train.m2"


def test_a_round_keeps_its_id_after_its_spec_is_dropped_idle(monkeypatch) -> None:
    now = [0.0]
    registry = JobRegistry(idle_s=60.0, clock=lambda: now[0])
    register(registry, "train", 8, FIRST)
    register(registry, "train", 16, JOINED)
    now[0] = 1000.0
    assert sorted(registry.seen(["other"])) == ["train", "train.m1"]
    assert "train.m1" not in registry and registry.in_round("train", JOINED) == "train.m1"
    assert register(registry, "train", 16, JOINED) == "train.m1"
    # The rounds of the least recently registered jobs go past the bound.
    monkeypatch.setattr(job_registry, "ROUNDS_KEPT", 2)
    register(registry, "b", 8, FIRST)
    register(registry, "c", 8, FIRST)
    assert registry.in_round("train", JOINED) is None and registry.in_round("c", FIRST) == "c"


def test_a_batch_names_its_rounds_job_and_is_refused_as_unregistered_until_the_round_registers() -> None:
    registry = JobRegistry()
    register(registry, "job-a", 8, FIRST)
    batch = good_records(20)  # ranks 0-7 of job-a
    message = records_message(batch)
    message.records.rendezvous = JOINED
    with pytest.raises(NotRegistered, match=r"^records\.rendezvous: job 'job-a' is not registered from its rendezvous "
                                            r"round 'node-0:29400/16' \(call RegisterJob first\)$"):
        validate.check_message(message, limits=LIMITS, registered=registry)
    register(registry, "job-a", 16, JOINED)
    renamed = validate.check_message(message, limits=LIMITS, registered=registry)
    assert set(renamed.decoded("job")) == {"job-a.m1"} and renamed["rank"].tolist() == batch["rank"].tolist()
    message.records.rendezvous = FIRST
    assert validate.check_message(message, limits=LIMITS, registered=registry).equals(batch)
    iterations = pb.StreamMessage()
    iterations.iterations.strings.append("job-a")
    iterations.iterations.job.append(0)
    iterations.iterations.rank.append(9)
    iterations.iterations.iteration.append(0)
    iterations.iterations.t_start_ns.append(1)
    iterations.iterations.t_end_ns.append(2)
    iterations.iterations.rendezvous = JOINED  # rank 9 lies in the joined round's world of 16
    assert set(validate.check_message(iterations, limits=LIMITS, registered=registry).decoded("job")) == {"job-a.m1"}


def test_a_rendezvous_name_longer_than_a_string_may_be_is_refused_naming_it() -> None:
    message = records_message(good_records(5))
    message.records.rendezvous = "x" * (LIMITS.max_string_bytes + 1)
    with pytest.raises(BatchRejected, match=rf"^records\.rendezvous: {LIMITS.max_string_bytes + 1} bytes, longer than "
                                            rf"the limit of {LIMITS.max_string_bytes}$"):
        validate.check_message(message, limits=LIMITS, registered=JobRegistry())
