"""PyTorch profiler traces → sleuth records (``sleuth import torch-profiler``).

What the format is (Kineto's ``ChromeTraceLogger``, libkineto/src/output_json.cpp, and torch's
profiler): one Chrome-trace JSON file per rank and profiling window, written by
``torch.profiler.profile(...).export_chrome_trace(path)`` or ``tensorboard_trace_handler``
(``<host>_<pid>.<time>.pt.trace.json``, gzipped as ``….json.gz`` when asked). A dict with
``traceEvents`` (the events), ``distributedInfo`` (``rank``, ``world_size``, ``backend``,
``pg_config``: one ``{pg_name, pg_desc, backend_config, pg_size, ranks}`` per process group, the
ranks global and in group-rank order), ``host_name`` (recent torch) and
``baseTimeNanoseconds``. Complete events (``"ph": "X"``) have ``ts`` and ``dur`` in microseconds
with three decimals.

Clocks: ``ts`` counts microseconds from ``baseTimeNanoseconds``, which is the host's
``system_clock`` (``CLOCK_REALTIME``) at the process's first use of Kineto floored to a multiple of
about three months (``std::chrono::floor`` to a quarter year), so that ``ts`` stays within a
double's exact range. The wall-clock time of an event is ``baseTimeNanoseconds + ts × 1000`` ns
(exact to about 1 ns after the float parse). CPU events are torch's approximate clock converted
to that wall clock; GPU events are CUPTI's, which Kineto puts on the same clock. Traces older than
``baseTimeNanoseconds`` wrote absolute epoch microseconds: read as base 0 (with a note).

Which events give which times:

* NCCL (GPU): ProcessGroupNCCL wraps each operator's launch in a ``record_param_comms`` CPU op
  whose args are ``Collective name``, ``In msg nelems`` / ``Out msg nelems``, ``dtype``
  (``c10::toString``: ``Float``), ``Group size``, ``Process Group Name`` / ``Description`` /
  ``Ranks``, ``Rank``, ``Src Rank`` / ``Dst Rank`` (a P2P operator's peer, global) and ``Seq`` (the
  group's operator counter, equal on every member). Kineto copies these args onto the NCCL
  kernel it launched (``cat: "kernel"``, ``ncclDevKernel_*``), whose ``External id`` is the CPU
  op's. ``t_start``/``t_end`` = the kernel's start and end on the device (the operator's real
  run, waiting for the peers included); ``t_issue`` = the ``record_param_comms`` op's start (the
  host enqueueing it; else the launch's ``cuda_runtime`` event by ``correlation``). A kernel
  without the args takes them from its ``record_param_comms`` op. A ``record_param_comms`` op
  with no kernel (no ``ProfilerActivity.CUDA``; a ``batch_isend_irecv`` group, whose one kernel
  ``ncclGroupEnd`` launches outside the ops) has no device time: left out and counted.
  NB: a CPU op's ``Sequence number`` arg is the autograd sequence number, not the group's.
* gloo (CPU): ProcessGroupGloo writes no ``record_param_comms`` (torch 2.15). The caller's
  ``c10d::allreduce_`` etc. CPU op only enqueues the work; the work runs on the group's
  ``pt_gloo_runloop`` thread inside a ``gloo:all_reduce`` event that starts when the thread takes
  it up and ends when it completes (torch#61342: queue time excluded), with the tensors'
  ``Input Dims`` / ``Input type``. ``gloo:send`` / ``gloo:recv`` run on the caller's thread
  from the post to the end of ``wait()``. ``t_start``/``t_end`` = the ``gloo:`` event;
  ``t_issue`` = the start of the matching ``c10d::`` op (the rank's next unmatched one of the
  same kind, gloo's queue being first in, first out), whose ``Concrete Inputs`` (with
  ``record_shapes=True``) give a P2P operator's peer as a group rank. A ``c10d::`` op names no
  process group, so a gloo trace is read only when ``pg_config`` lists one group (refused
  otherwise).

Sequence numbers: ``Seq`` where the trace has it (with the operator's position among those of one
``Seq``, which a coalesced group's collectives share); else a collective's position among its
group's collectives on the rank, counted within its ``ProfilerStep#N`` when every rank's trace
marks steps (so that windows starting at different operators still agree), else from the
trace's first. P2P operators carry -1 and a peer; ``assemble`` numbers them per peer.

Iterations: an operator inside ``ProfilerStep#N`` (by its issue time; the step annotation of
``prof.step()``) is in iteration N; outside every step -1 (counted in a note). A rank whose
trace has no step marks gets its iterations from its stream's period, as the other formats.

Hosts and GPUs: the trace's ``host_name`` when every file has one; else rank r is assumed on
host ``h{r // gpus_per_host}``. The GPU index is the NCCL kernels' ``device``; else the rank's
position among its host's ranks (``gpus_per_host`` order without ``host_name``). Several files
of one rank (``tensorboard_trace_handler`` writes one per window) are merged.
"""

