"""What ``libnccl-profiler-sleuth.so`` wrote (``logger/nccl_profiler/``) as a records folder.

The plugin writes, per process, ``nccl-<host>-<pid>.bin`` (the logger's 64-byte records,
``sleuth.logger.core.RECORD_DTYPE``) and ``nccl-<host>-<pid>.json`` (the sidecar: job, global
rank, host, GPU, the clock pair, the communicators in the order the records' ``comm`` indexes
them). This module turns a folder of them into what ``sleuth localize --records`` reads: one
Parquet file per rank and ``job.json``.

What the conversion decides, and how:

- Global ranks: the sidecar's ``global_rank`` (``SLEUTH_RANK``, ``RANK``, ``OMPI_COMM_WORLD_RANK``,
  ``PMI_RANK`` or ``SLURM_PROCID``); when no process has one, the rank in a communicator that
  every process belongs to.
- Communicators: identified by NCCL's commHash; the members, in communicator-rank order, are the
  processes that saw it; P2P peers (communicator ranks in the plugin's records) become global ranks.
  A communicator's id is its NCCL name when that name is unique, else ``nccl.<hash>``.
- Host times (CLOCK_MONOTONIC) move onto the wall clock with each process's clock pair.
- GPU times (KernelCh ``pTimer``, the GPU's globaltimer in ns) are used as wall-clock times
  (``gpu_clock="wall"``) or shifted by the least offset that puts every GPU start after its host
  issue (``"align"``); ``"auto"`` keeps them when they already are (every start after its issue,
  and the median gap under a second) and aligns otherwise.
- Iterations: NCCL knows no training steps. The reference communicator (the most members, then the
  most collectives) repeats a pattern of collectives each step. The period P whose longest stretch
  of exact repetition covers the most collectives (at least three whole steps; the smaller P on a
  tie) gives step boundaries at the same ``seq`` on every member, in every stretch of that period
  at least three steps long, and every operator of a rank belongs to the last boundary its rank
  issued before it. A rank outside that communicator, or a job whose largest communicator shows no
  pattern (a world group that only ran a barrier), takes its steps from its own largest
  communicator that shows one (of equal sizes, the one with the fewest steps: a group running two
  alike collectives a step shows period 1). ``period`` forces P on the largest communicator.
  Operators outside the stretches (a warm-up whose first step differs, as DDP's does before it
  rebuilds its buckets; a closing barrier; an evaluation between stretches) get iteration -1.
  Steps made only of alike collectives on every group cannot be told apart from the records: pass
  ``period``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sleuth.errors import RecordError
from sleuth.importers.assemble import named
from sleuth.importers.model import SourceComm
from sleuth.jobspec import JobSpec, RankPlacement
from sleuth.layout import CommGroup, ParallelLayout
from sleuth.logger.naming import infer_layout
from sleuth.recordio import write_parquet
from sleuth.records import OpKind, RecordBatch
from sleuth.validation import is_of, positive_int

__all__ = ["FLAGS", "NCCL_RECORD_DTYPE", "Conversion", "ImportResult", "ProcessDump", "convert", "import_folder", "read_dumps"]

#: The plugin's record: the logger's 64-byte layout, with the flags byte of its padding named.
NCCL_RECORD_DTYPE = np.dtype(
    {
        "names": ["t_issue_ns", "t_start_ns", "t_end_ns", "seq", "nbytes", "iteration", "comm", "peer", "op", "flags"],
        "formats": ["<i8", "<i8", "<i8", "<u8", "<u8", "<i8", "<u4", "<i4", "u1", "u1"],
        "offsets": [0, 8, 16, 24, 32, 40, 48, 52, 56, 57],
        "itemsize": 64,
    }
)

#: Bits of the flags byte (``FLAG_*`` in sleuth_nccl_profiler.c).
FLAGS = {"gpu_start": 1, "gpu_end": 2, "host_child": 4, "enqueue": 8, "forced": 16}

_FORMAT = "sleuth-nccl-profiler"
_GPU_CLOCKS = ("auto", "wall", "align")


@dataclass(frozen=True)
class Comm:
    """One communicator as one process saw it."""

    index: int
    hash: str
    name: str
    nranks: int
    rank: int


@dataclass(frozen=True)
class ProcessDump:
    """One process's files: its sidecar's facts and its records."""

    path: Path
    pid: int
    host: str
    job: str | None
    global_rank: int | None
    gpu: int | None
    clock_offset_ns: int  # realtime - monotonic: add to a host time to get wall-clock time
    comms: tuple[Comm, ...]
    records: np.ndarray  # NCCL_RECORD_DTYPE
    counters: Mapping[str, int]
    torn_bytes: int = 0  # a part of a record the records file ended in (left out)


@dataclass(frozen=True)
class ImportResult:
    """What ``import_folder`` wrote and what it decided."""

    spec: JobSpec
    records: RecordBatch
    out: Path
    period: int | None
    gpu_clock: dict[int, str]  # rank -> "wall", "align" or "host" (no GPU times)
    notes: list[str] = field(default_factory=list)


def read_dumps(folder: str | Path, *, read_records: Callable[[Path], bytes] | None = None) -> list[ProcessDump]:
    """Every process's sidecar and records in ``folder``; RecordError naming the file and field.
    ``read_records`` reads a records file whole (default: at once; a follower's appends what grew)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise RecordError(f"{folder}: no such folder")
    sidecars = sorted(folder.glob("nccl-*.json"))
    if not sidecars:
        raise RecordError(f"{folder}: no nccl-*.json files (set SLEUTH_LOG_DIR for libnccl-profiler-sleuth.so)")
    dumps = [_read_dump(path, read_records or _whole) for path in sidecars]
    stray = sorted({p.with_suffix(".json") for p in folder.glob("nccl-*.bin")} - set(sidecars))
    if stray:
        raise RecordError(f"{stray[0].with_suffix('.bin')}: records without their sidecar {stray[0].name}")
    return dumps


def _whole(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


def _read_dump(path: Path, read_records: Callable[[Path], bytes]) -> ProcessDump:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise RecordError(f"{path}: not JSON (line {error.lineno}: {error.msg})") from None
    if not isinstance(data, dict):
        raise RecordError(f"{path}: expected a JSON object")
    if data.get("format") != _FORMAT:
        raise RecordError(f"{path}: field 'format' is {data.get('format')!r}, expected {_FORMAT!r}")
    if data.get("version") != 1:
        raise RecordError(f"{path}: field 'version' is {data.get('version')!r}; this sleuth reads version 1")
    if _get(data, "record_size", int, path) != NCCL_RECORD_DTYPE.itemsize:
        raise RecordError(f"{path}: field 'record_size' is {data['record_size']}, expected {NCCL_RECORD_DTYPE.itemsize}")
    clock = _get(data, "clock", dict, path)
    offset = _get(clock, "realtime_ns", int, path, "clock.") - _get(clock, "monotonic_ns", int, path, "clock.")
    comms = []
    for position, item in enumerate(_get(data, "comms", list, path)):
        where = f"comms[{position}]."
        if not isinstance(item, dict):
            raise RecordError(f"{path}: field 'comms[{position}]' must be an object")
        comm = Comm(
            index=_get(item, "index", int, path, where), hash=_get(item, "hash", str, path, where),
            name=_get(item, "name", str, path, where), nranks=_get(item, "nranks", int, path, where),
            rank=_get(item, "rank", int, path, where),
        )
        if comm.index != position:
            raise RecordError(f"{path}: field '{where}index' is {comm.index}, expected {position}")
        if not 0 <= comm.rank < comm.nranks:
            raise RecordError(f"{path}: field '{where}rank' is {comm.rank}, outside nranks {comm.nranks}")
        comms.append(comm)
    binary = path.with_suffix(".bin")
    raw = read_records(binary)
    # The plugin only appends whole records: a part of one can only be the end a process killed
    # while writing (or a full disk) left, and the whole records before it stand.
    torn = len(raw) % NCCL_RECORD_DTYPE.itemsize
    records = np.frombuffer(raw[: len(raw) - torn], dtype=NCCL_RECORD_DTYPE)
    if len(records) and int(records["comm"].max()) >= len(comms):
        first = int(np.flatnonzero(records["comm"] >= len(comms))[0])
        raise RecordError(f"{binary}: record {first} names communicator {records['comm'][first]}, the sidecar lists {len(comms)}")
    counters = {key: int(data[key]) for key in ("written", "dropped", "unknown_ops", "late_children", "forced") if isinstance(data.get(key), int)}
    return ProcessDump(
        path=path, pid=_get(data, "pid", int, path), host=_get(data, "host", str, path),
        job=_optional(data, "job", str, path), global_rank=_optional(data, "global_rank", int, path),
        gpu=_optional(data, "gpu", int, path), clock_offset_ns=offset, comms=tuple(comms), records=records,
        counters=counters, torn_bytes=torn,
    )


def _get(data: Mapping[str, Any], key: str, kind: type, path: Path, where: str = "") -> Any:
    if key not in data:
        raise RecordError(f"{path}: field '{where}{key}' is missing")
    value = data[key]
    if not is_of(value, kind):
        raise RecordError(f"{path}: field '{where}{key}' must be {kind.__name__}, got {value!r}")
    return value


def _optional(data: Mapping[str, Any], key: str, kind: type, path: Path) -> Any:
    return None if data.get(key) is None else _get(data, key, kind, path)


@dataclass(frozen=True)
class Conversion:
    """The plugin's files as a job: its spec and each rank's records, and what was decided."""

    spec: JobSpec
    batches: dict[int, RecordBatch]  # global rank -> its records
    period: int | None
    clocks: dict[int, tuple[str, int]]  # global rank -> ("wall", "align" or "host", the align shift in ns)
    notes: list[str] = field(default_factory=list)


def import_folder(
    folder: str | Path, out: str | Path, *, job: str | None = None, gpu_clock: str = "auto", period: int | None = None,
) -> ImportResult:
    """Convert the plugin's files in ``folder`` into a records folder ``out`` (made if missing)."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise RecordError(f"--out {out}: exists and is not empty")
    conversion = convert(read_dumps(folder), folder, job=job, gpu_clock=gpu_clock, period=period)
    out.mkdir(parents=True, exist_ok=True)
    for rank, batch in conversion.batches.items():
        if len(batch):
            write_parquet(batch, out / f"rank-{rank:05d}-0000.parquet")
    conversion.spec.write(out)
    return ImportResult(conversion.spec, RecordBatch.concat(list(conversion.batches.values())), out, conversion.period,
                        {rank: clock for rank, (clock, _) in conversion.clocks.items()}, conversion.notes)


def convert(
    dumps: Sequence[ProcessDump], folder: str | Path, *, job: str | None = None, gpu_clock: str = "auto",
    period: int | None = None, clocks: Mapping[int, tuple[str, int]] | None = None,
) -> Conversion:
    """The job ``dumps`` (``read_dumps(folder)``) describe. ``clocks`` keeps a rank's GPU clock as
    decided before (a follower's: times already sent must not move), else ``gpu_clock`` decides it."""
    if gpu_clock not in _GPU_CLOCKS:
        raise RecordError(f"gpu_clock={gpu_clock!r}: expected one of {', '.join(_GPU_CLOCKS)}")
    if period is not None:
        positive_int("period", period, error=RecordError)
    notes: list[str] = []
    ranks = _global_ranks(dumps)
    comm_ids, members = _communicators(dumps, ranks)
    job_id = job or _job(dumps, Path(folder))
    placements = _placements(dumps, ranks)
    spec = JobSpec(
        job_id, len(dumps), _layout(dumps, members, placements), placements,
        tuple(CommGroup(comm_ids[h], _kind(dumps, h), tuple(members[h])) for h in sorted(members, key=comm_ids.get)),  # type: ignore[arg-type]  # every member hash has an id
    )
    boundaries, used_period = _step_boundaries(dumps, ranks, members, period, notes)
    batches, decided = {}, {}
    for dump, rank in zip(dumps, ranks):
        batches[rank], decided[rank] = _convert(dump, rank, job_id, comm_ids, members, gpu_clock, boundaries, notes,
                                                (clocks or {}).get(rank))
        lost, late, forced = (dump.counters.get(key, 0) for key in ("dropped", "late_children", "forced"))
        if dump.torn_bytes:
            notes.append(f"rank {rank}: {dump.path.with_suffix('.bin').name} ends in {dump.torn_bytes} bytes of a "
                         f"{NCCL_RECORD_DTYPE.itemsize}-byte record (a process killed while writing, or a full disk): "
                         "left out, the whole records before them imported")
        if lost:
            notes.append(f"rank {rank}: the plugin lost {lost} records (write errors)")
        if forced:
            notes.append(f"rank {rank}: {forced} operations were written before all their kernel channels reported "
                         "(at finalize, or 4096 operations later): their times may be host times or partial")
        if late:
            notes.append(f"rank {rank}: {late} kernel or proxy events came after their operation was written")
    return Conversion(spec, batches, used_period, decided, notes)


def _global_ranks(dumps: Sequence[ProcessDump]) -> list[int]:
    given = [d.global_rank for d in dumps]
    if all(r is not None for r in given):
        ranks = [int(r) for r in given]  # type: ignore[arg-type]
    elif any(r is not None for r in given):
        missing = next(d for d in dumps if d.global_rank is None)
        raise RecordError(f"{missing.path}: field 'global_rank' is null while other processes have one (set RANK or SLEUTH_RANK)")
    else:
        spanning = [h for h in {c.hash for c in dumps[0].comms} if all(
            any(c.hash == h and c.nranks == len(dumps) for c in d.comms) for d in dumps)]
        if not spanning:
            raise RecordError(
                f"{dumps[0].path.parent}: no process names its global rank and no communicator spans all "
                f"{len(dumps)} processes (set RANK or SLEUTH_RANK for the job)"
            )
        ranks = [next(c.rank for c in d.comms if c.hash == min(spanning)) for d in dumps]
    if sorted(ranks) != list(range(len(dumps))):
        seen: dict[int, Path] = {}
        for dump, rank in zip(dumps, ranks):
            if rank in seen:
                raise RecordError(f"{dump.path}: global rank {rank} is also {seen[rank].name}'s")
            seen[rank] = dump.path
        raise RecordError(f"{dumps[0].path.parent}: global ranks {sorted(ranks)} are not 0..{len(dumps) - 1} (a process's files are missing)")
    return ranks


def _communicators(dumps: Sequence[ProcessDump], ranks: Sequence[int]) -> tuple[dict[str, str], dict[str, list[int]]]:
    """commHash -> id, and commHash -> global ranks in communicator-rank order."""
    slots: dict[str, list[int | None]] = {}
    names: dict[str, set[str]] = {}
    for dump, rank in zip(dumps, ranks):
        for comm in dump.comms:
            members = slots.setdefault(comm.hash, [None] * comm.nranks)
            if len(members) != comm.nranks:
                raise RecordError(f"{dump.path}: communicator {comm.hash} has {comm.nranks} ranks here, {len(members)} elsewhere")
            if members[comm.rank] is not None and members[comm.rank] != rank:
                raise RecordError(f"{dump.path}: communicator {comm.hash} rank {comm.rank} is global rank {rank} here, {members[comm.rank]} elsewhere")
            members[comm.rank] = rank
            names.setdefault(comm.hash, set()).add(comm.name)
    complete: dict[str, list[int]] = {}
    for h, members in slots.items():
        missing = [i for i, r in enumerate(members) if r is None]
        if missing:
            raise RecordError(f"communicator {h}: no process files for its ranks {missing[:8]} (every rank's files are needed)")
        complete[h] = [int(r) for r in members if r is not None]
    by_name: dict[str, list[str]] = {}
    for h, found in names.items():
        if len(found) == 1 and next(iter(found)):
            by_name.setdefault(next(iter(found)), []).append(h)
    ids = {h: f"nccl.{h}" for h in complete}
    for name, hashes in by_name.items():
        if len(hashes) == 1:
            ids[hashes[0]] = name
    return ids, complete


def _layout(dumps: Sequence[ProcessDump], members: Mapping[str, list[int]],
            placements: Sequence[RankPlacement]) -> ParallelLayout | None:
    """The parallel layout the communicators' member sets imply, as for a logged job (a DDP
    job's one world communicator: data parallel over the world)."""
    comms = [SourceComm(h, _kind(dumps, h), tuple(ranks)) for h, ranks in members.items()]
    chosen = named(comms, len(dumps))
    kinds = [(chosen[comm.key][1], comm.ranks) for comm in comms]
    per_host = Counter(p.host for p in placements)
    return infer_layout(kinds, len(dumps), max(per_host.values()))


def _kind(dumps: Sequence[ProcessDump], comm_hash: str) -> str:
    return next((c.name for d in dumps for c in d.comms if c.hash == comm_hash and c.name), "nccl")


def _job(dumps: Sequence[ProcessDump], folder: Path) -> str:
    jobs = {d.job for d in dumps if d.job}
    if len(jobs) > 1:
        raise RecordError(f"{folder}: the processes name different jobs {sorted(jobs)}; pass --job")
    return jobs.pop() if jobs else folder.resolve().name


def _placements(dumps: Sequence[ProcessDump], ranks: Sequence[int]) -> tuple[RankPlacement, ...]:
    placements = []
    by_host: dict[str, list[int]] = {}
    for dump, rank in sorted(zip(dumps, ranks), key=lambda pair: pair[1]):
        by_host.setdefault(dump.host, []).append(rank)
    for dump, rank in zip(dumps, ranks):
        gpu = dump.gpu if dump.gpu is not None else by_host[dump.host].index(rank)
        placements.append(RankPlacement(rank, dump.host, gpu))
    return tuple(placements)


@dataclass(frozen=True)
class _Steps:
    """Where the steps are on one communicator: each step's first collective (``starts``), and the
    first collective after each stretch of steps (``stops``), all as its ``seq``."""

    period: int
    starts: np.ndarray
    stops: np.ndarray


#: The longest step searched for, in collectives: no training step issues more on one communicator.
MAX_PERIOD = 4096
#: A stretch counts as steps once it repeats this often: twice could be chance, three times is a pattern.
MIN_STEPS = 3


def _step_boundaries(
    dumps: Sequence[ProcessDump], ranks: Sequence[int], members: Mapping[str, list[int]], period: int | None,
    notes: list[str],
) -> tuple[dict[str, _Steps], int | None]:
    """The steps of each communicator that shows them, the preferred first (the most members, then
    the fewest steps), and the period of the first; a forced ``period`` is the largest group's."""
    p2p = (int(OpKind.SEND), int(OpKind.RECV), int(OpKind.UNKNOWN))
    colls: dict[str, np.ndarray] = {}
    for dump in dumps:
        for comm in dump.comms:
            mine = dump.records[(dump.records["comm"] == comm.index) & ~np.isin(dump.records["op"], p2p)]
            if comm.hash not in colls or len(mine) > len(colls[comm.hash]):
                colls[comm.hash] = np.sort(mine, order="seq")
    if not colls:
        notes.append("no collectives: iterations unknown (-1)")
        return {}, None
    preferred = sorted(colls, key=lambda h: (len(members[h]), len(colls[h]), h), reverse=True)
    shown: dict[str, _Steps] = {}
    for key in preferred[:1] if period else preferred:
        steps = _steps_of(colls[key], period)
        if steps is not None:
            shown[key] = steps
    # Among groups of one size, the fewest steps: a group that runs k alike collectives a step
    # (two equal gradients over dp) shows a period of one and k times the steps.
    found = dict(sorted(shown.items(), key=lambda item: (-len(members[item[0]]), len(item[1].starts))))
    top, n = preferred[0], len(colls[preferred[0]])
    if not found:
        notes.append(
            f"communicator {top}: its {n} collectives repeat no pattern three times"
            + (f" with period {period}" if period else "") + ": iterations unknown (-1); pass --period"
        )
        return {}, None
    if top not in found:
        # A world group that only ran a barrier: a tensor- or data-parallel group shows the steps.
        notes.append(f"communicator {top}: its {n} collectives repeat no pattern; steps from each rank's "
                     "largest communicator that shows one")
    return found, next(iter(found.values())).period


def _steps_of(colls: np.ndarray, period: int | None) -> _Steps | None:
    """The steps of one communicator's collectives (in seq order), None when they show no pattern."""
    signatures = colls["op"].astype(np.int64) << 48 | colls["nbytes"].astype(np.int64)
    seqs = colls["seq"].astype(np.uint64)
    n = len(signatures)
    candidates = [period] if period else range(1, min(n // MIN_STEPS, MAX_PERIOD) + 1)
    best: tuple[int, int] | None = None  # (whole steps' collectives in the longest stretch, period)
    for p in candidates:
        longest = max((length for _, length in _stretches(signatures, p)), default=0)
        covered = (longest + p) // p * p if longest else 0
        if covered >= MIN_STEPS * p and (best is None or covered > best[0]):
            best = (covered, p)
        if best is not None and best[0] >= 0.9 * n:  # a larger period cannot cover much more
            break
    if best is None:
        return None
    p = best[1]
    starts, stops = [], []
    for first, length in _stretches(signatures, p):
        steps = (length + p) // p
        if steps >= MIN_STEPS:
            starts.extend(seqs[first:first + steps * p:p].tolist())
            after = first + steps * p
            if after < n:
                stops.append(int(seqs[after]))
    return _Steps(p, np.asarray(starts, dtype=np.uint64), np.asarray(stops, dtype=np.uint64))


def _stretches(signatures: np.ndarray, p: int) -> list[tuple[int, int]]:
    """(first index, length) of each run where every collective equals the one ``p`` later."""
    if p >= len(signatures):
        return []
    same = np.concatenate(([False], signatures[:-p] == signatures[p:], [False])).astype(np.int8)
    edges = np.diff(same)
    firsts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return list(zip(firsts.tolist(), (ends - firsts).tolist()))


def _convert(
    dump: ProcessDump, rank: int, job: str, comm_ids: Mapping[str, str], members: Mapping[str, list[int]],
    gpu_clock: str, boundaries: Mapping[str, _Steps], notes: list[str], decided: tuple[str, int] | None = None,
) -> tuple[RecordBatch, tuple[str, int]]:
    rec = dump.records
    unknown = rec["op"] == OpKind.UNKNOWN
    if unknown.any():
        notes.append(f"rank {rank}: {int(unknown.sum())} operations of a kind sleuth does not know were left out")
    rec = rec[~unknown]
    hashes = [c.hash for c in dump.comms]
    wall_issue = rec["t_issue_ns"] + dump.clock_offset_ns
    gpu = (rec["flags"] & (FLAGS["gpu_start"] | FLAGS["gpu_end"])) == (FLAGS["gpu_start"] | FLAGS["gpu_end"])
    start = np.where(gpu, rec["t_start_ns"], rec["t_start_ns"] + dump.clock_offset_ns)
    end = np.where(gpu, rec["t_end_ns"], rec["t_end_ns"] + dump.clock_offset_ns)
    clock, shift = decided if decided is not None and decided[0] != "host" else ("host", 0)
    if gpu.any() and clock == "host":
        gap = rec["t_start_ns"][gpu] - wall_issue[gpu]
        consistent = bool((gap >= 0).all() and np.median(gap) < 1_000_000_000)
        clock = "wall" if gpu_clock == "wall" or (gpu_clock == "auto" and consistent) else "align"
        if clock == "align":
            shift = int(-gap.min())  # the least shift that puts every GPU start at or after its issue
    if clock == "align":
        start = np.where(gpu, start + shift, start)
        end = np.where(gpu, end + shift, end)
    peer = rec["peer"].astype(np.int64)
    p2p = np.isin(rec["op"], (int(OpKind.SEND), int(OpKind.RECV)))
    for index, comm in enumerate(dump.comms):
        mine = p2p & (rec["comm"] == index)
        if mine.any():
            bad = mine & ((peer < 0) | (peer >= comm.nranks))
            if bad.any():
                raise RecordError(f"{dump.path.with_suffix('.bin')}: a P2P record names peer {peer[bad][0]} of a {comm.nranks}-rank communicator")
            peer[mine] = np.asarray(members[comm.hash])[peer[mine]]
    iteration = np.full(len(rec), -1, dtype=np.int64)
    ref = next((comm for comm in boundaries if comm in hashes), None)  # the preferred one this rank is in
    if ref is not None:
        steps_on_ref = boundaries[ref]
        on_ref = rec[(rec["comm"] == hashes.index(ref)) & ~p2p]
        issue_of = dict(zip(on_ref["seq"].tolist(), on_ref["t_issue_ns"].tolist()))
        step_of = {seq: step for step, seq in enumerate(steps_on_ref.starts.tolist())}
        # Each mark opens a step, or (-1) a stretch outside the steps; marks in issue order.
        marks = sorted([(issue_of[q], step_of[q]) for q in step_of if q in issue_of]
                       + [(issue_of[q], -1) for q in steps_on_ref.stops.tolist() if q in issue_of])
        if marks:
            times = np.array([t for t, _ in marks], dtype=np.int64)
            steps = np.array([-1] + [step for _, step in marks], dtype=np.int64)
            iteration = steps[np.searchsorted(times, rec["t_issue_ns"], side="right")]
    batch = RecordBatch.from_columns(
        job=job, rank=np.full(len(rec), rank, dtype=np.uint32),
        comm=[comm_ids[hashes[i]] for i in rec["comm"].tolist()], seq=rec["seq"], op=rec["op"],
        peer=peer.astype(np.int32), nbytes=rec["nbytes"], iteration=iteration,
        t_issue_ns=wall_issue, t_start_ns=start, t_end_ns=end,
    )
    problems = batch.problems()
    if problems:
        raise RecordError(f"{dump.path.with_suffix('.bin')}: {problems[0]}")
    return batch, (clock, shift)
