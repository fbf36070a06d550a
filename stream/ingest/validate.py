"""Checks the gateway runs on every wire batch before it goes anywhere: pure, no I/O.

``check_message`` turns a ``StreamMessage`` into a domain batch or raises ``BatchRejected``
whose message names the offending field, so that a logger author can fix the sender. Order of
checks: cheap size bounds first (a huge batch or string is refused before it is decoded), then
the columns' types and lengths (``sleuth.proto.codec``), then value ranges
(``RecordBatch.problems``, then the gateway's own: sizes, issue before start, iteration numbers),
then that every job in the batch is registered (under its rendezvous round's id, when the batch names
one: ``JobRegistry.in_round``) and, where its spec is at hand (a ``JobRegistry``),
that every rank and every peer lies inside the job's world. A bad record refuses its whole batch
(the gateway's answer says how many batches before it were accepted); messages name the field,
the value and the position of the first offending record in the batch.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass

import numpy as np

from sleuth.errors import BatchRejected, NotRegistered, RecordError
from sleuth.proto import commops_pb2 as pb
from sleuth.proto import wire as columnar
from sleuth.records import IterationBatch, RecordBatch
from sleuth.settings import Settings
from sleuth.stream.ingest.job_registry import JobRegistry

#: Largest plausible payload of one operator (8 PiB). Also catches sizes that were negative on the
#: sender and arrive as huge unsigned varints.
MAX_NBYTES = 1 << 53

#: How far a record's issue time may lie after its start. On GPUs the start is a CUDA event mapped
#: onto the host clock through a reference taken at the midpoint of a synchronize round trip
#: (``calibrate`` in logger/_commops.c), so it may read up to half that round trip (microseconds)
#: early; a millisecond is far above that and flags a clock that is broken, not merely coarse.
MAX_ISSUE_AFTER_START_NS = 1_000_000


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Bounds on one batch; the gateway's settings fill them."""

    max_records: int = 1_000_000
    max_strings: int = 100_000
    max_string_bytes: int = 256
    max_iteration: int = Settings.gateway_max_iteration


def check_message(
    message: pb.StreamMessage, *, limits: Limits, registered: Container[str]
) -> RecordBatch | IterationBatch:
    """The batch ``message`` carries, valid and from registered jobs, or ``BatchRejected``."""
    kind = message.WhichOneof("payload")
    if kind is None:
        raise BatchRejected("payload: the message holds neither records nor iterations")
    wire = message.records if kind == "records" else message.iterations
    _check_sizes(wire, kind, limits)
    try:
        # Its bytes decoded by numpy (``proto.wire``): the parsed fields would be copied value by value.
        data = wire.SerializeToString()
        batch = columnar.records_from_bytes(data) if kind == "records" else columnar.iterations_from_bytes(data)
    except RecordError as error:
        raise BatchRejected(f"{kind}.{error}") from None
    found = batch.problems() if isinstance(batch, RecordBatch) else iteration_problems(batch)
    found += _iteration_cap_problems(batch, limits.max_iteration)
    if isinstance(batch, RecordBatch):
        found += _record_range_problems(batch)
    if found:
        raise BatchRejected(f"{kind}: " + "; ".join(found))
    if kind == "records" and message.records.dropped and not len(batch):
        # A drop is the job's and rank's of the batch that reports it: an empty batch names neither.
        raise BatchRejected(f"records.dropped: {message.records.dropped} records reported lost by a batch without "
                            "records, which names no job or rank (report them with the next batch of records)")
    if wire.rendezvous:
        batch = _in_round(batch, wire.rendezvous, registered, kind)
    for code in np.unique(batch["job"]):
        job = batch.strings[code]
        if job not in registered:
            raise NotRegistered(f"{kind}.job: job {job!r} is not registered (call RegisterJob first)")
        spec = registered.spec(job) if isinstance(registered, JobRegistry) else None
        if spec is not None:
            # The rank keys the Kafka message by its model replica, and names the GPU downstream.
            ranks = batch["rank"][batch["job"] == code]
            outside = ranks[ranks >= spec.world]
            if len(outside):
                raise BatchRejected(f"{kind}.rank: {len(outside)} records of job {job!r} name ranks outside its "
                                    f"world of {spec.world} (first: rank {int(outside[0])})")
            if isinstance(batch, RecordBatch):
                # A peer is a global rank too: the localizer follows it to the rank's records and GPU.
                beyond = np.flatnonzero((batch["job"] == code) & (batch["peer"] >= spec.world))
                if len(beyond):
                    first = int(beyond[0])
                    raise BatchRejected(
                        f"{kind}.peer: {len(beyond)} records of job {job!r} name peers outside its world of "
                        f"{spec.world} (first at index {first}: peer {int(batch['peer'][first])})")
    return batch


