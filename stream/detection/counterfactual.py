"""Counterfactual replay: how long each operator would have lasted without the slowdowns its chunk shows.

The forest judges an operator by how it compares with its own past and its neighbours. What the
labels ask (docs/design.md) is different: did the operator run over 5% longer than it would have in the
same run without the fault? Where a chunk holds every member of the groups it touches (a whole job
in one place), that question can be answered by replaying the chunk under the timing rules that
make records wait for each other (docs/design.md, "blocking and transfer"):

* each rank runs its operators in start order; an operator starts a *gap* after the rank's clock,
  which is the end of the previous operator, or its start when that operator did not hold the rank
  (a send, or an asynchronous operator the next one started before it ended);
* a group (a collective's members, a send and its receive) ends a *transfer* after its last member
  started.

The replay keeps every gap and every transfer as recorded, jitter and benign pauses included,
except two kinds of slowdown it puts back:

* a group's transfer more than ``transfer_cut`` times its usual one (the ``transfer_ratio``
  feature: the identity's window of normal transfers) goes back to the usual one: a slow NIC,
  link or switch;
* a rank whose compute between operators runs ``compute_cut`` times or more that of the ranks
  running the same program in the same iteration (the median over its gaps: one pause moves one
  gap, a slow GPU every gap) gets its compute divided by that factor; a gap is the rank's launch
  (its shortest gap), which the factor leaves alone, plus compute.

Then every start and end is recomputed by the shared replay (``sleuth.whatif.timeline``, which the
what-if attribution runs too), and an operator is abnormal when it ran more than
``excess`` times its replayed length. Records in a group with fewer members in the chunk than its
communicator has shown (``Chunk.transfer`` is NaN) cannot be replayed, nor can anything that
waited on them; ``Replayed.certain`` says which records the replay speaks for. A worker that never
sees a communicator's other members cannot know they exist and takes its part for the whole
group, which is why the workers run without the replay by default (``stream_detector.py``).

The model is the replay's (``timeline.holds_rank``): compute does not overlap a blocking operator,
and an operator, a send too, blocks unless the rank's next one started before it ended. On real
GPUs compute overlaps communication, so on real records the replay is an estimate whose error is
not measured (docs/detection.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from sleuth.stream.detection.features import FEATURE_NAMES, Chunk
from sleuth.validation import number_above
from sleuth.whatif.keys import group_median
from sleuth.stream.detection.rules import DETECTION_RULES
from sleuth.whatif.programs import program_slots
from sleuth.whatif.rules import ATTRIBUTION_RULES
from sleuth.whatif.timeline import dependencies, downstream, holds_rank, replay

__all__ = ["EXCESS", "CounterfactualReplay", "Replayed"]

#: The labels' line (``DetectionRules.excess``), the replay's default.
EXCESS = DETECTION_RULES.excess

_log = logging.getLogger(__name__)

_TRANSFER_RATIO = FEATURE_NAMES.index("transfer_ratio")
_OP = FEATURE_NAMES.index("op")
_NBYTES = FEATURE_NAMES.index("nbytes")


@dataclass(frozen=True)
class Replayed:
    """The replay of one chunk, aligned with the chunk's rows."""

    duration: np.ndarray  # float64 ns: each operator's replayed length
    certain: np.ndarray  # bool: the replay covers the operator (its groups and what it waited on were all in the chunk)
    restored_groups: int  # groups whose transfer was put back to the usual one
    restored_ranks: int  # ranks (per iteration) whose compute was scaled back
    levels: int  # levels of the dependency graph the replay swept (0: the chunk replayed as recorded)


