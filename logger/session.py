"""The logger's state in one process: the recorder, the groups seen, counters and iterations.

The hooks call ``begin``/``end`` on the training thread (or torch's callback thread); the
drainer thread calls ``drain``. Nothing here blocks or raises into the training loop on
purpose: a group that cannot be resolved is recorded under a fallback id.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from sleuth.logger import core
from sleuth.logger.groups import GroupInfo, comm_id, qualified
from sleuth.logger.identity import Identity
from sleuth.records import IterationBatch, RecordBatch


#: The wall clock has moved against the monotonic one (a step, or slewing adding up) when their
#: difference changes by more than this; reading the two clocks jitters by tens of nanoseconds,
#: which must not part the end of one iteration from the start of the next.
WALL_CLOCK_MOVED_NS = 1_000_000
#: An offset read whose two monotonic reads lie this close is taken at once; a wider one is read
#: again, up to ``OFFSET_READS`` times, and the tightest kept: a thread switched out between the
#: reads (CPython hands the GIL over every 5 ms) would otherwise read as a clock step.
TIGHT_OFFSET_READ_NS = 20_000
OFFSET_READS = 5


class Session:
    """Recorder plus bookkeeping. ``resolve_identity`` and ``group_ranks`` are injected so that
    this module never imports torch: the hooks pass torch-backed functions, tests plain ones."""

    def __init__(
        self,
        *,
        ring: int,
        resolve_identity: Callable[[], Identity],
        group_ranks: Callable[[Any], tuple[tuple[int, ...], str, str, str]],
        impl: Any = None,
    ) -> None:
        self.impl = impl or core.impl
        self.recorder = self.impl.Recorder(ring, max(4096, ring // 16))
        self._resolve_identity = resolve_identity
        self._group_ranks = group_ranks
        self.identity: Identity | None = None
        self.groups: list[GroupInfo] = []
        self._by_group: dict[int, tuple[Any, GroupInfo]] = {}
        self._owners: dict[str, str] = {}  # communicator name → torch's name of its group
        self._by_comm: dict[str, GroupInfo] = {}
        self.groups_version = 0
        # Iterations: the current step; whether step() or an optimizer hook ever advanced it.
        self.iteration = 0
        self.explicit_steps = False
        self.advanced = False
        self._begun_at_step = 0  # the recorder's count of records begun when the iteration began
        self._step_start_ns = self.impl.now_ns()
        self._iterations: list[tuple[int, int, int]] = []
        self.on_identity: list[Callable[[], None]] = []  # run once, at the first operator
        self.pollers: list[Callable[[], None]] = []  # run before each drain (works without futures)
        # The NCCL profiler plugin's communicators (nccl_comms.NcclComms) when it records into our ring.
        self.plugin_comms: Any = None
        self._lock = threading.Lock()  # only for group registration and iteration records
        self._wall_offset: int | None = None

    # -- hot path ------------------------------------------------------------------------------

    def group(self, group: Any) -> GroupInfo:
        """The bookkeeping of a process group, registering it the first time it is seen."""
        entry = self._by_group.get(id(group))
        if entry is not None:
            return entry[1]
        return self._register(group)

    def take_seq(self, info: GroupInfo, peer: int, direction: int) -> int:
        """The operator's sequence number: per group for collectives, per (direction, peer) for P2P.
        Native hooks (``sleuth.logger.native``) number theirs in C, exactly alike."""
        if peer < 0:
            seq = info.next_seq
            info.next_seq = seq + 1
            return seq
        key = (direction, peer)
        seq = info.p2p_seq.get(key, 0)
        info.p2p_seq[key] = seq + 1
        return seq

    def begin(self, info: GroupInfo, op: int, peer: int, nbytes: int, direction: int = 0) -> int:
        """Start an operator on the host clock; returns the recorder's handle."""
        return self.recorder.begin(info.code, self.take_seq(info, peer, direction), op, peer, nbytes, self.iteration)

    def record_done(self, info: GroupInfo, op: int, peer: int, nbytes: int, direction: int, t0: int) -> None:
        """Record an operator that started at ``t0`` and has just ended (peer known only now)."""
        seq = self.take_seq(info, peer, direction)
        self.recorder.record(info.code, seq, op, peer, nbytes, self.iteration, t0, t0, self.impl.now_ns())

    # -- groups --------------------------------------------------------------------------------

    def ensure_identity(self) -> Identity:
        """This rank's identity, resolved now if no operator resolved it yet (the NCCL plugin's
        communicators need it on the drainer thread when no hooked group ran an operator)."""
        if self.identity is None:
            with self._lock:
                self._identify()
        assert self.identity is not None
        return self.identity

    def _identify(self) -> None:
        """Called holding ``_lock``."""
        if self.identity is None:
            self.identity = self._resolve_identity()
            for callback in self.on_identity:
                callback()

    def add_group(self, comm: str, kind: str, ranks: tuple[int, ...]) -> GroupInfo:
        """A group that is no torch group (an NCCL communicator of the plugin), registered once by id."""
        with self._lock:
            info = self._by_comm.get(comm)
            if info is None:
                info = GroupInfo(len(self.groups), comm, kind, ranks)
                self.groups.append(info)
                self._by_comm[comm] = info
                self.groups_version += 1
            return info

    def _register(self, group: Any) -> GroupInfo:
        with self._lock:
            entry = self._by_group.get(id(group))
            if entry is not None:
                return entry[1]
            self._identify()
            ranks, torch_name, kind, name = self._group_ranks(group)
            base = name or comm_id(ranks)
            # Two groups under one name (the same members twice, or two descriptions of one
            # kind) are told apart by torch's group name, which every rank assigns alike.
            owner = self._owners.setdefault(base, torch_name)
            comm = base if owner == torch_name else qualified(base, torch_name)
            info = self._by_comm.get(comm)
            if info is None:  # else: the same group under another handle (None and WORLD)
                info = GroupInfo(len(self.groups), comm, kind, ranks)
                self.groups.append(info)
                self._by_comm[comm] = info
                self.groups_version += 1
            # The group object is kept so that its id() cannot be reused by another object.
            self._by_group[id(group)] = (group, info)
            return info

    # -- iterations ----------------------------------------------------------------------------

    def step(self, *, explicit: bool) -> None:
        """The current iteration ended. ``explicit``: from ``sleuth.logger.step()``, which then
        takes over from the optimizer hook. Several optimizers stepping with no operator between
        them end one iteration, not several."""
        if explicit:
            self.explicit_steps = True
        elif self.explicit_steps or (self.advanced and self.recorder.begun == self._begun_at_step):
            return
        now = self.impl.now_ns()
        with self._lock:
            self._iterations.append((self.iteration, self._step_start_ns, now))
            self._step_start_ns = now
            self.iteration += 1
            # Native hooks read the iteration in C, where the session's attribute is out of reach.
            self.recorder.iteration = self.iteration
            self.advanced = True
            self._begun_at_step = self.recorder.begun

    # -- draining ------------------------------------------------------------------------------

    def drain(self, *, final: bool = False) -> tuple[np.ndarray, int]:
        """The records completed since the last drain (``core.RECORD_DTYPE``), and the total of
        dropped records so far (the recorder's, and the NCCL plugin's that could not be mapped).
        ``final``: the last drain, which holds nothing back."""
        for poll in list(self.pollers):
            poll()
        if final and self.plugin_comms is not None:
            self.plugin_comms.settle()
        self.recorder.poll()
        records = core.records_from_bytes(self.recorder.drain()).copy()  # writable: moved in time
        dropped = self.recorder.dropped
        if self.plugin_comms is not None:
            records = self.plugin_comms.translate(records, final=final)
            dropped += self.plugin_comms.dropped
        offset = self.wall_offset_ns()
        for column in ("t_issue_ns", "t_start_ns", "t_end_ns"):
            records[column] += offset
        return records, dropped

    def wall_offset_ns(self) -> int:
        """The wall clock minus the recorder's monotonic one. Records are timed on the monotonic
        clock (a wall-clock step never bends a duration) and moved onto the wall clock, which
        ranks on different hosts share, when drained: a step shifts whole batches only."""
        offset, error = self._read_wall_offset()
        # A change within the read's own error is no evidence that the clock moved.
        if self._wall_offset is None or abs(offset - self._wall_offset) > WALL_CLOCK_MOVED_NS + error:
            self._wall_offset = offset
        return self._wall_offset

    def _read_wall_offset(self) -> tuple[int, int]:
        """(offset, error): the wall clock read between two monotonic reads, set against their
        midpoint, so that the offset is off by at most half the bracket, which is the error."""
        best: tuple[int, int] | None = None
        for _ in range(OFFSET_READS):
            before = self.impl.now_ns()
            wall = time.time_ns()
            after = self.impl.now_ns()
            width = after - before
            if best is None or width < best[1]:
                best = (wall - (before + after) // 2, width)
            if width <= TIGHT_OFFSET_READ_NS:
                break
        assert best is not None
        return best[0], best[1] // 2

    def drain_iterations(self) -> list[tuple[int, int, int]]:
        with self._lock:
            done, self._iterations = self._iterations, []
        offset = self.wall_offset_ns()
        return [(iteration, start + offset, end + offset) for iteration, start, end in done]

    def comm_names(self) -> list[str]:
        return [info.comm for info in self.groups]


def to_record_batch(records: np.ndarray, identity: Identity, comm_names: list[str]) -> RecordBatch:
    """A ``RecordBatch`` of drained records: job and rank added, comm codes into the names."""
    n = len(records)
    strings = [identity.job, *comm_names]
    columns = {
        "job": np.zeros(n, "u4"),
        "rank": np.full(n, identity.rank, "u4"),
        "comm": records["comm"] + np.uint32(1),
        "seq": records["seq"],
        "op": records["op"],
        "peer": records["peer"],
        "nbytes": records["nbytes"],
        "iteration": records["iteration"],
        "t_issue_ns": records["t_issue_ns"],
        "t_start_ns": records["t_start_ns"],
        "t_end_ns": records["t_end_ns"],
    }
    return RecordBatch({k: np.ascontiguousarray(v) for k, v in columns.items()}, strings)


def to_iteration_batch(items: list[tuple[int, int, int]], identity: Identity) -> IterationBatch:
    return IterationBatch.from_columns(
        job=identity.job,
        rank=[identity.rank] * len(items),
        iteration=[i for i, _, _ in items],
        t_start_ns=[s for _, s, _ in items],
        t_end_ns=[e for _, _, e in items],
    )
