"""The gateway's batch checks, without any service: every bad batch is refused naming its field."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from sleuth.errors import BatchRejected
from sleuth.proto import codec
from sleuth.proto import commops_pb2 as pb
from sleuth.records import IterationBatch, OpKind, RecordBatch
from sleuth.stream.ingest import validate

LIMITS = validate.Limits(max_records=1_000, max_strings=20, max_string_bytes=32, max_iteration=10_000)
JOBS = {"job-a"}


def good_records(n: int = 20, *, seed: int = 0, job: str = "job-a") -> RecordBatch:
    rng = np.random.default_rng(seed)
    start = 10**18 + np.arange(n) * 1000
    return RecordBatch.from_columns(
        job=job, rank=rng.integers(0, 8, n), comm="tp.0", seq=np.arange(n),
        op=np.full(n, int(OpKind.ALL_REDUCE)), peer=np.full(n, -1), nbytes=rng.integers(0, 1 << 30, n),
        iteration=np.arange(n) // 4, t_issue_ns=start, t_start_ns=start, t_end_ns=start + 500,
    )


def records_message(batch: RecordBatch) -> pb.StreamMessage:
    return pb.StreamMessage(records=codec.records_to_proto(batch))


def check(message: pb.StreamMessage):
    return validate.check_message(message, limits=LIMITS, registered=JOBS)


def test_a_good_batch_comes_back_equal() -> None:
    batch = good_records()
    assert check(records_message(batch)).equals(batch)
    iterations = IterationBatch.from_columns(job="job-a", rank=[0, 1], iteration=[3, 3], t_start_ns=[5, 6], t_end_ns=[9, 9])
    assert check(pb.StreamMessage(iterations=codec.iterations_to_proto(iterations))).equals(iterations)


# (field path the message must start with, how to break a good wire batch)
def _unequal(m): m.records.seq.append(7)
def _unknown_op(m): m.records.op[3] = 77
def _negative_op(m): m.records.op[0] = -5
def _bad_time(m): m.records.t_end_ns[2] = m.records.t_start_ns[2] - 1
def _negative_size(m): m.records.nbytes[1] = (1 << 64) - 10  # a -10 encoded as an unsigned varint
def _peer(m): m.records.peer[0] = -7
def _long_string(m): m.records.strings[0] = "x" * 33
def _code(m): m.records.comm[0] = 99
def _unregistered(m): m.records.strings[0] = "job-b"
def _empty(m): m.ClearField("payload")
def _issued_after_start(m): m.records.t_issue_ns[6] = m.records.t_start_ns[6] + validate.MAX_ISSUE_AFTER_START_NS + 1
def _huge_iteration(m): m.records.iteration[2] = LIMITS.max_iteration + 1


BREAKERS = [
    ("records.column 'seq'", _unequal), ("records: op", _unknown_op), ("records.column 'op'", _negative_op),
    ("records: t_end_ns", _bad_time), ("records: nbytes", _negative_size), ("records: peer", _peer),
    ("records.strings[0]", _long_string), ("records.column 'comm'", _code), ("records.job", _unregistered),
    ("payload", _empty), ("records: t_issue_ns", _issued_after_start), ("records: iteration", _huge_iteration),
]


@pytest.mark.parametrize("prefix, breaker", BREAKERS, ids=[b.__name__ for _, b in BREAKERS])
def test_each_kind_of_bad_batch_is_refused_naming_the_field(prefix, breaker) -> None:
    message = records_message(good_records())
    breaker(message)
    with pytest.raises(BatchRejected) as error:
        check(message)
    assert str(error.value).startswith(prefix), str(error.value)


def test_records_reported_lost_by_a_batch_without_records_are_refused_naming_the_field() -> None:
    message = records_message(good_records(0))
    message.records.dropped = 12
    with pytest.raises(BatchRejected, match=r"^records\.dropped: 12 records reported lost by a batch without records"):
        check(message)
    message.records.dropped = 0  # an empty batch alone is harmless
    assert len(check(message)) == 0


def test_size_limits_come_before_decoding() -> None:
    with pytest.raises(BatchRejected, match=r"^records: 1001 records, more than the limit of 1000"):
        check(records_message(good_records(1001)))
    message = records_message(good_records())
    message.records.strings.extend(f"s{i}" for i in range(30))
    with pytest.raises(BatchRejected, match=r"^records.strings: 32 entries"):
        check(message)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_any_single_mutation_is_either_accepted_valid_or_refused(data) -> None:
    """Fuzz: set one random column entry to a random value; never a crash, never a bad batch through."""
    message = records_message(good_records(8, seed=data.draw(st.integers(0, 100))))
    name = data.draw(st.sampled_from([f.name for f in RecordBatch.FIELDS]))
    column = getattr(message.records, name)
    index = data.draw(st.integers(0, 7))
    bounds = {"rank": (0, 2**32 - 1), "job": (0, 2**32 - 1), "comm": (0, 2**32 - 1), "seq": (0, 2**64 - 1),
              "nbytes": (0, 2**64 - 1), "op": (-(2**31), 2**31 - 1), "peer": (-(2**31), 2**31 - 1)}
    low, high = bounds.get(name, (-(2**63), 2**63 - 1))
    column[index] = data.draw(st.integers(low, high))
    try:
        batch = check(message)
    except BatchRejected as error:
        assert str(error).split(":")[0].startswith("records"), str(error)
        return
    assert batch.problems() == [] and set(validate.batch_jobs(batch)) <= JOBS
    assert int(batch["nbytes"].max()) <= validate.MAX_NBYTES
    assert int(batch["iteration"].max()) <= LIMITS.max_iteration
    assert (batch["t_issue_ns"] <= batch["t_start_ns"] + validate.MAX_ISSUE_AFTER_START_NS).all()


def test_a_rank_outside_the_registered_world_is_refused_naming_it() -> None:
    from sleuth.jobspec import JobSpec
    from sleuth.layout import ParallelLayout
    from sleuth.stream.ingest.job_registry import JobRegistry

    registry = JobRegistry([JobSpec.from_layout("job-a", ParallelLayout(8, 4, 1, 2))])
    batch = good_records(20)
    assert validate.check_message(records_message(batch), limits=LIMITS, registered=registry).equals(batch)
    ranks = batch["rank"].copy()
    ranks[5] = 11
    bad = RecordBatch({**batch.columns, "rank": ranks}, batch.strings)
    with pytest.raises(BatchRejected, match=r"records\.rank: 1 records of job 'job-a' name ranks outside its world of 8 \(first: rank 11\)"):
        validate.check_message(records_message(bad), limits=LIMITS, registered=registry)


def _registry(world: int = 8):
    from sleuth.jobspec import JobSpec
    from sleuth.layout import ParallelLayout
    from sleuth.stream.ingest.job_registry import JobRegistry

    return JobRegistry([JobSpec.from_layout("job-a", ParallelLayout(world, 4, 1, world // 4))])


def _with(batch: RecordBatch, **columns) -> RecordBatch:
    return RecordBatch({**batch.columns, **columns}, batch.strings)


def test_a_peer_outside_the_registered_world_is_refused_naming_value_and_position() -> None:
    registry = _registry(8)
    batch = good_records(20)
    op, peer = batch["op"].copy(), batch["peer"].copy()
    op[[3, 9]], peer[[3, 9]] = int(OpKind.SEND), 7  # 7: the last rank of the world
    ok = _with(batch, op=op, peer=peer)
    assert validate.check_message(records_message(ok), limits=LIMITS, registered=registry).equals(ok)
    peer = peer.copy()
    peer[9] = 8
    bad = _with(batch, op=op, peer=peer)
    with pytest.raises(BatchRejected, match=r"^records\.peer: 1 records of job 'job-a' name peers outside its world "
                                            r"of 8 \(first at index 9: peer 8\)$"):
        validate.check_message(records_message(bad), limits=LIMITS, registered=registry)


def test_a_record_issued_after_it_started_is_refused_beyond_the_clock_slack() -> None:
    batch = good_records(20)
    issue = batch["t_issue_ns"].copy()
    issue[4] = batch["t_start_ns"][4] + validate.MAX_ISSUE_AFTER_START_NS  # at the slack: accepted
    at_slack = _with(batch, t_issue_ns=issue)
    assert check(records_message(at_slack)).equals(at_slack)
    issue[[4, 11]] = batch["t_start_ns"][[4, 11]] + validate.MAX_ISSUE_AFTER_START_NS + 1
    with pytest.raises(BatchRejected) as error:
        check(records_message(_with(batch, t_issue_ns=issue)))
    expected = (f"records: t_issue_ns: issued more than {validate.MAX_ISSUE_AFTER_START_NS} ns after it starts "
                f"(t_start_ns) in 2 records (first at index 4: {issue[4]})")
    assert str(error.value) == expected


@pytest.mark.parametrize("kind", ["records", "iterations"])
def test_an_iteration_above_the_cap_or_below_its_floor_is_refused(kind) -> None:
    cap = LIMITS.max_iteration
    if kind == "records":
        batch = good_records(20)
        iteration = batch["iteration"].copy()
        iteration[7] = cap
        at_cap = _with(batch, iteration=iteration)
        assert check(records_message(at_cap)).equals(at_cap)
        iteration[7], iteration[12] = cap + 1, -2
        message = records_message(_with(batch, iteration=iteration))
        negative = "iteration: iteration below -1 in 1 records (first at index 12: -2)"
    else:
        its = IterationBatch.from_columns(job="job-a", rank=[0] * 9, iteration=[1] * 7 + [cap + 1, -1],
                                          t_start_ns=[5] * 9, t_end_ns=[9] * 9)
        message = pb.StreamMessage(iterations=codec.iterations_to_proto(its))
        negative = "iteration: negative iteration in 1 records (first at index 8: -1)"
    with pytest.raises(BatchRejected) as error:
        check(message)
    text = str(error.value)
    assert text.startswith(f"{kind}: ") and negative in text, text
    assert f"iteration: above {cap} (SLEUTH_GATEWAY_MAX_ITERATION) in 1 records (first at index 7: {cap + 1})" in text


def test_the_iteration_cap_is_the_gateway_setting() -> None:
    from sleuth.settings import Settings
    from sleuth.stream.ingest.gateway import limits_from

    settings = Settings.from_env({"SLEUTH_GATEWAY_MAX_ITERATION": "5000"})
    assert limits_from(settings).max_iteration == 5000
    assert validate.Limits().max_iteration == Settings().gateway_max_iteration
