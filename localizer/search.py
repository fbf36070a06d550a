"""Holmes Algorithm 1: from abnormal operators on the pivot rank to root operators and causes.

For one irregular iteration, starting at the pivot rank's abnormal operators (largest excess
first):

* a collective: breadth first, read the members' records of its communicator, a few members at
  a time until the last launcher is among them (``_read_collective``; all of them when the
  transfer itself is slow), and split the instance into transfer and blocking
  (``sleuth.localizer.timing``);
* a send or receive: depth first, read only the peer's and split the pair the same way.

Only a rank the search follows back (the last launcher, below) and the pivots are read whole
(``sleuth.localizer.fetch``): judging an instance needs each member's start and end of it alone.

A long transfer makes the operator a root with cause *network* (Algorithm 1 line 17/23: every
member is abnormal). Long blocking points at the last launcher L (the member whose operator is
"normal", line 7): the search looks at where L's time went before that operator. When L spent
more of it computing (gaps between operators above their baselines) than waiting (operators
above theirs), or waited nowhere abnormally, L computed (or launched) slowly: a root with cause
*compute* on L (line 13). Otherwise the search recurses into L's abnormal operator with the
largest delay (line 10). Both can hold at once (a slow transfer to a late rank), then both are roots.

"Explains" refines line 10: an earlier abnormal operator on L counts only when its own excess is
at least ``explain`` times L's lateness (default 0: any abnormal operator, as in the paper), so
that a caller can keep small, unrelated delays from diverting the search. An operator followed
back from a late rank has its blocking judged against that rank's lateness too: when it
accounts for at least half of it, the rank waited there, even if the wait alone is no outlier.

Termination: each (rank, operator instance) is examined at most once, and ranks are read at
most once (``sleuth.localizer.fetch``), so the search ends after at most (ranks x slots) steps.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sleuth.errors import ConfigError
from sleuth.records import OpKind

from sleuth.localizer.fetch import Fetcher
from sleuth.localizer.graph import OperatorGraph
from sleuth.localizer.operators import COLLECTIVE, RECV, SEND, RankOperators, Thresholds, baseline
from sleuth.localizer.rules import LOCALIZER_RULES
from sleuth.localizer.timing import split
from sleuth.validation import integer

__all__ = ["Action", "Cause", "Instance", "Root", "SearchResult", "Step", "search"]

#: One operator instance, as every rank names it: (communicator group, channel class, peer, seq).
Instance = tuple[int, int, int, int]


class Cause(enum.StrEnum):
    """Why a root operator was slow."""

    COMPUTE = "compute"
    NETWORK = "network"


class Action(enum.StrEnum):
    """How the search reached an operator."""

    PIVOT = "pivot"  # an abnormal operator of the pivot rank
    BFS = "bfs"  # a collective: the whole group examined
    DFS = "dfs"  # a send/recv: the peer examined
    BACK = "back"  # an earlier operator of the late rank
    # a member of a slow ring transfer: its abnormal operator in another group, judged for transfer only
    MEMBER = "member"


@dataclass(frozen=True)
class Step:
    """One operator the search examined."""

    rank: int
    comm: str
    seq: int
    op: str
    iteration: int
    action: Action


@dataclass(frozen=True)
class Root:
    """A root operator: where an irregular iteration's delay comes from.

    ``ranks`` are the GPUs involved: the late rank (compute) or the group or pair whose
    transfer was slow (network). ``members``/``rows`` locate the operator slot on every member,
    for the cross-iteration series: rows of each member's view of ``comm`` (``Fetcher.view``).
    ``iteration`` is the irregular iteration searched; ``ran`` the one the operator ran in,
    earlier when the delay came from the end of the one before (``_explaining``): one delay
    reached from the searches of several iterations is evidence from one iteration
    (``scoring``'s support). ``again``: other searched iterations in which
    the same operator slot was itself abnormal (a persistent fault's, ``localize``), which
    count toward the support as well.
    """

    iteration: int
    cause: Cause
    rank: int
    comm: str
    seq: int
    op: str
    ranks: tuple[int, ...]
    members: tuple[int, ...]
    rows: tuple[int, ...]
    ran: int
    again: tuple[int, ...] = ()

    @property
    def key(self) -> tuple:
        """Same root operator slot and cause, whatever the iteration. A compute root's slot is
        its late rank's: the members read beside it depend on what the search had read before
        (``_read_collective``)."""
        if self.cause is Cause.COMPUTE:
            return (self.cause, self.ranks, self.comm, self.rows[self.members.index(self.rank)])
        return (self.cause, self.ranks, self.comm, self.members, self.rows)


@dataclass(frozen=True)
class SearchResult:
    roots: tuple[Root, ...]
    steps: tuple[Step, ...]

    @property
    def traversal(self) -> tuple[int, ...]:
        """Ranks examined, in first-visit order, each once."""
        return tuple(dict.fromkeys(step.rank for step in self.steps))


def search(
    fetcher: Fetcher,
    graph: OperatorGraph,
    *,
    iteration: int,
    pivots: Sequence[int],
    thresholds: Thresholds,
    pivot_ops: int = LOCALIZER_RULES.pivot_ops,
    explain: float = 0.0,
    max_steps: int = 100_000,
    member_rings: int = LOCALIZER_RULES.member_rings,
    member_fanout: int = LOCALIZER_RULES.member_fanout,
    min_transfer: float = 0.0,
) -> SearchResult:
    """Root operators of one irregular ``iteration``, starting from ``pivots``' abnormal operators.

    ``member_rings``: how many newly found slow rings (and pairs) have their members'
    other operators searched (``_members_elsewhere``), and ``member_fanout``: how many members of
    each, those whose other operators ran longest first. That tells a ring's NICs apart at the
    cost of a few fetches; a device under many rings at once (a spine) makes every ring of the job
    slow and every member's other operators long, and searching all of them walked most of the
    job (360,000 steps and half of 4,096 ranks) for no new device. A slow NIC lengthens its own
    rank's other transfers only, so it is among the first members searched however long the ring
    (a data-parallel ring of 64 at 2,048 GPUs). A ring within one host crosses no NIC: its
    members' other operators are their data-parallel all-reduces, rings of up to 128 ranks at
    8,192 GPUs, which a slow device in the host lengthens alike, so reading them costs hundreds of
    ranks and tells nothing apart.

    ``min_transfer``: the least transfer excess (ns) a network root needs besides the
    thresholds' limit, for a caller that knows the size of the delay it looks for
    (``localize``'s probes of a level step); not asked of a ring member's operator elsewhere.
    """
    if not pivots:
        raise ConfigError("pivots: need at least one pivot rank")
    integer("pivot_ops", pivot_ops, low=1)
    first_col = fetcher.window.column(iteration)
    reference = fetcher.window.reference
    steps: list[Step] = []
    roots: dict[tuple, Root] = {}
    visited: set[tuple[int, Instance, int]] = set()
    hopped: set[tuple[int, Instance, int]] = set()  # late operators reached across a group (BFS/DFS hops)

    # (rank, operator instance, column, how reached, the delay this operator was followed back to explain)
    stack: list[tuple[int, Instance, int, Action, float]] = []
    for pivot in reversed(list(pivots)):
        ops = fetcher.one(pivot)
        rows = np.flatnonzero(ops.abnormal[:, first_col])
        excess = (ops.end[rows, first_col] - ops.start[rows, first_col]) - ops.base[rows]
        chosen = rows[np.argsort(-excess, kind="stable")][:pivot_ops]
        stack.extend((pivot, _instance_of(ops, int(row), first_col), first_col, Action.PIVOT, 0.0) for row in reversed(chosen))
        stack.extend(
            (pivot, _instance_of(ops, row, first_col), first_col, Action.PIVOT, 0.0)
            for row in _launched_late(ops, first_col, pivot_ops)
        )

    while stack and len(steps) < max_steps:
        rank, instance, col, action, chased = stack.pop()
        if (rank, instance, col) in visited:
            continue
        visited.add((rank, instance, col))
        comm_index, cls, peer, seq = instance
        at = int(fetcher.window.iterations[col])
        own = fetcher.view(rank, comm_index)
        row = own.find(comm_index, cls, peer, seq, col)
        if row < 0:
            continue  # not among the rank's records (instances are named from records read, so never)
        comm = graph.comms[comm_index]
        op = _label(int(own.slot_op[row]))
        steps.append(Step(rank, comm, seq, op, at, action))

        if cls != COLLECTIVE and not 0 <= peer < graph.world:
            # Algorithm 1 line 22: a P2P operator without a peer: the transfer itself is the root.
            root = Root(iteration, Cause.NETWORK, rank, comm, seq, op, (rank,), (rank,), (row,), ran=at)
            roots.setdefault(root.key, root)
            continue
        members, rows, channels, views = _members(fetcher, graph, rank, instance, col, thresholds)
        if len(members) < 2:
            continue  # the other side's record is missing: nothing to compare against
        timing = split([(views[m], r) for m, r in zip(members, rows)])
        if not timing.complete[col]:
            continue
        values = np.stack((timing.transfer, timing.lateness))
        base, spread = baseline(np.nan_to_num(values), np.isfinite(values), reference)
        excess = values[:, col] - base
        limit = thresholds.limit(base, spread)
        if chased > 0 and excess[1] >= 0.5 * chased and members[int(timing.late[col])] != rank:
            # Followed back to explain a lateness it mostly accounts for, waiting for another rank:
            # the wait is where the delay went, however small a share of a long wait it is (a
            # delay passed up a long pipeline) or however much the wait varies when healthy. Not
            # when this rank itself came late: that is the lateness being explained, no new lead.
            limit[1] = min(limit[1], 0.5 * chased)
        involved = tuple(sorted(members))
        # A member's operator elsewhere tells the devices of a slow ring apart: its transfer need not
        # make the delay looked for on its own: a slow NIC's sends each carry only part of it.
        if excess[0] > max(limit[0], 0.0 if action is Action.MEMBER else min_transfer):
            root = Root(iteration, Cause.NETWORK, rank, comm, seq, op, involved, tuple(members), tuple(rows), ran=at)
            new = root.key not in roots
            roots.setdefault(root.key, root)
            # A pair's two NICs have the same evidence as well (a send, or the tied embeddings'
            # all-reduce of the first and last stage), and only each end's other transfers tell
            # which one is slow. A pair reached as a member's operator elsewhere is already that
            # evidence: searching its members again would walk the pipeline pair by pair.
            pair = len(members) == 2
            if new and member_rings > 0 and graph.spans_hosts[comm_index] and not (pair and action is Action.MEMBER):
                member_rings -= 1
                stack.extend(
                    _members_elsewhere(fetcher, graph, members, comm_index, col, fanout=member_fanout, pairs_only=pair)
                )
        # A member's operator elsewhere is asked one thing: is its transfer slow too (which tells
        # the ring's devices apart)? Its waits are the ring's delay passing through the pipeline,
        # and following them leads into other data-parallel rings, which hold no new root.
        if excess[1] > limit[1] and action is not Action.MEMBER:
            late = int(timing.late[col])
            late_rank = members[late]
            late_instance = (comm_index, *channels[late], seq)
            if (late_rank, late_instance, col) in hopped:
                continue  # another path already led to this late operator and followed it back
            hopped.add((late_rank, late_instance, col))
            steps.append(Step(late_rank, comm, seq, op, at, Action.BFS if cls == COLLECTIVE else Action.DFS))
            # Where the late rank's time went before this operator: its whole program is needed now.
            late_ops = fetcher.one(late_rank)
            late_row = late_ops.find(comm_index, channels[late][0], channels[late][1], seq, col)
            culprit = _explaining(late_ops, late_row, col, explain * float(excess[1]), float(excess[1]))
            if culprit is not None:
                r, c = culprit
                # What the followed operator must account for: its own excess, when that is less
                # than the lateness. A delay that reaches a rank spread over several waits leaves
                # each a share of the lateness, and the one followed explains its own excess, not
                # the whole.
                excess_there = float(late_ops.end[r, c] - late_ops.start[r, c] - late_ops.base[r])
                chased = min(float(excess[1]), excess_there) if excess_there > 0 else float(excess[1])
                stack.append((late_rank, _instance_of(late_ops, r, c), c, Action.BACK, chased))
            else:
                root = Root(iteration, Cause.COMPUTE, late_rank, comm, seq, op, (late_rank,), tuple(members), tuple(rows), ran=at)
                roots.setdefault(root.key, root)
    return SearchResult(tuple(roots.values()), tuple(steps))


def _launched_late(ops: RankOperators, col: int, count: int) -> list[int]:
    """The ``count`` operators the rank reached latest because of its own compute.

    A pivot that is itself slow waits for nobody: none of its operators is abnormal, the others
    wait for it inside theirs. How late its own compute made it by each operator is the running
    sum of its gaps above their baselines (in start order); the operators where that is largest
    are examined too, so that the others' blocking points back at the pivot (a compute root) as
    it would from any other rank.
    """
    present = np.flatnonzero(ops.present[:, col])
    present = present[np.argsort(ops.start[present, col], kind="stable")]
    own = np.cumsum(ops.gap[present, col] - ops.gap_base[present])
    order = np.argsort(-own, kind="stable")[:count]
    return [int(present[k]) for k in order if own[k] > 0]


def _members_elsewhere(
    fetcher: Fetcher, graph: OperatorGraph, members: list[int], comm: int, col: int, *, fanout: int, pairs_only: bool = False
) -> list[tuple[int, Instance, int, Action, float]]:
    """For up to ``fanout`` members, their most abnormal operator in another group whose traffic
    crosses hosts, to be judged next for a slow transfer (not followed back: ``search``); the
    members whose such operator ran longest against its baseline first, and only those that ran
    at least half as long (against their baselines) as the longest: a slow NIC's own send runs
    x8 where the ring's other members' sends, waiting for it, run x1.5-2.3, and judging those
    would read one more rank each and tell nothing: their excess is the wait, not their own NIC's.
    A device under several members (a leaf, a spine) lengthens their operators alike, and all
    of them are kept. ``pairs_only``: only operators between two ranks (sends, receives,
    collectives of two), each judged by reading one more rank, where a ring would cost a whole
    ring to tell a pair's two NICs apart.

    A slow transfer in a ring of more than two ranks says only that some device on the ring is
    slow: every member ends together, so all their NICs and cables have the same evidence. The
    members' other transfers in the same iteration tell them apart: the slow device is on those
    paths too (a slow NIC also slows its GPU's pipeline sends), and on none of the others'. A
    group within one host crosses no NIC or cable, so only the groups that span hosts are read,
    and of those only the members' records on them (``Fetcher.views_of``).
    """
    spans = graph.spans_hosts
    wanted = [(m, int(g)) for m in members for g in graph.groups_of(m) if int(g) != comm and spans[int(g)]]
    views = fetcher.views_of(wanted)
    best: dict[int, tuple[float, Instance]] = {}
    for (member, _), ops in views.items():
        candidates = np.flatnonzero(ops.abnormal[:, col])
        if pairs_only:
            sizes = graph.group_sizes[ops.slot_comm[candidates]]
            candidates = candidates[(ops.slot_class[candidates] != COLLECTIVE) | (sizes == 2)]
        if not len(candidates):
            continue
        duration = ops.end[candidates, col] - ops.start[candidates, col]
        ratio = duration / np.maximum(ops.base[candidates], 1.0)
        k = int(np.argmax(ratio))
        if member not in best or ratio[k] > best[member][0]:
            best[member] = (float(ratio[k]), _instance_of(ops, int(candidates[k]), col))
    found = sorted(((ratio, member, instance) for member, (ratio, instance) in best.items()), key=lambda item: -item[0])
    found = [item for item in found[:fanout] if item[0] >= LOCALIZER_RULES.member_share * found[0][0]]
    # Pushed weakest first: the stack pops the longest first.
    return [(member, instance, col, Action.MEMBER, 0.0) for _, member, instance in reversed(found)]


def _members(
    fetcher: Fetcher, graph: OperatorGraph, rank: int, instance: Instance, col: int, thresholds: Thresholds
) -> tuple[list[int], list[int], list[tuple[int, int]], dict[int, RankOperators]]:
    """Members holding this operator instance (those read: ``_read_collective``), its slot in
    each member's view of the communicator, each member's channel (class, peer), and the views;
    ``rank`` first for P2P."""
    comm, cls, peer, seq = instance
    if cls == COLLECTIVE:
        found, views = _read_collective(fetcher, graph, graph.group(comm).tolist(), rank, instance, col, thresholds)
    else:
        opposite = RECV if cls == SEND else SEND
        views = fetcher.views((rank, peer), comm)
        found = [
            (rank, views[rank].find(comm, cls, peer, seq, col), (cls, peer)),
            (peer, views[peer].find(comm, opposite, rank, seq, col), (opposite, rank)),
        ]
    found = [item for item in found if item[1] >= 0]
    return [m for m, _, _ in found], [r for _, r, _ in found], [c for _, _, c in found], views


def _read_collective(
    fetcher: Fetcher, graph: OperatorGraph, group: list[int], rank: int, instance: Instance, col: int, thresholds: Thresholds
) -> tuple[list[tuple[int, int, tuple[int, int]]], dict[int, RankOperators]]:
    """The members of a collective read until its last launcher is among them, and their views.

    Judging an instance needs its last launcher: who the others waited for, and from whose
    start the transfer is timed. A member that launched last waited for nobody, so its operator
    is as short as its transfer; a member that waited for a later one, unread, holds that wait
    in its operator too. So the members are read a few at a time, and once the latest of those
    read shows a transfer within its healthy range, no unread member can have launched
    noticeably later: the rest are left unread. A slow transfer keeps every member's operator
    long, so it is judged on the whole group.

    The reading order: first the members whose records were read already (reading more of a
    rank touches no new rank), then those sharing another group with a rank read whole (a pivot,
    or a late rank a search followed back), then the others spread over the group. A slow
    replica's ranks are the late members of every data-parallel ring they are in, and its ranks
    share tensor and pipeline groups: the search that found one of them late finds the next
    ring's late member among the first read, where an order blind to them reads most of a ring
    before it reaches the slow replica.
    """
    comm, _, _, seq = instance
    near_groups = {int(g) for w in fetcher.whole for g in graph.groups_of(w)} - {comm}
    known: list[int] = []
    near: list[int] = []
    far: list[int] = []
    for m in group:
        if m == rank or fetcher.has_read(m):
            known.append(m)
        elif any(int(g) in near_groups for g in graph.groups_of(m)):
            near.append(m)
        else:
            far.append(m)
    stride = max(1, len(far) // LOCALIZER_RULES.read_batch)
    unread = near + [m for offset in range(stride) for m in far[offset::stride]]  # spread over the group
    batch = unread[: max(0, LOCALIZER_RULES.first_read - len(known))]
    chosen, unread = known + batch, unread[len(batch) :]
    reference = fetcher.window.reference
    while True:
        views = fetcher.views(chosen, comm)
        found = [(m, views[m].find(comm, COLLECTIVE, -1, seq, col), (COLLECTIVE, -1)) for m in chosen]
        if not unread or _launched_last_is_read([(views[m], r) for m, r, _ in found if r >= 0], col, reference, thresholds):
            position = {m: k for k, m in enumerate(group)}
            return sorted(found, key=lambda item: position[item[0]]), views
        read_batch = LOCALIZER_RULES.read_batch
        chosen, unread = chosen + unread[:read_batch], unread[read_batch:]


def _launched_last_is_read(
    members: list[tuple[RankOperators, int]], col: int, reference: np.ndarray, thresholds: Thresholds
) -> bool:
    """Whether the transfer timed from the latest start among ``members`` is within its healthy
    range in column ``col`` (and so no unread member launched much later), or cannot be told
    there (a member's record is missing: reading more would not mend it)."""
    if len(members) < 2:
        return False
    timing = split(members)
    if not timing.complete[col]:
        return True
    known = np.isfinite(timing.transfer)
    base, spread = baseline(np.nan_to_num(timing.transfer)[None, :], known[None, :], reference)
    return bool(timing.transfer[col] - base[0] <= thresholds.limit(base, spread)[0])


def _instance_of(ops: RankOperators, row: int, col: int) -> Instance:
    """The operator instance in slot ``row``, column ``col``, by what names it on every rank."""
    return (int(ops.slot_comm[row]), int(ops.slot_class[row]), int(ops.slot_peer[row]), int(ops.seq[row, col]))


def _explaining(ops: RankOperators, row: int, col: int, needed: float, lateness: float) -> tuple[int, int] | None:
    """Where the late rank's time went before ``row``: the operator to follow, or None (compute).

    The rank's delay before the operator is split into compute (its gaps between operators,
    above their baselines) and waiting (its operators' durations above theirs), both summed
    without clipping so that jitter cancels. More compute than waiting: the rank itself was
    slow, a compute root, unless that compute is under half the lateness and its abnormal
    operators alone waited longer. A rank held up inside its group also waits *less* elsewhere:
    a GPU slowed in a middle pipeline stage makes that stage the bottleneck, its ranks' receives
    from the stage before find the data already there, and those shorter receives cancel its
    tensor-parallel peers' long waits for it: summed, the waits fall below the rank's small
    compute excess, and the search would stop at a healthy peer; so the abnormal waits alone are
    weighed against the compute. A rank whose compute does explain its lateness stays
    the root even if it also waited: under sequence-length imbalance a replica's ranks all
    compute long and wait for each other.

    Otherwise the abnormal operator with the largest delay is followed (Algorithm 1 line 10), if
    its excess is at least ``needed``. When none is abnormal but the rank waited more than it
    computed and for at least half its lateness, the operator it waited longest in is followed:
    a delay passed down a long pipeline arrives spread over several receives that each stay
    under their own threshold, and with no compute excess, stopping there would blame a healthy GPU.

    The previous iteration is included when this one's operators before ``row`` account for
    under half the lateness: a rank late at the start of an iteration was held up at the end of
    the last (the gradient and embedding all-reduces), and iteration boundaries are per rank,
    not global.
    """
    candidates = [(col, ops.before(row, col))]
    rows = candidates[0][1]
    own = float((ops.gap[row, col] - ops.gap_base[row]) + _sum_excess(ops, rows, col))
    if own < 0.5 * lateness and col > 0:
        candidates.append((col - 1, _latest_first(ops, col - 1)))
    compute = float(ops.gap[row, col] - ops.gap_base[row])
    waiting = abnormal_waiting = 0.0
    best: tuple[float, int, int] | None = None
    longest: tuple[float, int, int] | None = None  # the longest wait, abnormal or not
    for where, earlier in candidates:
        if not len(earlier):
            continue
        compute += float((ops.gap[earlier, where] - ops.gap_base[earlier]).sum())
        excess = (ops.end[earlier, where] - ops.start[earlier, where]) - ops.base[earlier]
        waiting += float(excess.sum())
        abnormal_waiting += float(np.clip(excess[ops.abnormal[earlier, where]], 0, None).sum())
        flagged = ops.abnormal[earlier, where] & (excess >= needed)
        if flagged.any():
            k = int(np.argmax(np.where(flagged, excess, -np.inf)))
            if best is None or excess[k] > best[0]:
                best = (float(excess[k]), int(earlier[k]), where)
        k = int(np.argmax(excess))
        if excess[k] > max(needed, 0.0) and (longest is None or excess[k] > longest[0]):
            longest = (float(excess[k]), int(earlier[k]), where)
    if compute > waiting and (compute >= 0.5 * lateness or compute >= abnormal_waiting):
        return None
    if best is None and waiting >= 0.5 * lateness:
        best = longest
    return None if best is None else (best[1], best[2])


def _sum_excess(ops: RankOperators, rows: np.ndarray, col: int) -> float:
    if not len(rows):
        return 0.0
    durations = ops.end[rows, col] - ops.start[rows, col] - ops.base[rows]
    gaps = ops.gap[rows, col] - ops.gap_base[rows]
    return float(durations.sum() + gaps.sum())


def _latest_first(ops: RankOperators, col: int) -> np.ndarray:
    if col < 0:
        return np.empty(0, dtype=np.int64)
    rows = np.flatnonzero(ops.present[:, col])
    return rows[np.argsort(-ops.start[rows, col], kind="stable")]


def _label(op: int) -> str:
    try:
        return OpKind(op).label
    except ValueError:  # a value outside OpKind survives the records; show its number
        return str(op)
