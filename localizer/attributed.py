"""Incidents from what the job pays (``sleuth.whatif``), however the slowdown arrived.

A δ-irregular iteration finds sudden faults only. The what-if attribution measures, per iteration,
how much longer the job ran than with every operator at its peers' length (S); a run of at least
``sustain`` iterations at or above ``slowdown`` is an *episode* the job pays for, whether it came
as a spike, a step, a ramp or was there from the first iteration. Per episode:

* a non-hardware cause is named and no device is blamed (What-if §5.2-§5.4): *stage imbalance*
  when evening out the pipeline's split explains most of the slowdown (``split_slowdown``, in
  the log: S is the product of the split's part and the stragglers'); *sequence-length
  imbalance* when compute carries most of it, the top worker's host does not explain most of it,
  and the work moves between the episode's iterations (``work_moves``); *scattered pauses* when
  instead one rank at a time computes longest, another each time (``pauses_move``);
* otherwise the device search (``whatif_search``) starts from the ranks the worker slowdowns name: per rank, the
  slowdown of everything fixed but that rank (compute roots, split with the host when its host's
  other GPUs are as slow), and the groups whose transfers were put back (network roots), each
  weighted by its share of the iteration's slowdown and by the share of compute or transfers in
  S_t; the evidence is scored as the search's is (``scoring``).

S is the product of the stragglers' part and the pipeline split's (``Part``): each part that
costs the job the slowdown line on its own gets its own incident (an uneven split and a broken
GPU are two things to fix), else the whole episode gets one. A split's incident stands beside an
irregular iteration's (the split is the same in every iteration and explains none of them).

An episode an irregular iteration's incident covers gets no incident of its own; that incident
takes the what-if suspects of a side whose first what-if suspect it lacks, and the what-if's GPUs
on hosts its own compute suspects are not on (``complement``: a second, moderate fault that never
made an iteration irregular, a search from one irregular iteration that the whole job's
attribution contradicts, a second straggler its search did not reach), and the
side the job pays most for (S_t) leads its list, the what-if's own suspects first (``lead``), and it
spans the whole episode (``grown_to_episode``). A brief, cheap pause whose device pauses nowhere
else is a *hiccup* (``hiccup``): recorded, never paged.
"""

from __future__ import annotations

import enum
import math
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.stats import binom, combine_pvalues, mannwhitneyu, median_abs_deviation, norm

from sleuth.jobspec import JobSpec
from sleuth.sources import RecordSource
from sleuth.topology import DeviceKind, Routing, Topology
from sleuth.topology.ids import parse_device
from sleuth.whatif.attribution import COMPUTE, Attribution
from sleuth.whatif.rules import ATTRIBUTION_RULES
from sleuth.whatif.contributors import compute_put_back, rank_compute_slowdowns, slow_groups, transfer_groups

from sleuth.localizer.carried import weighed
from sleuth.localizer.explain import leading_with_own_cables
from sleuth.localizer.graph import OperatorGraph
from sleuth.localizer.impact import Impact
from sleuth.localizer.incident import AttributionSummary, Incident, IncidentCause, RootOperator, Suspect
from sleuth.localizer.nonhardware import ADVICE, Straggler
from sleuth.localizer.rules import LOCALIZER_RULES
from sleuth.localizer.scoring import Priors, accumulate, map_scores, tied_advice
from sleuth.localizer.search import Cause, Root

__all__ = ["Episode", "Part", "at_steps", "complement", "diagnose", "diagnose_episode", "episodes", "evidence_iterations", "grown_to_episode", "hiccup", "impact_over",
           "jitter_transfers_dropped", "lead", "outside_episodes", "paid_sides", "parts", "pauses_move", "runs", "slowdown_incident", "split_led", "steady_straggler",
           "summary", "tied_devices", "uncharged_device", "unpaid_compute", "unpaid_side", "unpaid_straggler_cause",
           "whatif_search", "work_moves"]

_RULES = LOCALIZER_RULES
_NS_PER_HOUR = 3_600e9
#: Places a step may start or end at in a long run (``_levels``): cuts within a few iterations of
#: thousands are the same cut, and the shuffles stay a fraction of a second.
_STEP_EDGES = 128


@dataclass(frozen=True)
class Episode:
    """Consecutive iterations at or above the slowdown line."""

    iterations: tuple[int, ...]
    peak: float  # the largest per-iteration S in it
    #: its iterations over the line (not the dips): where the job paid, and where a fluctuating
    #: device was slow (between them, anyone's jitter is the costliest)
    paid: tuple[int, ...] = ()
    cut: bool = False  # a step cut it from a longer run (``at_steps``): its own causes, its own attribution
    #: its transfers cost more over its iterations than the job's did outside every episode, or too
    #: few iterations lie on either side to tell (``_transfers_pay``): a device on a path is in play
    transfers: bool = True
    #: its transfers alone cost the job the line, the same ones in the steps they paid it in
    #: (``_transfers_alone``): a device on a path, whatever compute's stragglers cost beside it
    network: bool = False


def episodes(attribution: Attribution, *, slowdown: float, sustain: int) -> tuple[tuple[Episode, ...], tuple[Episode, ...]]:
    """(sustained episodes, shorter runs) of per-iteration S at or above ``slowdown``, the sustained
    ones cut where what the job pays steps (``at_steps``)."""
    sustained, short = runs(attribution.iterations, attribution.per_iteration, slowdown=slowdown, sustain=sustain)
    level = dict(zip(attribution.iterations, attribution.per_iteration))
    pieces = tuple(p for e in sustained for p in at_steps(e, level, slowdown=slowdown, sustain=sustain))
    # Quiet: under the line, outside every run over it. A short run is a spike, or a fluctuating
    # device's other turn, which slows the same transfers as the episode does.
    inside = {i for e in pieces + short for i in e.iterations}
    quiet = [i for i in attribution.iterations if i not in inside]
    return tuple(replace(e, transfers=_transfers_pay(attribution, e.iterations, quiet),
                         network=_transfers_alone(attribution, e.iterations, slowdown=slowdown)) for e in pieces), short


def _transfers_pay(attribution: Attribution, episode: Sequence[int], quiet: Sequence[int]) -> bool:
    """Whether a transfer type paid more (S_t - 1 per iteration) over an ``episode``'s iterations
    than over the ``quiet`` ones (Mann-Whitney U, one-sided, at ``significance`` shared among the
    types): a slow link slows its transfers in its episode only, where a loaded host's jitter delays
    them everywhere. Its dips count too: a slow link slows every step it lasts, and its paying steps
    alone are chosen for paying. True where too few iterations lie on either side for the test to
    reach that level."""
    kinds = [k for k, name in enumerate(attribution.by_type) if name != COMPUTE]
    if attribution.by_type_ns is None or not kinds:
        return True
    its = np.asarray(attribution.iterations)
    rows, others = np.isin(its, np.asarray(list(episode))), np.isin(its, np.asarray(list(quiet)))
    level = _RULES.significance / len(kinds)
    # The smallest p the test can give is 1 / C(n, the episode's): compared as integers, which a long job's overflow floats.
    if not rows.any() or not others.any() or math.comb(int(rows.sum() + others.sum()), int(rows.sum())) <= 1.0 / level:
        return True
    excess = _type_excess(attribution)
    return any(mannwhitneyu(excess[rows, k], excess[others, k], alternative="greater").pvalue < level for k in kinds)


def _transfers_alone(attribution: Attribution, episode: Sequence[int], *, slowdown: float) -> bool:
    """Whether the transfer types alone (their S_t - 1, summed) cost the job ``slowdown`` over the
    ``episode``'s iterations, and in the iterations they cost it the line on their own, at least two,
    most of what transfers ran beyond their peers was the same transfers' in most of them
    (``Attribution.persistent_transfers``): a slow link, NIC or switch lengthens the transfers through
    it whenever it is slow, and pauses striking one worker, then another, cost compute beside it
    without hiding it; a loaded host's jitter lengthens one transfer, then another."""
    kinds = [k for k, name in enumerate(attribution.by_type) if name != COMPUTE]
    if attribution.by_type_ns is None or not kinds:
        return False
    its = np.asarray(attribution.iterations)
    rows = np.isin(its, np.asarray(list(episode), dtype=np.int64))
    excess = np.clip(_type_excess(attribution)[rows][:, kinds], 0.0, None).sum(axis=1)
    ideal = np.asarray(attribution.ideal_ns, dtype=np.float64)[rows]
    if float(excess @ ideal) < (slowdown - 1.0) * float(ideal.sum()):
        return False
    paid = its[rows][excess >= slowdown - 1.0]
    return len(paid) >= 2 and attribution.persistent_transfers(paid.tolist(), most=_RULES.majority) >= _RULES.majority


def _split_excess(attribution: Attribution) -> np.ndarray:
    """Per attributed iteration, what an even pipeline split saves there (S_split - 1)."""
    return _over_ideal(attribution, attribution.hardware_ideal_ns)


def _type_excess(attribution: Attribution) -> np.ndarray:
    """Per attributed iteration and operator type (``by_type``'s order), S_t - 1 there (0 where its
    ideal is nothing); ``by_type_ns`` must be measured."""
    if attribution.by_type_ns is None:
        raise ValueError("the attribution's per-iteration S_t (by_type_ns) was not measured")
    return _over_ideal(attribution, attribution.by_type_ns)


def _over_ideal(attribution: Attribution, spent: Sequence[float] | np.ndarray) -> np.ndarray:
    """Per attributed iteration (a row, where ``spent`` has columns), ``spent`` over its ideal, less 1
    (0 where the ideal is nothing)."""
    spent = np.asarray(spent, dtype=np.float64)
    ideal = np.asarray(attribution.ideal_ns, dtype=np.float64).reshape((-1,) + (1,) * (spent.ndim - 1))
    return np.divide(spent, ideal, out=np.ones_like(spent), where=ideal > 0) - 1.0


