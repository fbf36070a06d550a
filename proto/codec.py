"""Conversions between sleuth's columnar batches and the wire messages of ``commops.proto``.

Lossless both ways: every column keeps its dtype and values bit for bit, and the string table
travels as is. Columns are copied with ``extend`` from Python lists (the fastest path into a
protobuf repeated field) and read back with ``np.fromiter`` of a known length.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np

from google.protobuf import json_format

from sleuth.errors import ConfigError, RecordError
from sleuth.jobspec import JobSpec
from sleuth.proto import commops_pb2 as pb
from sleuth.rank_runs import expand, runs
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
    """The wire form of a job spec; the field names are those of ``job.json``, but placements
    travel as ``host_runs`` and members as ``runs`` (a job of 16,384 ranks takes tens of KB, not
    the ~1 MiB of the lists, which Kafka's default message cap refuses)."""
    message = pb.JobSpec(job=spec.job, world=spec.world, time_resolution_ns=spec.time_resolution_ns)
    layout = spec.to_dict()["layout"] if spec.layout is not None else None
    if layout is not None:  # else absent on the wire, so that HasField("layout") says "unknown"
        json_format.ParseDict(layout, message.layout)
    for host, first_rank, count, first_gpu in _host_runs(spec):
        message.host_runs.add(host=host, first_rank=first_rank, count=count, first_gpu=first_gpu)
    for communicator in spec.communicators:
        wire = message.communicators.add(comm=communicator.comm, kind=communicator.kind)
        for start, count, step in runs(communicator.ranks):
            wire.runs.add(start=start, count=count, step=step)
    return message


def jobspec_from_proto(message: pb.JobSpec, *, source: str = "RegisterJob") -> JobSpec:
    """A validated job spec from the wire, in either form (lists, or runs as ``jobspec_to_proto``
    writes); ``ConfigError`` names ``source`` and the bad field."""
    if message.ranks and message.host_runs:
        raise ConfigError(f"{source}: ranks and host_runs: give the placements one way, not both")
    placements = [{"rank": p.rank, "host": p.host, "gpu": p.gpu} for p in message.ranks]
    for index, run in enumerate(message.host_runs):
        if run.count < 1 or run.first_rank + run.count > message.world:
            raise ConfigError(f"{source}: host_runs[{index}]: {run.count} ranks from {run.first_rank} "
                              f"do not fit the world of {message.world}")
        placements += [{"rank": run.first_rank + k, "host": run.host, "gpu": run.first_gpu + k} for k in range(run.count)]
    communicators = []
    for index, wire in enumerate(message.communicators):
        where = f"{source}: communicators[{index}]"
        if wire.ranks and wire.runs:
            raise ConfigError(f"{where}: ranks and runs: give the members one way, not both")
        members = list(wire.ranks) or list(expand([(r.start, r.count, r.step) for r in wire.runs],
                                                  below=message.world, where=f"{where}.runs"))
        communicators.append({"comm": wire.comm, "kind": wire.kind, "ranks": members})
    data = {"job": message.job, "world": message.world,
            "layout": json_format.MessageToDict(message.layout, preserving_proto_field_name=True,
                                                always_print_fields_with_no_presence=True)
            if message.HasField("layout") else None,
            "ranks": placements, "communicators": communicators}
    if message.time_resolution_ns:
        data["time_resolution_ns"] = message.time_resolution_ns
    return JobSpec.from_dict(data, source=source)


def _host_runs(spec: JobSpec) -> list[tuple[str, int, int, int]]:
    """(host, first rank, count, first GPU) of each stretch of consecutive ranks on consecutive GPUs of one host."""
    out: list[list] = []
    for placement in spec.placements:
        last = out[-1] if out else None
        if (last is not None and last[0] == placement.host and last[1] + last[2] == placement.rank
                and last[3] + last[2] == placement.gpu):
            last[2] += 1
        else:
            out.append([placement.host, placement.rank, 1, placement.gpu])
    return [tuple(run) for run in out]


def _fill(message: _Message, batch: ColumnBatch) -> None:
    message.strings.extend(batch.strings)
    for field in batch.FIELDS:
        getattr(message, field.name).extend(batch[field.name].tolist())


def _read(message: _Message, batch_type: type[_Batch]) -> _Batch:
    columns = {}
    for field in batch_type.FIELDS:
        values = getattr(message, field.name)
        dtype = np.dtype(field.dtype)
        try:
            if dtype.kind in "iu" and dtype.itemsize < 8:
                # Checked by hand: numpy 1.x wraps an out-of-range value where numpy 2 raises.
                wide = np.fromiter(values, dtype=np.int64, count=len(values))
                info = np.iinfo(dtype)
                outside = np.flatnonzero((wide < info.min) | (wide > info.max))
                if len(outside):  # e.g. an unknown enum value above the column's range
                    raise RecordError(f"column {field.name!r}: value {int(wide[outside[0]])} at index {int(outside[0])} "
                                      f"is out of range for {dtype}")
                columns[field.name] = wide.astype(dtype)
            else:
                columns[field.name] = np.fromiter(values, dtype=dtype, count=len(values))
        except OverflowError as error:
            raise RecordError(f"column {field.name!r}: {error}") from None
    return batch_type(columns, list(message.strings))
