"""The Collector gateway over a real gRPC channel on 127.0.0.1, into the real Kafka broker."""

from __future__ import annotations

import json
import subprocess
import threading

import grpc
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from sleuth.proto import codec
from sleuth.proto import commops_pb2 as pb
from sleuth.proto import commops_pb2_grpc as pb_grpc
from sleuth.records import IterationBatch, RecordBatch
from sleuth.stream.ingest import kafka_records

from ..conftest import Services
from .harness import bearer, consume, job_spec, private_settings, record_stream, running_gateway, stub
from .test_records_pipeline import training_records

pytestmark = [pytest.mark.services, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

TOKENS = {"job-a": "token-for-job-a-0123456789", "job-b": "token-for-job-b-0123456789"}


@pytest.fixture(scope="module")
def gateway_with_tokens(services: Services, tmp_path_factory):
    path = tmp_path_factory.mktemp("tokens") / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    settings = private_settings(services, gateway_tokens_file=str(path), gateway_max_batch_records=20_000)
    with running_gateway(settings) as (collector, target):
        client = stub(target)
        for job, token in TOKENS.items():
            client.RegisterJob(job_spec(job), metadata=bearer(token))
        yield settings, collector, client, target


def test_records_and_iterations_reach_kafka_keyed_by_job_and_replica(gateway_with_tokens) -> None:
    settings, collector, client, target = gateway_with_tokens
    sent = training_records(5_000, seed=3)
    sent = sent.take(sent.decoded("job") == "job-a")
    iterations = IterationBatch.from_columns(job="job-a", rank=[0, 1, 0], iteration=[1, 1, 2],
                                             t_start_ns=[10, 11, 20], t_end_ns=[19, 19, 29])

    def messages():
        yield from record_stream(sent, per_message=700)
        yield pb.StreamMessage(iterations=codec.iterations_to_proto(iterations))

    summary = client.Stream(messages(), metadata=bearer(TOKENS["job-a"]))
    assert summary.accepted == -(-len(sent) // 700) + 1 and summary.rejected == 0
    got = consume(settings, settings.records_topic, expect_records=len(sent))
    records = [m for m in got if kafka_records.kind_of(m.headers) == kafka_records.RECORDS]
    received = RecordBatch.concat(kafka_records.from_message(m.value) for m in records)
    order = np.lexsort((received["seq"],))
    assert received.take(order).equals(sent.take(np.lexsort((sent["seq"],))))
    # Every message holds one (job, model replica): its key names the replica, which in the
    # harness's layout (tensor 8, no pipeline) is the ranks' tensor group, so that the gateway's
    # partitioner puts a group's records together.
    for message in records:
        batch = kafka_records.from_message(message.value)
        assert {f"{j}/{r // 8 * 8}".encode() for j, r in zip(batch.decoded("job"), batch["rank"])} == {message.key}
    jobs = [m for m in got if kafka_records.kind_of(m.headers) == kafka_records.JOB]
    assert sorted(kafka_records.job_from_message(m.value).job for m in jobs) == ["job-a", "job-b"]


def test_a_token_for_one_job_never_writes_another(gateway_with_tokens) -> None:
    settings, collector, client, target = gateway_with_tokens
    batch = training_records(100, seed=4)
    job_b = batch.take(batch.decoded("job") == "job-b")
    with pytest.raises(grpc.RpcError) as error:
        client.Stream(record_stream(job_b, per_message=50), metadata=bearer(TOKENS["job-a"]))
    assert error.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "job-b" in error.value.details()
    with pytest.raises(grpc.RpcError) as error:
        client.RegisterJob(job_spec("job-b"), metadata=bearer(TOKENS["job-a"]))
    assert error.value.code() == grpc.StatusCode.PERMISSION_DENIED
    for metadata in ((), bearer("not-a-known-token-000000"), (("authorization", TOKENS["job-b"]),)):
        with pytest.raises(grpc.RpcError) as error:
            client.Stream(record_stream(job_b, per_message=50), metadata=metadata)
        assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert client.Stream(record_stream(job_b, per_message=50), metadata=bearer(TOKENS["job-b"])).accepted == 1


def test_a_token_for_a_job_writes_its_restarted_attempts_and_no_other_job(gateway_with_tokens) -> None:
    # A restarted attempt streams as ``<job>.r<N>`` (``logger.identity``) under the launcher's same token.
    settings, collector, client, target = gateway_with_tokens
    batch = training_records(200, seed=12)
    first = batch.take(batch.decoded("job") == "job-a")
    attempt = RecordBatch(first.columns, ["job-a.r1" if s == "job-a" else s for s in first.strings])
    client.RegisterJob(job_spec("job-a.r1"), metadata=bearer(TOKENS["job-a"]))
    summary = client.Stream(record_stream(attempt, per_message=50), metadata=bearer(TOKENS["job-a"]))
    assert summary.accepted == -(-len(attempt) // 50) and summary.rejected == 0
    got = consume(settings, settings.records_topic, expect_records=len(attempt))
    records = [kafka_records.from_message(m.value) for m in got if kafka_records.kind_of(m.headers) == kafka_records.RECORDS]
    assert sum(int((r.decoded("job") == "job-a.r1").sum()) for r in records) == len(attempt)
    other = batch.take(batch.decoded("job") == "job-b")
    client.RegisterJob(job_spec("job-b.r1"), metadata=bearer(TOKENS["job-b"]))
    for job in ("job-b", "job-b.r1"):
        named = RecordBatch(other.columns, [job if s == "job-b" else s for s in other.strings])
        with pytest.raises(grpc.RpcError) as error:
            client.Stream(record_stream(named, per_message=50), metadata=bearer(TOKENS["job-a"]))
        assert error.value.code() == grpc.StatusCode.PERMISSION_DENIED, job
        assert error.value.details() == f"batch 0: job: the token is for job 'job-a', not for [{job!r}]"
        with pytest.raises(grpc.RpcError) as error:
            client.RegisterJob(job_spec(job), metadata=bearer(TOKENS["job-a"]))
        assert error.value.code() == grpc.StatusCode.PERMISSION_DENIED, job


def test_a_job_spec_over_kafkas_message_cap_is_refused_for_good_naming_its_size(gateway_with_tokens) -> None:
    import dataclasses

    from sleuth.jobspec import JobSpec, RankPlacement
    from sleuth.layout import ParallelLayout
    from sleuth.stream.ingest.grpc_status import retryable
    from sleuth.stream.ingest.publisher import MAX_REQUEST_BYTES

    settings, collector, client, target = gateway_with_tokens
    spec = JobSpec.from_layout("job-a.r2", ParallelLayout(4096, 8, 1, 512))
    # Host names that long make the 4,096-rank spec about 2 MiB: Kafka would refuse it on every resend.
    spec = dataclasses.replace(spec, placements=tuple(
        RankPlacement(rank=p.rank, host=f"node-{p.rank // 8:04d}-" + "x" * 4000, gpu=p.gpu) for p in spec.placements))
    key, value = kafka_records.job_message(spec)
    size = len(key) + len(value)
    assert size > MAX_REQUEST_BYTES
    with pytest.raises(grpc.RpcError) as error:
        client.RegisterJob(codec.jobspec_to_proto(spec), metadata=bearer(TOKENS["job-a"]), timeout=60)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.value.details() == (f"job message: {size} bytes, over Kafka's cap of {MAX_REQUEST_BYTES} bytes "
                                     "a message with its framing (max_request_size)")
    # The logger's classification (``GrpcSink._register_spec``): not sent again.
    assert not retryable(error.value)
    assert "job-a.r2" not in collector.jobs


def test_a_bad_batch_is_refused_counted_and_dead_lettered(gateway_with_tokens) -> None:
    settings, collector, client, target = gateway_with_tokens
    good = training_records(300, seed=5)
    good = good.take(good.decoded("job") == "job-a")
    bad = pb.StreamMessage(records=codec.records_to_proto(good.take(slice(0, 10))))
    bad.records.op[4] = 42
    before = sum(collector.counters.rejected.values())

    def messages():
        yield from record_stream(good, per_message=100)
        yield bad

    call = client.Stream.with_call
    with pytest.raises(grpc.RpcError) as error:
        call(messages(), metadata=bearer(TOKENS["job-a"]))
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    details = error.value.details()
    assert details.startswith(f"batch {-(-len(good) // 100)}: records: op: unknown op kind"), details
    assert dict(error.value.trailing_metadata())["sleuth-accepted"] == str(-(-len(good) // 100))
    assert sum(collector.counters.rejected.values()) == before + 1
    dead = consume(settings, settings.rejects_topic, messages=1, timeout_s=30)
    reasons = [dict(m.headers)["sleuth-reason"].decode() for m in dead]
    assert details in reasons
    assert any(pb.StreamMessage.FromString(m.value) == bad for m in dead)


def test_health_serves(gateway_with_tokens) -> None:
    _, _, client, _ = gateway_with_tokens
    reply = client.Health(pb.HealthRequest())
    assert reply.status == pb.HealthReply.SERVING and reply.version


_FIELDS = ["job", "rank", "comm", "seq", "op", "peer", "nbytes", "iteration", "t_issue_ns", "t_start_ns", "t_end_ns"]
_BOUNDS = {"job": (0, 2**32 - 1), "rank": (0, 2**32 - 1), "comm": (0, 2**32 - 1), "seq": (0, 2**64 - 1),
           "nbytes": (0, 2**64 - 1), "op": (-(2**31), 2**31 - 1), "peer": (-(2**31), 2**31 - 1)}


@st.composite
def malformed(draw) -> bytes:
    """Serialized StreamMessages broken the ways a buggy or hostile client breaks them."""
    batch = training_records(30, seed=draw(st.integers(0, 50)))
    batch = batch.take(batch.decoded("job") == "job-a")
    message = pb.StreamMessage(records=codec.records_to_proto(batch))
    records = message.records
    how = draw(st.sampled_from(["unequal", "value", "huge_string", "unregistered", "garbage", "wrong_type"]))
    field = draw(st.sampled_from(_FIELDS))
    if how == "unequal":
        getattr(records, field).append(1)
    elif how == "value":  # any value the field's wire type can carry, valid or not
        low, high = _BOUNDS.get(field, (-(2**63), 2**63 - 1))
        getattr(records, field)[draw(st.integers(0, len(batch) - 1))] = draw(st.integers(low, high))
    elif how == "huge_string":
        records.strings.append("y" * draw(st.integers(300, 300_000)))
    elif how == "unregistered":
        records.strings[0] = draw(st.text(min_size=1, max_size=20).filter(lambda t: t not in TOKENS))
    elif how == "garbage":
        return draw(st.binary(min_size=1, max_size=300))
    else:  # wire type mismatch: field 1 (records) sent as a varint instead of a message
        return b"\x08" + bytes([draw(st.integers(1, 127))])
    return message.SerializeToString()


@hsettings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=malformed())
def test_malformed_batches_are_refused_and_good_clients_are_unaffected(gateway_with_tokens, raw) -> None:
    settings, collector, client, target = gateway_with_tokens
    good = training_records(200, seed=9)
    good = good.take(good.decoded("job") == "job-b")
    results = {}

    def good_client():
        results["good"] = client.Stream(record_stream(good, per_message=50), metadata=bearer(TOKENS["job-b"]))

    thread = threading.Thread(target=good_client)
    thread.start()
    channel = grpc.insecure_channel(target)
    send_raw = channel.stream_unary("/sleuth.v1.Collector/Stream", request_serializer=None,
                                    response_deserializer=pb.StreamSummary.FromString)
    try:
        summary = send_raw(iter([raw]), metadata=bearer(TOKENS["job-a"]))
    except grpc.RpcError as error:
        if error.code() == grpc.StatusCode.PERMISSION_DENIED:  # a job code that now points at job-b
            assert error.details() == "batch 0: job: the token is for job 'job-a', not for ['job-b']"
        elif error.code() == grpc.StatusCode.FAILED_PRECONDITION:  # a job no one registered
            assert error.details().startswith("batch 0: records.job: job "), error.details()
            assert error.details().endswith(" is not registered (call RegisterJob first)"), error.details()
        else:
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, (error.code(), error.details())
            assert error.details().startswith(("batch 0: records", "batch 0: iterations", "batch 0: payload",
                                               "batch 0: StreamMessage")), error.details()
    else:  # the mutation happened to leave a valid batch (e.g. a value in range)
        assert summary.accepted == 1
        message = pb.StreamMessage.FromString(raw)
        assert codec.records_from_proto(message.records).problems() == []
    finally:
        channel.close()
    thread.join()
    assert results["good"].accepted == -(-len(good) // 50)


def test_a_restarted_gateway_still_accepts_jobs_registered_before(services: Services) -> None:
    settings = private_settings(services)
    batch = training_records(400, seed=6)
    job_a = batch.take(batch.decoded("job") == "job-a")
    with running_gateway(settings) as (collector, target):
        stub(target).RegisterJob(job_spec("job-a"))
    with running_gateway(settings) as (collector, target):  # a new process would read the same topic
        assert "job-a" in collector.jobs and "job-b" not in collector.jobs
        assert stub(target).Stream(record_stream(job_a, per_message=100)).accepted == -(-len(job_a) // 100)
        with pytest.raises(grpc.RpcError) as error:
            stub(target).Stream(record_stream(batch.take(batch.decoded("job") == "job-b"), per_message=100))
        assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "job-b" in error.value.details()


def in_round(message: pb.StreamMessage, rendezvous: str) -> pb.StreamMessage:
    message.records.rendezvous = rendezvous
    return message


def test_a_joined_rendezvous_round_streams_as_a_job_of_its_own_and_keeps_its_id_across_gateways(
        services: Services) -> None:
    # torchelastic restarts every worker when a node joins, under the same run id and without counting it.
    settings = private_settings(services)
    batch = training_records(400, seed=13)
    job_a = batch.take(batch.decoded("job") == "job-a")
    first, joined = job_spec("job-a", 64), job_spec("job-a", 128)
    first.rendezvous, joined.rendezvous = "node-0:29400/64", "node-0:29400/128"
    messages = -(-len(job_a) // 100)
    with running_gateway(settings) as (collector, target):
        assert stub(target).RegisterJob(first).job == "job-a"
        endless = job_spec("job-a", 64)
        endless.rendezvous = "x" * (settings.gateway_max_string_bytes + 1)
        with pytest.raises(grpc.RpcError) as error:  # kept as long as its job: bounded like any string
            stub(target).RegisterJob(endless)
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error.value.details().startswith("JobSpec.rendezvous: ")
        with pytest.raises(grpc.RpcError) as error:  # the logger holds them until the round's spec is in
            stub(target).Stream(in_round(m, joined.rendezvous) for m in record_stream(job_a, per_message=100))
        assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "node-0:29400/128" in error.value.details()
        assert stub(target).RegisterJob(joined).job == "job-a.m1"
        summary = stub(target).Stream(in_round(m, joined.rendezvous) for m in record_stream(job_a, per_message=100))
        assert summary.accepted == messages
    got = consume(settings, settings.records_topic, expect_records=len(job_a))
    records = [kafka_records.from_message(m.value) for m in got if kafka_records.kind_of(m.headers) == kafka_records.RECORDS]
    assert sum(int((r.decoded("job") == "job-a.m1").sum()) for r in records) == len(job_a)
    specs = {spec.job: spec.world for spec in (kafka_records.job_from_message(m.value) for m in got
                                               if kafka_records.kind_of(m.headers) == kafka_records.JOB)}
    assert specs == {"job-a": 64, "job-a.m1": 128}
    with running_gateway(settings) as (collector, target):  # a new process reads the rounds back with the specs
        summary = stub(target).Stream(in_round(m, joined.rendezvous) for m in record_stream(job_a, per_message=100))
        assert summary.accepted == messages
        again = job_spec("job-a", 192)
        again.rendezvous = "node-0:29400/192"
        assert stub(target).RegisterJob(again).job == "job-a.m2"
        assert stub(target).RegisterJob(first).job == "job-a"


def self_signed_certificate(folder) -> tuple[str, str]:
    """A certificate for 127.0.0.1 and its key, made by the openssl command line tool."""
    cert, key = folder / "gateway.crt", folder / "gateway.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return str(cert), str(key)


def test_tls_gateway_serves_tls_clients_only(services: Services, tmp_path) -> None:
    cert, key = self_signed_certificate(tmp_path)
    settings = private_settings(services, gateway_tls_cert=cert, gateway_tls_key=key)
    batch = training_records(200, seed=7)
    job_a = batch.take(batch.decoded("job") == "job-a")
    with running_gateway(settings) as (collector, target):
        with open(cert, "rb") as pem:
            secure = pb_grpc.CollectorStub(grpc.secure_channel(target, grpc.ssl_channel_credentials(pem.read())))
        secure.RegisterJob(job_spec("job-a"), timeout=30)
        assert secure.Stream(record_stream(job_a, per_message=50), timeout=30).accepted == -(-len(job_a) // 50)
        with pytest.raises(grpc.RpcError) as error:  # plaintext to a TLS port never gets through
            stub(target).Health(pb.HealthRequest(), timeout=5)
        assert error.value.code() == grpc.StatusCode.UNAVAILABLE


def test_the_logger_reaches_a_gateway_that_checks_tls_and_tokens(services: Services, tmp_path) -> None:
    from sleuth.jobspec import JobSpec
    from sleuth.layout import ParallelLayout
    from sleuth.logger.sender import GrpcSink

    cert, key = self_signed_certificate(tmp_path)
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    settings = private_settings(services, gateway_tls_cert=cert, gateway_tls_key=key, gateway_tokens_file=str(tokens))
    batch = training_records(300, seed=8)
    job_a = batch.take(batch.decoded("job") == "job-a")
    with open(cert, "rb") as pem:
        ca = pem.read()
    with running_gateway(settings) as (collector, target):
        senders = {}
        for name, token in (("own token", TOKENS["job-a"]), ("another job's token", TOKENS["job-b"])):
            sender = GrpcSink(target, spill_dir=tmp_path / name, token=token, tls_ca=ca, stream_s=0.5)
            sender.spec(JobSpec.from_layout("job-a", ParallelLayout(64, 8, 1, 8)))
            sender.records(job_a, dropped=0)
            sender.close(20)
            senders[name] = sender
    assert senders["own token"].accepted == 1 and not senders["own token"].spill
    # Refused (the token is job-b's): nothing reaches Kafka, and the records are dropped and
    # counted, not held to be refused again forever.
    refused = senders["another job's token"]
    assert refused.accepted == 0 and not refused.spill
    assert (refused.dropped, refused.refused) == (len(job_a), 1)
    got = consume(settings, settings.records_topic, expect_records=len(job_a))
    records = [m for m in got if kafka_records.kind_of(m.headers) == kafka_records.RECORDS]
    assert sum(len(kafka_records.from_message(m.value)) for m in records) == len(job_a)


def _broken(batch: RecordBatch, **columns) -> RecordBatch:
    return RecordBatch({**batch.columns, **{k: v.astype(batch[k].dtype) for k, v in columns.items()}}, batch.strings)


def _bad_records(good: RecordBatch) -> dict[str, tuple[RecordBatch, str]]:
    """Batches of job-a (world 64) each with one bad record at index 3, and the refusal expected."""
    from sleuth.records import OpKind
    from sleuth.settings import Settings
    from sleuth.stream.ingest.validate import MAX_ISSUE_AFTER_START_NS

    cap = Settings().gateway_max_iteration
    op, peer, issue, iteration = (good[k].copy() for k in ("op", "peer", "t_issue_ns", "iteration"))
    op[3], peer[3] = int(OpKind.SEND), 64
    issue[3] = good["t_start_ns"][3] + MAX_ISSUE_AFTER_START_NS + 1
    iteration[3] = cap + 1
    return {
        "peer": (_broken(good, op=op, peer=peer), "records.peer: 1 records of job 'job-a' name peers outside its "
                                                  "world of 64 (first at index 3: peer 64)"),
        "t_issue": (_broken(good, t_issue_ns=issue), f"records: t_issue_ns: issued more than {MAX_ISSUE_AFTER_START_NS} "
                                                     f"ns after it starts (t_start_ns) in 1 records (first at index 3: {issue[3]})"),
        "iteration": (_broken(good, iteration=iteration), f"records: iteration: above {cap} "
                                                          f"(SLEUTH_GATEWAY_MAX_ITERATION) in 1 records (first at index 3: {cap + 1})"),
    }


def test_a_peer_outside_the_world_an_issue_after_the_start_and_an_absurd_step_are_refused_naming_them(
        gateway_with_tokens) -> None:
    settings, collector, client, target = gateway_with_tokens
    good = training_records(400, seed=11)
    good = good.take(good.decoded("job") == "job-a").take(slice(0, 50)).compact()
    for name, (bad, reason) in _bad_records(good).items():
        before = collector.counters.rejected.copy()
        with pytest.raises(grpc.RpcError) as error:
            client.Stream(iter([pb.StreamMessage(records=codec.records_to_proto(good)),
                                pb.StreamMessage(records=codec.records_to_proto(bad))]), metadata=bearer(TOKENS["job-a"]))
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT, name
        assert error.value.details() == f"batch 1: {reason}", name
        assert dict(error.value.trailing_metadata())["sleuth-accepted"] == "1"
        field = reason.split(":", 1)[0]
        assert collector.counters.rejected[field] == before[field] + 1, name


def test_the_logger_drops_and_counts_a_refused_batch_and_never_resends_what_the_gateway_confirmed(
        services: Services, tmp_path) -> None:
    from prometheus_client import REGISTRY

    from sleuth.jobspec import JobSpec
    from sleuth.layout import ParallelLayout
    from sleuth.logger.sender import GrpcSink

    settings = private_settings(services)
    records = training_records(1_200, seed=12)
    records = records.take(records.decoded("job") == "job-a")
    parts = [records.take(slice(start, start + 100)).compact() for start in range(0, len(records), 100)]
    bad, _ = _bad_records(parts[1])["peer"]
    def dropped_metric() -> float:
        return REGISTRY.get_sample_value("sleuth_logger_dropped_records_total", {"training_job": "job-a"}) or 0.0

    dropped_before = dropped_metric()
    with running_gateway(settings) as (collector, target):
        sender = GrpcSink(target, spill_dir=tmp_path / "spill", stream_s=5.0, backoff_s=(0.05, 0.2))
        sender.spec(JobSpec.from_layout("job-a", ParallelLayout(64, 8, 1, 8)))
        for part in [parts[0], bad, *parts[2:]]:  # one stream: batch 0 is confirmed before batch 1 is refused
            sender.records(part, dropped=0)
        sender.close(20)
        assert collector.counters.rejected["records.peer"] == 1
    good = RecordBatch.concat([parts[0], *parts[2:]])
    assert (sender.dropped, sender.refused, sender.held_bytes) == (len(bad), 1, 0) and not sender.spill
    assert dropped_metric() - dropped_before == len(bad)  # the gap reached the gateway
    # Read past the expected count for a while: a resent batch would show up twice.
    got = consume(settings, settings.records_topic, expect_records=len(good) + 1, timeout_s=15)
    received = RecordBatch.concat(kafka_records.from_message(m.value) for m in got
                                  if kafka_records.kind_of(m.headers) == kafka_records.RECORDS)
    assert sorted(received["seq"].tolist()) == sorted(good["seq"].tolist())