from __future__ import annotations

import bisect
import gzip
import json
import math
import re
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from sleuth.errors import ConfigError, ImportFileError
from sleuth.importers.assemble import assemble
from sleuth.importers.flight_recorder import DTYPE_BYTES, OP_KINDS, group_ranks
from sleuth.importers.model import Imported, SourceComm, SourceOp, SourceRank, Stream
from sleuth.importers.parallel import map_files
from sleuth.records import OpKind
from sleuth.topology.ids import host_name
from sleuth.validation import is_int, is_number, positive_int

__all__ = ["read_torch_profiler"]

#: ``record_param_comms``'s collective names beyond Flight Recorder's titles.
_KINDS: dict[str, OpKind] = {**OP_KINDS, "all_to_allv": OpKind.ALL_TO_ALL}

#: caffe2 ``TypeMeta`` names (a CPU op's ``Input type``) → ``c10::toString`` names.
_TYPE_NAMES: dict[str, str] = {
    "float": "Float", "double": "Double", "c10::Half": "Half", "c10::BFloat16": "BFloat16",
    "long int": "Long", "int": "Int", "short int": "Short", "signed char": "Char", "unsigned char": "Byte",
    "bool": "Bool", "c10::complex<float>": "ComplexFloat", "c10::complex<double>": "ComplexDouble",
    "short unsigned int": "UInt16", "unsigned int": "UInt32",
    "long unsigned int": "UInt64",
}

_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_SUFFIXES = (".json", ".json.gz")


@dataclass
class _Op:
    kind: OpKind
    comm: str
    peer: int
    nbytes: int
    seq: int | None  # the trace's Seq (collectives), else None
    issue: int
    start: int
    end: int


@dataclass
class _Trace:
    """What one file says."""

    source: str
    rank: int
    world: int
    host: str | None
    gpu: int | None
    comms: dict[str, SourceComm]
    ops: list[_Op]
    steps: list[tuple[int, int, int]]  # (start, end, N), sorted
    left_out: Counter = field(default_factory=Counter)
    based: bool = True
    unissued: int = 0  # gloo operators with no c10d op before them: t_issue = t_start


