"""Which of the streaming localizer's δ-irregular incidents are benign pauses (recorded, never paged),
and which the data's: as ``sleuth localize`` reads them offline.

``sleuth localize`` drops an irregular cluster's incident that the job's what-if attribution shows
to be a hiccup (``sleuth.localizer.attributed.hiccup``: one short run, not recurring, cheap). Live,
only the iterations after a pause tell whether it recurs or goes on, so an incident is judged once
``SLEUTH_ATTRIBUTION_SUSTAIN`` iterations past the last one it rests on have landed for every rank:
on the attribution of those and of the ``SLEUTH_ATTRIBUTION_WINDOW`` iterations before its first
(past ``SLEUTH_ATTRIBUTION_WARMUP``), its cost a share of the ``SLEUTH_LOCALIZER_WINDOW`` iterations
the localizer looks across, as offline it is of the records read. One that cannot be judged (its
iterations still in the warmup, or the iterations after it never landed) pages: a fault is never
held back for want of data. One naming a straggler cause the stragglers did not cost the job is
recorded as a pause too (``unpaid_straggler_cause``: its iterations were long on every rank alike).
A pause judged benign is recorded (``sleuth.stores.PauseStore``), and a device that paused before
pages the second time, as offline. A compute incident whose iterations the same attribution reads
as work or pauses moving between the ranks (``localize.data_not_device``: pauses striking one rank,
then another, every few steps) names that cause and no GPU, as offline.
"""

from __future__ import annotations

from collections.abc import Sequence

from sleuth.localizer import Incident
from sleuth.localizer.localize import data_not_device
from sleuth.localizer.attributed import evidence_iterations, hiccup, tied_devices, unpaid_straggler_cause
from sleuth.settings import Settings
from sleuth.sources import RecordSource
from sleuth.whatif.attribution import attribute

__all__ = ["judge", "settled_through"]


def settled_through(last: int, settings: Settings) -> int:
    """The iteration whose landing settles whether a pause ending at ``last`` is benign."""
    return last + settings.attribution_sustain


def judge(incidents: Sequence[Incident], source: RecordSource, settings: Settings, *, through: int | None,
          named_elsewhere: set[str]) -> list[Incident | None]:
    """Each of one gathering's ``incidents`` as judged on ``source``'s records landed ``through`` an
    iteration for every rank (None: none yet): None where it is a benign pause, else the incident,
    read as the data's (``data_not_device``) where the attribution says so; ``named_elsewhere``:
    devices the job's raised incidents name first or tie with, and its recorded pauses' first suspects."""
    if through is None:
        return list(incidents)
    judgeable = [i for i, incident in enumerate(incidents) if _judgeable(incident, settings, through=through)]
    if not judgeable:
        return list(incidents)
    seen = set().union(*(evidence_iterations(incidents[i]) for i in judgeable))
    first = max(settings.attribution_warmup, min(seen) - settings.attribution_window)
    last = min(through, settled_through(max(seen), settings))
    wanted = list(range(first, last + 1))
    spec = source.job_spec()
    attribution = attribute(source.ranks_records(None, iterations=wanted), spec,
                            iterations=source.iterations(iterations=wanted))
    found: list[Incident | None] = list(incidents)
    for i in judgeable:
        others = tied_devices(o for o in incidents if o is not incidents[i]) | named_elsewhere
        pause = hiccup(incidents[i], others, attribution, spec=spec, slowdown=settings.attribution_slowdown,
                       sustain=settings.attribution_sustain, horizon=max(len(wanted), settings.localizer_window)) \
            or unpaid_straggler_cause(incidents[i], attribution, slowdown=settings.attribution_slowdown)
        found[i] = None if pause else data_not_device(incidents[i], attribution)
    return found


def _judgeable(incident: Incident, settings: Settings, *, through: int) -> bool:
    """Past the warmup, and the iterations that show whether it goes on have landed."""
    seen = evidence_iterations(incident)
    return min(seen) >= settings.attribution_warmup and settled_through(max(seen), settings) <= through
