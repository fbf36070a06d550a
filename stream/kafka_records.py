"""CommOps records as Kafka messages: one message per (job, rank) slice of a batch.

The key is ``<job>/<rank>`` so that Kafka's default partitioner keeps each rank's records on one
partition, in order (design.md: ``sleuth.records`` is keyed by job and rank). The value is a
serialized ``commops.proto`` ``RecordBatch``, the same columnar form the gateway received.
"""

from __future__ import annotations

import numpy as np

from sleuth.proto import codec
from sleuth.proto import commops_pb2 as pb
from sleuth.jobspec import JobSpec
from sleuth.records import IterationBatch, RecordBatch


def message_key(job: str, rank: int) -> bytes:
    return f"{job}/{rank}".encode()


def to_messages(batch: RecordBatch, *, max_records: int = 10_000) -> list[tuple[bytes, bytes]]:
    """(key, value) pairs for ``batch``: split by (job, rank), each slice at most ``max_records``.

    Within a key the records keep their order in ``batch``.
    """
    if max_records < 1:
        raise ValueError(f"max_records must be positive, got {max_records}")
    if not len(batch):
        return []
    group = (batch["job"].astype(np.uint64) << np.uint64(32)) | batch["rank"].astype(np.uint64)
    order = np.argsort(group, kind="stable")
    boundaries = np.flatnonzero(np.diff(group[order])) + 1
    messages = []
    for indices in np.split(order, boundaries):
        first = int(indices[0])
        key = message_key(batch.strings[batch["job"][first]], int(batch["rank"][first]))
        for start in range(0, len(indices), max_records):
            part = batch.take(indices[start : start + max_records]).compact()
            messages.append((key, codec.records_to_proto(part).SerializeToString()))
    return messages


def from_message(value: bytes) -> RecordBatch:
    """The records of one message value."""
    return codec.records_from_proto(pb.RecordBatch.FromString(value))


# -- other payloads on the records topic ------------------------------------------------------
# Iteration batches and job specs travel on the same topic as the records, keyed the same way, so
# that one (job, rank)'s records and iterations stay in one partition's order. A header says what
# a value holds; messages without it are record batches (the format above).

KIND_HEADER = "sleuth-kind"
RECORDS, ITERATIONS, JOB = b"records", b"iterations", b"job"


def iteration_messages(batch: IterationBatch, *, max_records: int = 10_000) -> list[tuple[bytes, bytes]]:
    """(key, value) pairs for an iteration batch, split by (job, rank) like ``to_messages``."""
    if not len(batch):
        return []
    group = (batch["job"].astype(np.uint64) << np.uint64(32)) | batch["rank"].astype(np.uint64)
    order = np.argsort(group, kind="stable")
    messages = []
    for indices in np.split(order, np.flatnonzero(np.diff(group[order])) + 1):
        first = int(indices[0])
        key = message_key(batch.strings[batch["job"][first]], int(batch["rank"][first]))
        for start in range(0, len(indices), max_records):
            part = batch.take(indices[start : start + max_records]).compact()
            messages.append((key, codec.iterations_to_proto(part).SerializeToString()))
    return messages


def job_message(spec: JobSpec) -> tuple[bytes, bytes]:
    return spec.job.encode(), codec.jobspec_to_proto(spec).SerializeToString()


def kind_of(headers: list[tuple[str, bytes]] | dict[str, bytes] | None) -> bytes:
    # kafka-python and aiokafka give a list of pairs; faust may hand over a mapping.
    pairs = headers.items() if isinstance(headers, dict) else headers or ()
    for key, value in pairs:
        if key == KIND_HEADER:
            return value
    return RECORDS


def iterations_from_message(value: bytes) -> IterationBatch:
    return codec.iterations_from_proto(pb.IterationBatch.FromString(value))


def job_from_message(value: bytes) -> JobSpec:
    return codec.jobspec_from_proto(pb.JobSpec.FromString(value), source="Kafka job message")
