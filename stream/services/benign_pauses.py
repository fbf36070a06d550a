"""The streaming localizer's reading of a gathering of δ-irregular iterations (``localized``), as
``sleuth localize`` reads them offline: where each cluster's search stops, which incidents are
benign pauses (recorded, never paged), and which the data's.

``sleuth localize`` drops an irregular cluster's incident that the job's what-if attribution shows
to be a hiccup (``sleuth.localizer.attributed.hiccup``: one short run, not recurring, cheap). Live,
only the iterations after a pause tell whether it recurs or goes on, so an incident is judged once
``SLEUTH_ATTRIBUTION_SUSTAIN`` iterations past the last one it rests on have landed for every rank:
on the attribution of those and of the ``SLEUTH_ATTRIBUTION_WINDOW`` iterations before its first
(past ``SLEUTH_ATTRIBUTION_WARMUP``), its cost a share of the ``SLEUTH_LOCALIZER_WINDOW`` iterations
the localizer looks across, as offline it is of the records read. One whose iterations are still in
the warmup pages; one whose iterations after it have not landed within
``SLEUTH_LOCALIZER_LAND_TIMEOUT_S`` (the job ended or stalls) is judged on those that did, as the
finished job is offline: a stall that costs the job the line's share of the window still pages. One
naming a straggler cause the stragglers did not cost the job is recorded as a pause too
(``unpaid_straggler_cause``: its iterations were long on every rank alike), as is one naming a
compute device there (``unpaid_compute``) or naming only a side that carried under a tenth of what
the job paid in its iterations (``unpaid_side``: a transfer blip inside a slow GPU's episode, which
the slowdown watch raises), or compute devices its iterations' straggler cost was charged to under
the line or network devices whose transfers cost them under it (``uncharged_device``): offline,
outside every sustained episode; inside one, offline the episode's what-if search leads such an
incident with the devices the job paid for, which live the slowdown watch raises (a real job's rank
slow from step 50, whose search from a jitter spike at 29 named rank 1's GPU). A pause judged benign
is recorded (``sleuth.stores.PauseStore``), and a device that paused before pages the second time,
as offline. A compute incident whose iterations the same attribution reads as work or pauses moving
between the ranks (``localize.data_not_device``: pauses striking one rank, then another, every few
steps) names that cause and no GPU, as offline. Each is judged without a side its iterations barely
paid for, as offline reports it (``attributed.paid_sides``: a GPU's incident keeps no NVSwitch
beside it for a transfer blip), and an incident whose sustained episodes all read a non-hardware
cause other than its own is read as that cause (``localize.read_as_its_episodes``): offline it
gives way to the episode's own incident, which the slowdown watch raises live, the two then one.
One naming transfer devices alone inside an episode read as a device's, where its transfers were
jitter over its own iterations, is recorded as a pause (``localize.jitter_in_a_device_episode``):
offline the episode's what-if search replaces that side, live the watch raises the episode with
it. The sustained episodes of the same iterations (``Replayed.sustained``) bound each cluster's
search, as offline: a step later in the window is its own episode's (the slowdown watch raises
it), not evidence of the cluster's.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from sleuth.errors import SleuthError
from sleuth.localizer import Incident, localize
from sleuth.localizer.localize import (
    data_not_device, episode_readings, jitter_in_a_device_episode, read_as_its_episodes, searched_across_episodes,
)
from sleuth.localizer.attributed import (
    Episode, episodes, evidence_iterations, hiccup, paid_sides, tied_devices, uncharged_device, unpaid_compute,
    unpaid_side, unpaid_straggler_cause,
)
from sleuth.settings import Settings
from sleuth.sources import RecordSource
from sleuth.topology import Topology
from sleuth.whatif.attribution import Attribution, attribute

__all__ = ["Replayed", "judge", "localized", "replayed", "settled_through", "settling"]

_log = logging.getLogger(__name__)


def settled_through(last: int, settings: Settings) -> int:
    """The iteration whose landing settles whether a pause ending at ``last`` is benign."""
    return last + settings.attribution_sustain


@dataclass(frozen=True)
class Replayed:
    """The what-if attribution of the iterations read around a gathering's incidents (``replayed``)."""

    iterations: tuple[int, ...]
    attribution: Attribution

    def sustained(self, settings: Settings) -> tuple[Episode, ...]:
        """Its sustained episodes (``attributed.episodes``): what bounds each cluster's search, as offline."""
        return episodes(self.attribution, slowdown=settings.attribution_slowdown, sustain=settings.attribution_sustain)[0]


def replayed(incidents: Sequence[Incident], source: RecordSource, settings: Settings, *,
             through: int | None) -> Replayed | None:
    """The attribution of the ``SLEUTH_ATTRIBUTION_WINDOW`` iterations before the first that
    ``incidents`` rest on (past the warmup) through ``SLEUTH_ATTRIBUTION_SUSTAIN`` past their last,
    as far as ``through`` (None where none of those has landed for every rank)."""
    wanted = _around(incidents, settings, through=through)
    if not wanted:
        return None
    return Replayed(wanted, attribute(source.ranks_records(None, iterations=wanted), source.job_spec(),
                                      iterations=source.iterations(iterations=wanted)))


