"""When the streaming localizer measures what a job pays, and over which iterations.

A job that is slow from its first step, or slows gradually, makes no iteration δ-irregular, so
the irregularities topic never names it. The localizer therefore also watches the progress of
every active job it owns (``localizer_agent``): each round (``SLEUTH_ATTRIBUTION_INTERVAL_S``), a
job whose records have landed for every rank past the last iteration it measured gets its newest
``SLEUTH_ATTRIBUTION_WINDOW`` landed iterations measured (``sleuth.whatif.newest_slowdowns``), past its first
``SLEUTH_ATTRIBUTION_WARMUP`` (uneven across ranks by nature: a job that starts is not a straggler's
job). Only when a run of
``SLEUTH_ATTRIBUTION_SUSTAIN`` iterations at or above ``SLEUTH_ATTRIBUTION_SLOWDOWN`` is in the
window does the full attribution (S_t, S_w) and the device search run, over that run's iterations
and those after it (the earlier ones join as peers through their history): the two replays that
decide cost a fraction of the many that explain, and the incident's S is what its episode pays.
Scattered pauses read on a run still going on whose one rank paid every iteration, too few yet to
set it apart from chance (``too_few_to_tell``), are analysed again the next round instead of raised.

The window's records are kept between rounds (``WindowCache``), so each round reads from
ClickHouse only the iterations that landed since the last one, and replays only those: what the
earlier ones' peers need (their transfers by operator identity, their stages' work) is kept too.
They are kept on one clock: hosts' clocks disagree, and the replay compares times across ranks
(``sleuth.whatif.clocks``).
A round whose new iterations would call for the full analysis were they to pay what the one before
them paid measures them within that analysis (one preparation; the S its replay of them gives): a
localizer that fell behind by a few iterations catches up within the round that raises the incident. A guess that
proves wrong costs that round the analysis of a few iterations, never a wrong plan.
A job whose progress stood still is asked again after twice as long each time, up to
``MAX_IDLE_S``: finished jobs cost nothing.
One whose progress stood still for ``SLEUTH_JOB_IDLE_S`` is handed back by ``idle`` once, for the
localizer to drop its window; the few numbers of its progress stay (while the localizer owns the
job and it is active), so that a finished job is not measured again, and a job that resumes reads
its window afresh.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from sleuth.errors import ConfigError
from sleuth.jobspec import JobSpec
from sleuth.localizer import Incident, IncidentCause, localize
from sleuth.localizer.attributed import runs, too_few_to_tell
from sleuth.records import IterationBatch, RecordBatch
from sleuth.settings import Settings
from sleuth.sources import MemorySource
from sleuth.topology import Topology
from sleuth.validation import number_above
from sleuth.whatif.attribution import Attribution, PeerHistory, attribute, attribute_and_leave, newest_slowdowns
from sleuth.whatif.clocks import ClockOffsets, clock_offsets, on_one_clock
from sleuth.whatif.lost import fill_lost_members

__all__ = ["MAX_IDLE_S", "SlowdownWatch", "WindowCache", "slowdown_incidents"]

#: The longest a registered job whose records stopped landing waits for its next progress query:
#: a job resumed after a pause is measured again within a minute.
MAX_IDLE_S = 60.0


@dataclass
class _Progress:
    measured: int = -1  # the last landed iteration a round measured
    landed: int | None = None  # the landed-through iteration its last progress query found
    asked: bool = False  # whether its progress was queried before
    idle_s: float = 0.0  # the current wait between two progress queries of a job that stood still
    next_s: float = 0.0  # when its progress is asked next
    moved_s: float | None = None  # when its landed iteration last moved (None: not yet asked)
    parked: bool = False  # handed back by ``idle``: its window is dropped until it moves again


class SlowdownWatch:
    """Per job: whether its progress is due to be asked, and the window a round measures."""

    def __init__(self, *, interval_s: float, window: int, sustain: int, warmup: int = 0,
                 idle_s: float = float("inf")) -> None:
        number_above("interval_s", interval_s, 0, finite=False)
        if window < sustain:
            raise ConfigError(f"the attribution window ({window} iterations) must hold a sustained run of {sustain}")
        self.interval_s = interval_s
        self.window = window
        self.sustain = sustain
        self.warmup = warmup
        self.idle_s = number_above("idle_s", idle_s, 0, finite=False)
        self._jobs: dict[str, _Progress] = {}

    def asks(self, job: str, now: float) -> bool:
        """Whether ``job``'s progress is due to be asked at ``now``."""
        return self._jobs.setdefault(job, _Progress()).next_s <= now

    def measured(self, job: str) -> int:
        """The last landed iteration a round measured for ``job`` (-1 before the first)."""
        return self._jobs.setdefault(job, _Progress()).measured

    def window_of(self, job: str, landed: int | None, now: float) -> tuple[int, int] | None:
        """The iterations (first, last) to measure now that ``landed`` is the job's landed-through
        iteration (None: not every rank has records yet), or None when none past its warm-up landed
        since the last one measured."""
        progress = self._jobs.setdefault(job, _Progress())
        if progress.moved_s is None:
            progress.moved_s = now
        # A job whose landed iteration moved since it was last asked is moving, even within its warm-up.
        moved = progress.asked and landed is not None and landed != progress.landed
        progress.landed, progress.asked = landed, True
        due = landed is not None and landed > max(progress.measured, self.warmup - 1)
        if not moved and not due:  # it stood still: asked again after twice as long
            progress.idle_s = min(MAX_IDLE_S, max(self.interval_s, 2 * progress.idle_s))
            progress.next_s = now + progress.idle_s
            return None
        progress.idle_s = 0.0
        progress.next_s = now + self.interval_s
        progress.moved_s, progress.parked = now, False
        if landed is None or not due:
            return None  # it moved, but what landed is still its warm-up
        return max(self.warmup, landed - self.window + 1), landed

    def done(self, job: str, through: int) -> None:
        """A round measured ``job`` through ``through``."""
        self._jobs.setdefault(job, _Progress()).measured = through

    def idle(self, now: float) -> list[str]:
        """The jobs whose progress stood still for over ``idle_s`` since the last call that named them."""
        gone = [job for job, p in self._jobs.items()
                if not p.parked and p.moved_s is not None and now - p.moved_s > self.idle_s]
        for job in gone:
            self._jobs[job].parked = True
        return gone

    def forget(self, jobs: set[str]) -> None:
        """Drop the state of jobs no longer registered."""
        for job in set(self._jobs) - jobs:
            del self._jobs[job]


