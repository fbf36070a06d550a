"""Members of a job's groups its records lost, filled in from the members they kept.

A logger that drops records under pressure, or a trace cut by its buffer, leaves groups with a
member missing: a collective without one of its communicator's ranks, a send without its
receive. The replay reads the rank's next compute as covering the lost operator, and that rank's
program matches no other's (``programs.program_slots``), so none of its gaps has peers and its
straggler's cost is read as its ideal: a few records lost in every iteration hide what the job
pays. The group says what the lost record was (what-if §3.2's timing rules):

* the same communicator, sequence number, op and bytes as its group (a send's lost receive is
  the receive from the sender, and the reverse);
* it ended when its group ended: a group's members end together, after its last member started;
* it started when the group's last member present did, or later, where the group ended more
  than its usual transfer after that: then the lost member was the last to arrive, its usual
  transfer before the end (the median over the window's whole groups of its communicator, op
  and bytes);
* but within its own rank's program: after the operator its rank runs before it and before the
  one after it (its place in the rank's iterations that lost nothing). A pipeline's send that
  came early (an isend) would else start at its late receiver's start, after its rank's next
  operator, and the rank-iteration's program would match no peer's.

Only a rank that has records in that iteration gets a member filled in: a rank with none was
not recorded there at all, and its whole program is not the group's to invent. A communicator's
members are the job spec's where it names the communicator (a framework's group holds all its
members at each of its collectives: a data-parallel group may run one all-reduce a step, whose lost
member no other record names), else the ranks its collectives showed, where one group held them all.
"""

from __future__ import annotations

import numpy as np

from sleuth.jobspec import JobSpec
from sleuth.records import OpKind, RecordBatch
from sleuth.whatif.keys import dense_ids, first_of_each, group_median, places_in_runs, ranges
from sleuth.whatif.timeline import member_groups

__all__ = ["fill_lost_members"]


def fill_lost_members(records: RecordBatch, spec: JobSpec | None = None, *, program: RecordBatch | None = None
                      ) -> tuple[RecordBatch, int]:
    """``records`` with each lost member of their groups filled in (in ``RecordBatch.IDENTITY``
    order, each once), and how many were filled in; ``records`` as they are where none was lost.
    A communicator's members are the ``spec``'s where it names the communicator, else the ranks
    seen in its collectives. ``program``: records of the job's other iterations, which show
    where each operator sits in its rank's program where ``records`` hold few whole iterations
    (a stream's newest iteration)."""
    if len(records) < 2:
        return records, 0
    records = records.one_per_identity()
    rank = records["rank"].astype(np.int64)
    comm = records["comm"].astype(np.int64)
    op = records["op"].astype(np.int64)
    peer = records["peer"].astype(np.int64)
    iteration = records["iteration"].astype(np.int64)
    start = records["t_start_ns"].astype(np.int64)
    end = records["t_end_ns"].astype(np.int64)
    nbytes = records["nbytes"].astype(np.int64)
    group = member_groups(comm, records["seq"].astype(np.int64), rank, peer, op)
    groups = int(group.max()) + 1
    members = np.bincount(group, minlength=groups)
    latest = np.full(groups, np.iinfo(np.int64).min)
    np.maximum.at(latest, group, start)
    ended = np.full(groups, np.iinfo(np.int64).min)
    np.maximum.at(ended, group, end)
    p2p = peer >= 0

    comm_of, rank_of, comm_size, known = _membership(records, spec, comm[~p2p], rank[~p2p], members[group[~p2p]])
    whole = np.where(p2p, members[group] == 2, members[group] >= comm_size[comm])

    # Each lost member: (the row of its group it copies, its rank, its peer, its op).
    heads = np.flatnonzero(first_of_each(group))
    lone_p2p = heads[p2p[heads] & (members[group[heads]] == 1)]
    mirrored = np.where(op[lone_p2p] == OpKind.SEND, OpKind.RECV, np.where(op[lone_p2p] == OpKind.RECV, OpKind.SEND,
                                                                              op[lone_p2p]))
    short = heads[~p2p[heads] & known[comm[heads]] & (members[group[heads]] < comm_size[comm[heads]])]
    source, lost_rank = _absent_members(short, group, comm, rank, comm_of, rank_of)
    source = np.r_[lone_p2p, source]
    lost_rank = np.r_[peer[lone_p2p], lost_rank]
    lost_peer = np.r_[rank[lone_p2p], np.full(len(source) - len(lone_p2p), -1, np.int64)]
    lost_op = np.r_[mirrored, op[source[len(lone_p2p):]]].astype(np.int64)
    recorded = _has_records(rank, iteration, lost_rank, iteration[source])
    source, lost_rank, lost_peer, lost_op = source[recorded], lost_rank[recorded], lost_peer[recorded], lost_op[recorded]
    if not len(source):
        return records, 0

    # Its start: the last present member's, or its group's end less the usual transfer where later.
    kind = dense_ids(comm, op, nbytes)
    measured = whole & np.isin(kind, kind[source])  # only the kinds of the lost members: a fraction of the sort
    usual = group_median(kind[measured], (end - latest[group])[measured], size=int(kind.max()) + 1)
    g = group[source]
    transfer = usual[kind[source]]
    began = np.where(np.isnan(transfer), latest[g], np.maximum(latest[g], ended[g] - np.nan_to_num(transfer).astype(np.int64)))
    filled = records.take(source)
    columns = dict(filled.columns) | {
        "rank": lost_rank.astype(np.uint32), "peer": lost_peer.astype(np.int32), "op": lost_op.astype(np.uint8),
        "t_issue_ns": began, "t_start_ns": began, "t_end_ns": ended[g],
    }
    both = RecordBatch.concat([records, RecordBatch(columns, filled.strings)])
    shown = both if program is None or not len(program) else RecordBatch.concat([both, program])
    placed = _in_program_order(shown, len(records), len(both))[:len(both)]
    columns = dict(both.columns) | {"t_issue_ns": np.minimum(both["t_issue_ns"], placed), "t_start_ns": placed}
    return RecordBatch(columns, both.strings).one_per_identity(), len(source)


