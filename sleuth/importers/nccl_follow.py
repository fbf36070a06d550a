"""What ``libnccl-profiler-sleuth.so`` writes, streamed while the job runs (``sleuth import nccl-profiler --follow``).

A job with no Python logger for the plugin to record into (JAX, TensorFlow, a C++ program on
NCCL) leaves its records in the plugin's files. The follower reads that folder as it grows, makes
of it what ``sleuth.importers.nccl_profiler`` makes of the whole, and hands each rank's records to
a sink (the logger's ``GrpcSink``: the gateway, with its spill, retries and confirmations) once
their step is over. What it decides, and why:

- Nothing goes out until every communicator a process names has every rank's files: before that
  the job's world and members are not known.
- A rank's records go out once its step is settled: issued before the rank's second-latest step
  began. Operators of the latest step on other communicators may still run, and a step ends with
  its last operator; one step more covers a plugin buffer written late (``SLEUTH_FLUSH_S``).
- Nothing goes out twice: the follower keeps, per rank, communicator, direction and peer, the
  highest ``seq`` sent. One communicator's operations complete, and are written, in ``seq`` order.
- A rank's GPU clock, once its records went out, stays as decided then: times sent must not move.
- Steps are numbered as the import numbers the records so far. When the pattern found changes after
  records went out (the first steps looked unlike the later ones), a warning says so once; what was
  sent keeps its numbers, the rest takes the new ones.
- The plugin's count of records it lost rides the rank's next batch (``dropped``), as the logger's does.
- A last poll (``final``) sends everything left, the last steps too.

The folder must hold every process's files (a shared file system, or one host's job).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from threading import Event
from typing import Any

import numpy as np

from sleuth.importers.nccl_profiler import ProcessDump, convert, read_dumps
from sleuth.jobspec import JobSpec
from sleuth.records import OpKind, RecordBatch
from sleuth.records_folder import iterations_from_records

__all__ = ["Follower", "follow"]

log = logging.getLogger("sleuth.importers")

#: Steps a rank's records wait behind its latest: that step's operators on other communicators may still run.
SETTLE_STEPS = 2
_P2P = (int(OpKind.SEND), int(OpKind.RECV))


class Follower:
    """Reads ``folder`` as the plugin writes it; each ``poll`` hands the sink what became settled."""

    def __init__(self, folder: str | Path, sink: Any, *, job: str | None = None, gpu_clock: str = "auto",
                 period: int | None = None) -> None:
        self.folder = Path(folder)
        self.sink = sink
        self.job, self.gpu_clock, self.period = job, gpu_clock, period
        self.sent = 0  # records handed to the sink
        self.waiting: str | None = f"{self.folder}: no nccl-*.json files yet"  # why nothing can go out yet
        self._bytes: dict[Path, bytearray] = {}
        self.spec: JobSpec | None = None  # the job as last sent
        self._clocks: dict[int, tuple[str, int]] = {}
        self._seq_sent: dict[tuple[int, str, int, int], int] = {}  # (rank, comm, direction, peer) -> highest seq
        self._step_sent: dict[int, int] = {}  # rank -> highest step whose iteration record went out
        self._step_starts: dict[int, np.ndarray] = {}  # rank -> first issue time of each step sent
        self._dropped: dict[int, int] = {}
        self._warned = False

    @property
    def read_bytes(self) -> int:
        """Bytes of records read so far: what tells a follower the job still writes."""
        return sum(len(held) for held in self._bytes.values())

    def poll(self, *, final: bool = False) -> int:
        """Send what is settled (``final``: everything); returns the records handed to the sink."""
        dumps = self._read()
        if dumps is None:
            return 0
        conversion = convert(dumps, self.folder, job=self.job, gpu_clock=self.gpu_clock, period=self.period,
                             clocks=self._clocks)
        if conversion.spec != self.spec:
            self.sink.spec(conversion.spec)
            self.spec = conversion.spec
        handed = 0
        for (rank, batch), dump in zip(conversion.batches.items(), dumps):  # in the dumps' order
            self._check_steps(rank, batch)
            handed += self._send(rank, batch, dump, conversion.clocks[rank], final)
        self.sent += handed
        return handed

    def _send(self, rank: int, batch: RecordBatch, dump: ProcessDump, clock: tuple[str, int], final: bool) -> int:
        iteration = batch["iteration"]
        latest = int(iteration.max()) if len(batch) else -1
        if final:
            settled, last_step = np.ones(len(batch), dtype=bool), latest
        else:
            opening = iteration == latest - SETTLE_STEPS + 1
            if latest < SETTLE_STEPS - 1 or not opening.any():
                return 0
            settled, last_step = batch["t_issue_ns"] < batch["t_issue_ns"][opening].min(), latest - SETTLE_STEPS
        keys, key_of = self._keys(rank, batch)
        high = np.array([self._seq_sent.get(key, -1) for key in keys], dtype=np.int64)
        fresh = settled & (batch["seq"].astype(np.int64) > high[key_of])
        lost = max(0, dump.counters.get("dropped", 0) - self._dropped.get(rank, 0))
        if fresh.any() or lost:
            self.sink.records(batch.take(fresh).compact(), dropped=lost)
            self._dropped[rank] = dump.counters.get("dropped", 0)
            self._clocks.setdefault(rank, clock)
            np.maximum.at(high, key_of[fresh], batch["seq"][fresh].astype(np.int64))
            self._seq_sent.update((key, int(h)) for key, h in zip(keys, high.tolist()) if h >= 0)
        # The last step sent comes along: a step starts where the rank's previous one ended.
        recent = settled & (iteration >= self._step_sent.get(rank, -1))
        steps = iterations_from_records(batch.take(recent)) if recent.any() else None
        if steps is not None and len(steps):
            new = (steps["iteration"] > self._step_sent.get(rank, -1)) & (steps["iteration"] <= last_step)
            if new.any():
                self.sink.iterations(steps.take(new))
                self._step_sent[rank] = int(steps["iteration"][new].max())
                self._step_starts[rank] = _step_starts(batch, self._step_sent[rank])
        return int(fresh.sum())

    @staticmethod
    def _keys(rank: int, batch: RecordBatch) -> tuple[list[tuple[int, str, int, int]], np.ndarray]:
        """Each record's ordering key, as (the distinct keys, each record's index into them): a
        collective's is its communicator; a P2P operation's, its communicator, direction and peer."""
        op = batch["op"].astype(np.int64)
        direction = np.where(np.isin(op, _P2P), op, 0)
        peer = np.where(direction > 0, batch["peer"].astype(np.int64), -1)
        # One int per key (communicator code, op kind below 256, peer + 1 below 2^32): a flat sort.
        packed = batch["comm"].astype(np.int64) << 40 | direction << 32 | (peer + 1)
        distinct, key_of = np.unique(packed, return_inverse=True)
        keys = [(rank, batch.strings[k >> 40], (k >> 32) & 0xFF, (k & 0xFFFFFFFF) - 1) for k in distinct.tolist()]
        return keys, key_of.reshape(-1)

    def _check_steps(self, rank: int, batch: RecordBatch) -> None:
        """Warn once when steps already sent now begin elsewhere: the pattern changed as the job went on."""
        sent = self._step_starts.get(rank)
        if self._warned or sent is None:
            return
        now = _step_starts(batch, len(sent) - 1)
        if len(now) != len(sent) or not np.array_equal(now, sent):
            log.warning("sleuth import: rank %d's steps up to %d were sent as numbered then; the pattern of the job's "
                        "collectives now numbers them otherwise, and what is sent from now on takes the new numbers "
                        "(pass --period to fix the steps)", rank, len(sent) - 1)
            self._warned = True

    def _read(self) -> list[ProcessDump] | None:
        """The processes' files as they stand, or None (``waiting`` says why) while the job's shape is not known."""
        sidecars = {p.with_suffix("") for p in self.folder.glob("nccl-*.json")}
        if not sidecars:
            self.waiting = f"{self.folder}: no nccl-*.json files yet"
            return None
        # A process opens its records file, then writes its sidecar: between the two it is not known yet.
        if any(p.with_suffix("") not in sidecars for p in self.folder.glob("nccl-*.bin")):
            self.waiting = f"{self.folder}: a process's sidecar is not written yet"
            return None
        dumps = read_dumps(self.folder, read_records=self._grown)
        self.waiting = _incomplete(dumps)
        return None if self.waiting else dumps

    def _grown(self, path: Path) -> bytes:
        """The records file's bytes, reading only what was appended since the last poll."""
        held = self._bytes.setdefault(path, bytearray())
        try:
            with path.open("rb") as f:
                size = f.seek(0, 2)
                if size < len(held):  # a new process under a reused pid truncated it
                    held.clear()
                f.seek(len(held))
                held += f.read(size - len(held))
        except FileNotFoundError:
            held.clear()
        return bytes(held)