@dataclass
class WindowCache:
    """One job's newest iterations: records and iteration rows read once each, each iteration's S
    measured once (when it was the newest) with what it leaves for its successors' peers, and the
    last iteration a full analysis covered, with the level it saw."""

    records: dict[int, RecordBatch] = field(default_factory=dict)
    iterations: dict[int, IterationBatch] = field(default_factory=dict)
    slowdowns: dict[int, float] = field(default_factory=dict)
    history: dict[int, PeerHistory] = field(default_factory=dict)  # what each measured one leaves its successors' peers
    analysed_through: int = -1
    analysed_level: float = 0.0  # the median S of the newest sustained iterations the last analysis saw (0: none yet)
    analysed_since: int = -1  # where the level the last analysis saw began
    eased_at: int = -1  # where the level last stepped down: what came before is over, its incident final
    clocks: ClockOffsets = ClockOffsets({}, 0.0)  # the hosts' clocks as the newest records read told them

    def missing(self, first: int, last: int) -> list[int]:
        """The iterations of [first, last] not held yet."""
        return [i for i in range(first, last + 1) if i not in self.records]

    def add(self, wanted: list[int], records: RecordBatch, iterations: IterationBatch, spec: JobSpec) -> int:
        """Hold the ``wanted`` iterations' records and rows (an iteration without any is held empty),
        every host's on one clock: as their own collectives with other hosts' tell it, else as the
        last records read that had any (``clocks``), and the members of groups the records lost filled
        in from their groups (``sleuth.whatif.lost``); returns how many were filled in."""
        # Read anew each time: a host's clock that NTP slews or steps is followed as it moves.
        read = clock_offsets(records, spec)
        if read.across:
            self.clocks = read
        records, iterations = on_one_clock(records, iterations, self.clocks)
        # On one clock: a group's times are one reading. The newest held iteration shows the ranks' programs.
        program = self.records.get(max(self.records, default=-1))
        records, filled = fill_lost_members(records, spec, program=program)
        for it in wanted:
            self.records[it] = records.take(np.flatnonzero(records["iteration"] == it))
            self.iterations[it] = iterations.take(np.flatnonzero(iterations["iteration"] == it))
        return filled

    def window(self, first: int, last: int) -> tuple[RecordBatch, IterationBatch]:
        """The held records and rows of [first, last]; the older ones are dropped."""
        self.drop_before(first)
        return self.held(first, last, range(first, last + 1))

    def drop_before(self, first: int) -> None:
        """Drop what is held of the iterations before ``first``."""
        for held in (self.records, self.iterations, self.slowdowns, self.history):
            for it in [i for i in held if i < first]:
                del held[it]

    def held(self, first: int, last: int, iterations: Iterable[int]) -> tuple[RecordBatch, IterationBatch]:
        """The held records and rows of ``iterations`` (ascending) of the window [first, last], in
        that order, their strings numbered as the whole window's: the window's other iterations join
        with none of their rows, only their string tables."""
        wanted = set(iterations)
        window = range(first, last + 1)
        return (RecordBatch.concat([_rows_if(self.records[i], i in wanted) for i in window if i in self.records]),
                IterationBatch.concat([_rows_if(self.iterations[i], i in wanted) for i in window if i in self.iterations]))


