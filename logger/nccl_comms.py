"""The NCCL profiler plugin's communicators as the logger's groups, and its records mapped onto them.

The plugin (``logger/nccl_profiler/``) knows of a communicator only what NCCL tells it: its hash,
the same on every member, its size, and this process's rank in it. Its records carry
``RING_COMM | index`` (the communicator's place in the plugin's table) and P2P peers as ranks in
the communicator. The logger's records carry a group's code and peers as global ranks, so before
records leave the drainer:

* **Members.** Each member publishes its global rank under the communicator's hash and its rank
  in it (``position_key``); the communicator's rank 0 gathers the positions once all are in and
  publishes the member list (``members_key``), which the others read: one read per member, not
  one per member pair. It all runs on the drainer thread with non-blocking ``check``s: members
  initialize a communicator together, so the positions arrive within a poll or two.
* **Groups.** A resolved communicator becomes a ``GroupInfo`` that the rank entry publishes like
  any group (``groups.merge_spec`` needs nothing new). It is named like torch's group of the same
  members, else as ``naming`` infers from its shape, qualified ``~nccl`` (``~nccl2`` for a second
  one of that name, in the order this process initialized them: members initialize alike) so that
  it never takes the name of a torch group whose own operators the logger records.
* **Records.** Codes and P2P peers are mapped with numpy. Records of a communicator not yet
  resolved are held, at most ``hold_records`` and at most ``wait_s`` after it appeared; past
  either bound, they are dropped, counted in the logger's dropped count (``dropped``) and a log
  line names the communicator. The final flush first waits for them (``settle``, at most
  ``SETTLE_S``): every member is at its own final flush then, publishing what it knows.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sleuth.logger import core
from sleuth.logger.groups import KEY_PREFIX, GroupInfo, comm_id, get_many, qualified
from sleuth.rank_runs import expand, runs
from sleuth.records import OpKind

__all__ = ["HOLD_RECORDS", "RING_COMM", "SETTLE_S", "WAIT_S", "NcclComms", "PluginComm", "members_key", "position_key"]

log = logging.getLogger("sleuth.logger")

#: A plugin record's ``comm``: this bit or'ed with the table index (sleuth_nccl_attach.h).
RING_COMM = 0x8000_0000

#: How long a communicator may stay unresolved (seconds after it appeared) before its records are dropped.
WAIT_S = 120.0

#: Records held for unresolved communicators, at most (64 bytes each: 16 MiB).
HOLD_RECORDS = 1 << 18

#: The final flush waits at most this long for communicators still unresolved (and never past their WAIT_S).
SETTLE_S = 10.0

_PENDING, _FAILED = -1, -2
_P2P = np.array([int(OpKind.SEND), int(OpKind.RECV)], dtype=np.uint8)


@dataclass(frozen=True)
class PluginComm:
    """One entry of the plugin's communicator table."""

    index: int
    hash: int
    name: str
    nranks: int
    rank: int  # this process's rank in the communicator


def position_key(job: str, comm_hash: int, comm_rank: int) -> str:
    """The global rank of the member at ``comm_rank`` of the NCCL communicator ``comm_hash``."""
    return f"{KEY_PREFIX}/{job}/nccl/{comm_hash:016x}/{comm_rank}"


def members_key(job: str, comm_hash: int) -> str:
    """The communicator's members (global ranks in communicator-rank order, as runs)."""
    return f"{KEY_PREFIX}/{job}/nccl/{comm_hash:016x}/members"


@dataclass
class _Comm:
    entry: PluginComm
    seen_at: float
    published: bool = False
    members: tuple[int, ...] | None = None
    base: str = ""  # its name before the ~nccl qualifier, once named
    info: GroupInfo | None = None
    failed: bool = False

    def describe(self) -> str:
        e = self.entry
        return f"NCCL communicator {e.hash:016x} ({e.name or 'unnamed'}, {e.nranks} ranks, this process's rank {e.rank})"


