"""NVIDIA NCCL Inspector logs → sleuth records (``sleuth import nccl-inspector``).

What the format is (NVIDIA/nccl ``ext-profiler/inspector``, its JSON writer): one file per
process, ``<hostname>-pid<pid>.log`` in ``NCCL_INSPECTOR_DUMP_DIR``, one JSON object per line.
A record carries ``header`` (``id``: the communicator's hash ``0x…``, equal on every member;
``comm_name``; ``rank`` and ``n_ranks`` *within that communicator*), ``metadata``
(``hostname``, ``pid``, ``dump_timestamp_us``) and one of ``coll_perf`` (``coll``: ``AllReduce``...,
``coll_sn``: NCCL's per-communicator collective number, ``coll_msg_size_bytes`` = count ×
type size, ``coll_exec_time_us``) or ``p2p_perf`` (``p2p``: ``Send``/``Recv``, ``p2p_sn``: the
plugin's per-communicator P2P counter on this rank, ``p2p_peer``: the peer's rank in the
communicator). Format v4.4 writes ``header`` and ``metadata`` once per communicator and dump,
in a ``dump_stats`` record (with the ring's drop counts) that the following records inherit.
Only in verbose mode (``NCCL_INSPECTOR_DUMP_VERBOSE=1``) does a record carry ``event_trace_ts``:
``coll_start_ts``/``p2p_start_ts`` (the operator's start event, when the host enqueued it) and
per channel ``kernel_start_ts``/``kernel_stop_ts`` (when the kernel was seen to start and
stop), all from ``gettimeofday``: microseconds of the host's wall clock.

How records are made: ``t_issue`` = the start event; ``t_start`` = the first channel's kernel
start; ``t_end`` = the last channel's kernel stop (``t_start`` + ``exec_time`` when no kernel
event was kept), µs → ns. The global rank of a process is its rank in the communicator that
spans every process (the world); hosts are the files' host names, the GPU index a rank's
position among its host's ranks (the logs do not name the device).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sleuth.errors import ConfigError, ImportFileError
from sleuth.importers.assemble import assemble
from sleuth.importers.model import Imported, SourceComm, SourceOp, SourceRank, Stream
from sleuth.importers.parallel import map_files
from sleuth.records import OpKind

__all__ = ["FUNC_KINDS", "read_inspector"]

#: ``ncclFuncToString`` names → kinds (``AllToAll``, ``Gather``, ``Scatter``: NCCL 2.28's new ones).
FUNC_KINDS: dict[str, OpKind] = {
    "AllReduce": OpKind.ALL_REDUCE,
    "AllGather": OpKind.ALL_GATHER,
    "ReduceScatter": OpKind.REDUCE_SCATTER,
    "Broadcast": OpKind.BROADCAST,
    "Reduce": OpKind.REDUCE,
    "AllToAll": OpKind.ALL_TO_ALL,
    "AlltoAll": OpKind.ALL_TO_ALL,
    "Gather": OpKind.GATHER,
    "Scatter": OpKind.SCATTER,
    "Send": OpKind.SEND,
    "Recv": OpKind.RECV,
}

#: What NCCL calls a communicator that has no name.
_NO_NAME = {"", "unknown"}
_SUFFIXES = {".log", ".jsonl", ".json"}


@dataclass
class _Process:
    """What one file says: its host and pid, its rank in each communicator, its operators."""

    source: str
    host: str = ""
    pid: int = -1
    comms: dict[str, tuple[int, int, str | None]] = field(default_factory=dict)  # id → (rank, n_ranks, name)
    ops: list[tuple] = field(default_factory=list)  # (comm id, kind, local peer, nbytes, sn, issue, start, end, line)
    dropped: Counter = field(default_factory=Counter)  # (comm id, "collective" | "P2P") → records lost


def read_inspector(folder: str | Path, *, job: str, workers: int = 1) -> Imported:
    """Every process's log in ``folder`` (and its sub-folders): ``*.log``, ``*.jsonl``, ``*.json``,
    read by ``workers`` processes."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"{folder}: not a folder")
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in _SUFFIXES and not p.name.startswith("."))
    if not files:
        raise ConfigError(f"{folder}: no NCCL Inspector log (*.log files of NCCL_INSPECTOR_DUMP_DIR)")
    processes = map_files(_read_file, files, workers=workers)
    processes = [p for p in processes if p.comms]
    if not processes:
        raise ConfigError(f"{folder}: the logs hold no coll_perf or p2p_perf record")
    notes: list[str] = []
    global_rank = _global_ranks(processes, notes)
    members = _members(processes, global_rank, notes)

    ops: list[SourceOp] = []
    streams: dict[int, Stream] = {}
    for index, process in enumerate(processes):
        rank = global_rank[index]
        mine = sorted((op for op in process.ops if op[0] in members), key=lambda op: (op[5], op[8]))
        for order, (comm, kind, peer, nbytes, sn, issue, start, end, _) in enumerate(mine):
            if peer >= 0:  # the communicator's rank (checked against its size) → the global rank
                peer = members[comm][peer]
            ops.append(SourceOp(rank, comm, kind, peer, nbytes, -1 if kind.is_p2p else sn, order, issue, start, end))
        streams[rank] = Stream(0, tuple((op[1], op[0], op[3], op[2]) for op in mine))
        lost: Counter[str] = Counter()
        for (_, what), n in process.dropped.items():
            lost[what] += n
        if +lost:
            shown = ", ".join(f"{n} {what}" for what, n in sorted(lost.items()) if n)
            notes.append(f"rank {rank}: the Inspector dropped {shown} records (its ring filled between dumps: raise "
                         "NCCL_INSPECTOR_DUMP_COLL_RING_SIZE / _P2P_RING_SIZE or dump more often); "
                         "iterations and P2P pairs after a drop may be off")
    ranks = [SourceRank(global_rank[i], p.host, None, p.source) for i, p in enumerate(processes)]
    comms = [SourceComm(comm, _desc(processes, comm), tuple(group)) for comm, group in members.items()]
    return assemble(job, ranks, comms, ops, streams, notes=notes)


