"""The timing rules of a job's operators as a dependency graph, and its replay with other durations.

The rules (docs/design.md, "What a duration means"; What-if §3.2):

* each rank runs its operators in start order, a *chain*; an operator starts a *gap* after the
  rank's clock, which is the end of the previous operator, or its start when that operator did
  not hold the rank (a send, or an asynchronous operator the next one started before it ended);
* a group (a collective's members, a send and its receive) ends a *transfer* after its last
  member started; an operator whose group is not whole in the records ends its own recorded
  length after its start.

Those rules make a graph whose nodes are operator starts and group ends. :func:`dependencies`
orders it once into levels (Kahn's algorithm, one frontier per level; compiled in ``_sweep.c``
where built), so that :func:`replay` computes every start and end in one sweep over the levels,
each a few vectorised steps over the operators of that level: the work is linear in the operators
whatever durations are replayed, and many variants (a second axis of ``gap`` and ``transfer``)
share one sweep. :func:`latest_ends` runs the same sweep compiled (``_sweep.c``) over many
variants, giving each segment's last end. Where the levels go part by part (a job's iterations),
a replay can carry each rank's clock from a part into the next (:func:`carry_links`): the job's
one timeline, on which a rank starts its next iteration as soon as its own last one lets it.
Records whose chains contradict their groups (clocks skewed between hosts) form a cycle; its
operators, and everything that waits on them, get no level (``Dependencies.settled``).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order

from sleuth.errors import RecordError
from sleuth.records import OpKind
from sleuth.whatif.keys import dense_ids

try:  # the compiled sweep (sleuth/whatif/_sweep.c); the numpy one below is its reference
    from sleuth.whatif import _sweep
except ImportError as error:  # not built on this machine: latest_ends sweeps with numpy, several times slower
    _sweep = None  # type: ignore[assignment]
    logging.getLogger(__name__).warning("the what-if replay's compiled sweep is not built (%s): numpy sweeps, "
                                        "several times slower; reinstall sleuth with a C compiler", error)

__all__ = ["Dependencies", "carry_links", "dependencies", "downstream", "holds_rank", "latest_ends", "member_groups",
           "replay"]

#: Operators (and groups) the compiled levels index with 32-bit integers: half the memory their queue
#: reads out of order; a larger graph is leveled by numpy.
_COMPILED_LIMIT = 2**31 - 1
#: ``carry_links``' flags (``_sweep.c``'s): a chain's first operator that opens from its rank's
#: carried clock; a chain's last operator in its part that leaves its end, or its start, as that clock.
CONTINUES, CLOSES_AT_END, CLOSES_AT_START = 1, 2, 4


def member_groups(comm: np.ndarray, seq: np.ndarray, rank: np.ndarray, peer: np.ndarray, op: np.ndarray) -> np.ndarray:
    """Dense group id of each record: a collective's members share (comm, seq); a send pairs with
    its receive on (comm, seq, sender, receiver), since seq counts each direction of a pair apart
    (a pipeline's forward activation and backward gradient share a seq and are different transfers)."""
    peer = peer.astype(np.int64, copy=False)
    rank = rank.astype(np.int64, copy=False)
    p2p = peer >= 0
    incoming = op == OpKind.RECV
    directed = incoming | (op == OpKind.SEND)
    sender = np.where(incoming, peer, np.where(directed, rank, np.minimum(rank, peer)))
    receiver = np.where(incoming, rank, np.where(directed, peer, np.maximum(rank, peer)))
    return dense_ids(comm.astype(np.int64, copy=False), seq.astype(np.int64, copy=False), np.where(p2p, sender, -1),
                     np.where(p2p, receiver, -1))


def holds_rank(start: np.ndarray, end: np.ndarray, last: np.ndarray) -> np.ndarray:
    """Whether each operator (in chain order) holds its rank until it ends: the next operator did not
    start before it ended (else it ran asynchronously); a chain's last operator is taken to hold it.
    A send is no exception: torch's ``send`` and a waited ``isend`` hold the caller (and, on a GPU,
    its compute stream) until the receiver has the data, so the wait is not the sender's compute."""
    return last | (np.r_[start[1:], 0] >= end)


@dataclass(frozen=True)
class Dependencies:
    """The graph over ``n`` operators in chain order (chains contiguous, each in start order)."""

    first: np.ndarray  # bool: the operator opens its chain (starts at its anchor plus its gap)
    holds: np.ndarray  # bool: the next operator of the chain waits for this one's end, not its start
    complete: np.ndarray  # bool: the operator's group is whole, so it ends a transfer after its last member started
    group: np.ndarray  # int64 dense group ids
    settled: np.ndarray  # bool: the operator has a level (not on or after a cycle)
    op_levels: tuple[np.ndarray, ...]  # per level: the operators whose starts it computes
    loose_levels: tuple[np.ndarray, ...]  # per level: operators of incomplete groups that end there
    member_levels: tuple[np.ndarray, ...]  # per level: members of the complete groups ending there, group by group
    member_starts: tuple[np.ndarray, ...]  # per level: where each of those groups begins in member_levels
    #: the level at which each independent part with a level begins, ascending (``dependencies``' parts)
    part_levels: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    #: the levels go part by part (or there is one part): a replay may carry clocks from part to part
    by_part: bool = True

    @property
    def levels(self) -> int:
        return len(self.op_levels)

    @property
    def acyclic(self) -> bool:
        return bool(self.settled.all())

    @cached_property
    def order(self) -> np.ndarray:
        """The settled operators in level order (each level's in the order it lists them)."""
        return np.concatenate(self.op_levels).astype(np.int64) if self.op_levels else np.zeros(0, np.int64)

    def leveled(self, values: np.ndarray) -> np.ndarray:
        """``values`` (one row per operator, chain order) in level order, the settled operators only."""
        return np.ascontiguousarray(np.asarray(values)[self.order])

    def in_chain_order(self, values: np.ndarray) -> np.ndarray:
        """Level-ordered ``values`` back in chain order; zero where an operator is not settled."""
        values = np.asarray(values)
        out = np.zeros((len(self.first), *values.shape[1:]), values.dtype)
        out[self.order] = values
        return out

    @cached_property
    def flat(self) -> tuple[np.ndarray, ...]:
        """The graph as the compiled sweep reads it, by position in ``order``: whether each opens its
        chain, whether its chain's previous operator holds the rank and that one's position, the level
        bounds, the positions not whole in their group per level, the complete groups' members
        (groups follow one another: each one's first member, and their bounds per level), and the
        parts' level bounds."""
        order = self.order
        position = np.full(len(self.first), -1, np.int64)
        position[order] = np.arange(len(order))
        before = np.maximum(order - 1, 0)
        first = self.first[order]

        def joined(parts: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
            bounds = np.r_[0, np.cumsum([len(p) for p in parts])].astype(np.int64)
            return (np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)), bounds

        op_bounds = joined(self.op_levels)[1]
        loose, loose_bounds = joined(self.loose_levels)
        members, member_bounds = joined(self.member_levels)
        # A level where no group completes has one start (0) and no members: it has no group.
        begins, group_bounds = joined(tuple(s + b if len(m) else s[:0]
                                            for s, b, m in zip(self.member_starts, member_bounds[:-1], self.member_levels)))
        return (first.astype(np.uint8), self.holds[before].astype(np.uint8), np.where(first, 0, position[before]),
                op_bounds, position[loose], loose_bounds, begins, group_bounds, position[members],
                np.r_[self.part_levels, self.levels].astype(np.int64))


def dependencies(first: np.ndarray, holds: np.ndarray, group: np.ndarray, complete: np.ndarray,
                 parts: np.ndarray | None = None) -> Dependencies:
    """Order the timing rules' graph into levels (see the module docstring). ``parts``: where each
    part of the chain order begins (a job's iterations, each replayed from its own anchors); where
    no chain and no whole group crosses from one part into another, the levels go part by part, so
    that a level of the sweep holds one part's operators: the same replay, its reads in cache."""
    n = len(first)
    if not (len(holds) == len(group) == len(complete) == n):
        raise RecordError("dependencies: first, holds, group and complete must have one value per operator")
    parts = np.zeros(0, np.int64) if parts is None else np.asarray(parts, np.int64)
    if len(parts) and (parts[0] != 0 or (np.diff(parts) <= 0).any() or parts[-1] >= max(n, 1)):
        raise RecordError("dependencies: parts must ascend from 0, each a start below the operators' count")
    first = np.asarray(first, bool)
    groups = int(group.max()) + 1 if n else 0
    if _sweep is not None and 0 < n < _COMPILED_LIMIT and groups < _COMPILED_LIMIT:
        return _compiled_dependencies(first, np.asarray(holds, bool), group, np.asarray(complete, bool), groups, parts)
    last = np.r_[first[1:], True] if n else np.zeros(0, bool)
    order = np.argsort(group, kind="stable")
    bounds = np.r_[0, np.cumsum(np.bincount(group, minlength=groups))] if n else np.zeros(1, np.int64)
    pending = np.bincount(group[complete], minlength=groups)
    level = np.full(n, -1, np.int64)
    ends_at = np.full(groups, -1, np.int64)
    frontier = np.flatnonzero(first)
    op_levels: list[np.ndarray] = []
    loose_levels: list[np.ndarray] = []
    member_levels: list[np.ndarray] = []
    member_starts: list[np.ndarray] = []
    while len(frontier):
        depth = len(op_levels)
        level[frontier] = depth
        op_levels.append(frontier)
        loose = frontier[~complete[frontier]]
        loose_levels.append(loose)
        whole = frontier[complete[frontier]]
        ids, counts = np.unique(group[whole], return_counts=True)
        pending[ids] -= counts
        done = ids[pending[ids] == 0]
        ends_at[done] = depth
        members, offsets = _members(done, order, bounds)
        member_levels.append(members)
        member_starts.append(offsets)
        # Next: the successor of an operator whose clock is its start or its own end (known now),
        # and of every holding member of a group that ended now.
        by_start = frontier[~(holds[frontier] & complete[frontier]) & ~last[frontier]]
        by_group = members[holds[members] & ~last[members]]
        # A sort, not a unique: the two never share an operator (one excludes what the other holds
        # to its group's end), and each operator has one successor, so none repeats.
        frontier = np.sort(np.r_[by_start, by_group] + 1)
    lists = tuple(tuple(levels) for levels in (op_levels, loose_levels, member_levels, member_starts))
    part_levels = np.zeros(1, np.int64)
    split = _split_by_part(first, np.asarray(complete, bool), group, groups, parts, level, ends_at)
    if split is not None:
        part_levels = np.unique(split[2])  # a part without a level begins where the next one does
        lists = _listed_by_level(split[0], split[1], np.asarray(complete, bool), order, bounds)
    return Dependencies(first=first, holds=np.asarray(holds, bool), complete=np.asarray(complete, bool), group=group,
                        settled=level >= 0, op_levels=lists[0], loose_levels=lists[1], member_levels=lists[2],
                        member_starts=lists[3], part_levels=part_levels, by_part=len(parts) < 2 or split is not None)


def _members(done: np.ndarray, order: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The members of the groups ``done``, group by group (``order``: operators by group, ``bounds``:
    where each group's begin), and where each group begins among them."""
    sizes = bounds[done + 1] - bounds[done]
    offsets = np.r_[0, np.cumsum(sizes)[:-1]]
    return order[np.repeat(bounds[done] - offsets, sizes) + np.arange(int(sizes.sum()))], offsets


def _split_by_part(first: np.ndarray, complete: np.ndarray, group: np.ndarray, groups: int, parts: np.ndarray,
                   level: np.ndarray, ends_at: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Each operator's and group's level renumbered part by part, and the level each part begins
    at (``_sweep.c``'s ``split_by_part``, whose reference this is), or None where a chain or a whole
    group crosses parts. Each part keeps its levels' order and none is empty: an operator past
    level 0 waits on one of its part's."""
    n = len(first)
    if len(parts) < 2 or not first[parts[1:]].all():
        return None
    part = np.repeat(np.arange(len(parts)), np.diff(np.r_[parts, n]))
    whole = np.flatnonzero(complete)
    lowest, highest = np.full(groups, len(parts)), np.full(groups, -1)
    np.minimum.at(lowest, group[whole], part[whole])
    np.maximum.at(highest, group[whole], part[whole])
    if (lowest[highest >= 0] != highest[highest >= 0]).any():
        return None
    depth = np.zeros(len(parts), np.int64)
    np.maximum.at(depth, part, level + 1)
    offset = np.r_[0, np.cumsum(depth)]
    return (np.where(level >= 0, level + offset[part], -1),
            np.where(ends_at >= 0, ends_at + offset[np.maximum(highest, 0)], -1), offset[:-1])


def _listed_by_level(level: np.ndarray, ends_at: np.ndarray, complete: np.ndarray, order: np.ndarray,
                     bounds: np.ndarray) -> tuple[tuple[np.ndarray, ...], ...]:
    """``Dependencies``' per-level lists from each operator's level and each group's ending level
    (-1: none), listed as the numpy frontier lists them: ascending, groups by id."""
    count = int(level.max()) + 1 if len(level) else 0
    settled = np.flatnonzero(level >= 0)
    ops = settled[np.argsort(level[settled], kind="stable")]
    op_bounds = np.searchsorted(level[ops], np.arange(count + 1))
    ended = np.flatnonzero(ends_at >= 0)
    ended = ended[np.argsort(ends_at[ended], kind="stable")]
    group_bounds = np.searchsorted(ends_at[ended], np.arange(count + 1))
    op_levels, loose_levels, member_levels, member_starts = [], [], [], []
    for d in range(count):
        mine = ops[op_bounds[d]:op_bounds[d + 1]]
        op_levels.append(mine)
        loose_levels.append(mine[~complete[mine]])
        done = ended[group_bounds[d]:group_bounds[d + 1]]
        members, offsets = _members(done, order, bounds)
        member_levels.append(members)
        member_starts.append(offsets)
    return tuple(op_levels), tuple(loose_levels), tuple(member_levels), tuple(member_starts)


def _compiled_dependencies(first: np.ndarray, holds: np.ndarray, group: np.ndarray, complete: np.ndarray,
                           groups: int, parts: np.ndarray) -> Dependencies:
    """``dependencies`` from the compiled leveling (``_sweep.levels``): the same levels in the same order."""
    n = len(first)
    settled = np.empty(n, np.uint8)
    op_order, loose, members = (np.empty(n, np.int64) for _ in range(3))
    op_bounds, loose_bounds, member_bounds, begin_bounds = (np.empty(n + 1, np.int64) for _ in range(4))
    begins = np.empty(max(groups, 1), np.int64)
    part_levels = np.empty(max(len(parts), 1), np.int64)
    opens, waits, whole = (np.ascontiguousarray(a).view(np.uint8) for a in (first, holds, complete))
    count = _sweep.levels(n, groups, opens, waits, whole, np.ascontiguousarray(group, np.int64), parts, settled,
                          op_order, op_bounds, loose, loose_bounds, members, member_bounds, begins, begin_bounds,
                          part_levels)

    def per_level(values: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, ...]:
        return tuple(values[bounds[d]:bounds[d + 1]] for d in range(count))

    # A level where no group ends starts its one (empty) run of members at 0, as the numpy frontier's offsets do.
    starts = tuple(s if len(s) else np.zeros(1, np.int64) for s in per_level(begins, begin_bounds))
    return Dependencies(
        first=first, holds=holds, complete=complete, group=group, settled=settled.view(bool),
        op_levels=per_level(op_order, op_bounds), loose_levels=per_level(loose, loose_bounds),
        member_levels=per_level(members, member_bounds), member_starts=starts, part_levels=np.unique(part_levels),
        by_part=len(parts) < 2 or bool(part_levels[1:].any()),
    )


def carry_links(deps: Dependencies, continues: np.ndarray) -> np.ndarray:
    """Per operator (chain order), the flags by which a replay carries its rank's clock from part to
    part (``CONTINUES``, ``CLOSES_AT_END``, ``CLOSES_AT_START``): a chain's first operator where
    ``continues`` says its rank's chain of an earlier part goes on in it, and every chain's last
    operator, leaving its end where it holds the rank and its start where not."""
    if not deps.by_part:
        raise RecordError("carry_links: the levels do not go part by part (a chain or group crosses parts)")
    continues = np.asarray(continues, bool)
    if len(continues) != len(deps.first):
        raise RecordError("carry_links: continues must have one value per operator")
    last = np.r_[deps.first[1:], True] if len(deps.first) else np.zeros(0, bool)
    closes = np.where(deps.holds, CLOSES_AT_END, CLOSES_AT_START) * last
    return (np.where(deps.first & continues, CONTINUES, 0) | closes).astype(np.uint8)


def replay(deps: Dependencies, *, anchor: np.ndarray, gap: np.ndarray, transfer: np.ndarray, own: np.ndarray,
           link: np.ndarray | None = None, slot: np.ndarray | None = None,
           carry: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Starts and ends (float64) of every operator given each chain's ``anchor`` (its clock before
    its first operator), each operator's ``gap``, its group's ``transfer`` and its ``own`` length
    (used where its group is not whole). Arrays may carry a second axis of variants, replayed
    together (rows are operators, so a level gathers whole rows); operators off the settled graph keep NaN.

    ``link`` (``carry_links``), ``slot`` (each operator's rank) and ``carry`` (slots, variants; read
    and written): each part's chains continue from their rank's carried clock, kept relative to the
    latest end of the part before, so that each part's times are its own (see ``_sweep.c``)."""
    arrays = [np.asarray(a, np.float64) for a in (anchor, gap, transfer, own)]
    width = max((a.shape[1] for a in arrays if a.ndim == 2), default=0)
    if carry is not None:
        width = max(width, carry.shape[1])
    shape = (len(deps.first), width) if width else (len(deps.first),)
    anchor, gap, transfer, own = (a[:, None] if width and a.ndim == 1 else a for a in arrays)
    # Every settled operator is written below; only those on or after a cycle keep the NaN.
    start, end = np.empty(shape), np.empty(shape)
    if not deps.acyclic:
        start[~deps.settled] = end[~deps.settled] = np.nan
    first = deps.first if not width else deps.first[:, None]
    holds = deps.holds if not width else deps.holds[:, None]
    links = (link, slot, carry) if link is not None and slot is not None and carry is not None else None
    bounds = np.r_[deps.part_levels, deps.levels] if links is not None else np.array([0, deps.levels])
    levels = list(zip(deps.op_levels, deps.loose_levels, deps.member_levels, deps.member_starts))
    for begin, past in zip(bounds[:-1], bounds[1:]):
        for ops, loose, members, starts in levels[begin:past]:
            before = ops - 1
            clock = np.where(holds[before], end[before], start[before])
            opening = anchor[ops]
            if links is not None:
                flags, slots, clocks = links
                opening = opening + np.where((flags[ops] & CONTINUES > 0)[:, None], clocks[slots[ops]], 0.0)
            start[ops] = np.where(first[ops], opening, clock) + gap[ops]
            end[loose] = start[loose] + own[loose]
            if len(members):
                latest = np.maximum.reduceat(start[members], starts, axis=0)
                sizes = np.diff(np.r_[starts, len(members)])
                end[members] = np.repeat(latest, sizes, axis=0) + transfer[members]
        if links is not None and past > begin:
            flags, slots, clocks = links
            ops = np.concatenate([level[0] for level in levels[begin:past]])
            for flag, times in ((CLOSES_AT_END, end), (CLOSES_AT_START, start)):
                closing = ops[flags[ops] & flag > 0]
                clocks[slots[closing]] = times[closing]
            clocks -= end[ops].max(axis=0)
    return start, end


#: Variants the compiled sweep replays together: rows of this many floats per operator keep a
#: level's reads in few cache lines, and buffers this narrow are reused from one chunk to the next.
_SWEEP_VARIANTS = 8
#: Floats per operator array the numpy sweep may hold at once (bounds memory at 8,192 GPUs and up).
_NUMPY_VALUES = 1 << 25


_buffers = threading.local()


def _scratch(size: int) -> tuple[np.ndarray, np.ndarray]:
    """This thread's start and end buffers of at least ``size`` floats, kept for the next replay: a
    fresh array pays a page fault per 4 KiB it touches, at 8,192 GPUs as much as the sweep itself.
    They grow to the widest part the thread replayed (up to 8 floats per operator of that part)."""
    held = getattr(_buffers, "pair", None)
    if held is None or len(held[0]) < size:
        held = _buffers.pair = (np.empty(size), np.empty(size))
    return held


def latest_ends(deps: Dependencies, *, segments: np.ndarray, anchor: np.ndarray, gap: np.ndarray,
                ideal_gap: np.ndarray, transfer: np.ndarray, ideal_transfer: np.ndarray, own: np.ndarray,
                keep_gap: np.ndarray, keep_transfer: np.ndarray, link: np.ndarray | None = None,
                slot: np.ndarray | None = None, carry: np.ndarray | None = None) -> np.ndarray:
    """The latest end of each segment of operators (``segments``: where each begins in chain order,
    from 0 up) in every variant of :func:`replay`, shape (segments, W). Every other input is given
    in level order, one row per operator of ``deps.order`` (what :meth:`Dependencies.leveled` gives):
    variant ``w`` of an operator keeps its recorded gap where ``keep_gap[k, w]`` and takes its
    ``ideal_gap`` otherwise, likewise for transfers. The compiled sweep when built, else numpy's.

    With ``link`` (``carry_links``, leveled), ``slot`` (leveled ranks) and ``carry`` (ranks by W,
    the clocks carried in, relative to 0; written with those carried out): the chains go on from
    part to part, each part's ends measured from the latest end of the one before (its segments,
    a part's, are then its lengths on the job's one timeline)."""
    keep_gap, keep_transfer = np.asarray(keep_gap, bool), np.asarray(keep_transfer, bool)
    order = deps.order
    width = keep_gap.shape[1]
    if keep_gap.shape != keep_transfer.shape or len(keep_gap) != len(order):
        raise RecordError(f"latest_ends: keep masks of {len(order)} operators (the settled ones) by one column a variant")
    links = _checked_links(link, slot, carry, len(order), width)
    out = np.empty((len(segments), width))
    if _sweep is None or not len(order):
        chain = [deps.in_chain_order(a) for a in (anchor, gap, ideal_gap, transfer, ideal_transfer, own)]
        anchor, gap, ideal_gap, transfer, ideal_transfer, own = chain
        step = max(1, _NUMPY_VALUES // max(len(deps.first), 1))
        for begin in range(0, width, step):
            part = slice(begin, min(begin + step, width))
            kept_gap, kept_transfer = (deps.in_chain_order(m[:, part]) > 0 for m in (keep_gap, keep_transfer))
            held = links[2][:, part].copy() if links is not None else None
            _, end = replay(deps, anchor=anchor, gap=np.where(kept_gap, gap[:, None], ideal_gap[:, None]),
                            transfer=np.where(kept_transfer, transfer[:, None], ideal_transfer[:, None]), own=own,
                            link=None if links is None else deps.in_chain_order(links[0]),
                            slot=None if links is None else deps.in_chain_order(links[1]), carry=held)
            out[:, part] = np.maximum.reduceat(end, segments, axis=0)
            if links is not None:
                links[2][:, part] = held
        return out
    segment = np.searchsorted(segments, order, side="right") - 1
    anchor, gap, ideal_gap, transfer, ideal_transfer, own = (
        np.ascontiguousarray(a, np.float64) for a in (anchor, gap, ideal_gap, transfer, ideal_transfer, own))
    gap_mask, transfer_mask = (np.ascontiguousarray(m).view(np.uint8) for m in (keep_gap, keep_transfer))
    first, holds_previous, previous, op_bounds, loose, loose_bounds, group_begin, group_bounds, members, parts = deps.flat
    chunk = min(width, _SWEEP_VARIANTS)
    buffers = _scratch(int(np.diff(op_bounds[parts]).max()) * chunk)  # one part's rows at a time
    flags = np.ascontiguousarray(links[0], np.uint8) if links is not None else np.zeros(0, np.uint8)
    slots = np.ascontiguousarray(links[1], np.int32) if links is not None else np.zeros(0, np.int32)
    for begin in range(0, width, chunk):
        latest = np.empty((len(segments), min(chunk, width - begin)))
        columns = slice(begin, begin + latest.shape[1])
        held = np.ascontiguousarray(links[2][:, columns], np.float64) if links is not None else np.zeros(0)
        _sweep.sweep(latest.shape[1], width, begin, first, holds_previous, previous, op_bounds, loose, loose_bounds,
                     group_begin, group_bounds, members, parts, segment, anchor, gap, ideal_gap, transfer,
                     ideal_transfer, own, gap_mask, transfer_mask, slots, flags, buffers[0], buffers[1], latest, held)
        out[:, columns] = latest
        if links is not None:
            links[2][:, columns] = held
    if not deps.acyclic:  # a segment with an operator on or after a cycle has no end, as in replay
        out[np.unique(np.searchsorted(segments, np.flatnonzero(~deps.settled), side="right") - 1)] = np.nan
    return out


def _checked_links(link: np.ndarray | None, slot: np.ndarray | None, carry: np.ndarray | None, operators: int,
                   width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``latest_ends``' carry arguments, all three or none, each of its shape."""
    if link is None and slot is None and carry is None:
        return None
    if (link is None or slot is None or carry is None or len(link) != operators or len(slot) != operators
            or carry.shape[1:] != (width,) or (len(slot) and not 0 <= slot.min() <= slot.max() < len(carry))):
        raise RecordError(f"latest_ends: link and slot of {operators} operators and carry of each slot by {width} "
                          "variants, all three or none")
    return link, slot, carry


def downstream(deps: Dependencies, sources: np.ndarray) -> np.ndarray:
    """The operators whose replay waits, directly or not, on a ``sources`` operator: the next one of
    its chain, whatever holds, and every member of a group one of whose members waits."""
    n = len(deps.first)
    if not n or not sources.any():
        return sources.copy()
    groups = int(deps.group.max()) + 1
    # Nodes: operators 0..n-1, groups n..n+G-1, one root n+G joined to every source.
    ops = np.arange(n)
    chained = ops[1:][~deps.first[1:]]
    rows = np.r_[ops, n + deps.group[chained - 1], np.full(int(sources.sum()), n + groups)]
    cols = np.r_[n + deps.group, chained, np.flatnonzero(sources)]
    graph = csr_matrix((np.ones(len(rows), np.int8), (rows, cols)), shape=(n + groups + 1, n + groups + 1))
    reached = breadth_first_order(graph, n + groups, directed=True, return_predecessors=False)
    group_reached = np.zeros(groups, bool)
    group_reached[reached[(reached >= n) & (reached < n + groups)] - n] = True
    return group_reached[deps.group]