def read_torch_profiler(folder: str | Path, *, job: str, gpus_per_host: int = 8, workers: int = 1) -> Imported:
    """Every trace in ``folder`` and its sub-folders (``*.json``, ``*.json.gz``; one rank each,
    several windows of one rank merged), read by ``workers`` processes."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"{folder}: not a folder")
    positive_int("--gpus-per-host", gpus_per_host)
    files = sorted(str(p) for p in folder.rglob("*")
                   if p.is_file() and p.name.endswith(_SUFFIXES) and not p.name.startswith("."))
    if not files:
        raise ConfigError(f"{folder}: no PyTorch profiler trace (*.json, *.pt.trace.json, *.json.gz)")
    traces = map_files(_read_trace, files, workers=workers)
    notes: list[str] = []
    worlds = {t.world for t in traces}
    if len(worlds) > 1:
        raise ImportFileError(f"the traces disagree on the world size ({sorted(worlds)}): "
                              f"{', '.join(f'{t.source}: {t.world}' for t in traces)}")
    by_rank: dict[int, list[_Trace]] = defaultdict(list)
    comms: dict[str, SourceComm] = {}
    for trace in traces:
        by_rank[trace.rank].append(trace)
        for comm in trace.comms.values():
            known = comms.setdefault(comm.key, comm)
            if known.ranks != comm.ranks:
                raise ImportFileError(f"{trace.source}: process group {comm.key!r} has ranks {list(comm.ranks)}, "
                                      f"another file says {list(known.ranks)}")
    (world,) = worlds
    missing = sorted(set(range(world)) - set(by_rank))
    if missing:
        raise ImportFileError(f"ranks {missing} have no trace in {folder}: give every rank's file (world of {world})")
    if not any(t.ops for t in traces):
        shown = _shown(sum((t.left_out for t in traces), Counter()))
        raise ImportFileError(f"{folder}: the traces hold no communication operator with device or gloo times"
                              + (f" (left out: {shown})" if shown else " (no record_param_comms, NCCL kernel or "
                                 "gloo: event: was the job distributed, and profiled while it communicated?)"))
    stepped = all(t.steps for t in traces)
    if not stepped and any(t.steps for t in traces):
        notes.append("some traces mark no ProfilerStep: collectives without a Seq are matched across ranks by "
                     "their order since each trace's first operator")
    ops: list[SourceOp] = []
    streams: dict[int, Stream] = {}
    ranks: list[SourceRank] = []
    hosts_known = all(t.host for t in traces)
    for rank in sorted(by_rank):
        mine = by_rank[rank]
        if len(mine) > 1:
            notes.append(f"rank {rank}: {len(mine)} trace files merged ({', '.join(Path(t.source).name for t in mine)})")
        left_out = sum((t.left_out for t in mine), Counter())
        if left_out:
            notes.append(f"rank {rank}: left out {_shown(left_out)}")
        unissued = sum(t.unissued for t in mine)
        if unissued:
            notes.append(f"rank {rank}: {unissued} gloo operators have no c10d op issuing them in the trace "
                         "(issued before it began?): their t_issue is their start")
        if not all(t.based for t in mine):
            notes.append(f"rank {rank}: no baseTimeNanoseconds: ts read as microseconds since the epoch")
        steps = sorted(s for t in mine for s in t.steps)
        rank_ops = sorted((op for t in mine for op in t.ops), key=lambda op: (op.issue, op.start))
        ops.extend(_numbered(rank, rank_ops, steps, stepped, notes))
        if not steps:
            streams[rank] = Stream(0, tuple((op.kind, op.comm, op.nbytes) for op in rank_ops))
        gpus = {t.gpu for t in mine if t.gpu is not None}
        gpu = gpus.pop() if len(gpus) == 1 else None
        if hosts_known:
            ranks.append(SourceRank(rank, str(mine[0].host), gpu, mine[0].source))
        else:
            ranks.append(SourceRank(rank, host_name(rank // gpus_per_host), gpu if gpu is not None else rank % gpus_per_host,
                                    mine[0].source))
    if hosts_known:
        notes.append("hosts are the traces' host_name; times are each host's wall clock (hosts' clocks may differ)")
    else:
        notes.append(f"hosts are not in the traces (no host_name): assumed {gpus_per_host} ranks per host "
                     "(--gpus-per-host)")
    used = {op.comm for op in ops}
    return assemble(job, ranks, [c for c in comms.values() if c.key in used], ops, streams, notes=notes)


def _numbered(rank: int, ops: list[_Op], steps: list[tuple[int, int, int]], stepped: bool,
              notes: list[str]) -> list[SourceOp]:
    """The rank's operators with their sequence keys and iterations."""
    starts = [s[0] for s in steps]
    counts: Counter[tuple] = Counter()
    shared: Counter[tuple] = Counter()  # a coalesced group's collectives share one Seq
    outside = 0
    result = []
    for order, op in enumerate(ops):
        iteration = None
        if steps:
            at = bisect.bisect_right(starts, op.issue) - 1
            iteration = steps[at][2] if at >= 0 and op.issue < steps[at][1] else -1
            outside += iteration == -1
        if op.kind.is_p2p:
            seq: Any = -1
        elif op.seq is not None:
            seq = (op.seq, shared[op.comm, op.seq])
            shared[op.comm, op.seq] += 1
        else:
            scope = (op.comm, iteration) if stepped else (op.comm,)
            seq = (*scope[1:], counts[scope])
            counts[scope] += 1
        result.append(SourceOp(rank, op.comm, op.kind, op.peer, op.nbytes, seq, order, op.issue, op.start, op.end,
                               iteration))
    if outside:
        notes.append(f"rank {rank}: {outside} operators issued outside every ProfilerStep have iteration -1")
    return result