def runs(iterations: Sequence[int], per_iteration: Sequence[float], *, slowdown: float,
         sustain: int) -> tuple[tuple[Episode, ...], tuple[Episode, ...]]:
    """(sustained episodes, shorter runs) of consecutive iterations whose S is at or above ``slowdown``.

    Runs apart by fewer than ``sustain`` iterations under the line are one run, the dip within it:
    a slowdown that eases for an iteration or two goes on (the pause ``sustain`` outlasts, the
    other way round). A run is sustained when ``sustain`` of its iterations are over the line."""
    per = np.asarray(per_iteration, dtype=np.float64)
    its = tuple(int(i) for i in iterations)
    above = per >= slowdown
    edges = np.flatnonzero(np.diff(np.r_[0, above.astype(np.int8), 0]))
    spans: list[list[int]] = []
    for a, b in zip(edges[::2].tolist(), edges[1::2].tolist()):
        if spans and a - spans[-1][1] < sustain:
            spans[-1][1] = b
        else:
            spans.append([a, b])
    found = [Episode(its[a:b], float(per[a:b].max()), tuple(i for i, over in zip(its[a:b], above[a:b]) if over))
             for a, b in spans]
    return tuple(r for r in found if len(r.paid) >= sustain), tuple(r for r in found if len(r.paid) < sustain)


def at_steps(episode: Episode, level: dict[int, float], *, slowdown: float, sustain: int) -> tuple[Episode, ...]:
    """``episode`` cut where what the job pays (``level``: S per iteration) steps up or down and
    stays: a second cause joined or left (contention all along, a GPU failing for a while in it),
    and each level's causes are diagnosed on their own. The cut takes out the stretch ``[i, j)``
    (to the run's end or from its start: one step) whose own level, beside the rest's, explains the
    run's log S best, when it and each rest has ``sustain`` iterations over the line; its levels
    explain log S better than one level and a slope (a ramp is one cause growing, not two); its
    median and the rest's differ by at least the slowdown line; and no more than
    ``step_significance`` of the run's shuffles explain it as well (noise steps too). Each piece is
    cut again the same way. A last piece that pays less than the one before it stays with that one:
    the cause left, and what the job still pays after it is its tail (a loaded machine's jitter),
    which the few iterations left cannot read on their own; a step up is a second cause. A run that
    climbs in two steps, which no two levels fit better than a line, is cut in three (``_staircase``)."""
    pieces = _cut(episode, level, slowdown=slowdown, sustain=sustain)
    if len(pieces) < 2 or np.median([level[i] for i in pieces[-1].iterations]) >= np.median(
            [level[i] for i in pieces[-2].iterations]):
        return pieces
    if len(pieces) == 2:
        return (episode,)
    before, tail = pieces[-2], pieces[-1]
    return (*pieces[:-2], Episode(before.iterations + tail.iterations, max(before.peak, tail.peak),
                                  before.paid + tail.paid, cut=True))


def _cut(episode: Episode, level: dict[int, float], *, slowdown: float, sustain: int) -> tuple[Episode, ...]:
    """``episode`` cut at every step ``at_steps`` finds, tail and all."""
    its = np.asarray(episode.iterations)
    log = np.log(np.maximum(np.array([level[int(i)] for i in its], dtype=np.float64), 1e-12))
    over = np.isin(its, np.asarray(episode.paid))
    stretch = _step(log, over, slowdown=slowdown, sustain=sustain)
    if stretch is not None:
        i, j = _partial_steps(log, over, *stretch, slowdown=slowdown, sustain=sustain)
    else:
        stairs = _staircase(log, over, slowdown=slowdown, sustain=sustain)
        if stairs is None:
            return (episode,)
        i, j = stairs
    # A piece with fewer than ``sustain`` iterations over the line (the lower level's) is no sustained episode.
    return tuple(piece for a, b in ((0, i), (i, j), (j, len(its))) if b > a and over[a:b].sum() >= sustain for piece in _cut(
        Episode(tuple(its[a:b].tolist()), float(np.exp(log[a:b].max())), tuple(its[a:b][over[a:b]].tolist()), cut=True),
        level, slowdown=slowdown, sustain=sustain))


def _step(log: np.ndarray, over: np.ndarray, *, slowdown: float, sustain: int) -> tuple[int, int] | None:
    """The stretch ``[i, j)`` of the run of log S ``log`` that ``at_steps`` cuts out (``over``: which
    iterations are over the line), or None."""
    n = len(log)
    trend = _line_squares(log)
    stretches, levels = _levels(log, over, sustain=sustain)
    for k in np.argsort(levels, kind="stable"):
        if levels[k] >= trend:
            return None
        i, j = int(stretches[0][k]), int(stretches[1][k])
        if abs(float(np.median(log[i:j]) - np.median(np.r_[log[:i], log[j:]]))) >= math.log(slowdown):
            if not _beats_shuffles(log, over, float(levels[k]),
                                   lambda lg, ov: float(_levels(lg, ov, sustain=sustain)[1].min(initial=np.inf))):
                return None
            return i, j
    return None


def _line_squares(log: np.ndarray) -> float:
    """The sum of squares of log S about its least-squares line: one level and a slope (0 for one value)."""
    if len(log) < 2:
        return 0.0
    x = np.arange(len(log), dtype=np.float64)
    return float(np.sum((log - np.polyval(np.polyfit(x, log, 1), x)) ** 2))


def _beats_shuffles(log: np.ndarray, over: np.ndarray, fit: float, best: Callable[[np.ndarray, np.ndarray], float]) -> bool:
    """Whether no more than ``step_significance`` of the run's shuffles fit as well as ``fit`` (the
    ``best`` sum of squares a model finds for a run): the shuffles keep its values and lose their
    order, so how often noise fits as well (seeded by the run's length: the same run always gets the same answer)."""
    shuffled = np.random.default_rng(len(log))
    allowed = _RULES.step_significance * (_RULES.step_shuffles + 1) - 1
    as_well = 0
    for _ in range(_RULES.step_shuffles):
        order = shuffled.permutation(len(log))
        as_well += best(log[order], over[order]) <= fit
        if as_well > allowed:
            return False
    return True


def _staircase(log: np.ndarray, over: np.ndarray, *, slowdown: float, sustain: int) -> tuple[int, int] | None:
    """Where a run that ``_step`` reads as a ramp climbs (or falls) in two steps instead: a second
    cause joining while the first lasts (a GPU, then a NIC), each level flat. The edges ``(a, b)``
    of its middle level, when three levels ``[0, a)``, ``[a, b)``, ``[b, n)`` in order explain log S
    better than a line and than a ramp that levels off or sets in (one cause growing: a hinge);
    neighbouring levels' medians differ by the slowdown line; the two higher levels each have
    ``sustain`` iterations over the line; and no more than ``step_significance`` of the run's
    shuffles fit three levels as well. None otherwise."""
    n = len(log)
    if n < 3:
        return None
    fits, a, b, means = _three_levels(log, over, sustain=sustain)
    line = _line_squares(log)
    # In order, each level a step from the one before (their means: the medians are checked below).
    gaps = np.diff(means, axis=0)
    stairs = (((gaps > 0).all(axis=0)) | ((gaps < 0).all(axis=0))) & (np.abs(gaps).min(axis=0) >= math.log(slowdown))
    fitting = np.flatnonzero((fits < line) & stairs)
    if not len(fitting):
        return None
    bar = min(line, _hinge(log))
    for k in fitting[np.argsort(fits[fitting], kind="stable")]:
        if fits[k] >= bar:
            return None
        medians = np.array([np.median(p) for p in (log[:a[k]], log[a[k]:b[k]], log[b[k]:])])
        steps = np.diff(medians)
        if not ((steps > 0).all() or (steps < 0).all()) or np.abs(steps).min() < math.log(slowdown):
            continue
        if not _beats_shuffles(log, over, float(fits[k]),
                               lambda lg, ov: float(_three_levels(lg, ov, sustain=sustain)[0].min(initial=np.inf))):
            return None
        if _edges(n)[1] == 1:  # every iteration's edge was tried
            return int(a[k]), int(b[k])
        # A long run's edges are spaced: the cuts move to the iterations between that fit best.
        close, first, second, _ = _three_levels(log, over, sustain=sustain, near=(int(a[k]), int(b[k])))
        best = int(np.argmin(close))
        return int(first[best]), int(second[best])
    return None


