"""A job's records localized as ``sleuth localize`` does it: the δ-irregular iterations, the what-if
attribution of its steady steps (``steady_steps``), and the device search from both. One home for the command and the demo.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sleuth.errors import RecordError
from sleuth.jobspec import JobSpec
from sleuth.localizer.incident import Incident
from sleuth.localizer.localize import localize
from sleuth.records import IterationBatch, RecordBatch
from sleuth.settings import Settings
from sleuth.sources import MemorySource
from sleuth.stream.detection import irregular_iterations
from sleuth.topology import Routing, Topology
from sleuth.whatif.attribution import Attribution, attribute
from sleuth.whatif.clocks import ClockOffsets, read_on_one_clock
from sleuth.whatif.lost import fill_lost_members
from sleuth.whatif.steps import number_from_groups

__all__ = ["Localized", "Readied", "localize_records", "readied", "steady_from", "steady_steps"]

_SETTINGS = Settings()


@dataclass(frozen=True)
class Localized:
    """What ``localize_records`` found."""

    irregular: tuple[Any, ...]  # the δ-irregular iterations (detector results)
    attribution: Attribution | None  # None: left out, or (``skipped``) the replay could not order the records
    skipped: str | None
    incidents: tuple[Incident, ...]
    clocks: ClockOffsets = ClockOffsets({}, 0.0)  # the ranks whose times were read on their peers' clock
    read_from: int = 0  # the first iteration read: the warm-up, or less where the records hold too few past it
    filled: int = 0  # the lost members of groups filled in (``sleuth.whatif.lost``)
    numbered: int = 0  # the records without an iteration given their group's (``sleuth.whatif.steps``)
    unresolved: tuple[Incident, ...] = ()  # not reported: finer than the records' times (``resolvable``)


@dataclass(frozen=True)
class Readied:
    """A job's records as the localizer and the attribution read them (``readied``)."""

    records: RecordBatch
    iterations: IterationBatch
    clocks: ClockOffsets
    filled: int
    numbered: int


def readied(records: RecordBatch, iterations: IterationBatch, spec: JobSpec) -> Readied:
    """The records without an iteration given their groups' (a rank whose steps nothing marked),
    every rank's times on one clock (hosts' clocks may disagree; the replay and the δ rule compare
    times across ranks), then the members of groups the records lost filled in from their groups,
    which takes the groups' times on one clock."""
    records, numbered = number_from_groups(records)
    records, iterations, clocks = read_on_one_clock(records, iterations, spec)
    records, filled = fill_lost_members(records, spec)
    return Readied(records, iterations, clocks, filled, numbered)


def steady_from(records: RecordBatch, iterations: IterationBatch, *, warmup: int, sustain: int) -> int:
    """The first iteration the localizer reads: ``warmup``, or earlier where the records hold fewer
    than ``sustain`` steps past it (a profiler trace of a job's first steps: what it holds is all
    there is, and an incident needs ``sustain`` of them), leaving out as much of the warm-up as that
    spares. Steps are counted as ``steady_steps`` keeps them."""
    steps = np.unique(records["iteration"])
    steps = steps[steps >= 0]
    if len(iterations):
        steps = steps[steps <= int(iterations["iteration"].max())]
    return min(warmup, int(steps[-min(sustain, len(steps))])) if len(steps) else warmup


def steady_steps(records: RecordBatch, iterations: IterationBatch, warmup: int) -> tuple[RecordBatch, IterationBatch]:
    """The records and iteration rows of iterations ``warmup`` and later: a starting job's ranks are
    uneven by nature (process start, communicator setup, allocator growth, autotuning); and, where
    the ranks wrote iteration rows, none past the last step one of them closed: what follows it (a
    final barrier, a checkpoint's collectives, a step still running) is no step, and the streaming
    localizer, which measures landed iterations only, never sees it."""
    keep = np.ones(len(records), dtype=bool)
    if len(iterations):
        keep &= records["iteration"] <= int(iterations["iteration"].max())
    if warmup:
        keep &= records["iteration"] >= warmup
        iterations = iterations.take(iterations["iteration"] >= warmup)
    return (records, iterations) if keep.all() else (records.take(keep), iterations)


def localize_records(
    spec: JobSpec, records: RecordBatch, iterations: IterationBatch, *, topology: Topology,
    routing: Routing | str = Routing.ECMP, attribution: bool = True, warmup: int = _SETTINGS.attribution_warmup,
    slowdown: float = _SETTINGS.attribution_slowdown, sustain: int = _SETTINGS.attribution_sustain,
    top_k: int = 2, window: int = _SETTINGS.localizer_window, pivots: Sequence[int] = (0,),
    on_stage: Callable[[str], None] | None = None,
) -> Localized:
    """Incidents of the job whose ``records`` and ``iterations`` are all at hand, every rank's times
    on one clock first (``sleuth.whatif.clocks``). ``on_stage`` hears each stage as it begins after
    the first (a progress bar's next step)."""
    stage = on_stage or (lambda _what: None)
    ready = readied(records, iterations, spec)
    records, iterations = ready.records, ready.iterations
    stage(f"localize: irregular iterations of {spec.world} ranks")
    # A starting job's irregular iterations are its warm-up's, not a straggler's (``steady_steps``).
    first = steady_from(records, iterations, warmup=warmup, sustain=sustain)
    irregular = tuple(i for i in irregular_iterations(iterations) if i.iteration >= first)
    found, skipped = None, None
    if attribution:
        stage(f"localize: what-if attribution of {len(records)} operators")
        try:
            steady, steady_iterations = steady_steps(records, iterations, first)
            found = attribute(steady, spec, iterations=steady_iterations)
        except RecordError as error:  # records the replay cannot order: the δ rule still stands
            skipped = str(error)
    stage(f"localize: searching from {len(irregular)} irregular iterations")
    incidents = localize(
        MemorySource(spec, records, iterations), irregular_iterations=irregular, topology=topology, top_k=top_k,
        window=window, pivots=tuple(pivots), routing=routing, attribution=found, slowdown=slowdown, sustain=sustain,
    )
    fine = [resolvable(incident, spec.time_resolution_ns) for incident in incidents]
    return Localized(irregular, found, skipped, tuple(i for i, ok in zip(incidents, fine) if ok), ready.clocks, first,
                     ready.filled, ready.numbered, tuple(i for i, ok in zip(incidents, fine) if not ok))


def resolvable(incident: Incident, resolution_ns: int) -> bool:
    """Whether what ``incident`` says the job paid per iteration is at least the records' time
    resolution (``JobSpec.time_resolution_ns``): each iteration's length, and each operator's the
    replay put back, is known only to within it, so a smaller cost may be the clock's alone."""
    return incident.impact.actual_ns - incident.impact.baseline_ns >= resolution_ns
