"""CommOps records as Kafka messages: one message per (job, unit) slice of a batch.

The key is ``<job>/<unit>``, where the unit is the smallest rank of the rank's model replica
(``ParallelLayout.replica_of``) when the job was registered with a layout, and the rank itself
otherwise. Kafka's default partitioner sends equal keys to one partition, so each rank's records
stay on one partition, in order, as docs/design.md's per-(job, rank) keying promised, and a
replica's ranks land together: the worker that scores an operator holds the records of its tensor
mates and of its pipeline peers, whose timing the detector's features need (blocking, transfer,
the mates' same operator). With one key per rank, a job's ranks were spread over the workers at
random and a tensor group or a pipeline pair was split whenever more than one worker ran.
The value is a serialized ``commops.proto`` ``RecordBatch``, the same columnar form the gateway received.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sleuth.layout import ParallelLayout
from sleuth.proto import codec, wire
from sleuth.proto import commops_pb2 as pb
from sleuth.jobspec import JobSpec
from sleuth.records import IterationBatch, RecordBatch
from sleuth.validation import positive_int

#: A job's registered layout, or None where it has none (then each rank is its own unit).
LayoutOf = Callable[[str], ParallelLayout | None]


def message_key(job: str, unit: int) -> bytes:
    return f"{job}/{unit}".encode()


def _units(batch: RecordBatch | IterationBatch, layout_of: LayoutOf | None) -> np.ndarray:
    """Each record's unit (module docstring): its replica's smallest rank under its job's layout, else its rank."""
    ranks = batch["rank"]
    units = ranks.astype(np.uint64)
    if layout_of is None:
        return units
    for code in np.unique(batch["job"]).tolist():
        layout = layout_of(batch.strings[code])
        if layout is not None:
            mine = batch["job"] == code
            units[mine] = layout.replica_of(ranks[mine].astype(np.int64))
    return units


def _keyed_messages(batch: RecordBatch | IterationBatch, max_records: int, layout_of: LayoutOf | None,
                    encode: Callable[[Any, list[tuple[int, int]]], list[bytes]]) -> list[tuple[bytes, bytes]]:
    """(key, value) pairs: ``batch`` split by (job, unit), each slice at most ``max_records`` in
    batch order, keyed by the unit (module docstring), encoded by ``encode`` (the slices' bytes)."""
    positive_int("max_records", max_records, error=ValueError)
    if not len(batch):
        return []
    group = (batch["job"].astype(np.uint64) << np.uint64(32)) | _units(batch, layout_of)
    order = np.argsort(group, kind="stable")  # stable: each rank's records keep their order
    ordered = batch.take(order)  # one gather; every message below is then a slice of it
    group = group[order]
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    ends = np.r_[starts[1:], len(group)]
    keys, bounds = [], []
    for first, end in zip(starts.tolist(), ends.tolist()):
        key = message_key(ordered.strings[int(ordered["job"][first])], int(group[first] & np.uint64(0xFFFFFFFF)))
        for start in range(first, end, max_records):
            keys.append(key)
            bounds.append((start, min(start + max_records, end)))
    return list(zip(keys, encode(ordered, bounds)))


def to_messages(batch: RecordBatch, *, max_records: int = 10_000,
                layout_of: LayoutOf | None = None) -> list[tuple[bytes, bytes]]:
    """(key, value) pairs for ``batch``: split by (job, unit), each slice at most ``max_records``.

    A message holds the records of every rank of one unit (fewer, larger messages: Kafka's cost is
    per message); each rank's records keep their order in ``batch``. ``layout_of``: the jobs' layouts,
    for the replica keys (module docstring); a rank outside its layout's world raises ``LayoutError``.
    """
    return _keyed_messages(batch, max_records, layout_of, wire.records_slices_to_bytes)


def from_message(value: bytes) -> RecordBatch:
    """The records of one message value (decoded by numpy: ``proto.wire``)."""
    return wire.records_from_bytes(value)


# -- other payloads on the records topic ------------------------------------------------------
# Iteration batches and job specs travel on the same topic as the records, keyed the same way, so
# that one (job, rank)'s records and iterations stay in one partition's order. A header says what
# a value holds; messages without it are record batches (the format above).

KIND_HEADER = "sleuth-kind"
RECORDS, ITERATIONS, JOB, DROPS = b"records", b"iterations", b"job", b"drops"


def iteration_messages(batch: IterationBatch, *, max_records: int = 10_000,
                       layout_of: LayoutOf | None = None) -> list[tuple[bytes, bytes]]:
    """(key, value) pairs for an iteration batch, split and keyed like ``to_messages``."""
    return _keyed_messages(batch, max_records, layout_of, wire.iterations_slices_to_bytes)


def job_message(spec: JobSpec, rendezvous: str = "") -> tuple[bytes, bytes]:
    """Keyed by the job; ``rendezvous``: the launcher's round it was registered from (``JobRegistry``)."""
    message = codec.jobspec_to_proto(spec)
    message.rendezvous = rendezvous
    return spec.job.encode(), message.SerializeToString()


@dataclass(frozen=True)
class Drop:
    """Records a logger lost before a batch it sent (the batch's ``dropped``), reported by the batch's
    earliest record: its job and rank, and ``before_ns``, its start. The same batch sent again reports
    the same drop, which the ``logger_drops`` table then folds into one row."""

    job: str
    rank: int
    before_ns: int
    dropped: int

    def as_row(self) -> tuple[str, int, int, int]:
        return self.job, self.rank, self.before_ns, self.dropped


def drop_of(batch: RecordBatch, dropped: int) -> Drop:
    """The drop a non-empty batch reports (``dropped`` > 0 records lost just before it)."""
    first = int(np.argmin(batch["t_start_ns"]))
    return Drop(job=str(batch.decoded("job")[first]), rank=int(batch["rank"][first]),
                before_ns=int(batch["t_start_ns"][first]), dropped=dropped)


def drop_message(drop: Drop) -> tuple[bytes, bytes]:
    """Keyed by the reporting rank, JSON (``Drop``'s fields)."""
    return (message_key(drop.job, drop.rank),
            json.dumps(dataclasses.asdict(drop), separators=(",", ":")).encode())


def drop_from_message(value: bytes) -> Drop:
    fields = json.loads(value)
    return Drop(job=str(fields["job"]), rank=int(fields["rank"]), before_ns=int(fields["before_ns"]),
                dropped=int(fields["dropped"]))


def kind_of(headers: list[tuple[str, bytes]] | dict[str, bytes] | None) -> bytes:
    # kafka-python and aiokafka give a list of pairs; faust may hand over a mapping.
    pairs = headers.items() if isinstance(headers, dict) else headers or ()
    for key, value in pairs:
        if key == KIND_HEADER:
            return value
    return RECORDS


def iterations_from_message(value: bytes) -> IterationBatch:
    return wire.iterations_from_bytes(value)


def job_from_message(value: bytes) -> JobSpec:
    return registration_from_message(value)[0]


def registration_from_message(value: bytes) -> tuple[JobSpec, str]:
    """The spec of a job message and the rendezvous round it was registered from ("" for none)."""
    message = pb.JobSpec.FromString(value)
    return codec.jobspec_from_proto(message, source="Kafka job message"), message.rendezvous