def judge(incidents: Sequence[Incident], source: RecordSource, settings: Settings, *, through: int | None,
          named_elsewhere: set[str], read: Replayed | None = None, stopped: bool = False) -> list[Incident | None]:
    """Each of one gathering's ``incidents`` as judged on ``source``'s records landed ``through`` an
    iteration for every rank (None: none yet): None where it is a benign pause, else the incident,
    read as the data's (``data_not_device``) where the attribution says so; ``named_elsewhere``:
    devices the job's raised incidents name first or tie with, and its recorded pauses' first suspects;
    ``read``: ``replayed``'s, used where it holds the iterations the judgeable incidents need;
    ``stopped``: the job's records stopped landing before the iterations that settle a pause
    (``SLEUTH_LOCALIZER_LAND_TIMEOUT_S``): it is judged on those that landed, as offline."""
    if through is None:
        return list(incidents)
    judgeable = [i for i, incident in enumerate(incidents)
                 if _judgeable(incident, settings, through=through, stopped=stopped)]
    if not judgeable:
        return list(incidents)
    wanted = _around([incidents[i] for i in judgeable], settings, through=through)
    if read is None or read.iterations != wanted:
        read = replayed([incidents[i] for i in judgeable], source, settings, through=through)
    if read is None:
        return list(incidents)
    attribution, spec = read.attribution, source.job_spec()
    sustained = read.sustained(settings)
    found: list[Incident | None] = list(incidents)
    line = settings.attribution_slowdown
    for i in judgeable:
        others = tied_devices(o for o in incidents if o is not incidents[i]) | named_elsewhere
        # Without a side its iterations barely paid for, as offline reports it (``paid_sides``).
        paid = paid_sides(incidents[i], attribution)
        pause = hiccup(incidents[i], others, attribution, spec=spec, slowdown=line,
                       sustain=settings.attribution_sustain, horizon=max(len(wanted), settings.localizer_window)) \
            or unpaid_straggler_cause(incidents[i], attribution, slowdown=line) \
            or unpaid_compute(incidents[i], attribution, slowdown=line, spec=spec) \
            or unpaid_side(paid, attribution, slowdown=line) \
            or uncharged_device(paid, attribution, slowdown=line, spec=spec)
        # The episodes it lies in, diagnosed once for the two readings of them below.
        readings = () if pause else episode_readings(paid, attribution, sustained, slowdown=line)
        pause = pause or jitter_in_a_device_episode(paid, attribution, readings)
        found[i] = None if pause else read_as_its_episodes(data_not_device(paid, attribution), readings)
    return found


def localized(source: RecordSource, irregular: Sequence[int], *, topology: Topology, settings: Settings,
              through: int | None, named_elsewhere: set[str],
              stopped: bool = False) -> list[tuple[Incident, Incident | None]]:
    """The incidents of a gathering of ``irregular`` iterations (``localize``, raising what it raises),
    each with its reading (``judge``, ``stopped`` its). Where a cluster's search reached into a
    sustained episode of the iterations around (``replayed``) apart from its own, it is searched again
    kept between them, as offline: a step later in the window is that episode's, which the slowdown
    watch raises. Records the replay cannot order leave the incidents as first found, paged unjudged."""
    search = partial(localize, source, irregular_iterations=irregular, topology=topology,
                     window=settings.localizer_window)
    incidents = search()
    try:
        read = replayed(incidents, source, settings, through=through)
        sustained = read.sustained(settings) if read is not None else ()
        if any(searched_across_episodes(incident, sustained) for incident in incidents):
            incidents = search(between=sustained)
        return list(zip(incidents, judge(incidents, source, settings, through=through,
                                         named_elsewhere=named_elsewhere, read=read, stopped=stopped)))
    except SleuthError as error:
        _log.warning("job %s: cannot judge iterations %s..%s for benign pauses: %s", source.job_spec().job,
                     irregular[0], irregular[-1], error)
        return [(incident, incident) for incident in incidents]


def _around(incidents: Sequence[Incident], settings: Settings, *, through: int | None) -> tuple[int, ...]:
    """``replayed``'s iterations for ``incidents``."""
    if through is None or not incidents:
        return ()
    seen = set().union(*(evidence_iterations(incident) for incident in incidents))
    first = max(settings.attribution_warmup, min(seen) - settings.attribution_window)
    return tuple(range(first, min(through, settled_through(max(seen), settings)) + 1))


def settling(incident: Incident, settings: Settings) -> int:
    """The iteration whose landing settles whether ``incident`` is a benign pause: its search may have
    followed a delay into the iteration after its last (``evidence_iterations``)."""
    return settled_through(max(evidence_iterations(incident)), settings)


def _judgeable(incident: Incident, settings: Settings, *, through: int, stopped: bool) -> bool:
    """Past the warmup, and the iterations that show whether it goes on have landed, or none will."""
    return min(evidence_iterations(incident)) >= settings.attribution_warmup and (
        stopped or settling(incident, settings) <= through)