def _read_file(path: Path) -> _Process:
    process = _Process(str(path))
    context: tuple[dict, dict] | None = None
    seen: dict[tuple[str, str, int], int] = {}
    with path.open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                record = json.loads(line)
            except ValueError as error:
                raise ImportFileError(f"{where}: not JSON ({error})") from None
            if not isinstance(record, dict):
                raise ImportFileError(f"{where}: expected a JSON object, got {type(record).__name__}")
            if "header" in record:
                context = (_header(record, where), _metadata(record, where))
                _join(process, context, where)
            if "dump_stats" in record:
                _drops(process, record["dump_stats"], context, where)
            for kind_key in ("coll_perf", "p2p_perf"):
                if kind_key not in record:
                    continue
                if context is None:
                    raise ImportFileError(f"{where}: a {kind_key} record with no header before it")
                op = _operator(record[kind_key], kind_key, context[0], where)
                key = (op[0], kind_key, op[4])
                if key in seen:
                    raise ImportFileError(f"{where}: {kind_key} {kind_key[:-5]}_sn {op[4]} of communicator {op[0]} "
                                          f"appears twice (also line {seen[key]})")
                seen[key] = number
                process.ops.append((*op, number))
    return process


def _header(record: Mapping, where: str) -> dict:
    header = record["header"]
    if not isinstance(header, dict):
        raise ImportFileError(f"{where}: header: expected an object, got {header!r}")
    _need(header, "id", str, f"{where}: header")
    rank = _need(header, "rank", int, f"{where}: header")
    n_ranks = _need(header, "n_ranks", int, f"{where}: header")
    if n_ranks < 1 or not 0 <= rank < n_ranks:
        raise ImportFileError(f"{where}: header.rank: {rank} is not a rank of a communicator of {n_ranks}")
    name = header.get("comm_name")
    if name is not None and not isinstance(name, str):
        raise ImportFileError(f"{where}: header.comm_name: expected a string, got {name!r}")
    return header