def _shown(counts: Counter) -> str:
    return ", ".join(f"{n} {what}" for what, n in sorted(counts.items()))


# -- one file ------------------------------------------------------------------------------------


def _read_trace(source: str) -> _Trace:
    trace = _load(Path(source))
    info = trace.get("distributedInfo")
    if not isinstance(info, dict):
        raise ImportFileError(f"{source}: no distributedInfo: not a trace of a torch.distributed job "
                              "(profile after init_process_group)")
    rank, world = info.get("rank"), info.get("world_size")
    if not is_int(rank) or not is_int(world) or not 0 <= rank < world:
        raise ImportFileError(f"{source}: distributedInfo.rank / world_size: expected 0 <= rank < world_size, "
                              f"got {rank!r} / {world!r}")
    base = trace.get("baseTimeNanoseconds")
    if base is not None and not is_int(base):
        raise ImportFileError(f"{source}: baseTimeNanoseconds: expected an integer, got {base!r}")
    host = trace.get("host_name")
    comms = _pg_config(info, source)
    events = trace["traceEvents"]
    result = _Trace(source, rank, world, host if isinstance(host, str) and host else None, None, comms, [], [],
                    based=base is not None)
    clock = _Clock(source, base or 0)
    complete = []
    for i, event in enumerate(events):
        if not isinstance(event, dict):
            raise ImportFileError(f"{source}: traceEvents[{i}]: must be a dict, got {type(event).__name__}")
        if event.get("ph") == "X" and isinstance(event.get("name"), str):
            complete.append((i, event))
    for i, event in complete:
        found = _STEP.match(event["name"])
        if found and event.get("cat") in ("user_annotation", "cpu_op"):
            start, end = clock.span(i, event)
            result.steps.append((start, end, int(found.group(1))))
    result.steps.sort()
    _nccl(result, complete, clock)
    _gloo(result, complete, clock)
    return result


def _load(path: Path) -> dict:
    try:
        data = path.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
    except (OSError, EOFError) as error:
        raise ImportFileError(f"{path}: cannot be read ({error})") from None
    try:
        trace = json.loads(data)
    except (ValueError, UnicodeDecodeError) as error:
        raise ImportFileError(f"{path}: not JSON ({error})") from None
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise ImportFileError(f"{path}: no traceEvents list: not a PyTorch profiler (Chrome trace) file")
    return trace


def _pg_config(info: dict, source: str) -> dict[str, SourceComm]:
    config = info.get("pg_config", [])
    if isinstance(config, dict):  # some writers key the groups by name
        config = list(config.values())
    if not isinstance(config, list):
        raise ImportFileError(f"{source}: distributedInfo.pg_config: expected a list, got {type(config).__name__}")
    groups = {}
    for i, group in enumerate(config):
        where = f"{source}: distributedInfo.pg_config[{i}]"
        if not isinstance(group, dict) or not isinstance(group.get("pg_name"), str):
            raise ImportFileError(f"{where}: expected a dict with pg_name, got {group!r}")
        ranks = _ranks(group.get("ranks"), f"{where}.ranks")
        if ranks is None:
            raise ImportFileError(f"{where}.ranks: truncated ({group.get('ranks')!r}): the group's members are unknown")
        desc = group.get("pg_desc")
        groups[group["pg_name"]] = SourceComm(group["pg_name"], desc if isinstance(desc, str) and desc else None, ranks)
    return groups


def _ranks(raw: Any, where: str) -> tuple[int, ...] | None:
    """``group_ranks``; None when Kineto truncated the list (``...``)."""
    return None if isinstance(raw, str) and "..." in raw else group_ranks(raw, where)


