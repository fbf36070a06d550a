"""Conversions between sleuth's columnar batches and the wire messages of ``commops.proto``.

Lossless both ways: every column keeps its dtype and values bit for bit, and the string table
travels as is. Columns are copied with ``extend`` from Python lists (the fastest path into a
protobuf repeated field) and read back with ``np.fromiter`` of a known length.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np

from google.protobuf import json_format

from sleuth.errors import RecordError
from sleuth.jobspec import JobSpec
from sleuth.proto import commops_pb2 as pb
from sleuth.records import ColumnBatch, IterationBatch, RecordBatch

_Batch = TypeVar("_Batch", bound=ColumnBatch)
_Message = pb.RecordBatch | pb.IterationBatch


def records_to_proto(batch: RecordBatch, *, dropped: int = 0) -> pb.RecordBatch:
    """``batch`` as a wire ``RecordBatch``; ``dropped`` counts records lost just before it."""
    message = pb.RecordBatch(dropped=dropped)
    _fill(message, batch)
    return message


def records_from_proto(message: pb.RecordBatch) -> RecordBatch:
    """The records of a wire batch; RecordError names a column whose length differs."""
    return _read(message, RecordBatch)


def iterations_to_proto(batch: IterationBatch) -> pb.IterationBatch:
    message = pb.IterationBatch()
    _fill(message, batch)
    return message


def iterations_from_proto(message: pb.IterationBatch) -> IterationBatch:
    return _read(message, IterationBatch)


def jobspec_to_proto(spec: JobSpec) -> pb.JobSpec:
    """The wire form of a job spec; the field names are those of ``job.json``."""
    data = spec.to_dict()
    if data["layout"] is None:
        del data["layout"]  # absent on the wire, so that HasField("layout") says "unknown"
    return json_format.ParseDict(data, pb.JobSpec())


def jobspec_from_proto(message: pb.JobSpec, *, source: str = "RegisterJob") -> JobSpec:
    """A validated job spec from the wire; ``ConfigError`` names ``source`` and the bad field."""
    data = json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    data["layout"] = data["layout"] if message.HasField("layout") else None
    return JobSpec.from_dict(data, source=source)


def _fill(message: _Message, batch: ColumnBatch) -> None:
    message.strings.extend(batch.strings)
    for field in batch.FIELDS:
        getattr(message, field.name).extend(batch[field.name].tolist())


def _read(message: _Message, batch_type: type[_Batch]) -> _Batch:
    columns = {}
    for field in batch_type.FIELDS:
        values = getattr(message, field.name)
        try:
            columns[field.name] = np.fromiter(values, dtype=field.dtype, count=len(values))
        except OverflowError as error:  # e.g. an unknown enum value above the column's range
            raise RecordError(f"column {field.name!r}: {error}") from None
    return batch_type(columns, list(message.strings))