def _three_levels(log: np.ndarray, over: np.ndarray, *, sustain: int,
                  near: tuple[int, int] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every ``(a, b)`` cutting ``log`` into three levels whose two higher ones (by mean) have
    ``sustain`` iterations over the line: the sum of squares of log S about them, ``a``, ``b`` and
    the levels' means (3 x cuts). The cuts lie on ``_edges``, or, ``near`` a pair of them, at
    every iteration within an edge's spacing of it."""
    n = len(log)
    total, square, paid = (np.r_[0.0, np.cumsum(v)] for v in (log, log * log, over.astype(np.float64)))
    edges = _edges(n)
    if near is None:
        firsts = seconds = edges[1:-1]
    else:
        spacing = int(edges[1] - edges[0])
        firsts, seconds = (np.arange(max(1, e - spacing), min(n - 1, e + spacing) + 1) for e in near)
    a, b = (v.ravel() for v in np.meshgrid(firsts, seconds, indexing="ij"))
    keep = a < b
    a, b = a[keep], b[keep]
    bounds = ((np.zeros_like(a), a), (a, b), (b, np.full_like(b, n)))
    size = [hi - lo for lo, hi in bounds]
    sums = [total[hi] - total[lo] for lo, hi in bounds]
    means = np.stack([s / m for s, m in zip(sums, size)])
    counts = np.stack([paid[hi] - paid[lo] for lo, hi in bounds])
    # The lowest level may lie under the line (the run's first or last iterations); the others are episodes of their own.
    lowest = np.argmin(means, axis=0)
    sustained = np.all((counts >= sustain) | (np.arange(3)[:, None] == lowest), axis=0)
    ss = sum(square[hi] - square[lo] - s * s / m for (lo, hi), s, m in zip(bounds, sums, size))
    return ss[sustained], a[sustained], b[sustained], means[:, sustained]


def _edges(n: int) -> np.ndarray:
    """Where a run of ``n`` iterations may be cut, 0 and ``n`` included: every iteration's edge up to
    ``_STEP_EDGES``, evenly spaced ones beyond (a long run's cuts cost its length squared)."""
    return np.unique(np.r_[np.arange(0, n + 1, -(-(n + 1) // _STEP_EDGES)), n])


def _hinge(log: np.ndarray) -> float:
    """The least sum of squares of log S about two joined lines (one knot at an edge inside): a
    ramp that levels off, or sets in after a flat start."""
    n = len(log)
    x = np.arange(n, dtype=np.float64)
    best = np.inf
    for knot in _edges(n)[1:-1]:
        design = np.column_stack([np.ones(n), x, np.maximum(x - knot, 0.0)])
        _, residual, rank, _ = np.linalg.lstsq(design, log, rcond=None)
        if rank == 3 and len(residual):
            best = min(best, float(residual[0]))
    return best


def _partial_steps(log: np.ndarray, over: np.ndarray, i: int, j: int, *, slowdown: float, sustain: int) -> tuple[int, int]:
    """The stretch ``[i, j)`` of ``_step`` with each edge moved by the iteration the step began or
    ended in: one on the lower side of an edge that pays more than every other iteration of its
    piece by the slowdown line is partly at the higher level (the cause came or went within it), and
    goes with the higher side, which the least squares fit may not do for an iteration between the
    two levels. The higher level's pieces keep ``sustain`` iterations over the line, as ``_levels`` asks."""
    n = len(log)
    inside = np.zeros(n, dtype=bool)
    inside[i:j] = True
    higher = bool(np.median(log[inside]) > np.median(log[~inside]))
    # The lower side's iteration at each edge: the rest's where the stretch is higher, else the stretch's own.
    for k in [k for k, edge in ((i - 1 if higher else i, i > 0), (j if higher else j - 1, j < n)) if edge]:
        a, b = next((a, b) for a, b in _pieces(inside) if a <= k < b)
        side = np.zeros(n, dtype=bool)
        side[a:b] = True
        side[k] = False
        moved = inside.copy()
        moved[k] = higher
        if side.any() and moved.any() and not moved.all() and log[k] - float(log[side].max()) >= math.log(slowdown) \
                and all(int(over[a:b].sum()) >= sustain for a, b in _pieces(moved) if b > a and moved[a] == higher):
            inside = moved
    edges = np.flatnonzero(inside)
    return int(edges[0]), int(edges[-1]) + 1


def _pieces(inside: np.ndarray) -> tuple[tuple[int, int], ...]:
    """The pieces ``[a, b)`` a stretch (``inside``: one contiguous run of True) cuts its run into."""
    edges = np.flatnonzero(inside)
    return (0, int(edges[0])), (int(edges[0]), int(edges[-1]) + 1), (int(edges[-1]) + 1, len(inside))


def _levels(log: np.ndarray, over: np.ndarray, *, sustain: int) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    """Every stretch ``[i, j)`` ``at_steps`` may cut out of ``log`` (``over``: which iterations are
    over the line), and the sum of squares of log S about the levels it leaves (its own, the rest's)."""
    n = len(log)
    total, square, paid = (np.r_[0.0, np.cumsum(v)] for v in (log, log * log, over.astype(np.float64)))
    edges = _edges(n)
    i, j = (v.ravel() for v in np.meshgrid(edges, edges, indexing="ij"))
    inside = np.maximum(j - i, 1)
    rest = np.maximum(n - (j - i), 1)
    # The higher level's pieces are sustained; a lower one may not be, and then leaves the episodes (``_cut``).
    higher = (total[j] - total[i]) / inside > (total[n] - total[j] + total[i]) / rest
    valid = (j > i) & ((i > 0) | (j < n))
    valid &= np.where(higher, paid[j] - paid[i] >= sustain,
                      ((i == 0) | (paid[i] >= sustain)) & ((j == n) | (paid[n] - paid[j] >= sustain)))
    i, j, inside, rest = i[valid], j[valid], inside[valid], rest[valid]
    # Sum of squares about the stretch's mean plus about the rest's mean (both sides of it together).
    within = square[j] - square[i] - (total[j] - total[i]) ** 2 / inside
    outside = (square[n] - square[j] + square[i]) - (total[n] - total[j] + total[i]) ** 2 / rest
    return (i, j), within + outside


def hiccup(incident: Incident, named_elsewhere: Collection[str], attribution: Attribution, *, spec: JobSpec,
           slowdown: float, sustain: int, horizon: int | None = None) -> bool:
    """Whether an irregular iteration's ``incident`` is a benign pause: recorded, never paged.

    One iteration (spilling into its neighbours), not recurring, small cost: every iteration its
    search found evidence in (``evidence_iterations``) lies within one short run (fewer than
    ``sustain`` iterations over the slowdown line, nothing sustained beside it); its first suspect
    is not among the devices other incidents name first or tie with (``named_elsewhere``: a device
    that pauses again is a fault, however brief), unless the replay saw another rank pay for the
    run (``_paid_elsewhere``); and what the run cost is under the slowdown line's share of the whole
    window (the job does not pay for it), or of ``horizon`` iterations of it where the attribution
    covers only those around the pause.
    """
    # Read on the stragglers' part of S: an uneven split costs every iteration alike, so it explains
    # no irregular one, and its level lifting every iteration over the line makes no pause sustained.
    stragglers = replace(attribution, ideal_ns=attribution.hardware_ideal_ns)
    sustained, short = episodes(stragglers, slowdown=slowdown, sustain=sustain)
    seen = evidence_iterations(incident)
    near = [run for run in short if all(run.iterations[0] - 1 <= i <= run.iterations[-1] + 1 for i in seen)]
    if len(near) != 1 or any(abs(i - j) <= 1 for e in sustained for i in seen for j in (e.iterations[0], e.iterations[-1])):
        return False
    if incident.suspects and incident.suspects[0].device in named_elsewhere:
        elsewhere = _paid_elsewhere(incident.suspects[0], attribution, spec)
        known = [elsewhere[i] for i in near[0].iterations if i in elsewhere]
        if not known or not all(known):
            return False
    original, ideal = Part.STRAGGLERS.times(attribution, near[0].iterations)
    ideal_ns = np.asarray(attribution.hardware_ideal_ns, float)
    window = float(ideal_ns.sum()) if horizon is None else float(ideal_ns.mean()) * horizon
    return window > 0 and float(np.clip(original - ideal, 0, None).sum()) / window < slowdown - 1.0


def _paid_elsewhere(suspect: Suspect, attribution: Attribution, spec: JobSpec) -> dict[int, bool]:
    """Per attributed iteration whose costliest rank the replay found, whether a GPU or host
    ``suspect`` ran none of it: where it did not, the search, which saw a few ranks, named it by
    chance, so that it pauses again elsewhere says nothing of that iteration's pause. Empty for a
    device whose ranks the placements do not tell (a NIC, a switch or a set of spines: their cost is
    transfers)."""
    if not _is_compute(suspect) or not attribution.costliest_rank:
        return {}
    ranks = _ranks_of(suspect, spec)
    return {int(i): int(r) not in ranks for i, r in zip(attribution.iterations, attribution.costliest_rank) if r >= 0}


def _ranks_of(suspect: Suspect, spec: JobSpec) -> set[int]:
    """The ranks a GPU or host ``suspect`` runs."""
    ref = parse_device(suspect.device)
    return {p.rank for p in spec.placements if p.host == ref.name and (ref.kind is DeviceKind.HOST or p.gpu == ref.index)}


def uncharged_device(incident: Incident, attribution: Attribution, *, slowdown: float, spec: JobSpec) -> bool:
    """Whether a compute or network ``incident``'s suspects cost its iterations under the ``slowdown``
    line. Compute: with each iteration's straggler cost (recorded over the replay that keeps the
    split) charged to the rank the replay found costliest there, their ranks were charged under
    ``slowdown`` - 1 of those iterations' replayed time. Network: the transfer types' S_t - 1 over
    those iterations add up to under it. Its search, which saw a few ranks, found them late where
    the job paid little, or where another rank was the one it paid for (a rank 0's checkpoint
    pause), or a loaded host's transfers long now and then. A replay whose stragglers paid the line
    in no iteration may be blind to the job's compute (``unpaid_compute``) and says nothing of a
    compute incident (nor, on a coarse clock, of a network one), as does one that did not find the
    costliest rank of an iteration that cost something."""
    network = incident.cause is IncidentCause.NETWORK
    if not network and (incident.cause is not IncidentCause.COMPUTE or spec.time_resolution_ns
                        or not attribution.costliest_rank):
        return False
    # The replay measures each transfer from its members' last start to its end (§3.2): where no
    # iteration paid the line, what it put back of the network's cost little, on a fine clock.
    if not any(_stragglers_paid(attribution, slowdown).values()) and (not network or spec.time_resolution_ns):
        return False
    if network:
        share = _paid_compute_share(attribution, incident.iterations)
        if share is None:
            return False
        return (Part.STRAGGLERS.slowdown(attribution, incident.iterations) - 1.0) * (1.0 - share) < slowdown - 1.0
    at = np.isin(np.asarray(attribution.iterations), np.asarray(incident.iterations))
    original, ideal = Part.STRAGGLERS.times(attribution, incident.iterations)
    costliest = np.asarray(attribution.costliest_rank)[at]
    excess = np.clip(original - ideal, 0, None)
    if not at.any() or np.any((costliest < 0) & (excess > 0)):
        return False
    ranks = set().union(*(_ranks_of(s, spec) for s in incident.suspects))
    if not ranks:
        return False
    charged = float(excess[np.isin(costliest, np.asarray(sorted(ranks)))].sum())
    return float(ideal.sum()) > 0 and charged / float(ideal.sum()) < slowdown - 1.0


#: The non-hardware causes read from what the stragglers cost (What-if §5.3-§5.4).
STRAGGLER_CAUSES = frozenset((IncidentCause.SEQLEN_IMBALANCE, IncidentCause.SCATTERED_PAUSES))


def unpaid_straggler_cause(incident: Incident, attribution: Attribution, *, slowdown: float) -> bool:
    """Whether ``incident`` names a straggler cause (``STRAGGLER_CAUSES``) that cost the job nothing:
    in none of its iterations was the recorded time ``slowdown`` times its replay with every
    operator at its peers' length (the pipeline's split kept). Those iterations were long on every
    rank alike: there is no straggler to name."""
    if incident.cause not in STRAGGLER_CAUSES:
        return False
    paid = _stragglers_paid(attribution, slowdown)
    return not any(paid.get(i, False) for i in incident.iterations)


def unpaid_compute(incident: Incident, attribution: Attribution, *, slowdown: float, spec: JobSpec) -> bool:
    """Whether a compute ``incident``'s iterations were paid for by no straggler (as
    ``unpaid_straggler_cause``: each replayed, none ``slowdown`` times its replay) where the replay
    saw stragglers pay in other iterations: every rank ran long alike in its own, where a slow GPU or
    host makes its ranks' work the long part, which the replay puts back. A replay that put nothing
    back in any iteration may be blind to the job's compute (records without the ranks' arrival
    times, a coarse clock: ``JobSpec.time_resolution_ns``), and says nothing."""
    if incident.cause is not IncidentCause.COMPUTE or spec.time_resolution_ns:
        return False
    paid = _stragglers_paid(attribution, slowdown)
    return all(i in paid and not paid[i] for i in incident.iterations) and any(paid.values())


def unpaid_side(incident: Incident, attribution: Attribution, *, slowdown: float) -> bool:
    """Whether a hardware ``incident``'s suspects all lie on a side (compute, or transfers) that
    carries under ``minor`` of what the operator types add up to over its iterations, where the
    stragglers cost those iterations the ``slowdown`` line: what the job paid there is the other
    side's. Offline the episode's what-if suspects complement such an incident and ``paid_sides``
    drops this side, and one outside every episode is not reported; live the slowdown watch names
    the other side from every rank's records."""
    sides = {_is_compute(s) for s in incident.suspects}
    share = _paid_compute_share(attribution, incident.iterations)
    if not incident.cause.hardware or len(sides) != 1 or share is None:
        return False
    if Part.STRAGGLERS.slowdown(attribution, incident.iterations) < slowdown:
        return False
    return (share if sides == {True} else 1.0 - share) < _RULES.minor


def outside_episodes(incident: Incident, sustained: Iterable[Episode]) -> bool:
    """Whether none of ``incident``'s iterations lies in a ``sustained`` episode: no episode's what-if
    search complements it, so what its own iterations paid is all it rests on."""
    return not any(set(incident.iterations) & set(episode.iterations) for episode in sustained)


def evidence_iterations(incident: Incident) -> set[int]:
    """The iterations ``incident`` rests on: its own and those its root operators were found in."""
    return set(incident.iterations) | {i for r in incident.roots for i in (r.iteration, r.ran)}


def tied_devices(incidents: Iterable[Incident]) -> set[str]:
    """The devices ``incidents`` name first or tie with first (``LocalizerRules.tied_suspects``)."""
    return {s.device for incident in incidents for s in incident.suspects[:_RULES.tied_suspects]}


def diagnose(attribution: Attribution, *, split: bool = True, iterations: Sequence[int] | None = None,
             sustained: Episode | None = None, whole: Attribution | None = None) -> Straggler:
    """Hardware, or a non-hardware cause the paper names, from the attribution alone (``split``
    False: of what the stragglers cost beside the pipeline's split), for the episode of
    ``iterations`` (default: every iteration attributed). ``sustained``: the sustained episode they
    are the paying iterations of, enough to ask a compute-led device's rank to stand apart from
    chance over them, and its transfers to have paid more than the job's outside it. ``whole``: the
    job's attribution where ``attribution`` is a cut piece's (``Attribution.over``), on which a rank
    is followed through the iterations next to the episode (``_a_run``)."""
    episode = attribution.iterations if iterations is None else iterations
    # Over the episode's own iterations, as ``parts`` cut it: a link costing them more than the split
    # does, in a job whose split outweighs it over every iteration, is the episode's cost.
    if split and split_led(attribution, episode):
        return Straggler.STAGE_IMBALANCE
    # Sequence lengths are compute's: transfers carrying most of it put a device on a path in play, and
    # one host explaining most of it, more than its top workers do (a host of one GPU is its worker), is that host.
    host = attribution.host_share >= _RULES.majority and attribution.host_share > attribution.worker_share + 1e-9
    if host:
        return Straggler.HARDWARE
    # Compute leads where it does in total and step by step: a pause lifts its total alone.
    compute = min(_compute_share(attribution, episode, stragglers=not split),
                  _steady_compute_share(attribution, episode, stragglers=not split))
    if compute < _RULES.majority:
        # Transfers no costlier than outside the episode or not the same ones step after step, and
        # compute paying a side with no rank apart: a loaded host's jitter, delaying one process's
        # compute and transfers, then another's.
        if (sustained is not None and compute >= _RULES.minor and not _a_path_device_in_play(attribution, sustained)
                and not _a_rank_or_host_stands_apart(attribution, episode, whole=whole)):
            return Straggler.SCATTERED_PAUSES
        return Straggler.HARDWARE
    # Pauses costing compute more do not hide a link, NIC or switch that costs the job the line on its own.
    if sustained is not None and sustained.network:
        return Straggler.HARDWARE
    # Work that moves is the data's even where one worker explains each of the worst iterations (M_W,
    # measured on those alone): the slow batch is on some replica in each.
    if work_moves(attribution, episode):
        return Straggler.SEQLEN_IMBALANCE
    if pauses_move(attribution, episode, whole=whole):
        return Straggler.SCATTERED_PAUSES
    # A slow GPU is the costliest of the iterations it slows (§4.2): where no rank stands apart from
    # chance over them, what the job paid is data that moved, costly wherever its replica ran, or else
    # pauses striking one process, then another (a loaded host's jitter).
    if sustained is not None and not _a_rank_or_host_stands_apart(attribution, episode, whole=whole):
        return Straggler.SEQLEN_IMBALANCE if _costly_data_moved(attribution, episode) else Straggler.SCATTERED_PAUSES
    return Straggler.HARDWARE


def _costly_data_moved(attribution: Attribution, iterations: Sequence[int]) -> bool:
    """Whether the iterations paying half the mean or more had different costliest replicas, each
    costly at its other places too (``_Turns.everywhere``), not on one host: too few turns for
    ``work_moves``, but two slow devices would each be costly at their own place only."""
    turns = _Turns.of(attribution, iterations)
    return turns is not None and turns.paying_replicas > 1 and turns.data_like(attribution)


def _a_path_device_in_play(attribution: Attribution, sustained: Episode) -> bool:
    """Whether ``sustained``'s transfers cost more than outside it (``Episode.transfers``) and most of
    what they ran beyond their peers was the same transfers' in most of its paying iterations, or they
    alone cost the job the line (``Episode.network``): a slow link, NIC or switch lengthens each
    transfer through it at every step it is slow."""
    return sustained.network or sustained.transfers and attribution.persistent_transfers(
        sustained.paid, most=_RULES.majority) >= _RULES.majority


def diagnose_episode(attribution: Attribution, episode: Episode, *, part: Part,
                     whole: Attribution | None = None) -> Straggler:
    """``diagnose`` of the ``part`` of what sustained ``episode`` costs, over the iterations it paid in,
    with what ``diagnose``'s ``sustained`` asks of a device there (``whole``: ``diagnose``'s)."""
    if part is Part.SPLIT:
        return Straggler.STAGE_IMBALANCE
    return diagnose(attribution, split=part is Part.WHOLE, iterations=episode.paid, sustained=episode, whole=whole)


def work_moves(attribution: Attribution, iterations: Sequence[int]) -> bool:
    """Whether the replica that computes longest changes between ``iterations`` (What-if §5.3),
    weighing each iteration by what the job paid in it (S - 1): a slow device's replica is the
    costliest in the iterations it slows, which carry all but a ``minor`` share of what the job
    pays (jitter carries the rest), and two broken devices are two replicas; data whose cost
    varies makes a third the costliest of an iteration that paid at least half the mean
    (``moves``), or with two replicas only, each in turn. And the data is as costly whichever
    replica drew it: a replica that was the costliest of more of the iterations paying half the
    mean than chance gives, or of ones that paid more than the others', holds a device, the
    others' turns being jitter's (``_pays_more``, at ``significance``). Where a replica has ranks at
    several places, costly data is costly at most of them (``Attribution.costliest_breadth`` over
    ``data_breadth``); two slow devices taking turns are each at their own. Where a replica is one
    rank, that rank ran long over most of its work instead (``_Turns.everywhere``)."""
    turns = _Turns.of(attribution, iterations)
    if turns is None:
        return False
    moved = turns.paying_replicas >= min(_RULES.moves, attribution.replicas)
    apart = _pays_more(turns.replica[turns.pays], turns.excess[turns.pays], max(attribution.replicas, 2))
    return moved and turns.data_like(attribution) and turns.most(turns.replica) <= 1 - _RULES.minor and not apart


@dataclass(frozen=True)
class _Turns:
    """Per iteration of an episode, the costliest rank (``Attribution.costliest_rank``), its replica,
    its host (dense ids) and breadth, what the iteration paid (S - 1), which paid at least half
    the mean (``pays``): the iterations whose costliest rank is the slowdown's, not jitter's; the
    share of its compute that ran long (``Attribution.persistent_compute``; NaN where unknown); and
    how likely chance alone ran that many of its gaps above their peers' medians (``_above_by_chance``)."""

    rank: np.ndarray
    replica: np.ndarray
    host: np.ndarray
    breadth: np.ndarray
    excess: np.ndarray
    pays: np.ndarray
    persistence: np.ndarray
    above_by_chance: np.ndarray

    @classmethod
    def of(cls, attribution: Attribution, iterations: Sequence[int]) -> _Turns | None:
        """None when the episode paid nothing (or the attribution has no replicas to compare)."""
        n = min(len(attribution.iterations), len(attribution.costliest_replica), len(attribution.costliest_host))
        at = np.isin(np.asarray(attribution.iterations[:n]), np.asarray(list(iterations)))
        if not at.any():
            return None
        excess = np.clip(np.asarray(attribution.per_iteration[:n])[at] - 1.0, 0.0, None)
        if excess.sum() <= 0:
            return None
        rank = np.asarray(attribution.costliest_rank or (-1,) * n)[:n][at]
        breadth = np.asarray(attribution.costliest_breadth or (math.nan,) * n, dtype=np.float64)[:n][at]
        _, host = np.unique(np.asarray(attribution.costliest_host[:n])[at], return_inverse=True)
        persistent = attribution.persistent_compute
        persistence = (np.full(len(rank), math.nan) if persistent is None or rank.min(initial=0) < 0
                       else persistent[:n][at][np.arange(len(rank)), rank])
        sides = attribution.gaps_above_median
        above_by_chance = (np.ones(len(rank)) if sides is None or rank.min(initial=0) < 0
                           else _above_by_chance(sides[:n][at][np.arange(len(rank)), rank], attribution.world))
        return cls(rank, np.asarray(attribution.costliest_replica[:n])[at], host.ravel(), breadth, excess,
                   excess >= _RULES.majority * excess.mean(), persistence, above_by_chance)

    @property
    def sole(self) -> int | None:
        """The one rank the costliest of every paying iteration (None: several, or none known)."""
        paying = set(self.rank[self.pays].tolist())
        return paying.pop() if len(paying) == 1 and min(paying) >= 0 else None

    def most(self, of: np.ndarray) -> float:
        """The largest share of what was paid one value of ``of`` (a replica, a host) carries."""
        return float((np.bincount(of, weights=self.excess) / self.excess.sum()).max())

    @property
    def everywhere(self) -> bool:
        """The costliest replica's other places computed longer too, weighted by what was paid (costly
        data); where a replica has no other place (each one rank), its rank ran long over most of its
        work (not ``brief``): every layer's compute grows with a batch's tokens, a pause stops one step."""
        breadth = self.breadth[self.pays]
        if np.isnan(breadth).all():
            return not self.brief
        return float(np.average(breadth, weights=self.excess[self.pays])) > _RULES.data_breadth

    @property
    def paying_replicas(self) -> int:
        """How many replicas were the costliest of an iteration paying half the mean or more."""
        return len(set(self.replica[self.pays].tolist()))

    def data_like(self, attribution: Attribution) -> bool:
        """Costly over their whole replicas (``everywhere``) and not one host's turns: data's cost."""
        return self.everywhere and not self.one_host(attribution)

    def one_host(self, attribution: Attribution) -> bool:
        """Turns taken on one host are that host's (contention, its NVSwitch), where the job has more."""
        return attribution.hosts > 1 and self.most(self.host) > 1 - _RULES.minor

    @property
    def brief(self) -> bool:
        """What each costliest rank paid, weighted by what was paid, lay in a minority of its work: an
        event that stopped it once (a pause), not a device that slows every step it runs; and the
        costliest ranks' gaps did not run above their peers' medians more often than chance, the
        paying iterations' tests taken together (Fisher's method): a batch's tokens or a slow device
        lengthen every layer, each by less than the peers' spread where their compute varies widely."""
        if combine_pvalues(self.above_by_chance[self.pays], method="fisher").pvalue < _RULES.significance:
            return False
        persistence = self.persistence[self.pays]
        known = ~np.isnan(persistence)
        if not known.any():
            return False
        return float(np.average(persistence[known], weights=self.excess[self.pays][known] + 1e-12)) < _RULES.majority


def _above_by_chance(sides: np.ndarray, world: int) -> np.ndarray:
    """Per (gaps above their peers' medians, gaps compared) row, the one-sided sign test's p-value that
    chance alone ran that many above, corrected for picking the costliest of the ``world``'s ranks."""
    above, compared = sides[:, 0], sides[:, 1]
    # Never 0: a long run of gaps all above underflows, and Fisher's method takes the log.
    return np.clip(max(world, 2) * binom.sf(above - 1, compared, 0.5), np.finfo(np.float64).tiny, 1.0)


def pauses_move(attribution: Attribution, iterations: Sequence[int], *, whole: Attribution | None = None) -> bool:
    """Whether what the job pays in ``iterations`` is pauses that strike one worker at a time, another
    each time (What-if §5.4: a garbage-collection pause stops one process, and every other waits for
    it): the rank that computed longest in the iterations that paid at least half the mean is at
    least ``moves`` different ranks, or each paid for one step of its work, not most (``brief``:
    what a few iterations show of a pause, where a rank may pause twice by chance); its replica's
    other places did not compute longer with it (not data, ``work_moves``), no rank stands apart
    from the others over all of ``iterations`` (a slow device is the costliest of more of them than
    chance, whatever the pauses between cost, or of costlier ones: ``_often``, ``_pays_more``; and
    it computes longer in most of them: ``steady_straggler``), and where the job has several hosts,
    they are not one host's ranks taking turns (that host's CPU). ``whole``: ``diagnose``'s."""
    turns = _Turns.of(attribution, iterations)
    if turns is None or (len(set(turns.rank[turns.pays].tolist())) < _RULES.moves and not turns.brief):
        return False
    if not np.isnan(turns.breadth[turns.pays]).all() and turns.everywhere or turns.one_host(attribution):
        return False
    return not _stands_apart(attribution, iterations, turns, whole=whole)


def too_few_to_tell(attribution: Attribution, iterations: Sequence[int]) -> bool:
    """Whether one rank was the costliest of every iteration of ``iterations`` that paid (``_Turns.pays``),
    too few of them for even that to stand apart from chance at the world's size (``_beyond_chance``):
    until more land, a slow device and pauses that struck its rank by chance read alike."""
    turns = _Turns.of(attribution, iterations)
    if turns is None or turns.sole is None:
        return False
    paying = int(turns.pays.sum())
    return not bool(_beyond_chance(paying, paying, max(attribution.world, 2)))


def _a_rank_or_host_stands_apart(attribution: Attribution, iterations: Sequence[int], *,
                                 whole: Attribution | None = None, hosts: bool = True) -> bool:
    """Whether a rank stands apart over ``iterations`` (``_stands_apart``; True where they paid
    nothing: nothing to tell), or (``hosts``) one host's ranks were the costliest of more of the paying
    iterations of ``iterations`` than chance makes one of the job's hosts (``_beyond_chance``): a
    slow GPU, or a contended host, which slows whichever of its processes it starves, another each
    time, so that no rank stands apart; pauses land on any host."""
    turns = _Turns.of(attribution, iterations)
    if turns is None or _stands_apart(attribution, iterations, turns, whole=whole):
        return True
    if not hosts or attribution.hosts < 2:
        return False
    paying = turns.host[turns.pays]
    return bool(_beyond_chance(np.bincount(paying).max(initial=0), len(paying), attribution.hosts))


def _stands_apart(attribution: Attribution, iterations: Sequence[int], turns: _Turns, *,
                  whole: Attribution | None = None) -> bool:
    """Whether a rank stands apart from the others over ``iterations``, whatever jitter between:
    a steady straggler, or the costliest of more of them than chance makes one of the world's
    ranks, or of costlier ones (``_often``, ``_pays_more``), or of a run through them (``_a_run``,
    on ``whole`` where given), these three at ``significance`` shared among them (``_APART_TESTS``);
    True where no costliest rank is known."""
    if turns.rank.min(initial=0) < 0:
        return True
    world = max(attribution.world, 2)
    level = _RULES.significance / _APART_TESTS
    paying = turns.rank[turns.pays]
    # One rank the costliest of every paying iteration is only as telling as their number (binomial alone).
    pays_more = (_pays_more(paying, turns.excess[turns.pays], world, level=level) if len(set(paying.tolist())) > 1
                 else _often(paying, world, level=level))
    return (steady_straggler(attribution, iterations) or _often(turns.rank, world, level=level)
            or pays_more or _a_run(whole or attribution, iterations, turns, level=level))


#: The ways ``_stands_apart`` counts a rank the costliest of more steps than chance makes one (of
#: them all, of the paying ones or costlier ones, of a run): one question asked three ways, each at
#: a share of the level, so that chance answers it yes at most at ``significance`` (Bonferroni).
_APART_TESTS = 3


def _a_run(attribution: Attribution, iterations: Sequence[int], turns: _Turns, *,
           level: float = _RULES.significance) -> bool:
    """Whether the one rank costliest of every paying iteration of ``iterations`` stays the costliest
    of the attributed iterations next to them that pay as much (at least half their mean), over
    more of that stretch than chance makes one of the world's ranks (``_beyond_chance``): a pause
    strikes another worker each time, a device the same one step after step, and a cut where the
    job's cost steps (``at_steps``) or a cluster's edge divides such a run, not what it says."""
    rank = turns.sole
    if rank is None:
        return False
    n = min(len(attribution.iterations), len(attribution.costliest_rank))
    its = np.asarray(attribution.iterations[:n])
    member = ((np.asarray(attribution.costliest_rank[:n]) == rank)
              & (np.asarray(attribution.per_iteration[:n]) - 1.0 >= _RULES.majority * turns.excess.mean()))
    at = np.flatnonzero(np.isin(its, np.asarray(list(iterations))) & member)
    if not len(at):
        return False
    first, last = int(at.min()), int(at.max())
    while first > 0 and member[first - 1]:
        first -= 1
    while last + 1 < n and member[last + 1]:
        last += 1
    return bool(_beyond_chance(int(member[first:last + 1].sum()), last - first + 1, max(attribution.world, 2),
                               level=level))


def steady_straggler(attribution: Attribution, iterations: Sequence[int]) -> bool:
    """Whether a rank computes longer than its place's median in most of the attributed iterations from
    the first of ``iterations`` to the last, by more than chance makes the highest of the world's
    ranks (What-if §4.2: a device's slowdown persists from step to step; a batch's or a pause's comes
    and goes, and leaves each rank's median alone): its median over them stands above the ranks'
    medians by ``z`` robust standard deviations of theirs, ``z`` the normal quantile of
    ``significance`` shared among the ranks, and by more than ``AttributionRules.worker_floor``
    (under it, no straggler is worth naming); and most of its work ran long in most of them
    (``Attribution.persistent_compute``: a rank that paused in two of three iterations has a raised
    median too, but in one step of its work each time). Over so few
    iterations that the ranks' order alone could not set one apart at ``significance`` (among ranks
    alike, one is the highest of all n with probability ranks^(1-n)), or where it ran at its peers'
    pace in an iteration between two it ran long in (a device slows every step from its onset to its
    end; costly batches that one rank of a few drew in most of them leave it a step at its peers'
    pace), a median is a draw or two and the medians' spread no yardstick: its compute there must
    also stand above the other ranks' in the same iterations (Mann-Whitney U, one-sided, corrected for
    picking one of the ranks)."""
    return _stands_steady(attribution, _steady(attribution, iterations))


def _stands_steady(attribution: Attribution, steady: tuple[np.ndarray, np.ndarray, float] | None) -> bool:
    """``steady_straggler`` on the ranks' medians ``_steady`` read."""
    relative = attribution.relative_compute
    if steady is None or relative is None:
        return False
    rows, medians, bar = steady
    top = int(np.argmax(medians))
    persistent = attribution.persistent_compute
    if persistent is not None and float(np.median(persistent[rows][:, top])) < _RULES.majority:
        return False
    if not float(medians[top]) > bar:
        return False
    ranks = relative.shape[1]
    ran_long = np.flatnonzero(relative[rows][:, top] > 1.0 + ATTRIBUTION_RULES.worker_floor)
    unbroken = len(ran_long) > 0 and len(ran_long) == int(ran_long[-1] - ran_long[0]) + 1
    if unbroken and (1 - int(rows.sum())) * math.log(ranks) < math.log(_RULES.significance):
        return True
    others = np.delete(relative[rows], top, axis=1).ravel()
    return ranks * float(mannwhitneyu(relative[rows][:, top], others, alternative="greater").pvalue) < _RULES.significance


def _steady(attribution: Attribution, iterations: Sequence[int]) -> tuple[np.ndarray, np.ndarray, float] | None:
    """(the attributed iterations from the first of ``iterations`` to the last, each rank's median
    compute over its place's median there, the bar a steady straggler's median passes:
    ``steady_straggler``); None without relative compute or two such iterations."""
    relative = attribution.relative_compute
    if relative is None:
        return None
    # Every step from the first to the last, the dips too: a device slows each, where the steps the job
    # paid for are those a batch or a pause struck, which alone set apart whoever drew most of them.
    its = np.asarray(attribution.iterations)
    rows = (its >= min(iterations)) & (its <= max(iterations)) if len(iterations) else np.zeros(len(its), bool)
    if rows.sum() < 2:
        return None
    medians = np.median(relative[rows], axis=0)
    center = float(np.median(medians))
    sigma = float(median_abs_deviation(medians, scale="normal"))
    z = float(norm.isf(_RULES.significance / len(medians)))
    return rows, medians, center + max(z * sigma, ATTRIBUTION_RULES.worker_floor)


def _steady_ranks(attribution: Attribution, iterations: Sequence[int]) -> tuple[int, ...]:
    """The ranks whose compute stands apart as ``steady_straggler``'s does over ``iterations``, where
    it finds one, the highest median first: their medians over the bar, most of their work long in
    most of the steps (a contended host's every rank, a slow GPU's one)."""
    steady = _steady(attribution, iterations)
    if steady is None or not _stands_steady(attribution, steady):
        return ()
    rows, medians, bar = steady
    over = medians > bar
    persistent = attribution.persistent_compute
    if persistent is not None:
        over &= np.median(persistent[rows], axis=0) >= _RULES.majority
    ranks = np.flatnonzero(over)
    return tuple(ranks[np.argsort(-medians[ranks], kind="stable")].tolist())


def _often(rank: np.ndarray, ranks: int, *, level: float = _RULES.significance) -> bool:
    """Whether the rank most often the costliest was so in more iterations than chance makes one of
    ``ranks`` (``_beyond_chance``)."""
    return bool(_beyond_chance(np.bincount(rank).max(initial=0), len(rank), ranks, level=level))


def _beyond_chance(count: np.ndarray | int, iterations: int, ranks: int, *,
                   level: float = _RULES.significance) -> np.ndarray:
    """Whether one of ``ranks`` the costliest of ``count`` of ``iterations`` (each) is so more than
    chance makes one of them (binomial, one-sided, corrected for picking one of them, at ``level``)."""
    return np.minimum(1.0, ranks * binom.sf(np.asarray(count) - 1, iterations, 1.0 / ranks)) < level


def _masked_roots(attribution: Attribution, candidates: Sequence[int], paid: Sequence[int] | None,
                  weight: float, steady: Sequence[int] = ()) -> list[tuple[Root, float]]:
    """Compute roots of a straggler the worker iterations miss: a rank that is no candidate yet the
    costliest of more of the ``paid`` iterations (default: all) than chance makes one of the world's,
    or a ``steady`` one (``_steady_ranks``), straggles where a slower one masks it (the job then runs
    at the slower one's pace, so the slowest iterations, where the worker slowdowns are replayed,
    need not hold its turn: pauses costlier than a slow GPU or host there). Each is replayed on as
    many of the slowest iterations it is the costliest of as the worker slowdowns were, its root
    rated by its share of that iteration's slowdown, as ``_roots`` rates the candidates'."""
    costliest = np.asarray(attribution.costliest_rank, dtype=np.int64)
    if not len(costliest):
        return []
    its = np.asarray(attribution.iterations)[:len(costliest)]
    per = np.asarray(attribution.per_iteration)[:len(costliest)]
    at = np.ones(len(its), bool) if paid is None else np.isin(its, np.asarray(list(paid)))
    world, known = max(attribution.world, 2), set(int(r) for r in candidates)
    rated: list[tuple[Root, float]] = []
    ranks, counts = np.unique(costliest[at], return_counts=True)
    for rank in sorted(set(ranks[(ranks >= 0) & _beyond_chance(counts, int(at.sum()), world)].tolist()) | set(steady)):
        if rank in known:
            continue
        mine = np.flatnonzero(at & (costliest == rank))
        if not len(mine):  # a steady rank whose steps another's cost more: nothing of its own to replay
            continue
        chosen = np.sort(its[mine[np.argsort(-per[mine], kind="stable")[:len(attribution.worker_iterations)]]])
        slowdowns = rank_compute_slowdowns(attribution, [rank], chosen.tolist())[:, 0]
        for iteration, slowdown in zip(chosen.tolist(), slowdowns.tolist()):
            found = _compute_root(iteration, rank, slowdown, float(per[its == iteration][0]), weight)
            if found is not None:
                rated.append(found)
    return rated


def _compute_root(iteration: int, rank: int, slowdown: float, iteration_slowdown: float,
                  weight: float) -> tuple[Root, float] | None:
    """``rank``'s compute root in ``iteration``, rated ``weight`` times the share of what the iteration
    paid (S - 1) that its own compute gaps explain (``slowdown``); None where they explain nothing."""
    share = min(1.0, max(slowdown - 1.0, 0.0) / max(iteration_slowdown - 1.0, 1e-12))
    if share <= 0:
        return None
    return Root(iteration, Cause.COMPUTE, rank, "", -1, "compute", (rank,), (rank,), (), iteration), weight * share


def _pays_more(replica: np.ndarray, excess: np.ndarray, replicas: int, *, level: float = _RULES.significance) -> bool:
    """Whether the replica carrying most of the ``excess`` stands apart from the other ``replicas``:
    it was the costliest of more of these iterations than a batch landing anywhere makes one replica
    (binomial, one-sided), or of iterations that paid more than the others' (Mann-Whitney U,
    one-sided); each corrected for picking the top one of them (among replicas alike, any one may draw
    the most or the costliest batches) and at half the ``level``, so that both together keep it."""
    top = int(np.argmax(np.bincount(replica, weights=excess)))
    mine, theirs = excess[replica == top], excess[replica != top]
    if not len(theirs):
        return True
    often = replicas * float(binom.sf(len(mine) - 1, len(replica), 1.0 / replicas))
    costlier = replicas * float(mannwhitneyu(mine, theirs, alternative="greater").pvalue)
    return min(often, costlier) < level / 2


def split_led(attribution: Attribution, iterations: Sequence[int] | None = None) -> bool:
    """Whether an even pipeline split explains most of what the job pays over ``iterations`` (default:
    every one attributed; S = S_split x the rest)."""
    its = attribution.iterations if iterations is None else iterations
    s = Part.WHOLE.slowdown(attribution, its)
    return s > 1.0 and math.log(Part.SPLIT.slowdown(attribution, its)) >= _RULES.majority * math.log(s)


class Part(enum.Enum):
    """Which part of what the job pays an incident is of: S = stragglers' part x split's part."""

    WHOLE = "whole"  # all of it, diagnosed as one
    STRAGGLERS = "stragglers"  # recorded over the ideal that keeps the split
    SPLIT = "split"  # that ideal over the whole ideal: what an even pipeline split saves

    def times(self, attribution: Attribution, iterations: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """(slower, faster) replayed times of ``iterations`` whose ratio is this part's slowdown."""
        at = np.isin(np.asarray(attribution.iterations), np.asarray(iterations))
        slower = attribution.hardware_ideal_ns if self is Part.SPLIT else attribution.original_ns
        faster = attribution.hardware_ideal_ns if self is Part.STRAGGLERS else attribution.ideal_ns
        return np.asarray(slower)[at], np.asarray(faster)[at]

    def slowdown(self, attribution: Attribution, iterations: Sequence[int]) -> float:
        slower, faster = self.times(attribution, iterations)
        return float(slower.sum() / faster.sum()) if faster.sum() > 0 else 1.0


def parts(attribution: Attribution, iterations: Sequence[int], *, slowdown: float) -> tuple[Part, ...]:
    """The parts of an episode that may get an incident: each that costs the job the slowdown line on
    its own (an uneven split and a broken GPU are two things to fix), else the whole, as one. Beside a
    split over the line, or one that pays most of the whole where neither part is over it alone, the
    stragglers' part however little it costs alone: the episode pays over the line either way, and
    the whole's diagnosis would name the split alone; under the line alone, only a device found
    makes them an incident (``localize._with_attribution``)."""
    split = Part.SPLIT.slowdown(attribution, iterations)
    if split >= slowdown:
        return Part.SPLIT, Part.STRAGGLERS
    if Part.STRAGGLERS.slowdown(attribution, iterations) >= slowdown:
        return (Part.STRAGGLERS,)
    whole = Part.WHOLE.slowdown(attribution, iterations)
    if whole > 1.0 and math.log(split) >= _RULES.majority * math.log(whole):
        return Part.SPLIT, Part.STRAGGLERS
    return (Part.WHOLE,)


def summary(attribution: Attribution, trigger: str) -> AttributionSummary:
    return AttributionSummary(
        trigger, attribution.slowdown, attribution.gpu_hours_lost, attribution.top_workers(8),
        attribution.top_types(), attribution.worker_share, attribution.last_stage_share,
    )


def slowdown_incident(
    source: RecordSource, attribution: Attribution, episode: Episode, *, graph: OperatorGraph, topology: Topology,
    routing: Routing, priors: Priors, top_k: int, min_support: int, started: float, part: Part = Part.WHOLE,
    whole: Attribution | None = None,
) -> Incident:
    """The incident of one sustained episode, or of one ``part`` of what it costs (see the module
    docstring; ``whole``: ``diagnose``'s)."""
    diagnosis = diagnose_episode(attribution, episode, part=part, whole=whole)
    candidates = _candidates(attribution, graph)
    rated: list[tuple[Root, float]] = []
    suspects: tuple[Suspect, ...] = ()
    if diagnosis is Straggler.HARDWARE:
        rated, suspects = whatif_search(attribution, graph=graph, topology=topology, routing=routing, priors=priors,
                                        top_k=top_k, min_support=min_support, episode=episode)
        if not suspects:
            # No device held its evidence over the episode (a rank apart, its transfers jitter): a
            # loaded host's pauses, which blame no hardware, as ``diagnose`` reads them without a rank apart.
            diagnosis = Straggler.SCATTERED_PAUSES
    cause = _cause(suspects) or IncidentCause(diagnosis.value)
    t_from, t_to = _span(source, candidates, episode.iterations)
    return Incident(
        job=graph.job,
        incident=f"{graph.job}-s{episode.iterations[0]}-{episode.iterations[-1]}" + ("-split" if part is Part.SPLIT else ""),
        t_from_ns=t_from,
        t_to_ns=t_to,
        iterations=episode.iterations,
        cause=cause,
        suspects=suspects,
        roots=tuple(RootOperator(r.iteration, r.cause, r.rank, r.comm, r.seq, r.op, r.ranks, rate, r.ran)
                    for r, rate in rated),
        traversal=tuple(candidates),
        steps=(),
        ranks_fetched=graph.world,  # the attribution read every rank
        world=graph.world,
        impact=impact_over(attribution, episode.iterations, world=graph.world, part=part),
        advice=ADVICE[diagnosis] or tied_advice([(s.device, s.score) for s in suspects]),
        seconds=time.perf_counter() - started,
        attribution=summary(attribution, "slowdown"),
    )


def impact_over(attribution: Attribution, iterations: Sequence[int], *, world: int, part: Part = Part.WHOLE) -> Impact:
    """What ``part`` of the job's slowdown costs over ``iterations`` (What-if eq. 3, per iteration replayed)."""
    original, ideal = part.times(attribution, iterations)
    lost = float(np.clip(original - ideal, 0, None).sum()) * world / _NS_PER_HOUR
    if not len(ideal):
        return Impact(1.0, 0.0, 0.0, 0.0, 0)
    return Impact(float(original.sum() / ideal.sum()) if ideal.sum() > 0 else 1.0, float(ideal.mean()),
                  float(original.mean()), lost, len(ideal))


def grown_to_episode(source: RecordSource, incident: Incident, attribution: Attribution, episode: Episode, *,
                     graph: OperatorGraph, slowdown: float, whole: Attribution | None = None) -> Incident:
    """``incident``, an irregular iteration's that the attribution agrees with, spanning the whole
    sustained ``episode`` it lies in: one fault is one incident, and what the job pays for it is
    every iteration of the episode, not the few that tripped δ. Its irregular iterations apart from
    the episode (not next to it) that are not its first suspect's are left out, and its id names the
    first and last it keeps: where the stragglers cost the job under ``slowdown`` (``whole``'s
    attribution, else ``attribution``), or another rank than the suspect's paid (``_paid_elsewhere``),
    a pause in the window before a device's step is not that step's onset."""
    job, spec = whole or attribution, source.job_spec()
    paid = _stragglers_paid(job, slowdown)
    elsewhere = _paid_elsewhere(incident.suspects[0], job, spec) if incident.suspects else {}
    apart = {i for i in incident.iterations
             if not episode.iterations[0] - 1 <= i <= episode.iterations[-1] + 1
             and (not paid.get(i, True) or elsewhere.get(i, False))}
    own = [i for i in incident.iterations if i not in apart] or list(episode.iterations)
    iterations = tuple(sorted(set(own) | set(episode.iterations)))
    t_from, t_to = _span(source, _candidates(attribution, graph), iterations)
    if apart:  # the search's span began at an iteration left out
        incident = replace(incident, incident=f"{graph.job}-{own[0]}-{own[-1]}", t_from_ns=t_from)
    return replace(incident, iterations=iterations, impact=impact_over(attribution, iterations, world=graph.world),
                   t_from_ns=min((t for t in (t_from, incident.t_from_ns) if t), default=0),
                   t_to_ns=max(t_to, incident.t_to_ns))


def _stragglers_paid(attribution: Attribution, slowdown: float) -> dict[int, bool]:
    """Per attributed iteration, whether its stragglers cost it ``slowdown`` or more (``Part.STRAGGLERS``)."""
    slower, faster = Part.STRAGGLERS.times(attribution, attribution.iterations)
    return {int(i): bool(f > 0 and s >= slowdown * f) for i, s, f in zip(attribution.iterations, slower, faster)}


def _span(source: RecordSource, candidates: Sequence[int], iterations: Sequence[int]) -> tuple[int, int]:
    """(first start, last end) of ``iterations`` on the first candidate rank (ns; 0 when unrecorded)."""
    span = source.iterations(ranks=list(candidates[:1]) or [0], iterations=[min(iterations), max(iterations)])
    if not len(span):
        return 0, 0
    return int(span["t_start_ns"].min()), int(span["t_end_ns"].max())


def whatif_search(
    attribution: Attribution, *, graph: OperatorGraph, topology: Topology, routing: Routing, priors: Priors,
    top_k: int, min_support: int, episode: Episode | None = None,
) -> tuple[list[tuple[Root, float]], tuple[Suspect, ...]]:
    """The what-if roots with their rates, and the top ``top_k`` suspects of each side (compute,
    network) the job pays for, and any tied with the side's first (``scoring.leading``): each side
    is one fault's evidence, as ``explain.separate`` keeps
    the top K of each fault the search found; the side that carries most of what the job pays
    (S_t) comes first, as ``lead`` orders an irregular iteration's incident. Over a sustained
    ``episode``'s paying iterations, the compute side only where a rank stands apart from chance in
    them (``diagnose``): a slow GPU slows every iteration it is slow in; jitter names none. Likewise
    the network side only where most of what transfers ran beyond their peers was the same
    transfers' in most of those iterations (``Attribution.persistent_transfers``), or in those the
    transfers alone paid the line in (``Episode.network``): a slow link, NIC or switch lengthens
    each transfer through it at every step it is slow, a loaded host's jitter one transfer in one
    step and another in the next."""
    paid = None if episode is None else episode.paid
    rated, on_host = _roots(attribution, _candidates(attribution, graph), graph, episode=paid)
    compute_led = _compute_led(attribution)
    sides: tuple[Cause, ...] = (Cause.COMPUTE, Cause.NETWORK) if compute_led else (Cause.NETWORK, Cause.COMPUTE)
    # A host apart speaks for its compute only where compute leads: a slow NIC's host's ranks wait the most too.
    if paid is not None and not _a_rank_or_host_stands_apart(attribution, paid, hosts=compute_led):
        sides = tuple(cause for cause in sides if cause is not Cause.COMPUTE)
    if (episode is not None and not episode.network
            and attribution.persistent_transfers(episode.paid, most=_RULES.majority) < _RULES.majority):
        sides = tuple(cause for cause in sides if cause is not Cause.NETWORK)
    suspects: list[Suspect] = []
    for cause in sides:
        side = [(root, rate) for root, rate in rated if root.cause is cause]
        evidence = accumulate(side, topology=topology, gpus=graph.gpus, routing=routing, host_share=on_host)
        ranking = [s for s in map_scores(evidence, topology=topology, priors=priors) if s.support >= min_support]
        if cause is Cause.NETWORK:
            ranking = weighed(ranking, lambda ranks: transfer_groups(attribution, paid, ranks=ranks), topology=topology,
                              gpus=graph.gpus, routing=routing)
        suspects += [Suspect(s.device, s.kind, float(s.score)) for s in leading_with_own_cables(ranking, top_k)]
    return rated, tuple(suspects)


def complement(incident: Incident, suspects: Sequence[Suspect]) -> Incident:
    """``incident`` with the what-if suspects it lacks, after its own: those of a side (compute,
    network) whose first what-if suspect it does not name (a second fault no irregular iteration
    showed, or a search of a few iterations that the whole job's attribution contradicts), and the
    what-if's GPUs and hosts on hosts none of its compute suspects is on (a second straggler its
    search did not reach). Which comes first is ``lead``'s to say."""
    if not incident.cause.hardware:
        return incident
    named = {s.device for s in incident.suspects}
    hosts = {parse_device(s.device).name for s in incident.suspects if _is_compute(s)}
    added = []
    for side in (True, False):
        theirs = [s for s in suspects if _is_compute(s) == side]
        agreed = bool(theirs) and theirs[0].device in named
        added += [s for s in theirs if s.device not in named
                  and (not agreed or (side and parse_device(s.device).name not in hosts))]
    if not added:
        return incident
    merged = incident.suspects + tuple(added)
    return replace(incident, suspects=merged, cause=_cause(merged) or incident.cause)


def lead(incident: Incident, attribution: Attribution, whatif: Sequence[Suspect] = ()) -> Incident:
    """``incident`` with the suspects of the side (compute, network) that carries most of what the
    job pays (S_t over every rank and iteration) first; within a side, those the what-if search
    also names (``whatif``, in its order), then the rest in the incident's order. An irregular
    iteration's search sees the delays of a few iterations, which on a noisy machine include
    transfers the whole job's replay puts at jitter, and ranks waiting on the slow one whose host
    then looks contended; the incident's first suspect is the one that explains what the job
    pays. Nothing is dropped: a short second fault stays listed."""
    compute_first = _compute_led(attribution)
    named = {s.device: k for k, s in enumerate(whatif)}
    ordered = tuple(sorted(incident.suspects,
                           key=lambda s: (_is_compute(s) != compute_first, named.get(s.device, len(named)))))
    return incident if ordered == incident.suspects else replace(incident, suspects=ordered)


def _is_compute(suspect: Suspect) -> bool:
    return suspect.kind in (DeviceKind.GPU, DeviceKind.HOST)


def _cause(suspects: Sequence[Suspect]) -> IncidentCause | None:
    kinds = {_is_compute(s) for s in suspects}
    if not kinds:
        return None
    return IncidentCause.MIXED if len(kinds) == 2 else IncidentCause.COMPUTE if True in kinds else IncidentCause.NETWORK


def paid_sides(incident: Incident, attribution: Attribution) -> Incident:
    """A hardware ``incident`` without the suspects of a side (compute, or transfers) that carries
    less than ``minor`` of what the operator types add up to over its iterations, where the other
    side has suspects: that side is jitter's, which the what-if search does not search either
    (``_roots``); a loaded host's transfer jitter would otherwise name its NVSwitch, on every
    transfer's path, beside each slow GPU of it."""
    share = _paid_compute_share(attribution, incident.iterations)
    if not incident.cause.hardware or share is None:
        return incident
    if share < _RULES.minor:
        unpaid_is_compute = True
    elif 1.0 - share < _RULES.minor:
        unpaid_is_compute = False
    else:
        return incident
    return _without_side(incident, compute=unpaid_is_compute)


def jitter_transfers_dropped(incident: Incident, attribution: Attribution, *, episodes: Collection[str] = ()) -> Incident:
    """An irregular iteration's hardware ``incident`` without its network suspects where it has compute
    suspects and the transfers over its own iterations are jitter (``persistent_transfers`` under
    ``majority``, what ``whatif_search`` asks of an episode): a loaded host's descheduled process
    delays a collective through the host's NVSwitch in one of them, another in the next, where a
    flapping link delays its own transfers in every iteration it trips δ in. The ``episodes``'
    devices stay: the what-if search of the episode the incident lies in named them, its transfers
    persistent over the episode's own iterations (a NIC failing after the iterations that opened it)."""
    if not incident.cause.hardware:
        return incident
    if attribution.persistent_transfers(incident.iterations, most=_RULES.majority) >= _RULES.majority:
        return incident
    return _without_side(incident, compute=False, keeping=episodes)


def _without_side(incident: Incident, *, compute: bool, keeping: Collection[str] = ()) -> Incident:
    """``incident`` without its suspects of one side (``compute``, else transfers) but the devices it is
    ``keeping``, where the other side has some."""
    kept = tuple(s for s in incident.suspects if _is_compute(s) != compute or s.device in keeping)
    if not kept or len(kept) == len(incident.suspects):
        return incident
    return replace(incident, suspects=kept, cause=_cause(kept) or incident.cause)


def _compute_share(attribution: Attribution, iterations: Sequence[int] | None = None, *,
                   stragglers: bool = False) -> float:
    """Compute gaps' share of what the operator types add up to (S_t - 1), over ``iterations`` where
    given and measured (the job's S_t is its costliest stretch's: a pause is not a NIC's episode);
    ``stragglers``: of what they add up to beside the pipeline's split, whose cost (S_split - 1,
    the last stage's extra work) is compute's and is taken from it."""
    share = _paid_compute_share(attribution, iterations, stragglers=stragglers)
    return 0.0 if share is None else share


def _steady_compute_share(attribution: Attribution, iterations: Sequence[int], *, stragglers: bool = False) -> float:
    """The median over ``iterations`` of each one's compute share of what its operator types add up
    to, where they add up to something (else ``_compute_share``). A sustained slowdown persists from
    step to step (What-if §4.2), and a pause is compute's (a paused rank issues nothing; a transfer is
    timed from its last member's start): one in a slow link's episode can cost its iteration more
    than the link costs all of them, lifting compute's total share, and is not what the episode is."""
    if attribution.by_type_ns is None or COMPUTE not in attribution.by_type:
        return _compute_share(attribution, iterations, stragglers=stragglers)
    at = np.isin(np.asarray(attribution.iterations), np.asarray(list(iterations), dtype=np.int64))
    compute = list(attribution.by_type).index(COMPUTE)
    excess = _type_excess(attribution)[at]
    if stragglers:  # each iteration's split (``_compute_share``)
        excess[:, compute] -= _split_excess(attribution)[at]
    excess = np.clip(excess, 0.0, None)
    total = excess.sum(axis=1)
    paid = total > 0
    if not paid.any():
        return 0.0
    return float(np.median(excess[paid, compute] / total[paid]))


def _paid_compute_share(attribution: Attribution, iterations: Sequence[int] | None = None, *,
                        stragglers: bool = False) -> float | None:
    """``_compute_share``; None where the operator types add up to nothing."""
    by_type, split = dict(attribution.by_type), attribution.split_slowdown
    if iterations is not None and attribution.by_type_ns is not None:
        at = np.isin(np.asarray(attribution.iterations), np.asarray(list(iterations), dtype=np.int64))
        ideal = float(np.asarray(attribution.ideal_ns)[at].sum())
        if ideal > 0:
            by_type = dict(zip(attribution.by_type, attribution.by_type_ns[at].sum(axis=0) / ideal))
            split = Part.SPLIT.slowdown(attribution, iterations)
    if stragglers and COMPUTE in by_type:
        by_type[COMPUTE] -= split - 1.0
    excess = {t: max(s - 1.0, 0.0) for t, s in by_type.items()}
    total = sum(excess.values())
    return excess.get(COMPUTE, 0.0) / total if total > 0 else None


def _compute_led(attribution: Attribution) -> bool:
    return _compute_share(attribution) >= _RULES.majority


def _candidates(attribution: Attribution, graph: OperatorGraph) -> list[int]:
    """The ranks whose compute the replay put back most, then those whose worker slowdown is at least
    ``majority`` of the top one's (over 1: a second straggler half as costly is a second fault, not
    noise), with their hosts' other ranks; the first ``max_candidates`` of them. A slow ring or NIC
    makes every worker on it costly, and the paper's replica x stage approximation a whole stage,
    which would crowd out a slow GPU elsewhere: its put-back compute names it whatever the transfers do."""
    values = np.asarray(attribution.by_worker)
    if not len(values) or values.max() <= 1.0:
        return []
    put_back = compute_put_back(attribution)
    by_put_back = np.argsort(-put_back, kind="stable")
    computing = by_put_back[put_back[by_put_back] >= _RULES.majority * put_back.max()].tolist() \
        if put_back.max() > 0 else []
    excess = values - 1.0
    by_value = np.argsort(-values, kind="stable")
    costly = by_value[excess[by_value] >= _RULES.majority * excess.max()]
    top = computing + costly[~np.isin(costly, computing)].tolist()
    hosts = {graph.hosts[r] for r in top}
    chosen = set(top)
    mates = [r for r in range(graph.world) if graph.hosts[r] in hosts and r not in chosen]
    return sorted((top + mates)[:_RULES.max_candidates])


def _roots(attribution: Attribution, candidates: Sequence[int], graph: OperatorGraph,
           episode: Sequence[int] | None = None) -> tuple[list[tuple[Root, float]], dict[int, float]]:
    """What-if roots with their rates (see the module docstring), and each compute root's host
    share; with those of stragglers a slower one masks in the ``episode``'s paying iterations
    (``_masked_roots``)."""
    excess = {t: max(s - 1.0, 0.0) for t, s in attribution.by_type.items()}
    total = sum(excess.values()) or 1.0
    share = excess.get(COMPUTE, 0.0) / total
    compute_weight = share if share >= _RULES.minor else 0.0
    network_weight = 1.0 - share if 1.0 - share >= _RULES.minor else 0.0
    rated: list[tuple[Root, float]] = []
    on_host: dict[int, float] = {}
    per_iteration = np.asarray(attribution.per_iteration)
    position = {it: k for k, it in enumerate(attribution.iterations)}
    if compute_weight > 0 and candidates:
        slowdowns = rank_compute_slowdowns(attribution, list(candidates))
        gain = np.clip(slowdowns - 1.0, 0.0, None).mean(axis=0)
        for j, rank in enumerate(candidates):
            mates = [k for k, other in enumerate(candidates) if other != rank and graph.hosts[other] == graph.hosts[rank]]
            # A mate is as slow when it gains at least half what the rank gains (``peers.host_share``'s question).
            on_host[rank] = float(np.mean([gain[k] >= _RULES.majority * gain[j] for k in mates])) if mates and gain[j] > 0 else 0.0
        # A rank gaining under ``minor`` of the top one's is the jitter a 3-sigma put-back lets through.
        slow = gain >= _RULES.minor * gain.max() if gain.max() > 0 else np.zeros(len(candidates), bool)
        for row, iteration in enumerate(attribution.worker_iterations):
            for j, rank in enumerate(candidates):
                found = _compute_root(iteration, int(rank), float(slowdowns[row, j]),
                                      float(per_iteration[position[iteration]]), compute_weight) if slow[j] else None
                if found is not None:
                    rated.append(found)
    if compute_weight > 0:
        steady = _steady_ranks(attribution, episode) if episode is not None else ()
        if steady:
            host = graph.host_index
            per_host = np.bincount(host)
            # One device's steady ranks are at most one host's: the highest of them, each replayed on its own.
            steady = steady[:int(per_host.max())]
            as_steady = np.bincount(host[list(steady)], minlength=len(per_host))
            for rank in set(steady) - set(candidates):
                # As a candidate's: the share of its host's other ranks that are as steady.
                others = int(per_host[host[rank]]) - 1
                on_host[rank] = (int(as_steady[host[rank]]) - 1) / others if others else 0.0
        rated += _masked_roots(attribution, candidates, episode, compute_weight, steady)
    if network_weight > 0:
        groups = slow_groups(attribution)
        totals: dict[int, float] = {}
        for g in groups:
            totals[g.iteration] = totals.get(g.iteration, 0.0) + g.excess_ns
        for g in groups:
            root = Root(g.iteration, Cause.NETWORK, g.ranks[0], g.comm, g.seq, g.op, g.ranks, g.ranks, (), g.iteration)
            rated.append((root, network_weight * g.excess_ns / totals[g.iteration]))
    return rated, on_host
