"""Records and a job spec from what an importer read (:mod:`sleuth.importers.model`).

Done here once for every format, with the logger's own rules so that an imported folder reads
like a logged one:

* communicators are named by :func:`sleuth.logger.naming.name_groups` (``tp.3``, ``dp.0``) from
  their description and shape, else keep the member-hash id of
  :func:`sleuth.logger.groups.comm_id`; two communicators under one name are told apart by
  the format's own key (``qualified``), as the logger does with torch's group names;
* a communicator's collectives are numbered 0, 1, 2... in the order of their keys, from the
  keys any member's file holds, so that members agree on every number;
* P2P operators are numbered per (communicator, direction, peer) in stream order, so that send
  k from a to b matches receive k on b from a (the contract's P2P rule); where either side's
  stream starts within the job (a wrapped buffer), its first kept transfer is not the other's, so
  the count of one side moves by the shift that makes a send and its receive end together;
* iterations are the format's own step numbers where it marks steps (``SourceOp.iteration``),
  else come from the period of each rank's operator stream
  (:class:`sleuth.logger.period.PeriodicSteps`, Greyhound's autocorrelation), counted along its
  repeating motif from its first step (from the job's first operator where the stream starts
  later), each rank's count moved so that its groups' members agree on their steps
  (:mod:`sleuth.importers.aligned_steps`); -1 where a rank's stream shows no period;
* a rank without a GPU index gets its position among its host's ranks (as ``merge_spec``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from sleuth.errors import ImportFileError
from sleuth.importers.aligned_steps import aligned_steps
from sleuth.importers.model import Imported, SourceComm, SourceOp, SourceRank, Stream
from sleuth.jobspec import Communicator, JobSpec, RankPlacement
from sleuth.logger.groups import comm_id, qualified
from sleuth.logger.naming import infer_layout, name_groups
from sleuth.logger.period import PeriodicSteps
from sleuth.records import OpKind, RecordBatch
from sleuth.whatif.timeline import member_groups

__all__ = ["assemble", "kind_counts", "named"]

#: Operators of a stream's start searched for its period (the logger holds 4096 per rank).
PERIOD_WINDOW = 16384


def assemble(
    job: str,
    ranks: Sequence[SourceRank],
    comms: Sequence[SourceComm],
    ops: Sequence[SourceOp],
    streams: Mapping[int, Stream],
    *,
    notes: Sequence[str] = (),
    time_resolution_ns: int = 0,
) -> Imported:
    """The records and job spec of one job; ``notes`` are passed on with what this step adds.
    ``time_resolution_ns``: how far the format's times may lie from the truth (``JobSpec``)."""
    notes = list(notes)
    world = len(ranks)
    by_rank = {source.rank: source for source in ranks}
    if sorted(by_rank) != list(range(world)):
        missing = sorted(set(range(max(by_rank, default=-1) + 1)) - set(by_rank))
        raise ImportFileError(f"ranks {missing} have no file: give every rank's file (world of {max(by_rank) + 1})")
    placements = _placements([by_rank[r] for r in range(world)])
    names, communicators = _name(comms, world)
    counted = {rank: _counted(streams.get(rank), rank, notes) for rank in range(world)}

    ordered = sorted(ops, key=lambda op: (op.rank, op.order))
    numbers = _collective_numbers(ordered)
    p2p: Counter[tuple[int, str, int, int]] = Counter()
    columns: dict[str, list] = {name: [] for name in (
        "rank", "comm", "seq", "op", "peer", "nbytes", "iteration", "t_issue_ns", "t_start_ns", "t_end_ns")}
    position: list[int] = []  # along its rank's repeated steps, where the format marks none (else -1)
    for op in ordered:
        if op.kind.is_p2p:
            key = (op.rank, op.comm, int(op.kind), op.peer)
            seq = p2p[key]
            p2p[key] += 1
        else:
            seq = numbers[op.comm][op.seq]
        columns["rank"].append(op.rank)
        columns["comm"].append(names[op.comm])
        columns["seq"].append(seq)
        columns["op"].append(int(op.kind))
        columns["peer"].append(op.peer)
        columns["nbytes"].append(op.nbytes)
        mine = counted[op.rank]
        at = op.order - mine.first if mine is not None and op.iteration is None else -1
        position.append(int(mine.positions[at]) if mine is not None and 0 <= at < len(mine.positions) else -1)
        columns["iteration"].append(-1 if op.iteration is None else op.iteration)  # the format's own step
        columns["t_issue_ns"].append(op.t_issue_ns)
        columns["t_start_ns"].append(op.t_start_ns)
        columns["t_end_ns"].append(op.t_end_ns)
    wrapped = [rank for rank, stream in streams.items() if stream.first > 0]
    if wrapped:
        columns["seq"] = _paired_transfers(columns, wrapped).tolist()
    records = RecordBatch.from_columns(job=job, **columns)
    records = _with_steps(records, np.asarray(position, dtype=np.int64), counted, notes)
    problems = records.problems()
    if problems:
        raise ImportFileError("the imported records break the record contract: " + "; ".join(problems))
    per_host = Counter(placement.host for placement in placements)
    layout = infer_layout([(c.kind, c.ranks) for c in communicators], world, max(per_host.values()))
    spec = JobSpec(job, world, layout, tuple(placements), tuple(communicators), time_resolution_ns)
    return Imported(spec, records, tuple(notes))