def _in_round(batch: RecordBatch | IterationBatch, rendezvous: str, registered: Container[str],
              kind: str) -> RecordBatch | IterationBatch:
    """``batch`` with its jobs named as their rendezvous round ``rendezvous`` is registered
    (``JobRegistry.in_round``); ``NotRegistered`` until a spec of that round is."""
    strings = list(batch.strings)
    for code in np.unique(batch["job"]):
        named = registered.in_round(strings[code], rendezvous) if isinstance(registered, JobRegistry) else None
        if named is None:
            raise NotRegistered(f"{kind}.rendezvous: job {strings[code]!r} is not registered from its rendezvous "
                                f"round {rendezvous!r} (call RegisterJob first)")
        strings[code] = named
    return type(batch)(batch.columns, strings)


def batch_jobs(batch: RecordBatch | IterationBatch) -> list[str]:
    """The distinct job names the records of ``batch`` use."""
    return [batch.strings[code] for code in np.unique(batch["job"])]


def iteration_problems(batch: IterationBatch) -> list[str]:
    """Like ``RecordBatch.problems`` for iteration records."""
    checks = (
        ("iteration", batch["iteration"] < 0, "negative iteration"),
        ("t_start_ns", batch["t_start_ns"] < 0, "negative time"),
        ("t_end_ns", batch["t_end_ns"] < batch["t_start_ns"], "ends before it starts"),
    )
    found = _first_of_each(batch, checks)
    if any(not batch.strings[code] for code in np.unique(batch["job"])):
        found.append("job: empty name")
    return found


def _record_range_problems(batch: RecordBatch) -> list[str]:
    checks = (
        ("nbytes", batch["nbytes"] > MAX_NBYTES, f"above {MAX_NBYTES} (negative on the sender?)"),
        ("t_issue_ns", batch["t_issue_ns"] > batch["t_start_ns"] + MAX_ISSUE_AFTER_START_NS,
         f"issued more than {MAX_ISSUE_AFTER_START_NS} ns after it starts (t_start_ns)"),
    )
    return _first_of_each(batch, checks)


def _iteration_cap_problems(batch: RecordBatch | IterationBatch, max_iteration: int) -> list[str]:
    checks = (("iteration", batch["iteration"] > max_iteration,
               f"above {max_iteration} (SLEUTH_GATEWAY_MAX_ITERATION)"),)
    return _first_of_each(batch, checks)


def _first_of_each(batch: RecordBatch | IterationBatch, checks: tuple[tuple[str, np.ndarray, str], ...]) -> list[str]:
    """One message per broken check: the field, how many records, the first one's index and value."""
    found = []
    for name, bad, what in checks:
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            found.append(f"{name}: {what} in {int(bad.sum())} records (first at index {first}: {batch[name][first]})")
    return found


def _check_sizes(wire: pb.RecordBatch | pb.IterationBatch, kind: str, limits: Limits) -> None:
    # Length of the first column: unequal lengths are the codec's to report, naming the column.
    n = len(wire.job)
    if n > limits.max_records:
        raise BatchRejected(f"{kind}: {n} records, more than the limit of {limits.max_records}")
    if len(wire.strings) > limits.max_strings:
        raise BatchRejected(
            f"{kind}.strings: {len(wire.strings)} entries, more than the limit of {limits.max_strings}"
        )
    for index, text in enumerate(wire.strings):
        size = len(text.encode())
        if size > limits.max_string_bytes:
            raise BatchRejected(
                f"{kind}.strings[{index}]: {size} bytes, longer than the limit of {limits.max_string_bytes}"
            )
    check_rendezvous(wire.rendezvous, limits, where=kind)


def check_rendezvous(rendezvous: str, limits: Limits, *, where: str) -> None:
    """A rendezvous round's name is kept for as long as its job: bounded like the batches' strings."""
    size = len(rendezvous.encode())
    if size > limits.max_string_bytes:
        raise BatchRejected(f"{where}.rendezvous: {size} bytes, longer than the limit of {limits.max_string_bytes}")