class _Clock:
    """Event times in wall-clock ns (``base + ts × 1000``), checked."""

    def __init__(self, source: str, base: int) -> None:
        self.source, self.base = source, base

    def span(self, i: int, event: dict) -> tuple[int, int]:
        ts, dur = event.get("ts"), event.get("dur")
        if not (is_number(ts) and is_number(dur) and math.isfinite(cast(float, ts)) and 0 <= cast(float, dur) < math.inf):
            raise ImportFileError(f"{self.source}: traceEvents[{i}] ({event['name']}): expected numbers ts and dur >= 0, "
                                  f"got ts={ts!r} dur={dur!r}")
        start = self.base + round(cast(float, ts) * 1000)
        return start, start + round(cast(float, dur) * 1000)


def _nccl(result: _Trace, complete: list[tuple[int, dict]], clock: _Clock) -> None:
    """Operators from NCCL kernels, with their ``record_param_comms`` ops' args and times."""
    params: dict[Any, tuple[int, dict]] = {}
    launches: dict[Any, tuple[int, dict]] = {}
    kernels = []
    for i, event in complete:
        args = _args(event)
        if event["name"] == "record_param_comms" and event.get("cat") == "cpu_op":
            params[args.get("External id", ("no id", i))] = (i, event)
        elif event.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in args:
            launches[args["correlation"]] = (i, event)
        elif event.get("cat") == "kernel" and ("Collective name" in args or event["name"].startswith("nccl")):
            kernels.append((i, event, args))
    used = set()
    for i, kernel, args in kernels:
        param = params.get(args.get("External id")) if "External id" in args else None
        meta = args if "Collective name" in args else (_args(param[1]) if param else {})
        if "Collective name" not in meta:
            result.left_out["NCCL kernels with no collective args"] += 1
            continue
        if param is not None:
            used.add(args.get("External id"))
        op = _nccl_op(result, i, kernel["name"], meta, clock.span(i, kernel))
        if op is None:
            continue
        issuer = param or launches.get(args.get("correlation"))
        if issuer is not None:
            op.issue = min(op.start, clock.span(*issuer)[0])
        result.ops.append(op)
        if is_int(args.get("device")):
            result.gpu = args["device"]
    unmatched = len(set(params) - used)
    if unmatched:
        result.left_out["record_param_comms ops with no NCCL kernel (profile with ProfilerActivity.CUDA; "
                        "batch_isend_irecv groups launch theirs outside)"] += unmatched


def _nccl_op(result: _Trace, i: int, name: str, meta: dict, span: tuple[int, int]) -> _Op | None:
    where = f"{result.source}: traceEvents[{i}] ({name})"
    collective = meta["Collective name"]
    kind = _KINDS.get(collective) if isinstance(collective, str) else None
    if kind is None:
        result.left_out[f"{collective} (not a sleuth operator kind)"] += 1
        return None
    pg = meta.get("Process Group Name")
    if not isinstance(pg, str) or not pg:
        raise ImportFileError(f"{where}.args['Process Group Name']: missing")
    if pg not in result.comms:
        ranks = _ranks(meta.get("Process Group Ranks"), f"{where}.args['Process Group Ranks']")
        if ranks is None:
            raise ImportFileError(f"{where}: group {pg!r} is not in distributedInfo.pg_config and its "
                                  "'Process Group Ranks' is truncated")
        desc = meta.get("Process Group Description")
        result.comms[pg] = SourceComm(pg, desc if isinstance(desc, str) and desc else None, ranks)
    group = result.comms[pg]
    dtype = meta.get("dtype")
    if dtype not in DTYPE_BYTES:
        raise ImportFileError(f"{where}.args['dtype']: unknown dtype {dtype!r}")
    side = "Out msg nelems" if kind is OpKind.RECV else "In msg nelems"
    nelems = meta.get(side)
    if not is_int(nelems) or nelems < 0:
        raise ImportFileError(f"{where}.args[{side!r}]: expected a count >= 0, got {nelems!r}")
    peer = -1
    if kind.is_p2p:
        peer = _nccl_peer(meta, kind, group, where)
    seq = meta.get("Seq")
    return _Op(kind, pg, peer, nelems * DTYPE_BYTES[dtype], seq if is_int(seq) and not kind.is_p2p else None,
               span[0], span[0], span[1])