def _in_program_order(records: RecordBatch, present: int, shown: int) -> np.ndarray:
    """The start of each record, the filled ones (rows ``present`` to ``shown``) moved between
    the starts of the present operators their rank runs before and after them. A record's place
    in its rank's program is the median place of its slot (rank, communicator, op, peer, bytes and
    its turn among those in the iteration, by sequence number) in the rank's iterations that
    lost nothing (rows from ``shown`` on only show them); a slot never seen in one keeps its start."""
    rank, iteration = records["rank"].astype(np.int64), records["iteration"].astype(np.int64)
    start = records["t_start_ns"].astype(np.int64)
    end = records["t_end_ns"].astype(np.int64)
    index = np.arange(len(records))
    filled = (index >= present) & (index < shown)
    kind = dense_ids(rank, records["comm"].astype(np.int64), records["op"].astype(np.int64),
                     records["peer"].astype(np.int64), records["nbytes"].astype(np.int64))
    run = dense_ids(rank, iteration)
    by_turn = np.lexsort((records["seq"].astype(np.int64), kind, run))
    turn = np.empty(len(records), np.int64)
    turn[by_turn] = places_in_runs(np.r_[True, (np.diff(kind[by_turn]) != 0) | (np.diff(run[by_turn]) != 0)])
    slot = dense_ids(kind, turn)
    lost_any = np.bincount(run, weights=filled, minlength=int(run.max()) + 1) > 0
    whole = ~lost_any[run]
    by_start = np.flatnonzero(whole)[np.lexsort((start[whole], run[whole]))]
    place = places_in_runs(np.r_[True, np.diff(run[by_start]) != 0])
    usual = group_median(slot[by_start], place.astype(np.float64), size=int(slot.max()) + 1)[slot]
    known = ~np.isnan(usual) & lost_any[run]
    rows = np.flatnonzero(known)
    rows = rows[np.lexsort((filled[rows], usual[rows], run[rows]))]  # each run in program order
    if not filled[rows].any():
        return start
    # Within each run: the latest present start before a row, the earliest after, as offsets from
    # the run's first start stacked run after run so one running max / min serves every run.
    base = np.full(int(run.max()) + 1, np.iinfo(np.int64).max)
    np.minimum.at(base, run[rows], start[rows])
    offset = start[rows] - base[run[rows]]
    span = int(offset.max()) + 2
    ordinal = np.cumsum(np.r_[True, np.diff(run[rows]) != 0]) - 1
    lifted = np.where(filled[rows], -1, offset) + ordinal * span
    before = np.maximum.accumulate(lifted) - ordinal * span  # -1: no present operator before
    raised = np.where(filled[rows], span - 1, offset) + ordinal * span
    after = np.minimum.accumulate(raised[::-1])[::-1] - ordinal * span  # span - 1: none after
    out = start.copy()
    mine = filled[rows]
    low = np.where(before[mine] >= 0, base[run[rows][mine]] + before[mine] + 1, np.iinfo(np.int64).min)
    high = np.where(after[mine] < span - 1, base[run[rows][mine]] + after[mine] - 1, np.iinfo(np.int64).max)
    moved = rows[mine]
    out[moved] = np.minimum(np.clip(start[moved], low, np.maximum(low, high)), end[moved])
    return out