class NcclComms:
    """Resolves the plugin's communicators (``poll``, a session poller) and maps its records
    (``translate``, from ``Session.drain``).

    ``table(start)``: the plugin's entries from index ``start`` on; ``store()``: the
    torch.distributed store; ``naming(members)``: ``(kind, name)`` of a communicator over those
    global ranks (name "" where none fits).
    """

    def __init__(
        self,
        session: Any,
        table: Callable[[int], list[PluginComm]],
        store: Callable[[], Any] | None,
        naming: Callable[[tuple[int, ...]], tuple[str, str]],
        *,
        wait_s: float | None = None,
        hold_records: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._session = session
        self._table = table
        self._store = store
        self._naming = naming
        self.wait_s = WAIT_S if wait_s is None else wait_s  # read at use: tests shorten the module's
        self.hold_records = HOLD_RECORDS if hold_records is None else hold_records
        self._clock = clock
        self._sleep = sleep
        self._comms: list[_Comm] = []
        self._codes = np.zeros(0, dtype=np.int64)  # table index -> group code, _PENDING or _FAILED
        self._members: dict[int, np.ndarray] = {}  # table index -> global ranks
        self._held = np.zeros(0, dtype=core.RECORD_DTYPE)
        self.dropped = 0
        self._errors: set[str] = set()

    # -- resolving (the drainer thread) ----------------------------------------------------------

    def poll(self) -> None:
        try:
            self._poll()
        except Exception as error:  # the drain goes on; records wait for the next round
            self._once("resolving NCCL communicators", error)

    def settle(self, timeout: float | None = None) -> None:
        """Poll until every communicator is resolved or given up, at most ``timeout`` (``SETTLE_S``) seconds."""
        until = self._clock() + (SETTLE_S if timeout is None else timeout)
        while True:
            self.poll()
            if all(c.info is not None or c.failed for c in self._comms) or self._clock() >= until:
                return
            self._sleep(0.05)

    def _poll(self) -> None:
        new = self._table(len(self._comms))
        now = self._clock()
        for entry in new:
            self._comms.append(_Comm(entry, now))
        if new:
            self._codes = np.concatenate([self._codes, np.full(len(new), _PENDING, dtype=np.int64)])
        open_ = [c for c in self._comms if c.info is None and not c.failed]
        if not open_:
            return
        identity = self._session.ensure_identity()  # torch's group exists: NCCL runs under it
        unresolved = [c for c in open_ if c.members is None]
        store = self._get_store() if any(c.entry.nranks > 1 for c in unresolved) else None
        for comm in unresolved:
            self._resolve(comm, identity, store)
        self._name()
        for comm in open_:
            if comm.info is None and not comm.failed and now - comm.seen_at > self.wait_s:
                self._fail(comm, f"not resolved to global ranks in {self.wait_s:g} s ({self._why(comm, identity, store)})")

    def _get_store(self) -> Any:
        if self._store is None:
            return None
        try:
            return self._store()
        except Exception as error:
            self._once("finding the torch.distributed store", error)
            return None

    def _resolve(self, comm: _Comm, identity: Any, store: Any) -> None:
        e = comm.entry
        if e.nranks == 1:
            comm.members = (identity.rank,)
            return
        if store is None:
            return
        if not comm.published:
            store.set(position_key(identity.job, e.hash, e.rank), str(identity.rank).encode())
            comm.published = True
        if e.rank == 0:
            keys = [position_key(identity.job, e.hash, r) for r in range(e.nranks)]
            if not store.check(keys):
                return
            members = tuple(int(value) for value in get_many(store, keys))
            store.set(members_key(identity.job, e.hash), json.dumps(runs(members)).encode())
        else:
            key = members_key(identity.job, e.hash)
            if not store.check([key]):
                return
            members = expand(json.loads(store.get(key)), below=identity.world, where=comm.describe())
        if len(members) != e.nranks or len(set(members)) != e.nranks or members[e.rank] != identity.rank:
            self._fail(comm, f"its members {list(members)} do not fit it")
            return
        comm.members = members

    def _name(self) -> None:
        """Resolved communicators become groups in table order: a communicator's qualifier counts the
        earlier ones of its name, so every earlier one of its size must be resolved (or given up) first."""
        for position, comm in enumerate(self._comms):
            if comm.members is None or comm.info is not None or comm.failed:
                continue
            earlier = self._comms[:position]
            if any(o.members is None and not o.failed and o.entry.nranks == comm.entry.nranks for o in earlier):
                continue
            kind, name = self._naming(comm.members)
            comm.base = name or comm_id(comm.members)
            count = 1 + sum(1 for o in earlier if o.info is not None and o.base == comm.base)
            comm.info = self._session.add_group(qualified(comm.base, "nccl" if count == 1 else f"nccl{count}"), kind, comm.members)
            self._members[comm.entry.index] = np.asarray(comm.members, dtype=np.int32)
            self._codes[comm.entry.index] = comm.info.code

    def _why(self, comm: _Comm, identity: Any, store: Any) -> str:
        e = comm.entry
        if store is None:
            return "no torch.distributed store"
        if comm.members is not None:
            return "an earlier communicator of its size is unresolved"
        if e.rank != 0:
            return "its rank 0 never published the member list"
        missing = [r for r in range(e.nranks) if not store.check([position_key(identity.job, e.hash, r)])]
        return f"communicator ranks {missing[:8]}{'...' if len(missing) > 8 else ''} never published their global rank"

    def _fail(self, comm: _Comm, why: str) -> None:
        comm.failed = True
        self._codes[comm.entry.index] = _FAILED
        log.warning("sleuth logger: %s: %s: its records are dropped and counted as dropped", comm.describe(), why)

    def _once(self, what: str, error: BaseException) -> None:
        if what not in self._errors:
            self._errors.add(what)
            log.warning("sleuth logger: %s failed: %r", what, error)

    # -- records (Session.drain) ---------------------------------------------------------------

    def translate(self, records: np.ndarray, *, final: bool = False) -> np.ndarray:
        """``records`` with the plugin's mapped to their groups (held ones released when resolved)."""
        plugin = (records["comm"] & np.uint32(RING_COMM)) != 0
        if not plugin.any() and not len(self._held):
            return records
        theirs = np.concatenate([self._held, records[plugin]]) if len(self._held) else records[plugin]
        index = (theirs["comm"] & np.uint32(RING_COMM - 1)).astype(np.int64)
        code = np.full(len(theirs), _PENDING, dtype=np.int64)
        known = index < len(self._codes)  # else its table entry came after this round's poll
        code[known] = self._codes[index[known]]
        ready = code >= 0
        failed = code == _FAILED
        out = theirs[ready]  # a copy: fancy indexing
        out["comm"] = code[ready].astype(np.uint32)
        self._map_peers(out, index[ready])
        self.dropped += int(failed.sum())
        held = theirs[~ready & ~failed]
        if final and len(held):
            for i in np.unique((held["comm"] & np.uint32(RING_COMM - 1)).astype(np.int64)).tolist():
                comm = self._comms[i] if i < len(self._comms) else None
                if comm is not None and not comm.failed:
                    self._fail(comm, "still unresolved at the final flush")
            self.dropped += len(held)
            held = held[:0]
        elif len(held) > self.hold_records:
            excess = len(held) - self.hold_records
            self.dropped += excess
            self._once("holding records of unresolved NCCL communicators",
                       RuntimeError(f"more than {self.hold_records} held: the oldest are dropped and counted"))
            held = held[excess:]
        self._held = held
        return np.concatenate([records[~plugin], out]) if len(out) else records[~plugin]

    def _map_peers(self, out: np.ndarray, index: np.ndarray) -> None:
        """P2P peers from communicator ranks to global ranks, the logger's meaning of ``peer``."""
        p2p = np.isin(out["op"], _P2P)
        if not p2p.any():
            return
        peer = out["peer"]
        for i in np.unique(index[p2p]).tolist():
            members = self._members[i]
            mine = p2p & (index == i)
            valid = mine & (peer >= 0) & (peer < len(members))
            peer[valid] = members[peer[valid]]
            peer[mine & ~valid] = -1  # a peer outside the communicator: NCCL said nothing usable
