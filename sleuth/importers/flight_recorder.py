"""PyTorch Flight Recorder dumps → sleuth records (``sleuth import flight-recorder``).

What the format is (torch/csrc/distributed/c10d/FlightRecorder*.hpp, tools/flight_recorder):
one file per rank, named ``<prefix><global rank>`` (``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``,
default ``/tmp/nccl_trace_rank_``), written on timeout (``TORCH_NCCL_DUMP_ON_TIMEOUT``) or on
demand (``torch._C._distributed_c10d._dump_nccl_trace()``, or its ``_json`` twin). A pickle
(or JSON) dict: ``version``, ``pg_config`` (torch group name → ``name``, ``desc``, ``ranks``: the
global ranks in group-rank order, as the string ``"[0, 1]"``), ``entries``: the last
``TORCH_NCCL_TRACE_BUFFER_SIZE`` operators in ``record_id`` order, each with
``process_group`` (name, desc), ``collective_seq_id`` / ``p2p_seq_id``, ``profiling_name``
(``nccl:all_reduce``, ``nccl:send 0->1`` / ``nccl:recv 1<-0`` in group ranks), ``input_sizes`` /
``input_dtypes`` (``Float``, ``BFloat16``...), ``state`` and three times on the host's
``CLOCK_REALTIME`` in ns: ``time_created_ns`` (enqueued), ``time_discovered_started_ns`` and
``time_discovered_completed_ns`` (when the watchdog thread *noticed*, up to its polling period
late: 100 ms in current torch); ``duration_ms`` (CUDA events) only with
``TORCH_NCCL_ENABLE_TIMING=1``. A coalesced group (``batch_isend_irecv``, coalescing managers)
is its operators' entries followed by an entry named ``nccl:coalesced`` (or ``..._coalesced``)
with the same sequence id, which alone carries the group's times.

How records are made: ``t_issue`` = created. With a duration, the operator is placed at the
earliest start its issue time, the operator before it on its stream and the watchdog's
discovery windows allow (``_place``), and a collective's members then end together at the
earliest end all their windows allow (``_common_ends``); without one, ``t_start``/``t_end`` are
the discovered start (torch has none without timing: its start event is made only then; the
issue time stands in) and completion, late by up to the polling period, which the job spec's
``time_resolution_ns`` then records. Operators not completed at dump time are left out (counted
in the notes). nbytes = Σ numel × element size of
the inputs (of the outputs for a receive). Hosts are not in the dumps: rank r is assumed on
host ``h{r // gpus_per_host}``, GPU ``r % gpus_per_host``.

Pickles are loaded by :mod:`sleuth.importers.safe_pickle`: builtin values only, no code runs.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from sleuth.errors import ConfigError, ImportFileError
from sleuth.importers.assemble import assemble
from sleuth.importers.model import Imported, SourceComm, SourceOp, SourceRank, Stream
from sleuth.importers.parallel import map_files
from sleuth.importers.safe_pickle import load_plain
from sleuth.records import OpKind
from sleuth.topology.ids import host_name
from sleuth.validation import is_int, is_of, non_negative_number, positive_int

__all__ = ["DTYPE_BYTES", "ENDING_TOGETHER", "OP_KINDS", "group_ranks", "read_flight_recorder"]

#: Operator names after the backend prefix (``nccl:``) → kinds; ProcessGroupNCCL's titles.
OP_KINDS: dict[str, OpKind] = {
    **dict.fromkeys(("all_reduce", "allreduce", "all_reduce_coalesced", "allreduce_coalesced"), OpKind.ALL_REDUCE),
    **dict.fromkeys(("all_gather", "allgather", "_all_gather_base", "_allgather_base", "all_gather_base",
                     "all_gather_into_tensor_coalesced", "allgather_into_tensor_coalesced",
                     "all_gather_coalesced", "allgather_coalesced"), OpKind.ALL_GATHER),
    **dict.fromkeys(("reduce_scatter", "_reduce_scatter_base", "reduce_scatter_base",
                     "reduce_scatter_tensor_coalesced", "reduce_scatter_coalesced"), OpKind.REDUCE_SCATTER),
    **dict.fromkeys(("all_to_all", "alltoall", "all_to_all_single", "alltoall_base"), OpKind.ALL_TO_ALL),
    **dict.fromkeys(("broadcast", "_broadcast_oop", "broadcast_coalesced"), OpKind.BROADCAST),
    **dict.fromkeys(("reduce", "_reduce_oop"), OpKind.REDUCE),
    **dict.fromkeys(("barrier", "all_reduce_barrier"), OpKind.BARRIER),
    "gather": OpKind.GATHER,
    "scatter": OpKind.SCATTER,
    "send": OpKind.SEND,
    "recv": OpKind.RECV,
}

#: ``c10::toString(ScalarType)`` names → bytes per element.
DTYPE_BYTES: dict[str, int] = {
    **dict.fromkeys(("Byte", "Char", "Bool", "QInt8", "QUInt8", "Float8_e5m2", "Float8_e4m3fn",
                     "Float8_e5m2fnuz", "Float8_e4m3fnuz", "Float8_e8m0fnu", "Float4_e2m1fn_x2", "UInt8", "Int8"), 1),
    **dict.fromkeys(("Short", "Half", "BFloat16", "UInt16", "Int16", "ComplexHalf"), 2),
    **dict.fromkeys(("Int", "Float", "QInt32", "UInt32", "Int32"), 4),
    **dict.fromkeys(("Long", "Double", "ComplexFloat", "UInt64", "Int64"), 8),
    "ComplexDouble": 16,
}

#: Collectives whose members' kernels finish together: each member ends once it holds every
#: member's part (a broadcast's or a reduce's root, and P2P operators, end apart).
ENDING_TOGETHER = frozenset({OpKind.ALL_REDUCE, OpKind.ALL_GATHER, OpKind.REDUCE_SCATTER, OpKind.ALL_TO_ALL,
                             OpKind.BARRIER})

#: ProcessGroupNCCL's kWatchdogThreadSleepMillis: the watchdog notices a completion this late at most.
WATCHDOG_POLL_MS = 100

_RANK_IN_NAME = re.compile(r"(\d+)(?:\.json)?$")
_SEND = re.compile(r"^(\d+)->(\d+)$")
_RECV = re.compile(r"^(\d+)<-(\d+)$")


def read_flight_recorder(
    folder: str | Path, *, job: str, gpus_per_host: int = 8, watchdog_poll_ms: float = WATCHDOG_POLL_MS,
    workers: int = 1,
) -> Imported:
    """Every rank's dump in ``folder`` (one file per rank, its rank at the end of its name), read
    by ``workers`` processes. ``watchdog_poll_ms``: how late discovery times may be (``_place``)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"{folder}: not a folder")
    positive_int("--gpus-per-host", gpus_per_host)
    non_negative_number("--watchdog-poll-ms", watchdog_poll_ms)
    notes: list[str] = []
    tasks: dict[int, tuple[int, str, int]] = {}
    for path in sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")):
        found = _RANK_IN_NAME.search(path.name)
        if found is None:
            notes.append(f"{path.name}: no rank at the end of its name, not read")
            continue
        rank = int(found.group(1))
        if rank in tasks:
            raise ImportFileError(f"{path}: rank {rank} again (also {tasks[rank][1]})")
        tasks[rank] = (rank, str(path), round(watchdog_poll_ms * 1_000_000))
    if not tasks:
        raise ConfigError(f"{folder}: no Flight Recorder dump (files named <prefix><rank>)")

    comms: dict[str, SourceComm] = {}
    ops: list[SourceOp] = []
    windows: list[Window | None] = []
    streams: dict[int, Stream] = {}
    timed = False
    sources = {}
    for rank, dump in zip(sorted(tasks), map_files(_read_dump, [tasks[r] for r in sorted(tasks)], workers=workers)):
        source, groups, mine, their_windows, stream, their_notes, has_duration = dump
        for comm in groups.values():
            known = comms.setdefault(comm.key, comm)
            if known.ranks != comm.ranks:
                raise ImportFileError(
                    f"{source}: pg_config[{comm.key!r}].ranks is {list(comm.ranks)}, another rank's file says {list(known.ranks)}"
                )
        ops.extend(mine)
        windows.extend(their_windows)
        streams[rank] = stream
        notes.extend(their_notes)
        timed |= has_duration
        sources[rank] = source
    if not timed:
        notes.append(f"no entry has duration_ms (TORCH_NCCL_ENABLE_TIMING=1 was not set): end times are the "
                     f"watchdog's discovery times, late by up to its polling period ({watchdog_poll_ms:g} ms), "
                     "and no delay under it is read as a straggler's")
    notes.append(f"hosts are not in Flight Recorder dumps: assumed {gpus_per_host} ranks per host (--gpus-per-host)")
    ranks = [SourceRank(r, host_name(r // gpus_per_host), r % gpus_per_host, sources[r]) for r in sorted(sources)]
    ops = _common_ends(ops, windows)
    used = {op.comm for op in ops}
    return assemble(job, ranks, [c for c in comms.values() if c.key in used], ops, streams, notes=notes,
                    time_resolution_ns=0 if timed else round(watchdog_poll_ms * 1_000_000))


def _read_dump(task: tuple[int, str, int]
               ) -> tuple[str, dict[str, SourceComm], list[SourceOp], list[Window | None], Stream, list[str], bool]:
    """One rank's dump: its groups, operators and their end windows, stream, notes, and whether it has durations."""
    rank, source, poll_ns = task
    dump = _load(Path(source))
    groups = _pg_config(dump, source)
    notes: list[str] = []
    ops, windows, stream = _entries(dump, source, rank, groups, notes, poll_ns)
    timed = any(isinstance(e, dict) and "duration_ms" in e for e in _list(dump, "entries", source))
    return source, groups, ops, windows, stream, notes, timed


def _load(path: Path) -> dict:
    data = path.read_bytes()
    if data.lstrip()[:1] == b"{":  # the JSON dump (_dump_nccl_trace_json)
        try:
            dump = json.loads(data)
        except ValueError as error:
            raise ImportFileError(f"{path}: not JSON ({error})") from None
    else:
        dump = load_plain(data, str(path))
    if not isinstance(dump, dict):
        raise ImportFileError(f"{path}: the dump is a {type(dump).__name__}, not a dict")
    for key in ("version", "pg_config"):
        if key not in dump:
            raise ImportFileError(f"{path}: field {key!r} is missing: not a Flight Recorder dump")
    return dump


def _list(dump: Mapping, key: str, source: str) -> list:
    value = dump.get(key, [])  # an empty buffer is dumped without "entries"
    if not isinstance(value, list):
        raise ImportFileError(f"{source}: field {key!r} must be a list, got {type(value).__name__}")
    return value


def _pg_config(dump: Mapping, source: str) -> dict[str, SourceComm]:
    config = dump["pg_config"]
    if not isinstance(config, dict):
        raise ImportFileError(f"{source}: field 'pg_config' must be a dict, got {type(config).__name__}")
    groups = {}
    for name, info in config.items():
        where = f"{source}: pg_config[{name!r}]"
        if not isinstance(info, dict):
            raise ImportFileError(f"{where}: must be a dict, got {type(info).__name__}")
        ranks = group_ranks(info.get("ranks"), f"{where}.ranks")
        desc = info.get("desc")
        groups[str(name)] = SourceComm(str(name), desc if isinstance(desc, str) else None, ranks)
    return groups


def group_ranks(raw: Any, where: str) -> tuple[int, ...]:
    """A process group's global ranks in group-rank order, from a list or torch's ``ranks_str``
    (``"[0, 1]"``); an error naming ``where`` otherwise."""
    try:
        ranks = tuple(int(r) for r in (json.loads(raw) if isinstance(raw, str) else raw))
    except (TypeError, ValueError):  # a missing list is the TypeError
        raise ImportFileError(f"{where}: not a list of ranks: {raw!r}") from None
    if not ranks or len(set(ranks)) != len(ranks) or min(ranks) < 0:
        raise ImportFileError(f"{where}: not a list of distinct ranks: {raw!r}")
    return ranks


def _entries(
    dump: Mapping, source: str, rank: int, groups: Mapping[str, SourceComm], notes: list[str], poll_ns: int
) -> tuple[list[SourceOp], list[Window | None], Stream]:
    entries = _list(dump, "entries", source)
    _refuse_gloo(entries, source)
    parsed = [_entry(entry, f"{source}: entries[{i}]", rank, groups) for i, entry in enumerate(entries)]
    parsed.sort(key=lambda e: e["record_id"])
    ids = [e["record_id"] for e in parsed]
    if ids and ids != list(range(ids[0], ids[0] + len(ids))):
        notes.append(f"rank {rank}: record ids are not consecutive; its iterations may be off")
    if ids and ids[0] > 0:
        notes.append(f"rank {rank}: the buffer had wrapped (first record_id {ids[0]}): the operators before are "
                     "lost, and its P2P operators are paired with their peers' by when they ended; set "
                     "TORCH_NCCL_TRACE_BUFFER_SIZE above the operators the analysis should see")
    # Entries of one group and sequence id: one operator, or a coalesced group closed by its end entry.
    by_key: dict[tuple, list[dict]] = defaultdict(list)
    for e in parsed:
        by_key[(e["pg"], e["is_p2p"], e["seq_id"])].append(e)
    timed_ops: list[tuple[dict, dict, int]] = []
    left_out: Counter[str] = Counter()
    for members in by_key.values():
        end = members[-1] if len(members) > 1 and members[-1]["coalesced_end"] else None
        if end is not None:
            members = members[:-1]
        for position, e in enumerate(members):
            if e["kind"] is None:
                left_out[f"{e['name']} (no coalesced members in the buffer)" if e["coalesced_end"] else e["name"]] += 1
                continue
            timed = e if e["completed"] is not None else end
            if timed is None or timed["completed"] is None:
                left_out[f"not completed ({e['state']})"] += 1
                continue
            timed_ops.append((e, timed, position))
    ops, windows = _place(rank, timed_ops, poll_ns)
    if left_out:
        shown = ", ".join(f"{n} {what}" for what, n in sorted(left_out.items()))
        notes.append(f"rank {rank}: left out {shown}")
    signatures = tuple((e["name"], e["pg"], e["sizes"]) for e in parsed)
    return ops, windows, Stream(ids[0] if ids else 0, signatures)


def _refuse_gloo(entries: list, source: str) -> None:
    """A gloo job's dump, refused by name: torch's Flight Recorder keeps no time but the issue for a
    gloo operator (no watchdog discovers it: every entry stays ``scheduled``), and files its groups'
    members under an empty name (torch 2.15), so there is nothing to place an operator by."""
    names = [e.get("profiling_name") for e in entries if isinstance(e, dict)]
    if names and all(isinstance(n, str) and n.startswith("gloo:") for n in names):
        raise ImportFileError(
            f"{source}: a gloo job's dump: torch's Flight Recorder records no start or completion time for gloo "
            "operators, nor its groups' members; log the job with sleuth's logger (SLEUTH_LOG_DIR or "
            "SLEUTH_COLLECTOR set) or import its profiler traces (sleuth import torch-profiler)")


def _place(rank: int, timed_ops: list[tuple[dict, dict, int]],
           poll_ns: int) -> tuple[list[SourceOp], list[Window | None]]:
    """Each operator's device start and end from what the dump knows of it, and where a timed
    collective's end may lie (``_common_ends`` then ends its members together).

    With a CUDA-event duration D: the operator ran [S, S + D] where S is at least its issue time
    and the end of the operator before it on the same stream (a group's collectives share one
    NCCL stream; P2P operators are chained per peer only, the loosest assumption), S + D lies
    within the watchdog's polling period before the completion it discovered, and S within one
    before the start it discovered (``FlightRecorder::update_state`` queries both events on the
    same watchdog pass). S is the earliest start these allow: exact when the device keeps up with
    the host, else pulled up to the discovery windows. Without a duration: discovered start and
    completion as they are.
    """
    ops: list[SourceOp] = []
    windows: list[Window | None] = []
    chain_end: dict[tuple, int] = {}
    placed: dict[int, tuple[int, int, Window | None]] = {}  # a coalesced group's end entry → its one placement
    for e, timed, position in sorted(timed_ops, key=lambda item: item[0]["record_id"]):
        created, completed, duration = e["created"], timed["completed"], timed["duration_ns"]
        window = None
        if id(timed) in placed:
            t_start, t_end, window = placed[id(timed)]
        elif duration is not None:
            chain = (e["pg"], e["peer"]) if e["is_p2p"] else (e["pg"],)
            earliest = max(created, chain_end.get(chain, created))
            latest = completed - duration
            started = timed["started"]
            if started is not None and started <= completed:
                # The watchdog saw the start event on the same ticks: the start lies within a period before.
                earliest, latest = max(earliest, started - poll_ns), min(latest, started)
            low = max(earliest, latest - poll_ns)
            t_start = max(created, min(low, latest))
            t_end = t_start + duration
            chain_end[chain] = t_end
            window = (Window(low + duration, latest + duration, duration, e["kind"] in ENDING_TOGETHER, e["seq_id"])
                      if low <= latest and not e["is_p2p"] else None)
        else:
            t_start, t_end = max(created, timed["started"] or created), completed
        placed[id(timed)] = (t_start, t_end, window)
        ops.append(SourceOp(rank, e["pg"], e["kind"], e["peer"], e["nbytes"],
                            -1 if e["is_p2p"] else (e["seq_id"], position), e["record_id"], created, t_start, t_end))
        windows.append(window)
    return ops, windows


class Window(NamedTuple):
    """Where a timed collective's end may lie on its rank (the discovery windows, its issue time and
    its stream allow), its duration, whether its members end together (``ENDING_TOGETHER``), and
    its sequence id (a coalesced group's collectives share one, and run at once)."""

    low: int
    high: int
    duration: int
    together: bool
    seq_id: int


def _common_ends(ops: list[SourceOp], windows: list[Window | None]) -> list[SourceOp]:
    """``ops`` with each timed collective's members ending together (``Window.together``) at the
    earliest end every member's window and stream allow: their windows, each a watchdog period
    wide, narrow one another, and a member's start is that end less its own duration (the last to
    launch waited least), which leaves each member's wait and the transfer as the durations say.
    A communicator's collectives go in order on each member's one NCCL stream (a coalesced group's
    at once), so each starts no earlier than the member's one before it ended; where the windows
    do not meet, each member is placed as before, after the one before it."""
    instances: dict[str, dict[int, dict[Hashable, list[tuple[int, Window]]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    for k, (op, window) in enumerate(zip(ops, windows)):
        if window is not None:
            instances[op.comm][window.seq_id][op.seq].append((k, window))
    out = list(ops)
    for by_seq_id in instances.values():
        stream_end: dict[int, int] = {}  # per member, the end of its communicator's collective before
        for seq_id in sorted(by_seq_id):
            ended: dict[int, int] = {}
            for members in by_seq_id[seq_id].values():
                lows = [max(window.low, stream_end.get(ops[k].rank, window.low - window.duration) + window.duration)
                        for k, window in members]
                end = max(lows)
                together = len(members) > 1 and all(window.together for _, window in members)
                if together and end <= min(window.high for _, window in members):
                    ends = [end] * len(members)
                else:
                    ends = [max(ops[k].t_end_ns, low) for (k, _), low in zip(members, lows)]
                for (k, window), at in zip(members, ends):
                    out[k] = ops[k]._replace(t_start_ns=at - window.duration, t_end_ns=at)
                    ended[ops[k].rank] = max(ended.get(ops[k].rank, at), at)
            stream_end.update(ended)
    return out


def _entry(entry: Any, where: str, rank: int, groups: Mapping[str, SourceComm]) -> dict:
    if not isinstance(entry, dict):
        raise ImportFileError(f"{where}: must be a dict, got {type(entry).__name__}")

    def need(key: str, types: type | tuple, *, optional: bool = False) -> Any:
        if key not in entry:
            if optional:
                return None
            raise ImportFileError(f"{where}.{key}: missing")
        value = entry[key]
        if value is None and optional:
            return None
        if not is_of(value, types):
            raise ImportFileError(f"{where}.{key}: expected {_names(types)}, got {value!r}")
        return value

    pg = need("process_group", (list, tuple))
    if len(pg) != 2 or not all(isinstance(v, str) for v in pg):
        raise ImportFileError(f"{where}.process_group: expected (name, desc), got {pg!r}")
    if pg[0] not in groups:
        raise ImportFileError(f"{where}.process_group: group {pg[0]!r} is not in pg_config")
    title = need("profiling_name", str)
    backend, _, name = title.partition(":")
    if not name:
        raise ImportFileError(f"{where}.profiling_name: expected '<backend>:<op>', got {title!r}")
    op, _, meta = name.partition(" ")
    is_p2p = need("is_p2p", bool, optional=True)
    if is_p2p is None:  # dumps before version 2.3 say it only in the name
        is_p2p = op in ("send", "recv")
    state = need("state", str)
    # The JSON dump writes 0 for "not discovered", the pickle None.
    started = need("time_discovered_started_ns", int, optional=True) or None
    completed = need("time_discovered_completed_ns", int, optional=True) or None
    duration = need("duration_ms", (int, float), optional=True)
    if duration is not None and not (math.isfinite(duration) and duration >= 0):
        raise ImportFileError(f"{where}.duration_ms: expected a duration >= 0, got {duration!r}")
    kind = OP_KINDS.get(op)
    peer = -1
    if kind in (OpKind.SEND, OpKind.RECV):
        peer = _peer(kind, meta, where, rank, groups[pg[0]])
    sizes, nbytes = _payload(entry, where, kind)
    seq_key = "p2p_seq_id" if is_p2p else "collective_seq_id"
    return {
        "record_id": need("record_id", int),
        "pg": pg[0],
        "is_p2p": is_p2p,
        "seq_id": need(seq_key, int),
        "name": title,
        "kind": kind,
        "coalesced_end": op == "coalesced" or op.endswith("_coalesced"),
        "peer": peer,
        "nbytes": nbytes,
        "sizes": sizes,
        "state": state,
        "created": need("time_created_ns", int),
        "started": started,
        "completed": completed if state == "completed" else None,
        "duration_ns": None if duration is None else round(duration * 1e6),
    }


def _peer(kind: OpKind, meta: str, where: str, rank: int, group: SourceComm) -> int:
    pattern = _SEND if kind is OpKind.SEND else _RECV
    found = pattern.match(meta)
    if found is None:
        shape = "send <me>-><peer>" if kind is OpKind.SEND else "recv <me><-<peer>"
        raise ImportFileError(f"{where}.profiling_name: expected '{shape}' in group ranks, got {meta!r}")
    me, other = int(found.group(1)), int(found.group(2))
    for local in (me, other):
        if local >= len(group.ranks):
            raise ImportFileError(f"{where}.profiling_name: group rank {local} is outside group {group.key!r} "
                                  f"of {len(group.ranks)} ranks")
    if group.ranks[me] != rank:
        raise ImportFileError(f"{where}.profiling_name: group rank {me} of {group.key!r} is global rank "
                              f"{group.ranks[me]}, not this file's rank {rank}")
    return group.ranks[other]


def _payload(entry: dict, where: str, kind: OpKind | None) -> tuple[tuple, int]:
    """The sizes (for the period's signature) and the bytes an operator moves."""
    side = "output" if kind is OpKind.RECV else "input"
    total = 0
    shapes = []
    for prefix in (side, "output" if side == "input" else "input"):
        sizes, dtypes = entry.get(f"{prefix}_sizes", []), entry.get(f"{prefix}_dtypes", [])
        if not isinstance(sizes, list) or not all(
            isinstance(s, list) and all(is_int(d) and d >= 0 for d in s)
            for s in sizes
        ):
            raise ImportFileError(f"{where}.{prefix}_sizes: expected lists of dimensions, got {sizes!r}")
        if not isinstance(dtypes, list) or len(dtypes) != len(sizes):
            raise ImportFileError(f"{where}.{prefix}_dtypes: expected one dtype per tensor of {prefix}_sizes, got {dtypes!r}")
        shapes.append(tuple(tuple(s) for s in sizes))
        if total == 0 and sizes:
            for dims, dtype in zip(sizes, dtypes):
                if dtype not in DTYPE_BYTES:
                    raise ImportFileError(f"{where}.{prefix}_dtypes: unknown dtype {dtype!r}")
                total += math.prod(dims) * DTYPE_BYTES[dtype]
    return tuple(shapes), total


def _names(types: type | tuple) -> str:
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join({list: "a list", tuple: "a tuple", int: "an integer", float: "a number", str: "a string",
                        bool: "a boolean"}.get(t, t.__name__) for t in types)