_Batch = TypeVar("_Batch", RecordBatch, IterationBatch)


def _rows_if(batch: _Batch, kept: bool) -> _Batch:
    """``batch``, or none of its rows (its string table still joins a concatenation's)."""
    return batch if kept else batch.take(slice(0, 0))


def slowdown_incidents(cache: WindowCache, spec: JobSpec, first: int, last: int, *, topology: Topology,
                       settings: Settings) -> list[Incident]:
    """The incidents of the sustained slowdowns in the window [first, last] of a job (none: it pays
    nothing, or the episode analysed last goes on and is analysed again a window later)."""
    # Each held iteration's records are their own batch: a round joins only those it replays.
    cache.drop_before(first)
    window = range(first, last + 1)
    if not any(len(cache.records[i]) for i in window if i in cache.records):
        return []
    new = [i for i in window if i not in cache.slowdowns]
    fresh = [i for i in new if i in cache.records and len(cache.records[i])]
    guess = _guessed_plan(cache, new, first, last, settings) if fresh else None
    ready: Attribution | None = None  # the attribution of ``guess``'s span, made while measuring ``last``
    span: tuple[RecordBatch, IterationBatch] | None = None  # the records and rows of ``ready``'s span
    if guess is not None:
        # The round that measures the newest iteration will likely also attribute the span it ends
        # (an episode opening, or one growing): one preparation does both (``attribute_and_leave``).
        since, until = guess.span
        span = cache.held(first, last, range(since, until + 1))
        ready, lefts = attribute_and_leave(span[0], spec, iterations=span[1], history=_history(cache, first, since),
                                           newest=len(new))
        cache.slowdowns.update(zip(ready.iterations[-len(new):], ready.per_iteration[-len(new):]))
        cache.history.update(lefts)
    elif fresh:
        # Only the new iterations are prepared: the earlier ones' peers come from their history.
        fresh_records, fresh_iterations = cache.held(first, last, new)
        steps, measured, lefts = newest_slowdowns(fresh_records, spec, history=_history(cache, first, min(new)),
                                                  iterations=fresh_iterations)
        cache.slowdowns.update(zip(steps.tolist(), measured.tolist()))
        cache.history.update(lefts)
    plan = _plan(cache, cache.slowdowns, first, last, settings)
    if plan is None:
        return []
    analysed = cache.analysed_through, cache.analysed_level, cache.analysed_since, cache.eased_at
    cache.analysed_through, cache.analysed_level = last, plan.level
    cache.analysed_since, cache.eased_at = plan.since, plan.eased_at
    since, until = plan.span
    if guess is None or plan.span != guess.span or span is None:
        # No guess, or the newest iteration paid otherwise than guessed: the plan's span is attributed anew.
        span = cache.held(first, last, range(since, until + 1))
        ready = attribute(span[0], spec, iterations=span[1], history=_history(cache, first, since))
    span_records, span_iterations = span
    found = localize(MemorySource(spec, span_records, span_iterations), irregular_iterations=[], topology=topology,
                     window=settings.localizer_window, attribution=ready,
                     slowdown=settings.attribution_slowdown, sustain=settings.attribution_sustain)
    # Pauses read on an episode still going on whose one rank paid every iteration, too few yet to
    # tell from a device: analysed again next round, with one more iteration's evidence.
    waiting = [i for i in found if i.cause is IncidentCause.SCATTERED_PAUSES and max(i.iterations) == last
               and ready is not None and too_few_to_tell(ready, i.iterations)]
    if waiting:
        cache.analysed_through, cache.analysed_level, cache.analysed_since, cache.eased_at = analysed
    return [i for i in found if i not in waiting]


