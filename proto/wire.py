"""Columnar batches straight from their ``commops.proto`` bytes, with numpy: no per-record Python.

protobuf's parser fills repeated fields that Python then copies value by value (``codec``,
about 2 M records/s). A packed column is one length-delimited run of varints or of 8-byte
little-endian values, so numpy decodes it whole: the fixed-width times are views of the bytes
(zero-copy), the varints are found by their stop bits and assembled in a few array passes.
The encoders write what protobuf's serializer writes of slices of one batch, each with its own
string table (``ColumnBatch.compact``), every column encoded once for all of them.

Only the canonical encoding (what protobuf and sleuth's gateway write: packed columns, no unknown
fields) takes this path; anything else (unpacked repeated fields, unknown fields, an op number
beyond the column, a truncated message) goes to ``codec`` and protobuf, which decide and word
the error exactly as before.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TypeVar

import numpy as np

from sleuth.proto import codec
from sleuth.proto import commops_pb2 as pb
from sleuth.records import ColumnBatch, IterationBatch, RecordBatch

try:  # the compiled varint runs (proto/_varints.c); the numpy ones below are their reference
    from sleuth.proto import _varints as _compiled
except ImportError as error:  # not built on this machine: numpy, a few times slower
    _compiled = None  # type: ignore[assignment]
    logging.getLogger(__name__).warning("the wire's compiled varints are not built (%s): numpy decodes and encodes "
                                        "them, a few times slower; reinstall sleuth with a C compiler", error)

_Batch = TypeVar("_Batch", bound=ColumnBatch)

# How each packed field number is encoded on the wire (commops.proto).
_RECORDS = {2: ("job", "u32"), 3: ("rank", "u32"), 4: ("comm", "u32"), 5: ("seq", "u64"), 6: ("op", "enum"),
            7: ("peer", "s32"), 8: ("nbytes", "u64"), 9: ("iteration", "s64"), 10: ("t_issue_ns", "f64"),
            11: ("t_start_ns", "f64"), 12: ("t_end_ns", "f64")}
_ITERATIONS = {2: ("job", "u32"), 3: ("rank", "u32"), 4: ("iteration", "s64"), 5: ("t_start_ns", "f64"),
               6: ("t_end_ns", "f64")}
_DROPPED = 13  # RecordBatch.dropped, a plain varint


class _NotCanonical(Exception):
    """The bytes need protobuf's general parser."""


def records_slices_to_bytes(batch: RecordBatch, bounds: Sequence[tuple[int, int]]) -> list[bytes]:
    """For each (a, b) of ``bounds``: ``codec.records_to_proto(batch.take(slice(a, b)).compact()).SerializeToString()``."""
    return _slices_to_bytes(batch, _RECORDS, bounds)


def iterations_slices_to_bytes(batch: IterationBatch, bounds: Sequence[tuple[int, int]]) -> list[bytes]:
    """For each (a, b) of ``bounds``: ``codec.iterations_to_proto(batch.take(slice(a, b)).compact()).SerializeToString()``."""
    return _slices_to_bytes(batch, _ITERATIONS, bounds)


def records_from_bytes(data: bytes) -> RecordBatch:
    """The records of a serialized ``RecordBatch`` (as ``codec.records_from_proto`` of its parse)."""
    try:
        return _decode(data, _RECORDS, RecordBatch)
    except _NotCanonical:
        return codec.records_from_proto(pb.RecordBatch.FromString(data))


def iterations_from_bytes(data: bytes) -> IterationBatch:
    try:
        return _decode(data, _ITERATIONS, IterationBatch)
    except _NotCanonical:
        return codec.iterations_from_proto(pb.IterationBatch.FromString(data))


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise _NotCanonical
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value, pos
        shift += 7


def _slices_to_bytes(batch: ColumnBatch, layout: dict[int, tuple[str, str]],
                     bounds: Sequence[tuple[int, int]]) -> list[bytes]:
    named = [f.name for f in batch.FIELDS if f.is_string]
    # Each numeric column encoded once, with each record's first byte: a slice's bytes are a slice of them.
    encoded = {name: _column_bytes(batch[name], encoding) for name, encoding in layout.values() if name not in named}
    out = []
    for a, b in bounds:
        if b <= a:  # no records: every column left out, and no string used
            out.append(b"")
            continue
        codes = np.concatenate([batch[name][a:b] for name in named])
        # The strings the slice uses, in the table's order, and each code's place among them: a
        # table as long as the batch's strings (few), not a sort of the slice's codes.
        present = np.zeros(len(batch.strings), bool)
        present[codes] = True
        used = np.flatnonzero(present)
        whole = len(used) == len(batch.strings)  # compact keeps the table and the codes as they are
        strings = batch.strings if whole else [batch.strings[code] for code in used.tolist()]
        remapped = codes if whole else (np.cumsum(present) - 1)[codes]
        parts: list[bytes] = []
        for text in strings:
            utf8 = text.encode("utf-8")
            parts += [b"\x0a", _uvarint(len(utf8)), utf8]
        for number, (name, _) in layout.items():
            if name in named:
                k = named.index(name)
                payload = _varint_bytes(remapped[k * (b - a):(k + 1) * (b - a)].astype(np.uint64))
            else:
                data, offsets = encoded[name]
                payload = data[offsets[a]:offsets[b]].tobytes()
            parts += [_uvarint(number << 3 | 2), _uvarint(len(payload)), payload]
        out.append(b"".join(parts))
    return out