class CounterfactualReplay:
    """Replays chunks in order; each rank's clocks carry from one chunk to the next.

    ``transfer_cut``: a transfer over this multiple of its usual one is put back (a slowed transfer
    runs several times its usual length, a transfer's jitter stays far below it, so any cut between
    the two puts back the same transfers). ``compute_cut``: a rank whose compute runs this much
    longer than its program's peers' has it scaled back. ``excess``: the abnormal line. Defaults:
    ``DetectionRules``.
    """

    def __init__(self, *, transfer_cut: float = DETECTION_RULES.transfer_cut,
                 compute_cut: float = DETECTION_RULES.compute_cut, excess: float = EXCESS) -> None:
        for name, value in (("transfer_cut", transfer_cut), ("compute_cut", compute_cut), ("excess", excess)):
            number_above(name, value, 1)
        self.transfer_cut = float(transfer_cut)
        self.compute_cut = float(compute_cut)
        self.excess = float(excess)
        # Per (job, rank) row of the feature windows: the rank's clock after its last replayed
        # operator, as recorded and as replayed, so a chunk starts where the last one ended.
        self._observed_clock = np.zeros(0, np.int64)
        self._replayed_clock = np.zeros(0, np.int64)
        self._known = np.zeros(0, bool)

    def abnormal(self, chunk: Chunk, fallback: np.ndarray) -> np.ndarray:
        """The chunk rows' abnormal flags: the replay's verdict where it is certain, ``fallback`` elsewhere."""
        replayed = self.replay(chunk)
        return np.where(replayed.certain, chunk.duration > self.excess * replayed.duration, fallback)

    def replay(self, chunk: Chunk) -> Replayed:
        """Replay ``chunk`` (``OperatorWindows.features`` of the next records in time)."""
        n = len(chunk.index)
        if not n:
            return Replayed(np.zeros(0), np.zeros(0, bool), 0, 0, 0)
        start = chunk.start
        end = start + chunk.duration.astype(np.int64)
        op = chunk.X[:, _OP].astype(np.int64)
        rank = chunk.rank_rows
        self._grow(int(rank.max()) + 1)

        # Each rank's operators in start order (a send before the receive that starts with it).
        order = np.lexsort((op, start, rank))
        inverse = np.empty(n, np.int64)
        inverse[order] = np.arange(n)
        s, e, o, r = start[order], end[order], op[order], rank[order]
        first = np.r_[True, r[1:] != r[:-1]]
        last = np.r_[r[1:] != r[:-1], True]
        holds = holds_rank(s, e, last)
        clock = np.where(holds, e, s)
        carried = self._known[r] & first
        base = np.where(first, np.where(carried, self._observed_clock[r], s), np.r_[0, clock[:-1]])
        gap = np.maximum(s - base, 0)
        anchor = np.where(carried, self._replayed_clock[r], s)  # where a rank's first operator's gap starts

        factor, launch = _gap_factors(gap, o, chunk.X[order, _NBYTES].astype(np.int64), r, chunk.iteration[order], first)
        slow_rank = factor >= self.compute_cut
        # A gap is a launch, which a slow GPU does not slow, plus compute, which it slows by the factor.
        gap_cf = np.where(slow_rank, np.rint(launch + (gap - launch) / factor), gap).astype(np.int64)

        group = chunk.group[order]  # dense ids
        complete = ~np.isnan(chunk.transfer[order])
        ratio = np.nan_to_num(chunk.X[order, _TRANSFER_RATIO], nan=0.0)
        group_order = np.argsort(group, kind="stable")
        bounds = np.r_[0, np.flatnonzero(np.diff(group[group_order])) + 1]
        group_ratio = np.maximum.reduceat(ratio[group_order], bounds)[group]
        slowed = complete & (group_ratio > self.transfer_cut)
        transfer = np.where(complete, e - np.maximum.reduceat(s[group_order], bounds)[group], 0)
        transfer_cf = np.where(slowed, np.rint(transfer / np.where(slowed, group_ratio, 1.0)), transfer).astype(np.int64)

        s_cf, e_cf, levels = s, e, 0
        uncertain = ~complete
        # Nothing put back, every group whole and every rank where the last chunk left it: the
        # replay is the run itself.
        if slowed.any() or slow_rank.any() or uncertain.any() or (carried & (anchor != base)).any():
            deps = dependencies(first, holds, group, complete)
            if deps.acyclic:
                replayed = replay(deps, anchor=anchor, gap=gap_cf, transfer=transfer_cf, own=e - s)
                s_cf, e_cf = replayed[0].astype(np.int64), replayed[1].astype(np.int64)
                # What the replay cannot speak for: groups with members elsewhere, and whatever waited on them.
                uncertain = downstream(deps, ~complete)
                levels = deps.levels
            else:
                # Some rank's program order contradicts a group's (clocks skewed between hosts, or
                # operators logged out of order). The replay then speaks for nothing here.
                _log.warning("counterfactual replay did not settle: %d of %d operators wait on a cycle; "
                             "the forest judges this chunk alone", int((~deps.settled).sum()), n)
                uncertain = np.ones(n, bool)

        ends_at = np.flatnonzero(last)
        self._observed_clock[r[ends_at]] = clock[ends_at]
        self._replayed_clock[r[ends_at]] = np.where(holds, e_cf, s_cf)[ends_at]
        # A rank whose last operator the replay could not speak for starts the next chunk afresh,
        # from its recorded start, rather than from a replayed clock that may be wrong.
        self._known[r[ends_at]] = ~uncertain[ends_at]
        duration = (e_cf - s_cf).astype(np.float64)[inverse]
        restored_ranks = len(np.unique(np.stack([r[slow_rank], chunk.iteration[order][slow_rank]]), axis=1).T)
        return Replayed(duration, ~uncertain[inverse], int(len(np.unique(group[slowed]))), restored_ranks, levels)

    def renumber(self, rank_map: np.ndarray) -> None:
        """Follow ``OperatorWindows.forget``: the rank rows it dropped (-1) go, the others move."""
        kept = np.flatnonzero(rank_map[: len(self._known)] >= 0)
        for name in ("_observed_clock", "_replayed_clock", "_known"):
            old = getattr(self, name)
            new = np.zeros(int(rank_map.max(initial=-1)) + 1, old.dtype)
            new[rank_map[kept]] = old[kept]
            setattr(self, name, new)

    def _grow(self, size: int) -> None:
        if size > len(self._known):
            grown = max(size, 2 * len(self._known), 64)
            for name, fill in (("_observed_clock", 0), ("_replayed_clock", 0), ("_known", False)):
                old = getattr(self, name)
                new = np.full(grown, fill, old.dtype)
                new[: len(old)] = old
                setattr(self, name, new)


