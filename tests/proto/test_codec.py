"""Record batches to and from the wire messages of commops.proto."""

import numpy as np
import pytest
from google.protobuf import json_format

from sleuth.errors import ConfigError, RecordError
from sleuth.jobspec import JobSpec
from sleuth.layout import ParallelLayout
from sleuth.proto import codec
from sleuth.proto import commops_pb2 as pb
from sleuth.records import IterationBatch, OpKind, RecordBatch

from ..record_factory import random_records


def test_100k_records_round_trip_bit_exact_through_serialized_bytes():
    batch = random_records(100_000, seed=42)
    wire = codec.records_to_proto(batch, dropped=7).SerializeToString()
    message = pb.RecordBatch.FromString(wire)
    back = codec.records_from_proto(message)
    assert message.dropped == 7
    assert back.strings == batch.strings
    for field in batch.FIELDS:
        assert back[field.name].dtype == batch[field.name].dtype
        # bit-exact: compare the raw bytes of every column, not just the values
        assert back[field.name].tobytes() == batch[field.name].tobytes(), field.name


def test_columns_travel_packed():
    # Realistic values: a record costs its few bytes of varints and three fixed 8-byte times,
    # with no per-record tags, as one packed array per field gives.
    n = 1_000
    batch = RecordBatch.from_columns(
        job="job", rank=np.full(n, 4095), comm=["dp.7"] * n, seq=np.arange(n) + 10**6, op=[1] * n,
        peer=[-1] * n, nbytes=[64 << 20] * n, iteration=[12_345] * n,
        t_issue_ns=np.arange(n) + 1_700_000_000 * 10**9, t_start_ns=np.arange(n) + 1_700_000_000 * 10**9,
        t_end_ns=np.arange(n) + 1_700_000_000 * 10**9,
    )
    wire = codec.records_to_proto(batch).SerializeToString()
    assert len(wire) / n < 24 + 2 + 3 + 1 + 1 + 1 + 4 + 3 + 2


def test_iterations_round_trip():
    its = IterationBatch.from_columns(
        job=["a", "b"], rank=[0, 4_000_000_000], iteration=[-1, 2**62],
        t_start_ns=[-(2**63), 0], t_end_ns=[2**63 - 1, 1],
    )
    message = pb.IterationBatch.FromString(codec.iterations_to_proto(its).SerializeToString())
    assert codec.iterations_from_proto(message).equals(its)


def test_unequal_columns_on_the_wire_are_refused_naming_the_column():
    message = codec.records_to_proto(random_records(10, seed=2))
    message.seq.append(5)
    with pytest.raises(RecordError, match="'seq' has 11 values"):
        codec.records_from_proto(message)


def test_unknown_op_values_survive_decoding_for_validation_to_see():
    message = codec.records_to_proto(random_records(3, seed=3))
    message.op[1] = 99  # proto3 keeps unknown enum numbers
    batch = codec.records_from_proto(message)
    assert batch["op"][1] == 99
    assert any("unknown op kind" in p for p in batch.problems())


def test_python_op_kinds_mirror_the_proto_enum():
    proto_values = {value.number: value.name for value in pb.OpKind.DESCRIPTOR.values}
    python_values = {int(kind): kind.name for kind in OpKind}
    assert proto_values.keys() == python_values.keys()
    for number, name in python_values.items():
        assert proto_values[number] == ("OP_KIND_UNKNOWN" if number == 0 else name)
    assert np.dtype("u1").type(max(python_values)) == max(python_values)


def test_job_spec_round_trips_with_and_without_layout():
    spec = JobSpec.from_layout("job-7", ParallelLayout(16, 2, 2, 4))
    message = pb.JobSpec.FromString(codec.jobspec_to_proto(spec).SerializeToString())
    assert message.layout.dp == 4
    assert codec.jobspec_from_proto(message) == spec
    discovered = JobSpec.from_dict(spec.to_dict() | {"layout": None})
    message = codec.jobspec_to_proto(discovered)
    assert not message.HasField("layout")
    assert codec.jobspec_from_proto(message) == discovered
    coarse = JobSpec.from_dict(spec.to_dict() | {"time_resolution_ns": 100_000_000})
    assert codec.jobspec_from_proto(pb.JobSpec.FromString(codec.jobspec_to_proto(coarse).SerializeToString())) == coarse


def list_form(spec: JobSpec) -> pb.JobSpec:
    """The wire form writers sent before issue 32: every placement and member one by one."""
    return json_format.ParseDict({k: v for k, v in spec.to_dict().items() if v is not None}, pb.JobSpec())


def test_bad_job_spec_on_the_wire_names_the_field():
    message = list_form(JobSpec.from_layout("job-7", ParallelLayout(4, 2, 1, 2)))
    message.communicators[0].ranks.append(99)
    with pytest.raises(ConfigError, match=r"RegisterJob: communicators\[0\]\.ranks\[2\]: rank 99 is outside the world of 4"):
        codec.jobspec_from_proto(message)


def test_a_spec_of_16384_ranks_fits_a_kafka_message_with_room_and_round_trips():
    spec = JobSpec.from_layout("big", ParallelLayout(16384, 8, 8, 256))
    wire = codec.jobspec_to_proto(spec).SerializeToString()
    assert len(list_form(spec).SerializeToString()) > 400_000  # the lists, as before
    assert len(wire) < 256 * 1024  # a quarter of Kafka's default 1 MiB cap
    message = pb.JobSpec.FromString(wire)
    assert len(message.host_runs) == 16384 // 8 and not message.ranks
    assert all(len(c.runs) == 1 and not c.ranks for c in message.communicators)
    assert codec.jobspec_from_proto(message) == spec


def test_the_list_form_is_still_read_and_irregular_placements_and_members_round_trip():
    spec = JobSpec.from_layout("job-7", ParallelLayout(16, 2, 2, 4))
    assert codec.jobspec_from_proto(list_form(spec)) == spec
    data = spec.to_dict()
    data["ranks"] = [{"rank": r, "host": "ab"[r % 2], "gpu": 15 - r} for r in range(16)]
    data["communicators"][0]["ranks"] = [5, 3, 9, 0]
    odd = JobSpec.from_dict(data)
    assert codec.jobspec_from_proto(pb.JobSpec.FromString(codec.jobspec_to_proto(odd).SerializeToString())) == odd


@pytest.mark.parametrize("spoil, problem", [
    (lambda m: m.communicators[0].runs.add(start=0, count=10**9, step=1),
     r"communicators\[0\]\.runs\[1\]: run .* outside the world of 4"),
    (lambda m: m.communicators[0].ranks.append(1), r"communicators\[0\]: ranks and runs"),
    (lambda m: m.host_runs.add(host="x", first_rank=3, count=2, first_gpu=0), r"host_runs\[2\]: 2 ranks from 3"),
    (lambda m: m.ranks.add(rank=0, host="x", gpu=0), r"ranks and host_runs"),
])
def test_a_bad_compact_spec_on_the_wire_names_the_field(spoil, problem):
    message = codec.jobspec_to_proto(JobSpec.from_layout("job-7", ParallelLayout(4, 2, 1, 2, gpus_per_host=2)))
    spoil(message)
    with pytest.raises(ConfigError, match=rf"^RegisterJob: {problem}"):
        codec.jobspec_from_proto(message)
