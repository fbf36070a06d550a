"""Batches decoded by numpy from their bytes (``proto.wire``) equal protobuf's decoding, bit for bit."""

import numpy as np
import pytest
from google.protobuf.message import DecodeError

from sleuth.errors import RecordError
from sleuth.proto import codec, wire
from sleuth.proto import commops_pb2 as pb
from sleuth.records import IterationBatch, RecordBatch

from ..record_factory import random_records


def _same(a, b) -> None:
    assert a.strings == b.strings
    for field in a.FIELDS:
        assert a[field.name].dtype == b[field.name].dtype
        assert a[field.name].tobytes() == b[field.name].tobytes(), field.name


def test_full_range_records_decode_as_protobuf_does():
    data = codec.records_to_proto(random_records(20_000, seed=5), dropped=3).SerializeToString()
    _same(wire.records_from_bytes(data), codec.records_from_proto(pb.RecordBatch.FromString(data)))


def test_negative_peers_and_iterations_and_extreme_varints():
    batch = RecordBatch.from_columns(
        job="j", rank=[0, 2**32 - 1, 5], comm=["a", "b", "a"], seq=[0, 2**64 - 1, 127], op=[1, 11, 7],
        peer=[-1, 2**31 - 1, 0], nbytes=[128, 2**63, 0], iteration=[-1, 2**63 - 1, 0],
        t_issue_ns=[-(2**63), 0, 2**63 - 1], t_start_ns=[1, 2, 3], t_end_ns=[4, 5, 6])
    _same(wire.records_from_bytes(codec.records_to_proto(batch).SerializeToString()), batch)


def test_iterations_and_empty_batches():
    its = IterationBatch.from_columns(job=["a", "b"], rank=[0, 4_000_000_000], iteration=[-1, 2**62],
                                      t_start_ns=[-(2**63), 0], t_end_ns=[2**63 - 1, 1])
    _same(wire.iterations_from_bytes(codec.iterations_to_proto(its).SerializeToString()), its)
    _same(wire.records_from_bytes(b""), RecordBatch.empty())


def test_unpacked_columns_and_unknown_fields_take_protobufs_path():
    batch = random_records(5, seed=1)
    packed = codec.records_to_proto(batch).SerializeToString()
    # rank (field 3) once more, unpacked: one varint with its own tag, which appends a sixth value.
    unpacked = packed + bytes([3 << 3 | 0, 9])
    with pytest.raises(RecordError, match="'rank' has 6 values"):
        wire.records_from_bytes(unpacked)
    unknown = packed + bytes([15 << 3 | 0, 1])  # field 15: protobuf keeps it as unknown
    _same(wire.records_from_bytes(unknown), batch)


def test_a_column_that_does_not_fit_is_refused_naming_it():
    message = codec.records_to_proto(random_records(3, seed=3))
    message.op[1] = 300
    with pytest.raises(RecordError, match="column 'op'"):
        wire.records_from_bytes(message.SerializeToString())
    message.op[1] = -5
    with pytest.raises(RecordError, match="column 'op'"):
        wire.records_from_bytes(message.SerializeToString())


def test_cut_off_bytes_are_a_decode_error():
    data = codec.records_to_proto(random_records(50, seed=4)).SerializeToString()
    with pytest.raises(DecodeError):
        wire.records_from_bytes(data[: len(data) // 2])


def test_unequal_columns_are_refused_naming_the_column():
    message = codec.records_to_proto(random_records(10, seed=2))
    message.seq.append(5)
    with pytest.raises(RecordError, match="'seq' has 11 values"):
        wire.records_from_bytes(message.SerializeToString())


@pytest.mark.parametrize("seed", range(6))
def test_slices_encode_as_protobuf_serializes_each_compacted_slice(seed):
    batch = random_records(5_000, seed=seed)
    cuts = np.unique(np.r_[0, np.random.default_rng(seed).integers(0, len(batch), 6), len(batch)])
    bounds = [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:])]
    assert wire.records_slices_to_bytes(batch, bounds) == [
        codec.records_to_proto(batch.take(slice(a, b)).compact()).SerializeToString() for a, b in bounds]


def test_slices_of_extreme_values_and_of_iterations_encode_as_protobuf_does():
    batch = RecordBatch.from_columns(
        job="j", rank=[0, 2**32 - 1, 5], comm=["a", "b", "a"], seq=[0, 2**64 - 1, 127], op=[1, 11, 7],
        peer=[-1, 2**31 - 1, -(2**31)], nbytes=[128, 2**63, 0], iteration=[-1, 2**63 - 1, -(2**63)],
        t_issue_ns=[-(2**63), 0, 2**63 - 1], t_start_ns=[1, 2, 3], t_end_ns=[4, 5, 6])
    its = IterationBatch.from_columns(job=["a", "b", "a"], rank=[0, 4_000_000_000, 3], iteration=[-1, 2**62, 5],
                                      t_start_ns=[-(2**63), 0, 1], t_end_ns=[2**63 - 1, 1, 2])
    for bounds in ([(0, 3)], [(0, 1), (1, 3)], [(2, 3)]):
        assert wire.records_slices_to_bytes(batch, bounds) == [
            codec.records_to_proto(batch.take(slice(a, b)).compact()).SerializeToString() for a, b in bounds]
        assert wire.iterations_slices_to_bytes(its, bounds) == [
            codec.iterations_to_proto(its.take(slice(a, b)).compact()).SerializeToString() for a, b in bounds]


def _edge_values(seed: int) -> np.ndarray:
    """Every varint width from 1 to 10 bytes at both of its ends, and random values of every width."""
    rng = np.random.default_rng(seed)
    bounds = [0, 1, 127, 128, 2**14 - 1, 2**14, *[2**(7 * k) + d for k in range(3, 10) for d in (-1, 0)], 2**63, 2**64 - 1]
    widths = rng.integers(0, 64, 20_000)
    random = rng.integers(0, 2**63, 20_000, dtype=np.uint64, endpoint=True) >> (63 - widths.astype(np.uint64))
    return np.concatenate([np.array(bounds, np.uint64), random])


@pytest.mark.parametrize("seed", [0, 1])
def test_the_compiled_varints_are_numpy_s_bit_for_bit(seed):
    if wire._compiled is None:
        pytest.fail("proto/_varints.c is not built (reinstall with a C compiler)")
    values = _edge_values(seed)
    data, sizes = wire._varints_of(values)
    reference, reference_sizes = wire._numpy_varints_of(values)
    assert data.tobytes() == reference.tobytes() and np.array_equal(sizes, reference_sizes)
    assert np.array_equal(wire._varints(data), values) and np.array_equal(wire._numpy_varints(data), values)
    # An 11th byte keeps no bits: both drop a value's bits past the 64th the same way, or refuse it alike.
    overlong = np.concatenate([np.full(9, 0xFF, np.uint8), np.array([0x7F], np.uint8)])
    assert np.array_equal(wire._varints(overlong), wire._numpy_varints(overlong))
    cut_off = np.concatenate([data, np.array([0x80], np.uint8)])  # a last value begun and never ended
    for bad in (cut_off, np.concatenate([np.full(10, 0x80, np.uint8), np.array([1], np.uint8)])):
        for decode in (wire._varints, wire._numpy_varints):
            with pytest.raises(wire._NotCanonical):
                decode(bad)