def _gap_factors(gap: np.ndarray, op: np.ndarray, nbytes: np.ndarray, rank: np.ndarray, iteration: np.ndarray,
                 first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per operator, how much longer its rank's gaps ran in the iteration than those of the ranks
    running the same program (1 where fewer than ``AttributionRules.min_peers`` ranks run it), and the rank's launch.

    A gap is the launch (the rank's shortest gap) plus compute, and a rank's factor is the median
    of its compute over the slot medians (``sleuth.whatif.programs``).
    """
    slots = program_slots(op, nbytes, rank, iteration, first)
    run_id, run_start = slots.run, slots.run_start
    run = np.zeros(len(gap), bool)
    run[run_start] = True
    # The launch: a run's shortest gap after its first (between operators with no compute between).
    later = np.where(run, np.iinfo(np.int64).max, gap)
    launch = np.minimum.reduceat(later, run_start)
    launch = np.where(launch == np.iinfo(np.int64).max, 0, launch)[run_id]
    compute = (gap - launch).astype(np.float64)
    slot_median = group_median(slots.slot, compute)
    # Only gaps that are mostly compute measure the slowdown; a launch's jitter would swamp the rest.
    ratio = compute / np.where(slot_median > 4 * launch, slot_median, np.nan)
    usable = ~np.isnan(ratio) & (slots.peers >= ATTRIBUTION_RULES.min_peers)
    factor = np.ones(len(run_start))
    if usable.any():
        medians = group_median(run_id[usable], ratio[usable], size=len(run_start))
        factor = np.where(np.isnan(medians), 1.0, medians)
    return factor[run_id], launch