def _column_bytes(column: np.ndarray, encoding: str) -> tuple[np.ndarray, np.ndarray]:
    """A column's packed bytes (``encoding`` as in the layouts) and each record's first byte, then the end."""
    if encoding == "f64":
        return np.ascontiguousarray(column, "<i8").view(np.uint8), np.arange(len(column) + 1) * 8
    if encoding == "s64":  # zigzag
        values = column.astype(np.int64)
        unsigned = (values << np.int64(1)).view(np.uint64) ^ (values >> np.int64(63)).view(np.uint64)
    elif encoding == "s32":
        values = column.astype(np.int32)
        unsigned = ((values << np.int32(1)) ^ (values >> np.int32(31))).view(np.uint32).astype(np.uint64)
    else:  # u32, u64 and the enum: their values as they are
        unsigned = column.astype(np.uint64)
    data, sizes = _varints_of(unsigned)
    return data, np.r_[0, np.cumsum(sizes)]


def _varint_bytes(values: np.ndarray) -> bytes:
    return _varints_of(values)[0].tobytes()


def _uvarint(value: int) -> bytes:
    """One varint (a tag, a length): plain Python, where an array's passes cost more than its bytes."""
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _varints_of(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The packed varints of uint64 ``values`` (7 bits a byte, low first, the high bit set on all
    but a value's last byte), and each value's size in bytes."""
    if _compiled is None:
        return _numpy_varints_of(values)
    sizes = np.empty(len(values), np.int64)
    return np.frombuffer(_compiled.encode(np.ascontiguousarray(values, np.uint64), sizes), np.uint8), sizes


def _numpy_varints_of(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_varints_of`` in numpy: one pass a byte of the widest value."""
    sizes = np.ones(len(values), np.int64)
    widest = int(values.max()) if len(values) else 0
    k = 1
    while k < 10 and widest >= 1 << (7 * k):
        sizes += values >= np.uint64(1 << (7 * k))
        k += 1
    if k == 1:  # every value one byte
        return values.astype(np.uint8), sizes
    ends = np.cumsum(sizes)
    out = np.empty(int(ends[-1]), np.uint8)
    starts = ends - sizes
    for byte in range(k):
        more = np.flatnonzero(sizes > byte)
        chunk = ((values[more] >> np.uint64(7 * byte)) & np.uint64(0x7F)).astype(np.uint8)
        out[starts[more] + byte] = chunk | ((sizes[more] > byte + 1) * np.uint8(0x80)).astype(np.uint8)
    return out, sizes


def _decode(data: bytes, layout: dict[int, tuple[str, str]], kind: type[_Batch]) -> _Batch:
    strings: list[str] = []
    spans: dict[int, list[tuple[int, int]]] = {number: [] for number in layout}
    pos = 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        number, wire_type = tag >> 3, tag & 7
        if wire_type == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise _NotCanonical
            if number == 1:
                try:
                    strings.append(data[pos : pos + length].decode("utf-8"))
                except UnicodeDecodeError:
                    raise _NotCanonical from None
            elif number in spans:
                spans[number].append((pos, pos + length))
            else:
                raise _NotCanonical
            pos += length
        elif wire_type == 0 and number == _DROPPED and kind is RecordBatch:
            _, pos = _varint(data, pos)
        else:
            raise _NotCanonical
    buffer = np.frombuffer(data, np.uint8)
    columns = {name: _column(buffer, spans[number], encoding) for number, (name, encoding) in layout.items()}
    return kind(columns, strings)


def _column(buffer: np.ndarray, spans: list[tuple[int, int]], encoding: str) -> np.ndarray:
    raw = buffer[spans[0][0] : spans[0][1]] if len(spans) == 1 else (
        np.concatenate([buffer[a:b] for a, b in spans]) if spans else buffer[:0])
    if encoding == "f64":
        if len(raw) % 8:
            raise _NotCanonical
        return raw.view("<i8").astype(np.int64, copy=False)
    values = _varints(raw)
    if encoding == "u64":
        return values
    if encoding == "u32":
        return values.astype(np.uint32)  # protobuf keeps the low 32 bits of a longer varint too
    if encoding == "s64":  # zigzag
        return (values >> np.uint64(1)).view(np.int64) ^ -(values & np.uint64(1)).view(np.int64)
    low = values.astype(np.uint32)
    if encoding == "s32":
        return (low >> np.uint32(1)).view(np.int32) ^ -(low & np.uint32(1)).view(np.int32)
    numbers = low.view(np.int32)  # enum: an int32
    if len(numbers) and (int(numbers.min()) < 0 or int(numbers.max()) > 255):
        raise _NotCanonical  # codec names the column and the value
    return numbers.astype(np.uint8)


def _varints(raw: np.ndarray) -> np.ndarray:
    """The uint64 values of a run of packed varints."""
    if _compiled is None or not len(raw):
        return _numpy_varints(raw)
    values = np.empty(int(np.count_nonzero(raw < 0x80)), np.uint64)
    try:
        _compiled.decode(raw, values)
    except ValueError:  # a value cut off, or longer than 10 bytes
        raise _NotCanonical from None
    return values


def _numpy_varints(raw: np.ndarray) -> np.ndarray:
    """``_varints`` in numpy: the values found by their stop bits, assembled in a few array passes."""
    if not len(raw):
        return np.zeros(0, np.uint64)
    if raw[-1] >= 0x80:
        raise _NotCanonical  # the last value is cut off
    ends = np.flatnonzero(raw < 0x80)
    if len(ends) == len(raw):
        return raw.astype(np.uint64)  # every value a single byte
    starts = np.empty(len(ends), np.int64)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    lengths = ends - starts + 1
    if int(lengths.max()) > 10:
        raise _NotCanonical
    shift = (np.arange(len(raw)) - np.repeat(starts, lengths)) * 7
    parts = (raw & 0x7F).astype(np.uint64) << shift.astype(np.uint64)
    return np.bitwise_or.reduceat(parts, starts)