def _metadata(record: Mapping, where: str) -> dict:
    metadata = record.get("metadata")
    if not isinstance(metadata, dict):
        raise ImportFileError(f"{where}: metadata: expected an object, got {metadata!r}")
    _need(metadata, "hostname", str, f"{where}: metadata")
    _need(metadata, "pid", int, f"{where}: metadata")
    return metadata


def _join(process: _Process, context: tuple[dict, dict], where: str) -> None:
    header, metadata = context
    if process.host and (process.host, process.pid) != (metadata["hostname"], metadata["pid"]):
        raise ImportFileError(f"{where}: metadata: host {metadata['hostname']} pid {metadata['pid']}, but earlier "
                              f"lines of this file are host {process.host} pid {process.pid}")
    process.host, process.pid = metadata["hostname"], metadata["pid"]
    entry = (header["rank"], header["n_ranks"], header.get("comm_name"))
    known = process.comms.setdefault(header["id"], entry)
    if known[:2] != entry[:2]:
        raise ImportFileError(
            f"{where}: header: communicator {header['id']} is rank {entry[0]} of {entry[1]} here, rank {known[0]} "
            f"of {known[1]} earlier in this file (one process driving several GPUs is not supported)"
        )


def _drops(process: _Process, stats: Any, context: tuple | None, where: str) -> None:
    if not isinstance(stats, dict):
        raise ImportFileError(f"{where}: dump_stats: expected an object, got {stats!r}")
    comm = context[0]["id"] if context else "?"
    for key, what in (("coll_dropped_total", "collective"), ("p2p_dropped_total", "P2P")):
        value = stats.get(key, 0)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ImportFileError(f"{where}: dump_stats.{key}: expected a count, got {value!r}")
        # Totals are cumulative per communicator: the largest seen is the communicator's.
        process.dropped[(comm, what)] = max(process.dropped[(comm, what)], value)


def _operator(perf: Any, kind_key: str, header: Mapping, where: str) -> tuple:
    prefix = kind_key[:-5]  # coll_perf → coll, p2p_perf → p2p
    at = f"{where}: {kind_key}"
    if not isinstance(perf, dict):
        raise ImportFileError(f"{at}: expected an object, got {perf!r}")
    func = _need(perf, prefix, str, at)
    kind = FUNC_KINDS.get(func)
    if kind is None:
        raise ImportFileError(f"{at}.{prefix}: unknown operator {func!r} (known: {', '.join(FUNC_KINDS)})")
    if kind.is_p2p != (prefix == "p2p"):
        raise ImportFileError(f"{at}.{prefix}: {func!r} is not a {'P2P' if prefix == 'p2p' else 'collective'} operator")
    sn = _need(perf, f"{prefix}_sn", int, at)
    nbytes = _need(perf, f"{prefix}_msg_size_bytes", int, at)
    exec_us = _need(perf, f"{prefix}_exec_time_us", int, at)
    peer = -1
    if prefix == "p2p":
        peer = _need(perf, "p2p_peer", int, at)
        if not 0 <= peer < header["n_ranks"]:
            raise ImportFileError(f"{at}.p2p_peer: {peer} is not a rank of communicator {header['id']} "
                                  f"of {header['n_ranks']}")
    trace = perf.get("event_trace_ts")
    if not isinstance(trace, dict):
        raise ImportFileError(
            f"{at}.event_trace_ts: missing: the Inspector ran without NCCL_INSPECTOR_DUMP_VERBOSE=1, which alone "
            "writes when each operator started and ended"
        )
    issue = _need(trace, f"{prefix}_start_ts", int, f"{at}.event_trace_ts")
    starts, stops = [], []
    for where_channel, channel in _channels(perf, trace, at):
        if not isinstance(channel, dict):
            raise ImportFileError(f"{where_channel}: expected an object, got {channel!r}")
        start = _need(channel, "kernel_start_ts", int, where_channel)
        stop = _need(channel, "kernel_stop_ts", int, where_channel)
        if start and stop:  # 0: the callback never came
            starts.append(start)
            stops.append(stop)
    start = min(starts) if starts else issue
    end = max(stops) if stops else start + exec_us
    if end < start:
        raise ImportFileError(f"{at}.event_trace_ts: the kernels end ({end} µs) before they start ({start} µs)")
    return (header["id"], kind, peer, nbytes, sn, issue * 1000, start * 1000, end * 1000)