def _nccl_peer(meta: dict, kind: OpKind, group: SourceComm, where: str) -> int:
    key = "Dst Rank" if kind is OpKind.SEND else "Src Rank"
    if is_int(meta.get(key)):
        return meta[key]
    local = meta.get("Rank")  # a P2P operator's record_param_comms "rank" is its peer's group rank
    if is_int(local) and 0 <= local < len(group.ranks):
        return group.ranks[local]
    raise ImportFileError(f"{where}.args: a {kind.label} with neither {key!r} nor a 'Rank' in group {group.key!r}")


def _gloo(result: _Trace, complete: list[tuple[int, dict]], clock: _Clock) -> None:
    """Operators from the ``gloo:`` events, issued by the matching ``c10d::`` ops."""
    runs = [(i, e) for i, e in complete if e["name"].startswith("gloo:") and e.get("cat") in ("user_annotation", "cpu_op")]
    if not runs:
        return
    if len(result.comms) != 1:
        raise ImportFileError(f"{result.source}: gloo operators name no process group, and distributedInfo.pg_config "
                              f"lists {len(result.comms)} groups ({', '.join(sorted(result.comms)) or 'none'}): "
                              "only a gloo job with one process group can be read")
    (group,) = result.comms.values()
    queued: dict[OpKind, deque] = defaultdict(deque)
    calls = [(clock.span(i, e)[0], kind, e) for i, e in complete if e["name"].startswith("c10d::") and e.get("cat") == "cpu_op"
             and (kind := _KINDS.get(e["name"][len("c10d::"):].rstrip("_"))) is not None]
    for called, kind, event in sorted(calls, key=lambda call: call[0]):
        queued[kind].append((called, event))
    unmatched = 0
    for i, event in sorted(runs, key=lambda item: clock.span(*item)[0]):
        name = event["name"][len("gloo:"):]
        kind = _KINDS.get(name)
        if kind is None:
            result.left_out[f"gloo:{name} (not a sleuth operator kind)"] += 1
            continue
        start, end = clock.span(i, event)
        waiting = queued[kind]
        issued = waiting.popleft() if waiting and waiting[0][0] <= start else None
        peer = -1
        if kind.is_p2p:
            peer = _gloo_peer(issued[1] if issued else None, group)
            if peer < 0:
                result.left_out[f"gloo:{name} with no peer (its c10d op and Concrete Inputs: record_shapes=True)"] += 1
                continue
        if issued is None:
            unmatched += 1
        nbytes = _gloo_bytes(_args(event), f"{result.source}: traceEvents[{i}] ({event['name']})")
        result.ops.append(_Op(kind, group.key, peer, nbytes, None, issued[0] if issued else start, start, end))
    result.unissued += unmatched


def _gloo_peer(issued: dict | None, group: SourceComm) -> int:
    """A send's or receive's peer (global) from its ``c10d::send`` / ``recv_`` op's concrete inputs
    ``(tensors, process group, peer's group rank, tag)``."""
    if issued is None:
        return -1
    concrete = _args(issued).get("Concrete Inputs")
    if not isinstance(concrete, list) or len(concrete) < 3:
        return -1
    try:
        local = int(concrete[2])
    except (TypeError, ValueError):
        return -1
    return group.ranks[local] if 0 <= local < len(group.ranks) else -1


def _args(event: dict) -> dict:
    args = event.get("args")
    return args if isinstance(args, dict) else {}


def _gloo_bytes(args: dict, where: str) -> int:
    dims, types = args.get("Input Dims", []), args.get("Input type", [])
    if not isinstance(dims, list) or not isinstance(types, list) or len(dims) != len(types):
        raise ImportFileError(f"{where}.args: 'Input Dims' and 'Input type' must be lists of one length, "
                              f"got {dims!r} / {types!r}")
    total = 0
    for shape, name in zip(dims, types):
        if not isinstance(shape, list) or not all(is_int(d) and d >= 0 for d in shape):
            raise ImportFileError(f"{where}.args['Input Dims']: expected lists of dimensions, got {dims!r}")
        dtype = _TYPE_NAMES.get(name, name[len("c10::"):] if isinstance(name, str) and name.startswith("c10::") else name)
        if dtype not in DTYPE_BYTES:
            raise ImportFileError(f"{where}.args['Input type']: unknown tensor type {name!r}")
        total += math.prod(shape) * DTYPE_BYTES[dtype]
    return total