def _membership(records: RecordBatch, spec: JobSpec | None, comm: np.ndarray, rank: np.ndarray, members: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each communicator's ranks (pairs of communicator code and rank, by code), its size, and
    whether they are known, from the collectives' ``comm``, ``rank`` and group ``members``: the
    ``spec``'s where it names the communicator (a group of the framework holds all its members at
    every collective), else every rank seen in its collectives, known where one group held them all."""
    comms = len(records.strings)
    seen = first_of_each(comm, rank)
    comm_of, rank_of = comm[seen], rank[seen]
    size = np.bincount(comm_of, minlength=comms)
    largest = np.zeros(comms, np.int64)
    np.maximum.at(largest, comm, members)
    known = size == largest
    groups = {} if spec is None else {c.comm: c.ranks for c in spec.communicators}
    named = [(code, groups[text]) for code, text in enumerate(records.strings) if size[code] and text in groups]
    if named:
        replaced = np.isin(comm_of, [code for code, _ in named])
        comm_of = np.r_[comm_of[~replaced], np.concatenate([np.full(len(ranks), code) for code, ranks in named])]
        rank_of = np.r_[rank_of[~replaced], np.concatenate([np.asarray(ranks, np.int64) for _, ranks in named])]
        for code, ranks in named:
            size[code], known[code] = len(ranks), True
    by_comm = np.argsort(comm_of, kind="stable")
    return comm_of[by_comm], rank_of[by_comm], size, known


def _absent_members(short: np.ndarray, group: np.ndarray, comm: np.ndarray, rank: np.ndarray, comm_of: np.ndarray,
                    rank_of: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each collective group whose first row is in ``short``, the row it is and each rank of
    its communicator (``comm_of``'s codes, ascending, beside ``rank_of``'s ranks) it lacks."""
    if not len(short):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    bounds = np.searchsorted(comm_of, comm[short]), np.searchsorted(comm_of, comm[short], side="right")
    counts = bounds[1] - bounds[0]
    row = np.repeat(short, counts)
    candidate = rank_of[ranges(*bounds)]
    pairs = dense_ids(np.r_[group, group[row]], np.r_[rank, candidate])
    absent = ~np.isin(pairs[len(group):], pairs[:len(group)])
    return row[absent], candidate[absent]


def _has_records(rank: np.ndarray, iteration: np.ndarray, lost_rank: np.ndarray, lost_iteration: np.ndarray) -> np.ndarray:
    """Whether each (``lost_rank``, ``lost_iteration``) has records among (``rank``, ``iteration``)."""
    keys = dense_ids(np.r_[rank, lost_rank], np.r_[iteration, lost_iteration])
    return np.isin(keys[len(rank):], keys[:len(rank)])