def _channels(perf: Mapping, trace: Mapping, at: str) -> list[tuple[str, Any]]:
    """Each kernel channel's timestamps with where they stand: in ``event_trace_ts.kernel_events``
    (v4.0, v4.4), or as ``KernelCh`` entries of the record's ``events`` list (v4.1)."""
    if "events" in perf:
        events = perf["events"]
        if not isinstance(events, list):
            raise ImportFileError(f"{at}.events: expected a list, got {events!r}")
        return [(f"{at}.events[{i}].event_trace_ts", e.get("event_trace_ts"))
                for i, e in enumerate(events) if isinstance(e, dict) and e.get("event_type") == "KernelCh"]
    channels = trace.get("kernel_events", [])
    if not isinstance(channels, list):
        raise ImportFileError(f"{at}.event_trace_ts.kernel_events: expected a list, got {channels!r}")
    return [(f"{at}.event_trace_ts.kernel_events[{i}]", c) for i, c in enumerate(channels)]


def _need(entry: Mapping, key: str, kind: type, where: str) -> Any:
    if key not in entry:
        raise ImportFileError(f"{where}.{key}: missing")
    value = entry[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)) or (kind is int and value < 0):  # type: ignore[operator]  # value is an int when kind is int
        expected = {int: "a non-negative integer", str: "a string"}[kind]
        raise ImportFileError(f"{where}.{key}: expected {expected}, got {value!r}")
    return value


def _global_ranks(processes: list[_Process], notes: list[str]) -> list[int]:
    """Each process's global rank: its rank in a communicator spanning every process."""
    everyone = len(processes)
    candidates = [
        comm for comm in processes[0].comms
        if processes[0].comms[comm][1] == everyone and all(comm in p.comms for p in processes)
    ]
    for comm in sorted(candidates):
        ranks = [p.comms[comm][0] for p in processes]
        if sorted(ranks) == list(range(everyone)):
            return ranks
    order = sorted(range(everyone), key=lambda i: (processes[i].host, processes[i].pid))
    notes.append("no communicator spans every process (the world's operators were all below "
                 "NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES?): global ranks assumed in order of host name, then pid")
    ranks = [0] * everyone
    for rank, index in enumerate(order):
        ranks[index] = rank
    return ranks


def _members(processes: list[_Process], global_rank: list[int], notes: list[str]) -> dict[str, list[int]]:
    """Communicator id → global ranks in communicator-rank order; incomplete ones are left out."""
    size: dict[str, int] = {}
    slots: dict[str, dict[int, int]] = defaultdict(dict)
    for index, process in enumerate(processes):
        for comm, (rank, n_ranks, _) in process.comms.items():
            size[comm] = n_ranks
            if rank in slots[comm]:
                other = processes[slots[comm][rank]].source
                raise ImportFileError(f"{process.source}: communicator {comm} rank {rank} is also in {other}")
            slots[comm][rank] = index
    members = {}
    for comm, n_ranks in size.items():
        found = slots[comm]
        if len(found) != n_ranks:
            missing = sorted(set(range(n_ranks)) - set(found))
            notes.append(f"communicator {comm}: no file for its ranks {missing}: its operators are left out")
            continue
        members[comm] = [global_rank[found[r]] for r in range(n_ranks)]
    return members


def _desc(processes: list[_Process], comm: str) -> str | None:
    for process in processes:
        if comm in process.comms:
            name = process.comms[comm][2]
            return None if name is None or name.strip().lower() in _NO_NAME else name
    return None