@dataclass(frozen=True)
class _Plan:
    """A full analysis due this round: the iterations it attributes (first, last), and what the
    cache keeps of it (``WindowCache.analysed_level``, ``analysed_since``, ``eased_at``)."""

    span: tuple[int, int]
    level: float
    since: int
    eased_at: int


def _guessed_plan(cache: WindowCache, new: list[int], first: int, last: int, settings: Settings) -> _Plan | None:
    """The plan of this round were its new iterations, ``new`` (those that landed since the last
    round, through ``last``), each to pay what the one before them paid (a level goes on more
    often than not), when that plan attributes a span that ends at ``last`` and holds them all;
    else None (the round measures its new iterations alone first)."""
    before = new[0] - 1
    if new != list(range(new[0], last + 1)) or before not in cache.slowdowns \
            or not all(len(cache.records.get(i, ())) for i in new):
        return None
    guess = _plan(cache, cache.slowdowns | dict.fromkeys(new, cache.slowdowns[before]), first, last, settings)
    return guess if guess is not None and guess.span[0] <= new[0] and guess.span[1] == last else None


def _plan(cache: WindowCache, slowdowns: dict[int, float], first: int, last: int, settings: Settings) -> _Plan | None:
    """The full analysis the held iterations' ``slowdowns`` call for this round (None: none)."""
    held = sorted(slowdowns)
    sustained, _ = runs(held, [slowdowns[i] for i in held], slowdown=settings.attribution_slowdown,
                        sustain=settings.attribution_sustain)
    if not sustained:
        return None
    episode = sustained[-1].iterations
    # The newest sustained iterations each pay the slowdown line's margin more than the level the
    # last analysis saw: a second cause joined the one analysed (a GPU failing beside an uneven split);
    # or each that margin less: the cause analysed left, and what goes on is another's (pauses around it).
    line, level = settings.attribution_slowdown, cache.analysed_level
    newest = [slowdowns[i] for i in held[-settings.attribution_sustain:]]
    stepped = level > 0 and min(newest) >= level * line
    eased = level > 0 and max(newest) * line <= level
    if not _analysis_due(episode, cache.analysed_through, last, every=settings.attribution_window,
                         stepped=stepped or eased):
        return None
    # Only the episode and what followed it are attributed (after a step, only the iterations past
    # the step): the incident is about them, and the iterations before join as peers through their
    # history, at a fraction of the replays. After a step down, the level analysed is attributed up
    # to the step once more (its incident's final extent), and what follows a window later.
    eased_at = cache.eased_at
    span = (max(episode[0], eased_at), last)
    if stepped:
        span = (_step_start(held, slowdowns, lambda s: s >= level * line), last)
    elif eased:
        step = _step_start(held, slowdowns, lambda s: s * line <= level)
        before = max(episode[0], cache.analysed_since, first)
        # What follows is analysed a window later, with a window's evidence of its own: which rank
        # pauses when takes more than a few iterations to tell from a device.
        span = (before, step - 1) if before < step else (step, last)
        eased_at = step
    return _Plan(span, float(np.median(newest)), eased_at if eased else span[0], eased_at)


def _history(cache: WindowCache, first: int, since: int) -> list[PeerHistory]:
    """What the window's iterations before ``since`` left: the peers across iterations of those after."""
    return [cache.history[i] for i in range(first, since) if i in cache.history]


def _step_start(held: list[int], slowdowns: dict[int, float], holds: Callable[[float], bool]) -> int:
    """The first of the newest iterations whose S all ``holds`` (the step they made)."""
    start = held[-1]
    for it in reversed(held):
        if not holds(slowdowns[it]):
            break
        start = it
    return start


def _analysis_due(episode: tuple[int, ...], analysed_through: int, last: int, *, every: int, stepped: bool = False) -> bool:
    """Whether the newest sustained episode needs the full analysis (attribution and device search):
    it is new, or it ended since the last analysis (its incident's final extent), or what it pays
    ``stepped`` up (a second cause) or down (the cause analysed left) since, or it went on for a
    window since (the incident grows, and its alert stays open, a window at a time)."""
    if episode[-1] <= analysed_through:
        return False
    return episode[0] > analysed_through or episode[-1] < last or stepped or last - analysed_through >= every