def _paired_transfers(columns: Mapping[str, list], wrapped: Sequence[int]) -> np.ndarray:
    """The P2P numbers of ``columns`` where a rank in ``wrapped`` sends or receives, moved so that
    send k matches receive k: a send and its receive are one transfer and end together, so the
    shift is the one most sends' nearest receive by end time shows."""
    op, seq, end = np.asarray(columns["op"]), np.array(columns["seq"]), np.asarray(columns["t_end_ns"])
    rank, peer = np.asarray(columns["rank"]), np.asarray(columns["peer"])
    sends = op == int(OpKind.SEND)
    rows = np.flatnonzero((sends | (op == int(OpKind.RECV)))
                          & (np.isin(rank, wrapped) | np.isin(peer, wrapped)))
    comm = np.unique(np.asarray(columns["comm"])[rows], return_inverse=True)[1].reshape(-1)
    sender, receiver = np.where(sends[rows], rank[rows], peer[rows]), np.where(sends[rows], peer[rows], rank[rows])
    channel = np.unique(np.stack([comm, sender, receiver], axis=1), axis=0, return_inverse=True)[1].reshape(-1)
    rows = rows[np.lexsort((seq[rows], ~sends[rows], channel))]  # by channel, its sends then its receives
    channel = np.sort(channel)
    for members in np.split(rows, np.flatnonzero(np.diff(channel)) + 1):
        sent, got = members[sends[members]], members[~sends[members]]
        if not len(sent) or not len(got):
            continue
        by_end = np.argsort(end[got], kind="stable")
        right = np.searchsorted(end[got][by_end], end[sent]).clip(0, len(got) - 1)
        left = (right - 1).clip(0)
        nearer = np.where(np.abs(end[got][by_end[left]] - end[sent]) <= np.abs(end[got][by_end[right]] - end[sent]),
                          left, right)
        shifts, counts = np.unique(by_end[nearer] - np.arange(len(sent)), return_counts=True)
        shift = int(shifts[np.argmax(counts)])  # receive k + shift is send k's
        if shift > 0:
            seq[sent] += shift
        else:
            seq[got] -= shift
    return seq


def _collective_numbers(ops: Sequence[SourceOp]) -> dict[str, dict]:
    keys: dict[str, set] = defaultdict(set)
    for op in ops:
        if not op.kind.is_p2p:
            keys[op.comm].add(op.seq)
    return {comm: {key: i for i, key in enumerate(sorted(found))} for comm, found in keys.items()}


def _placements(ranks: Sequence[SourceRank]) -> list[RankPlacement]:
    taken: dict[str, set[int]] = defaultdict(set)
    for source in ranks:
        if source.gpu is not None:
            taken[source.host].add(source.gpu)
    placements = []
    for source in ranks:
        gpu = source.gpu
        if gpu is None:  # the lowest index not taken on its host, in rank order
            used = taken[source.host]
            gpu = next(i for i in range(len(ranks) + len(used) + 1) if i not in used)
            used.add(gpu)
        placements.append(RankPlacement(source.rank, source.host, gpu))
    return placements


