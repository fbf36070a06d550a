"""Each host's clock as its ranks' collectives tell it, and records read on one clock.

The members of a collective finish it together (its last step is every member's), so a host whose
ranks end their collectives with other hosts' ranks a steady distance from those ends runs its
clock that far off. Hosts' clocks disagree by what NTP leaves them (milliseconds) or by seconds
without it, and the replay (a collective's transfer starts when its last member starts) and the δ
rule (a step spans every rank) compare times across ranks: a host's offset larger than a
collective's own spread of ends is its clock's, and is taken off its ranks' times before anything
reads them. A collective within one host shares its clock, so it tells nothing of any offset.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
from scipy import sparse
from scipy.sparse import csgraph
from scipy.sparse import linalg as splinalg

from sleuth.jobspec import JobSpec
from sleuth.records import ColumnBatch, IterationBatch, OpKind, RecordBatch
from sleuth.sources import RecordSource
from sleuth.whatif.keys import dense_ids, group_median
from sleuth.whatif.timeline import member_groups

_Batch = TypeVar("_Batch", bound=ColumnBatch)
_RECORD_TIMES = ("t_issue_ns", "t_start_ns", "t_end_ns")
_ITERATION_TIMES = ("t_start_ns", "t_end_ns")

#: Collectives every member leaves at its last step (rooted ones and pairs may leave early).
SYMMETRIC = (OpKind.ALL_REDUCE, OpKind.ALL_GATHER, OpKind.REDUCE_SCATTER, OpKind.ALL_TO_ALL, OpKind.BARRIER)
#: Conjugate-gradient steps at most: exact after as many as the hosts, a few dozen on any job's groups.
_ROUNDS = 1000
#: Offsets are wanted to well within a microsecond: collectives' ends spread by more than that on
#: any fabric (NCCL kernels' ends: µs; gloo's on a loaded host: ms).
_SETTLED_NS = 1000.0
#: An end this many robust deviations off its collective's fit is the rank's stamp, not its clock.
_OUTLIER = 6.0
#: Records of each kind read at most: a host's clock is one number, which a million records of
#: collectives (or of transfers) across hosts measure many times over.
_MOST_RECORDS = 1 << 20


@dataclass(frozen=True)
class ClockOffsets:
    """The hosts whose clocks were off, by how much each ran ahead of its peers' (ns), and so each of their ranks."""

    offsets_ns: dict[int, int]  # by rank
    spread_ns: float  # how far apart one collective's members end, at the median, on the corrected clocks
    hosts_ns: dict[str, int] = field(default_factory=dict)
    host_ranks: dict[str, tuple[int, ...]] = field(default_factory=dict)  # the ranks of each host off
    across: int = 0  # the collectives and transfers across hosts read (0: nothing could be told)
    wander_ns: dict[str, int] = field(default_factory=dict)  # over several readings: how far apart each host's lay

    def __bool__(self) -> bool:
        return bool(self.offsets_ns)


def clock_offsets(records: RecordBatch, spec: JobSpec) -> ClockOffsets:
    """Each host's offset from its peers' clocks, centred on the hosts' median: fitted on the
    symmetric collectives hosts share (``_fit_collectives``), the hosts no collective joins read
    against each other through their transfers' causality (``_join_by_transfers``); kept only
    where larger than the median collective's spread of ends. Reads at most ``_MOST_RECORDS``
    records of each kind: every n-th collective of each communicator, whole, and every n-th transfer."""
    hosts, host_of_rank = np.unique([p.host for p in spec.placements], return_inverse=True)
    offset, part, spread, collectives = _fit_collectives(records, host_of_rank, len(hosts))
    offset, joined, transfers = _join_by_transfers(records, host_of_rank, offset, part)
    if not collectives + transfers:
        return ClockOffsets({}, 0.0)
    offset = np.round(offset - np.median(offset[joined])).astype(np.int64)
    off = np.flatnonzero(joined & (np.abs(offset) > spread))
    ranks = {str(hosts[h]): tuple(int(r) for r in np.flatnonzero(host_of_rank == h)) for h in off}
    by_rank = {r: int(offset[h]) for h in off for r in ranks[str(hosts[h])]}
    return ClockOffsets(by_rank, spread, {str(hosts[h]): int(offset[h]) for h in off}, ranks, collectives + transfers)