def _step_starts(batch: RecordBatch, last: int) -> np.ndarray:
    """The first issue time of each of steps 0..``last`` in ``batch`` (int64 max where a step has none)."""
    starts = np.full(last + 1, np.iinfo(np.int64).max, dtype=np.int64)
    keep = (batch["iteration"] >= 0) & (batch["iteration"] <= last)
    np.minimum.at(starts, batch["iteration"][keep], batch["t_issue_ns"][keep])
    return starts


def _incomplete(dumps: list[ProcessDump]) -> str | None:
    """Why the job's shape is not known yet: a communicator whose ranks have not all written, or
    global ranks beyond the processes seen; None when it is."""
    seen: dict[str, tuple[int, set[int]]] = {}
    for dump in dumps:
        for comm in dump.comms:
            seen.setdefault(comm.hash, (comm.nranks, set()))[1].add(comm.rank)
    for comm_hash, (nranks, ranks) in sorted(seen.items()):
        if len(ranks) < nranks:
            return f"communicator {comm_hash}: {len(ranks)} of its {nranks} ranks' files so far"
    given = [d.global_rank for d in dumps if d.global_rank is not None]
    if given and max(given) >= len(dumps):
        return f"global rank {max(given)} seen, {len(dumps)} processes' files so far"
    return None


def follow(follower: Follower, *, interval_s: float, stop: Event, idle_exit_s: float | None = None,
           on_poll: Callable[[Follower], None] | None = None) -> None:
    """Poll until ``stop`` is set (or, with ``idle_exit_s``, no records file grew for that long),
    then send the rest. A poll reads and converts the whole folder, so the pause after it is at
    least four times its own time: the follower takes at most a fifth of a core however long the job."""
    grown_at, size = time.monotonic(), -1
    while not stop.is_set():
        began = time.monotonic()
        follower.poll()
        if follower.read_bytes != size:
            grown_at, size = time.monotonic(), follower.read_bytes
        if on_poll is not None:
            on_poll(follower)
        if idle_exit_s is not None and time.monotonic() - grown_at >= idle_exit_s:
            break
        stop.wait(max(interval_s, 4 * (time.monotonic() - began)))
    follower.poll(final=True)