def named(comms: Sequence[SourceComm], world: int) -> dict[str, tuple[str, str]]:
    """Each communicator's (name, kind) by its key, named as the logger names it from its lowest
    member's view (the member-hash id and ``world`` or ``group`` where no name fits)."""
    of_rank: dict[int, list[SourceComm]] = defaultdict(list)
    for comm in comms:
        for rank in comm.ranks:
            of_rank[rank].append(comm)
    chosen: dict[str, tuple[str, str]] = {}
    for comm in sorted(comms, key=lambda c: (min(c.ranks), c.key)):
        view = of_rank[min(comm.ranks)]
        found = name_groups([(c.ranks, c.desc) for c in view], world)[view.index(comm)]
        if found is None:
            kind = "world" if len(comm.ranks) == world else "group"
            found = (comm_id(comm.ranks), kind)
        chosen[comm.key] = found
    return chosen


def _name(comms: Sequence[SourceComm], world: int) -> tuple[dict[str, str], list[Communicator]]:
    """Each communicator's id, named as the logger names it from its lowest member's view."""
    chosen = named(comms, world)
    names: dict[str, str] = {}
    owners: dict[str, str] = {}
    communicators = []
    for comm in sorted(comms, key=lambda c: (min(c.ranks), c.key)):
        base, kind = chosen[comm.key]
        # Two communicators under one name (same members, same kind) are told apart by the key.
        owner = owners.setdefault(base, comm.key)
        name = base if owner == comm.key else qualified(base, comm.key)
        names[comm.key] = name
        communicators.append(Communicator(name, kind, comm.ranks))
    communicators.sort(key=lambda c: (len(c.ranks) != world, c.comm))  # the world first, then by name
    return names, communicators


class _Counted(NamedTuple):
    first: int  # the stream's first element's position in the job's stream
    positions: np.ndarray  # each element's along the repeated steps (``PeriodicSteps.positions``)
    period: int


def _counted(stream: Stream | None, rank: int, notes: list[str]) -> _Counted | None:
    """Where each element of a rank's stream is along its repeated steps; None where it shows no period."""
    if stream is None or not stream.signatures:
        return None
    codes: dict = {}
    coded = np.fromiter((codes.setdefault(s, len(codes)) for s in stream.signatures), dtype=np.int64,
                        count=len(stream.signatures))
    steps = PeriodicSteps.find(coded[:PERIOD_WINDOW], first=stream.first)
    if steps is None:
        notes.append(f"rank {rank}: its operators repeat with no period, so its iterations are -1")
        return None
    return _Counted(stream.first, steps.positions(coded), steps.period)


def _with_steps(records: RecordBatch, position: np.ndarray, counted: Mapping[int, _Counted | None],
                notes: list[str]) -> RecordBatch:
    """``records`` with the steps of those at a ``position`` (>= 0) along their rank's steps, each
    rank's count moved so that its groups' members agree (``aligned_steps``); the steps before the
    first that every such rank holds from its start are left out (a step without its start would
    read as a short one)."""
    derived = position >= 0
    if not derived.any():
        return records
    period = np.array([0 if (mine := counted[r]) is None else mine.period for r in range(len(counted))], np.int64)
    rank = records["rank"].astype(np.int64)
    group = member_groups(records["comm"].astype(np.int64), records["seq"].astype(np.int64), rank,
                          records["peer"].astype(np.int64), records["op"].astype(np.int64))
    move = aligned_steps(rank[derived], group[derived], position[derived], period)
    iteration = records["iteration"].astype(np.int64)
    iteration[derived] = (position[derived] + move[rank[derived]]) // period[rank[derived]]
    firsts = [-((-(int(c.positions[0]) + move[r])) // c.period) for r, c in counted.items() if c is not None]
    whole_from = max([0, *firsts])
    moved = int((move[period > 0] != 0).sum())
    if moved:
        notes.append(f"{moved} ranks' steps were counted from a different operator than their peers' and were "
                     "moved to agree with them on their groups' steps")
    columns = dict(records.columns) | {"iteration": iteration.astype(records["iteration"].dtype)}
    records = RecordBatch(columns, records.strings)
    partial = derived & (iteration < whole_from)
    if partial.any():
        notes.append(f"iterations before {whole_from} lack their start on some rank: "
                     f"their {int(partial.sum())} records are left out")
        records = records.take(~partial)
    return records


def kind_counts(records: RecordBatch) -> dict[str, int]:
    """How many records of each operator kind (for the import's summary)."""
    labels = {int(kind): kind.label for kind in OpKind}
    values, counts = np.unique(records["op"], return_counts=True)
    return {labels.get(int(v), str(v)): int(n) for v, n in zip(values, counts)}