def _fit_collectives(records: RecordBatch, host_of_rank: np.ndarray, hosts: int) -> tuple[np.ndarray, np.ndarray, float, int]:
    """Hosts' offsets fitted by least squares as ``end = collective's end + host's offset`` over
    the symmetric collectives spanning hosts, each host's clock read once per collective (its ranks'
    median end of it, however many of its GPUs take part); fitted twice, the second time without
    the ends the first left over ``_OUTLIER`` robust deviations off (a rank descheduled as it
    stamped one). (offsets ns, the part of the hosts the collectives join each host to, the median
    collective's spread of ends on the fitted clocks, collectives read); every host a part of its
    own where no collective spans hosts. Each part's offsets are known up to a constant of its own."""
    chosen = np.isin(records["op"], np.asarray(SYMMETRIC, np.uint8)) & (records["peer"] < 0)
    host = host_of_rank[records["rank"][chosen].astype(np.int64)]
    end = records["t_end_ns"][chosen].astype(np.int64)
    seq = records["seq"][chosen].astype(np.int64)
    group = dense_ids(records["comm"][chosen].astype(np.int64), seq)
    across = _spans_hosts(group, host)[group] if len(group) else np.zeros(0, bool)
    across &= seq % max(-(-int(across.sum()) // _MOST_RECORDS), 1) == 0
    host, end, group = host[across], end[across], dense_ids(group[across])
    if not len(host):
        return np.zeros(hosts), np.arange(hosts), 0.0, 0
    end -= int(end.min())  # exact in float64 once it counts from the first end read
    entry = dense_ids(group, host)
    first = np.unique(entry, return_index=True)[1]
    entry_group, entry_host = group[first], host[first]
    entry_end = group_median(entry, end, size=len(first))
    offset = _least_squares(entry_group, entry_host, entry_end, hosts)
    residual = _centred(entry_group, entry_end - offset[entry_host])
    deviation = 1.4826 * float(np.median(np.abs(residual)))  # the normal's standard deviation, robustly
    kept = np.abs(residual) <= max(_OUTLIER * deviation, _SETTLED_NS)
    offset = _least_squares(entry_group[kept], entry_host[kept], entry_end[kept], hosts)
    groups = int(group.max()) + 1
    links = sparse.coo_matrix((np.ones(len(first)), (entry_host, hosts + entry_group)), shape=(hosts + groups,) * 2)
    part = csgraph.connected_components(links, directed=False)[1][:hosts]
    own = end - offset[host]
    spread = float(np.median(_group_max(group, own) + _group_max(group, -own)))
    return offset, part, spread, groups


def _least_squares(group: np.ndarray, host: np.ndarray, end: np.ndarray, hosts: int) -> np.ndarray:
    """The hosts' offsets x minimising the squared misfit of ``end = collective's end + x[host]``:
    with each collective's end eliminated (its members' mean), the normal equations are a graph
    Laplacian over the hosts, solved by conjugate gradients; each part's offsets sum to zero."""
    group = dense_ids(group)

    def laplacian(x: np.ndarray) -> np.ndarray:
        return np.bincount(host, _centred(group, x[host]), minlength=hosts)

    operator = splinalg.LinearOperator((hosts, hosts), matvec=laplacian, dtype=np.float64)
    misfit = np.bincount(host, _centred(group, end), minlength=hosts)
    solution, _ = splinalg.cg(operator, misfit, rtol=0.0, atol=_SETTLED_NS / 100, maxiter=_ROUNDS)
    return solution


def _centred(group: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values`` less their group's mean."""
    return values - (np.bincount(group, values) / np.bincount(group))[group]


def _join_by_transfers(records: RecordBatch, host_of_rank: np.ndarray, offset: np.ndarray,
                       part: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """The offsets with the parts the collectives left apart (a pipeline's stages, joined only by
    their transfers) moved onto one clock, which hosts it holds, and the transfers between parts
    read. A receive ends after its send
    starts, so a send from part a to part b bounds b's offset less a's from above by the least
    (receive's end - send's start) on their clocks; sends both ways bound it from both sides, and
    the middle of the bounds is taken. The part of the most hosts is the reference; each other joins
    it through the parts it is bounded against both ways."""
    parts = int(part.max()) + 1
    reference = int(np.argmax(np.bincount(part)))
    if parts == 1:
        return offset, part == reference, 0
    chosen = (records["peer"] >= 0) & np.isin(records["op"], np.asarray((OpKind.SEND, OpKind.RECV), np.uint8))
    pairs = member_groups(records["comm"][chosen], records["seq"][chosen], records["rank"][chosen],
                          records["peer"][chosen], records["op"][chosen])
    # Every n-th seq: a pipeline's forward and backward transfers share one, and both are wanted.
    sampled = records["seq"][chosen] % max(-(-len(pairs) // _MOST_RECORDS), 1) == 0
    kept = np.flatnonzero(chosen)[sampled]
    pairs = dense_ids(pairs[sampled])
    sends = kept[records["op"][kept] == OpKind.SEND]
    recvs = kept[records["op"][kept] == OpKind.RECV]
    send_of = np.full(int(pairs.max(initial=-1)) + 1, -1)
    send_of[pairs[records["op"][kept] == OpKind.SEND]] = sends
    recv_pair = pairs[records["op"][kept] == OpKind.RECV]
    matched = send_of[recv_pair] >= 0
    send, recv = send_of[recv_pair[matched]], recvs[matched]
    a = part[host_of_rank[records["rank"][send].astype(np.int64)]]
    b = part[host_of_rank[records["rank"][recv].astype(np.int64)]]
    base = offset[host_of_rank[records["rank"][recv].astype(np.int64)]] - offset[host_of_rank[records["rank"][send].astype(np.int64)]]
    slack = (records["t_end_ns"][recv].astype(np.int64) - records["t_start_ns"][send].astype(np.int64)) - base
    between = a != b
    bound = np.full((parts, parts), np.inf)
    np.minimum.at(bound, (a[between], b[between]), slack[between])
    both = np.isfinite(bound) & np.isfinite(bound.T)
    # b's offset less a's lies in [-bound[b, a], bound[a, b]]: its middle, where both are known.
    known = np.where(both, bound, 0.0)
    middle, half = (known - known.T) / 2, (known + known.T) / 2
    # Within the bounds' half-width of in step, the transfers cannot tell the parts' clocks apart.
    middle[np.abs(middle) <= half] = 0.0
    order, parent = csgraph.breadth_first_order(sparse.csr_matrix(both), reference, directed=False)
    shift = np.zeros(parts)
    for p in order[1:]:
        shift[p] = shift[parent[p]] + middle[parent[p], p]
    reached = np.zeros(parts, bool)
    reached[order] = True
    return offset + shift[part], reached[part], int(between.sum())


def read_on_one_clock(records: RecordBatch, iterations: IterationBatch,
                      spec: JobSpec) -> tuple[RecordBatch, IterationBatch, ClockOffsets]:
    """``records`` and ``iterations`` with every host's times on one clock, each iteration read on
    the clocks its own records tell (``clock_offsets``; one whose records join no hosts on the last
    reading that did): NTP lets a host's clock wander by milliseconds over minutes, and a clock
    without it drifts by up to a few tens of microseconds a second. Also what was moved: each host
    its median offset over the iterations, ``wander_ns`` how far apart its readings lie."""
    names, host_of_rank = np.unique([p.host for p in spec.placements], return_inverse=True)
    steps = np.unique(records["iteration"])
    order = np.argsort(records["iteration"], kind="stable")
    bounds = np.r_[np.searchsorted(records["iteration"][order], steps), len(order)]
    raw = [clock_offsets(records.take(order[bounds[k]:bounds[k + 1]]), spec) for k in range(len(steps))]
    told = [reading for reading in raw if reading.across]
    if not any(told):
        return records, iterations, told[0] if told else ClockOffsets({}, 0.0)
    # The iterations before the first that joins hosts are read on that one's clocks.
    readings, last = [], told[0]
    for reading in raw:
        last = reading if reading.across else last
        readings.append(last)
    hosts = sorted({host for reading in readings for host in reading.hosts_ns})
    # One row per recorded iteration, one column per host moved in any: its offset then (0: in step).
    table = np.array([[reading.hosts_ns.get(host, 0) for host in hosts] for reading in readings], np.int64)
    column_of_host = np.full(len(names), -1)
    column_of_host[np.searchsorted(names, hosts)] = np.arange(len(hosts))

    def shifted(batch: _Batch, fields: tuple[str, ...]) -> _Batch:
        # A row of an iteration no record holds is read on the reading before it.
        row = np.maximum(np.searchsorted(steps, batch["iteration"], side="right") - 1, 0)
        column = column_of_host[host_of_rank[batch["rank"].astype(np.int64)]]
        return _less(batch, np.where(column >= 0, table[row, np.maximum(column, 0)], 0), fields)

    middle = {host: int(np.median(table[:, j])) for j, host in enumerate(hosts)}
    ranks = {host: ranks for reading in told for host, ranks in reading.host_ranks.items()}
    summary = ClockOffsets({r: middle[h] for h in hosts for r in ranks[h]}, float(np.median([r.spread_ns for r in told])),
                           middle, ranks, sum(r.across for r in told), {host: int(np.ptp(table[:, j])) for j, host in enumerate(hosts)})
    return shifted(records, _RECORD_TIMES), shifted(iterations, _ITERATION_TIMES), summary


def on_one_clock(records: RecordBatch, iterations: IterationBatch,
                 offsets: ClockOffsets) -> tuple[RecordBatch, IterationBatch]:
    """``records`` and ``iterations`` with each off rank's times moved onto its peers' clock."""
    if not offsets:
        return records, iterations
    return _shifted(records, offsets, _RECORD_TIMES), _shifted(iterations, offsets, _ITERATION_TIMES)


def _shifted(batch: _Batch, offsets: ClockOffsets, fields: tuple[str, ...]) -> _Batch:
    """``batch`` with ``fields`` of each off rank's rows less its offset."""
    size = max(max(offsets.offsets_ns) + 1, int(batch["rank"].max(initial=0)) + 1)
    by_rank = np.zeros(size, np.int64)
    for rank, offset in offsets.offsets_ns.items():
        by_rank[rank] = offset
    return _less(batch, by_rank[batch["rank"].astype(np.int64)], fields)


def _less(batch: _Batch, shift: np.ndarray, fields: tuple[str, ...]) -> _Batch:
    """``batch`` with ``shift`` (one per row) taken off its ``fields``."""
    return type(batch)({name: values - shift if name in fields else values for name, values in batch.columns.items()},
                       batch.strings)



def _spans_hosts(group: np.ndarray, host: np.ndarray) -> np.ndarray:
    """Per group: whether its members are on more than one host."""
    return _group_max(group, host) != -_group_max(group, -host)


def _group_max(group: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per group: the largest of its ``values``."""
    top = np.full(int(group.max()) + 1, np.iinfo(np.int64).min)
    np.maximum.at(top, group, values)
    return top


class OnOneClockSource:
    """A :class:`~sleuth.sources.RecordSource` whose records and iteration rows are read with each
    off host's ranks' times moved onto its peers' clock (``offsets``, from ``clock_offsets``)."""

    def __init__(self, source: RecordSource, offsets: ClockOffsets) -> None:
        self.source = source
        self.offsets = offsets

    def job_spec(self) -> JobSpec:
        return self.source.job_spec()

    def iteration_ids(self) -> np.ndarray:
        return self.source.iteration_ids()

    def ranks_records(self, ranks: Iterable[int] | None, *, iterations: Iterable[int] | None = None,
                      comms: Iterable[str] | None = None) -> RecordBatch:
        batch = self.source.ranks_records(ranks, iterations=iterations, comms=comms)
        return _shifted(batch, self.offsets, _RECORD_TIMES) if self.offsets and len(batch) else batch

    def iterations(self, *, ranks: Iterable[int] | None = None,
                   iterations: Iterable[int] | None = None) -> IterationBatch:
        batch = self.source.iterations(ranks=ranks, iterations=iterations)
        return _shifted(batch, self.offsets, _ITERATION_TIMES) if self.offsets and len(batch) else batch
