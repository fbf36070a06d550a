"""``localize``: irregular iterations in, incidents out (Holmes §4.3-4.4 end to end).

For each cluster of irregular iterations (those within one window of T iterations):

1. build the grouped operator graph from the job spec (``graph``);
2. per irregular iteration, search from the pivot ranks' abnormal operators to root operators,
   fetching ranks only as the search reaches them (``search``, ``fetch``);
3. rate each root by its irregularity rate R over the window (``cross_iteration``);
   then, when the iteration time steps up again later in the window (a second fault that is
   never δ-irregular, ``shifts``), the iterations after the step, against baselines from the
   level before it; and when the first irregular iteration starts a level that stays up
   (``shifts.persists``) and the cluster's irregular iterations are too few for the support
   rule, or just enough but leave every device short of it, the 3 iterations after it, which
   count toward the support rule; so do the 10 after a step before the first irregular
   iteration (a persistent fault that never tripped δ). A probe stops once one root operator has been found in
   ``min_support + 1`` of its iterations: the rate is computed over the whole window whichever
   iteration found the root, so a later search can add fetches but no evidence;
4. accumulate R onto devices (a compute root's split between its GPU and its host by how many
   of the host's other GPUs were as slow, ``peers.host_share``) and score them by MAP with
   topology decay (``scoring``);
5. decide: stragglers that are not hardware (``nonhardware``), or the top K suspects of each
   fault found (``explain``) with enough support; estimate the impact (``impact``) and build the
   ``Incident``.

Scoring is kept apart from deciding: steps 1-4 rank every device with evidence; step 5 alone
applies the support rule (a suspect needs evidence from at least ``min_support`` irregular
iterations, so one random hiccup never raises an incident) and the top K cut.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np

from sleuth.errors import ConfigError, TopologyError
from sleuth.jobspec import JobSpec
from sleuth.sources import RecordSource
from sleuth.topology import DeviceKind, Routing, Topology

from sleuth.settings import Settings
from sleuth.validation import integer, is_int, number_above
from sleuth.whatif.attribution import Attribution

from sleuth.localizer.attributed import (
    Episode, Part, complement, diagnose, diagnose_episode, episodes, evidence_iterations, grown_to_episode, hiccup,
    jitter_transfers_dropped, lead, outside_episodes, paid_sides, parts, slowdown_incident, summary, tied_devices,
    uncharged_device, unpaid_compute, unpaid_side, unpaid_straggler_cause, whatif_search,
)
from sleuth.localizer.cross_iteration import irregularity_rate, iteration_times, root_series
from sleuth.localizer.episodes import one_per_episode
from sleuth.localizer.explain import nic_beside_its_cable, separate
from sleuth.localizer.fetch import AbnormalFn, Fetcher
from sleuth.localizer.graph import OperatorGraph, build_graph
from sleuth.localizer.impact import estimate
from sleuth.localizer.incident import Incident, IncidentCause, RootOperator, Suspect
from sleuth.localizer.nonhardware import ADVICE, Diagnosis, Straggler, classify
from sleuth.localizer.peers import host_share, peer_share, stands_out
from sleuth.localizer.operators import Thresholds, Window, baseline, make_window, rebase
from sleuth.localizer.rules import LOCALIZER_RULES
from sleuth.localizer.periodic import on_the_beat
from sleuth.localizer.scoring import DEFAULT_PRIORS, Priors, Score, accumulate, map_scores, root_devices, tied_advice
from sleuth.localizer.search import Cause, Root, SearchResult, Step, search
from sleuth.localizer.shifts import level_shifts, persists

__all__ = ["Readings", "data_not_device", "episode_readings", "jitter_in_a_device_episode", "localize",
           "read_as_its_episodes", "searched_across_episodes"]

_COMPUTE_KINDS = (DeviceKind.GPU, DeviceKind.HOST)
_SETTINGS = Settings()  # defaults only: entry points read the environment
_RULES = LOCALIZER_RULES


def localize(
    source: RecordSource,
    *,
    irregular_iterations: Iterable[Any],
    topology: Topology,
    abnormal: AbnormalFn | None = None,
    pivots: Sequence[int] = (0,),
    top_k: int = 2,
    window: int = _SETTINGS.localizer_window,
    priors: Priors = DEFAULT_PRIORS,
    thresholds: Thresholds | None = None,
    min_support: int = _RULES.min_support,
    pivot_ops: int = _RULES.pivot_ops,
    graph: OperatorGraph | None = None,
    routing: Routing | str = Routing.ECMP,
    attribution: Attribution | None = None,
    slowdown: float = _SETTINGS.attribution_slowdown,
    sustain: int = _SETTINGS.attribution_sustain,
    between: Sequence[Episode] = (),
) -> list[Incident]:
    """Incidents for the irregular iterations of the job behind ``source``.

    ``irregular_iterations``: training steps (ints), or detector results with an ``iteration``
    attribute. ``abnormal``: a detector's abnormal-operator mask function; without it the
    search judges operators by their slot baselines and blocking/transfer times. ``pivots``:
    the monitored ranks the search starts from. ``routing``: how the fabric spreads flows over
    equal-cost spines (``sleuth.topology.Routing``; "static" when every pair's route is known,
    which lets a spine be singled out). Returns one incident per cluster of irregular
    iterations that has hardware suspects or a non-hardware diagnosis (possibly none); its
    suspects are the top K of each fault found, and any device tied with its first (``scoring.leading``).

    ``attribution``: the job's what-if attribution (``sleuth.whatif.attribute``), when its records
    were all read. Then every episode of at least ``sustain`` iterations at a slowdown S of at
    least ``slowdown`` that no irregular cluster covers opens an incident of its own
    (``attributed``), every incident carries what the job pays, a cluster whose hardware or
    non-hardware reading the attribution contradicts gives way to the episode's incident, one
    that agrees spans the episode it lies in, and a cluster that is a benign pause (brief, cheap,
    its device pausing nowhere else: ``attributed.hiccup``) is not reported; no hardware incident
    names a side the job barely pays for over its iterations (``attributed.paid_sides``), and one
    outside every episode that names only such a side, or devices its iterations' straggler cost
    was charged to under the line, is not reported (``unpaid_side``, ``uncharged_device``); nor is
    one inside an episode whose stragglers pay under the line beside an uneven split and where no
    device was found (the attribution reads none, or its search finds none).

    ``between``: without ``attribution``, sustained episodes of the job's (``attributed.episodes``)
    that part clusters and bound their searches as ``attribution``'s do, adding no incident of their
    own (the streaming localizer's slowdown watch raises those).

    Incidents of one episode (``episodes``: less than ``window`` iterations apart, naming the same
    device first or second) are returned as one, grown over both. A compute incident whose late
    rank was late exactly one period apart says in its advice that a program's beat, not
    hardware's, keeps that time (``periodic.on_the_beat``).
    """
    started = time.perf_counter()
    wanted = sorted({_iteration(item) for item in irregular_iterations})
    _check_options(top_k=top_k, window=window, min_support=min_support, pivot_ops=pivot_ops)
    number_above("slowdown", slowdown, 1, finite=False)
    integer("sustain", sustain, low=1)
    thresholds = thresholds or Thresholds()
    try:
        routing = Routing(routing)
    except ValueError:
        raise ConfigError(f"routing must be one of {[r.value for r in Routing]}, got {routing!r}") from None
    spec = source.job_spec()
    graph = graph or build_graph(spec)
    for pivot in pivots:
        if not isinstance(pivot, (int, np.integer)) or not 0 <= int(pivot) < graph.world:
            raise ConfigError(f"pivot rank {pivot!r} is outside the world of {graph.world}")
    missing = next((gpu for gpu in graph.gpus if gpu not in topology), None)
    if missing is not None:
        raise TopologyError(f"the job's GPU {missing} is not in the topology")
    if not wanted and attribution is None:
        return []
    available = source.iteration_ids()
    incidents = []
    sustained = tuple(between) if attribution is None else episodes(attribution, slowdown=slowdown, sustain=sustain)[0]
    for cluster in _apart_by_episode(_clusters(wanted, window), sustained):
        incident = _localize_cluster(
            source, graph, cluster, _between_other_episodes(available, cluster, sustained), topology=topology,
            abnormal=abnormal, pivots=[int(p) for p in pivots], top_k=top_k, window=window, priors=priors,
            thresholds=thresholds, min_support=min_support, pivot_ops=pivot_ops, started=started, routing=routing,
        )
        if incident is not None:
            incidents.append(incident)
    if attribution is not None:
        incidents = _with_attribution(
            source, incidents, attribution, graph=graph, topology=topology, routing=routing, priors=priors, top_k=top_k,
            min_support=min_support, started=started, slowdown=slowdown, sustain=sustain, sustained=sustained,
        )
    incidents = one_per_episode(incidents, window=window)
    if attribution is not None:
        incidents = [paid_sides(incident, attribution) for incident in incidents]
        # A cluster no episode covers has no episode's suspects to complement it (``paid_sides`` keeps
        # its side): where its iterations barely paid for that side (a transfer blip beside a pause),
        # or its suspects were charged under the line there, no device it names cost the job what it
        # paid, as the streaming judge reads it (``unpaid_side``, ``uncharged_device``).
        incidents = [k for k in incidents if not (outside_episodes(k, sustained)
                                                  and _paid_for_nothing(k, attribution, slowdown=slowdown, spec=spec))]
    return [on_the_beat(replace(incident, suspects=nic_beside_its_cable(incident.suspects, lambda s: s.device)))
            for incident in incidents]


def _with_attribution(
    source: RecordSource, incidents: list[Incident], attribution: Attribution, *, graph: OperatorGraph,
    topology: Topology, routing: Routing, priors: Priors, top_k: int, min_support: int, started: float,
    slowdown: float, sustain: int, sustained: Sequence[Episode],
) -> list[Incident]:
    """The irregular clusters' incidents with what the job pays, less the hiccups' (``hiccup``) and
    those naming a straggler cause or a compute device where no straggler cost the job
    (``unpaid_straggler_cause``, ``unpaid_compute``), the one naming the episode it lies in grown to
    that episode, plus one incident per ``sustained`` episode (``episodes``) no cluster covers."""
    spec = source.job_spec()
    kept = [
        data_not_device(replace(incident, attribution=summary(attribution, "irregular")), attribution)
        for incident in incidents
        if not hiccup(incident, tied_devices(o for o in incidents if o is not incident), attribution,
                      spec=spec, slowdown=slowdown, sustain=sustain)
    ]
    kept = [k for k in kept if not unpaid_straggler_cause(k, attribution, slowdown=slowdown)
            and not unpaid_compute(k, attribution, slowdown=slowdown, spec=spec)]
    alone: set[int] = set()  # clusters resting on their own iterations: judged as those outside every episode
    for episode in sustained:
        own = _attribution_of(attribution, episode, only=len(sustained) == 1)
        covering = [k for k, incident in enumerate(kept) if set(episode.iterations) & set(incident.iterations)]
        for part in parts(own, episode.iterations, slowdown=slowdown):
            if part is Part.SPLIT:
                # The split is the same in every iteration: it explains no irregular iteration, so a
                # cluster's incident stays beside it.
                kept.append(slowdown_incident(
                    source, own, episode, graph=graph, topology=topology, routing=routing, priors=priors,
                    top_k=top_k, min_support=min_support, started=started, part=part, whole=attribution,
                ))
                continue
            reading, beside_split = _stragglers_read(own, episode, part, whole=attribution, slowdown=slowdown)
            hardware = reading is Straggler.HARDWARE
            if beside_split and not hardware:
                # The stragglers paid under the line beside the split and read no device: a cluster
                # there rests on what its own iterations paid, as one outside every episode does.
                alone.update(covering)
                continue
            # A cluster agrees where it reads the episode's cause: hardware, or its non-hardware cause.
            if covering and _agrees(kept[covering[0]], reading):
                suspects: tuple[Suspect, ...] = ()
                if hardware:
                    _, suspects = whatif_search(own, graph=graph, topology=topology, routing=routing, priors=priors,
                                                top_k=top_k, min_support=min_support, episode=episode)
                    if beside_split and not suspects:  # under the line, the search found no device: as above
                        alone.update(covering)
                    # Every cluster in the episode gets the same evidence: they merge into one incident.
                    for k in covering:
                        if kept[k].cause.hardware:
                            # Within a side, the search that read more iterations of the fault orders the suspects.
                            order = suspects if len(episode.paid) >= len(kept[k].iterations) else ()
                            kept[k] = jitter_transfers_dropped(lead(complement(kept[k], suspects), own, order), own,
                                                               episodes=[s.device for s in suspects])
                first = _naming(kept, covering, suspects)
                kept[first] = grown_to_episode(source, kept[first], own, episode, graph=graph, slowdown=slowdown,
                                               whole=attribution)
                continue
            # No cluster covers the episode, or the one that does reads hardware where the attribution,
            # which saw every rank and iteration, does not (or the reverse, or another non-hardware
            # cause): the episode's own incident.
            incident = slowdown_incident(
                source, own, episode, graph=graph, topology=topology, routing=routing, priors=priors,
                top_k=top_k, min_support=min_support, started=started, part=part, whole=attribution,
            )
            if beside_split and not incident.suspects:
                continue
            if covering:
                kept[covering[0]] = incident
                alone.discard(covering[0])
            else:
                kept.append(incident)
    return [k for n, k in enumerate(kept)
            if n not in alone or not _paid_for_nothing(k, attribution, slowdown=slowdown, spec=spec)]


def _paid_for_nothing(incident: Incident, attribution: Attribution, *, slowdown: float, spec: JobSpec) -> bool:
    """Whether a cluster that rests on its own iterations names only a side they barely paid for, or
    devices charged under the line there (``unpaid_side``, ``uncharged_device``)."""
    return (unpaid_side(incident, attribution, slowdown=slowdown)
            or uncharged_device(incident, attribution, slowdown=slowdown, spec=spec))


def _agrees(incident: Incident, reading: Straggler) -> bool:
    """Whether a cluster's ``incident`` reads what its episode's attribution reads: hardware for
    hardware (the devices may differ: the search complements them), else the same cause."""
    if reading is Straggler.HARDWARE or incident.cause.hardware:
        return incident.cause.hardware == (reading is Straggler.HARDWARE)
    return incident.cause.value == reading.value


def _stragglers_read(own: Attribution, episode: Episode, part: Part, *, whole: Attribution,
                     slowdown: float) -> tuple[Straggler, bool]:
    """(``diagnose_episode`` of ``part`` of ``episode``, whether it is the stragglers' part under the
    line beside a split over it): the split's incident tells what the job pays there, and the
    stragglers' stands only where a device is found (not a loaded host's jitter)."""
    beside_split = part is Part.STRAGGLERS and part.slowdown(own, episode.iterations) < slowdown
    return diagnose_episode(own, episode, part=part, whole=whole), beside_split


#: (iterations shared with an incident, reading) of each part of the sustained episodes it lies in
#: that raises an incident of the stragglers' (``episode_readings``).
Readings = tuple[tuple[int, Straggler], ...]


def episode_readings(incident: Incident, attribution: Attribution, sustained: Sequence[Episode], *,
                     slowdown: float) -> Readings:
    """(iterations shared with ``incident``, reading) of each part of the ``sustained`` episodes (of
    ``attribution``'s) it lies in that raises an incident of the stragglers' (not the split; not
    stragglers under the line beside it that read no device): what ``read_as_its_episodes`` and
    ``jitter_in_a_device_episode`` read, diagnosed once."""
    readings: list[tuple[int, Straggler]] = []
    for episode in sustained:
        shared = len(set(episode.iterations) & set(incident.iterations))
        if not shared:
            continue
        own = _attribution_of(attribution, episode, only=len(sustained) == 1)
        for part in parts(own, episode.iterations, slowdown=slowdown):
            if part is Part.SPLIT:
                continue
            reading, beside_split = _stragglers_read(own, episode, part, whole=attribution, slowdown=slowdown)
            if reading is Straggler.HARDWARE or not beside_split:
                readings.append((shared, reading))
    return tuple(readings)


def read_as_its_episodes(incident: Incident, readings: Readings) -> Incident:
    """A cluster's ``incident`` as the non-hardware cause of the sustained episodes it lies in (their
    ``episode_readings``), where none of them reads hardware: offline such a cluster gives way to
    the episode's own incident where it reads otherwise (``_with_attribution``), which live the
    slowdown watch raises, and the two are one episode's (``episodes.episode_of``). Of several
    readings, the episode sharing most of the incident's iterations names the cause."""
    if not readings or any(r is Straggler.HARDWARE for _, r in readings):
        return incident
    found = max(readings, key=lambda r: r[0])[1]
    if incident.cause.value == found.value:
        return incident
    return replace(incident, cause=IncidentCause(found.value), suspects=(), advice=ADVICE[found])


def jitter_in_a_device_episode(incident: Incident, attribution: Attribution, readings: Readings) -> bool:
    """Whether a cluster's ``incident`` names transfer devices alone, lies in a sustained episode read
    as hardware's (its ``episode_readings``), and its transfers over its own iterations are jitter
    (``persistent_transfers`` under ``majority``: one transfer in one step, another in the next).
    Offline the episode's what-if search complements it and that side goes
    (``jitter_transfers_dropped``); live the slowdown watch raises the episode with that search's
    devices, and this one names only the jitter's."""
    if incident.cause is not IncidentCause.NETWORK or not any(r is Straggler.HARDWARE for _, r in readings):
        return False
    return attribution.persistent_transfers(incident.iterations, most=_RULES.majority) < _RULES.majority


def _attribution_of(attribution: Attribution, episode: Episode, *, only: bool) -> Attribution:
    """What ``episode`` is diagnosed and searched on: the job's attribution where it is the ``only``
    episode the job paid for and whole, else its own iterations' (``Attribution.over``: a step cut it
    from a longer run, ``attributed.at_steps``, or the job paid elsewhere too), whose worker
    slowdowns name its ranks, not those of the stretch the whole job paid most for."""
    if (only and not episode.cut) or attribution.prepared is None:
        return attribution
    return attribution.over(episode.iterations)


def data_not_device(incident: Incident, attribution: Attribution) -> Incident:
    """A cluster's compute incident as sequence-length imbalance when, over its iterations, the work
    moves between replicas (``attributed.work_moves``, What-if §5.3), or as scattered pauses when one
    rank at a time is the slow one, another each time (``attributed.pauses_move``, §5.4): its search
    saw a few ranks, late by chance twice on one GPU as often as not, where the replay saw every rank
    of every iteration. A compute-led mixed reading is such a search's too (diagnose asks compute to lead)."""
    readings = _NOT_DEVICE.get(incident.cause, ())
    if not readings:
        return incident
    found = diagnose(attribution, split=False, iterations=incident.iterations)
    if found not in readings:
        return incident
    return replace(incident, cause=IncidentCause(found.value), suspects=(), advice=ADVICE[found])


#: Which non-hardware readings over its own iterations replace a cluster's incident of each cause: a
#: replica late with costly data or a pause delays its pipeline neighbours' transfers too (mixed). A
#: network reading stays: a congested switch slows every peer alike, so the replay puts nothing back.
_NOT_DEVICE = {
    IncidentCause.COMPUTE: (Straggler.SEQLEN_IMBALANCE, Straggler.SCATTERED_PAUSES),
    IncidentCause.MIXED: (Straggler.SEQLEN_IMBALANCE, Straggler.SCATTERED_PAUSES),
}


def _naming(incidents: list[Incident], covering: list[int], suspects: Sequence[Suspect]) -> int:
    """Which of the ``covering`` incidents is the episode's: the first whose top suspect the
    what-if search names too, else the first."""
    named = {s.device for s in suspects}
    return next((k for k in covering if incidents[k].suspects and incidents[k].suspects[0].device in named), covering[0])


def _localize_cluster(
    source: RecordSource,
    graph: OperatorGraph,
    cluster: list[int],
    available: np.ndarray,
    *,
    topology: Topology,
    abnormal: AbnormalFn | None,
    pivots: list[int],
    top_k: int,
    window: int,
    priors: Priors,
    thresholds: Thresholds,
    min_support: int,
    pivot_ops: int,
    started: float,
    routing: Routing,
) -> Incident | None:
    frame = make_window(available, cluster, size=window)
    times = iteration_times(source, ranks=pivots, window=frame)

    fetched: set[int] = set()  # every rank any fetcher of this cluster read

    def searched(
        frame: Window, iterations: list[int], thresholds: Thresholds, *, settle: int | None = None,
        min_transfer: float = 0.0,
    ) -> tuple[Fetcher, list[tuple[Root, float]], list[Step], dict[tuple, np.ndarray]]:
        """The fetcher, each root with its rate, the steps, and each root's delay series by key."""
        fetcher = Fetcher(source, graph, frame, thresholds=thresholds, abnormal=abnormal, read_elsewhere=fetched)
        searching = partial(
            search, fetcher, graph, pivots=pivots, thresholds=thresholds, pivot_ops=pivot_ops, min_transfer=min_transfer
        )
        roots: list[Root] = []
        steps: list[Step] = []
        found_in: dict[tuple, set[int]] = {}
        for iteration in iterations:
            if settle is not None and any(len(seen) >= settle for seen in found_in.values()):
                break
            result = searching(iteration=iteration)
            following = iteration + 1
            if not result.roots and following not in iterations and following in frame.iterations:
                # Iteration boundaries are per rank: a delay at the end of a stage the pivot does not
                # wait for within the iteration (its data-parallel all-reduce) reaches the pivot at
                # the start of the next one, where the search follows it back (``search._explaining``).
                later = searching(iteration=following)
                result = SearchResult(result.roots + later.roots, result.steps + later.steps)
            roots.extend(result.roots)
            steps.extend(result.steps)
            for root in result.roots:
                found_in.setdefault(root.key, set()).add(iteration)
        series: dict[tuple, np.ndarray] = {}
        rates: dict[tuple, float] = {}
        for root in roots:
            if root.key not in rates:
                series[root.key] = root_series(root, fetcher.views(root.members, graph.comm_index(root.comm)))
                rates[root.key] = irregularity_rate(series[root.key], times)
        return fetcher, [(root, rates[root.key]) for root in roots], steps, series

    fetcher, rated, steps, _ = searched(frame, cluster, thresholds)
    fetched.update(fetcher.order)
    onset = frame.column(cluster[0])
    # (shift, iterations to search, whether the level it starts lasts through the onset)
    lasting = persists(times, at=onset, reference=frame.reference, probe=_RULES.shift_probe)
    # After an onset whose level came back (a hiccup), the columns before it are the level a later
    # step rises from as well: the few columns between the onset and the step alone leave a small
    # step's t under the segmentation's bar, and the hiccup would be the only evidence.
    segment_from = onset if lasting is not None else 0
    probes = [(shift, _RULES.shift_probe, False) for shift in level_shifts(times, start=segment_from, after=onset)]
    if lasting is not None and (
        len(cluster) < min_support or (len(cluster) == min_support and not _supported(rated, topology, graph, min_support))
    ):
        # The onset of a level that stays up, with too few irregular iterations for the support
        # rule, or just enough, where one hiccup among them or one search that found nothing
        # leaves every device short of it (both led to one hiccup, or each to a different device):
        # a persistent fault just over δ. The iterations after it are searched as
        # after a later step, and count toward the support rule, so that a hiccup that happened
        # to share the onset is not the answer. More irregular iterations whose roots agree on
        # no device are left alone: slowness that moves between replicas (``nonhardware``).
        probes.insert(0, (lasting, 1 + _RULES.onset_probe, True))
    # A step before the onset that never tripped δ (a small persistent slowdown, then a hiccup the
    # only irregular iteration) is a fault the incident's window holds: its iterations are searched
    # and count toward the support rule as the onset's do, so that the hiccup alone is not the answer.
    earlier = level_shifts(times[:onset], start=0, t_min=_RULES.earlier_t_min)
    probes = [(shift, _RULES.shift_probe, True) for shift in earlier] + probes
    supported = len(cluster)
    for shift, length, lasts in probes:
        probe = [int(i) for i in frame.iterations[shift.at : shift.at + length] if int(i) not in cluster]
        later = rebase(frame, probe, reference_from=shift.since, reference_to=shift.at)
        if later is None:
            continue
        if lasts:
            supported += len(probe)
        # The step is small next to the operators it lands on (it was never δ-irregular): judge
        # operators by a few spreads of their own level alone, not by a share of their duration.
        judged = replace(thresholds, relative=0.0, spread_k=min(thresholds.spread_k, _RULES.probe_spread_k))
        # Without the relative bar, a transfer a few microseconds over its level would be a network
        # root beside a step of milliseconds: a slow transfer that makes the step is a share of it.
        step = (shift.ratio - 1.0) * float(np.nanmedian(times[shift.since : shift.at]))
        more, found, walked, series = searched(
            later, probe, judged, settle=min_support + 1, min_transfer=_RULES.probe_transfer_share * step
        )
        if lasts:
            found = _seen_again(found, series, later, probe, judged)
        rated += found
        steps += walked
        fetched.update(more.order)

    # The iterations each late rank computed slowly in, to compare it with its peers there (``peers``).
    columns: dict[int, set[int]] = {}
    for root, rate in rated:
        if root.cause is Cause.COMPUTE and rate > 0:
            columns.setdefault(root.rank, set()).add(frame.column(root.iteration))
    # Its GPU or its host's CPU: how many of the host's other GPUs were as slow then.
    on_host = {rank: host_share(fetcher, graph, rank, sorted(cols)) for rank, cols in columns.items()}

    # Scoring: every device with evidence, ranked.
    evidence = accumulate(rated, topology=topology, gpus=graph.gpus, routing=routing, host_share=on_host)
    ranking = map_scores(evidence, topology=topology, priors=priors)

    # Deciding.
    # Compute evidence per late rank, and where the searched iterations found each late: a broken
    # device recurs, slowness that moves between replicas does not (``nonhardware``).
    compute: dict[int, float] = {}
    late: dict[int, set[int]] = {}
    for root, rate in rated:
        if root.cause is Cause.COMPUTE:
            compute[root.rank] = compute.get(root.rank, 0.0) + rate
            late.setdefault(root.rank, set()).add(root.iteration)
    # Late ranks whose slowness their data-parallel peers share are not broken (``peers``).
    shared = {rank: peer_share(fetcher, graph, rank, sorted(cols)) for rank, cols in columns.items()}
    fetched.update(fetcher.order)
    # A straggler diagnosis reads compute evidence only: it decides the incident only when compute
    # roots carry most of the irregularity rate (a congested spine also leaves a few compute roots).
    total_rate = sum(rate for _, rate in rated if rate > 0)
    if total_rate > 0 and sum(compute.values()) >= _RULES.straggler_share * total_rate:
        outstanding = {rank for rank, cols in columns.items() if stands_out(fetcher, rank, sorted(cols))}
        diagnosis = classify(compute, graph=graph, shared=shared, late=late, outstanding=outstanding)
    else:
        diagnosis = Diagnosis(Straggler.HARDWARE, 0, 0.0, 0)
    support = min(min_support, supported)
    hardware = diagnosis.kind is Straggler.HARDWARE

    def ranked(subset: Sequence[tuple[Root, float]]) -> list[Score]:
        found = accumulate(subset, topology=topology, gpus=graph.gpus, routing=routing, host_share=on_host)
        return [
            s for s in map_scores(found, topology=topology, priors=priors)
            if s.support >= support
            # Beside an imbalance, network devices may still be at fault; compute ones are explained.
            and (hardware or s.kind not in _COMPUTE_KINDS)
        ]

    devices: dict[tuple, frozenset[str]] = {}

    def devices_of(root: Root) -> frozenset[str]:
        if root.key not in devices:
            devices[root.key] = frozenset(
                root_devices(root, topology=topology, gpus=graph.gpus, routing=routing, host_share=on_host)
            )
        return devices[root.key]

    overall = {s.device: s for s in ranking}
    faults = separate(rated, ranked=ranked, devices_of=devices_of, top_k=top_k)
    chosen = list({s.device: overall.get(s.device, s) for fault in faults for s in fault}.values())
    if not hardware:
        cause = IncidentCause(diagnosis.kind.value)
    else:
        if not chosen:
            return None
        kinds = {s.kind in _COMPUTE_KINDS for s in chosen}
        cause = IncidentCause.MIXED if len(kinds) == 2 else IncidentCause.COMPUTE if True in kinds else IncidentCause.NETWORK

    traversal = tuple(dict.fromkeys(step.rank for step in steps))
    span = source.iterations(ranks=pivots, iterations=[cluster[0], cluster[-1]])
    t_from = int(span["t_start_ns"].min()) if len(span) else 0
    t_to = int(span["t_end_ns"].max()) if len(span) else 0
    return Incident(
        job=graph.job,
        incident=f"{graph.job}-{cluster[0]}-{cluster[-1]}",
        t_from_ns=t_from,
        t_to_ns=t_to,
        iterations=tuple(cluster),
        cause=cause,
        suspects=tuple(Suspect(s.device, s.kind, s.score) for s in chosen),
        roots=tuple(
            RootOperator(r.iteration, r.cause, r.rank, r.comm, r.seq, r.op, r.ranks, rate, r.ran, r.again)
            for r, rate in rated
        ),
        traversal=traversal,
        steps=tuple(steps),
        ranks_fetched=len(fetched),
        world=graph.world,
        impact=estimate(times, frame, world=graph.world),
        advice=diagnosis.advice or tied_advice([(s.device, s.score) for s in chosen]),
        seconds=time.perf_counter() - started,
    )


def _seen_again(
    found: list[tuple[Root, float]], series_of: dict[tuple, np.ndarray], frame: Window, probe: list[int],
    thresholds: Thresholds,
) -> list[tuple[Root, float]]:
    """The roots found after a lasting onset, each with the probed iterations in which its own
    operator slot was abnormal again against the level before the onset (``Root.again``).

    The searches of the iterations after the onset can each lead back to the onset's operator
    (a persistent NIC's delay passed around the pipeline leads back to the NIC's sends of the
    onset iteration), which alone is one iteration's support. A
    persistent fault's operator is as slow in those iterations too; a hiccup's is not.
    """
    out = []
    for root, rate in found:
        series = series_of[root.key]
        known = np.isfinite(series)
        base, spread = baseline(np.nan_to_num(series)[None, :], known[None, :], frame.reference)
        limit = float(thresholds.limit(base, spread)[0])
        again = tuple(
            iteration for iteration in probe
            if iteration != root.ran and known[frame.column(iteration)] and series[frame.column(iteration)] - base[0] > limit
        )
        out.append((replace(root, again=again), rate))
    return out


def _supported(rated: Sequence[tuple[Root, float]], topology: Topology, graph: OperatorGraph, min_support: int) -> bool:
    """Whether some device has evidence from roots that ran in at least ``min_support`` iterations."""
    evidence = accumulate(rated, topology=topology, gpus=graph.gpus)
    return any(len(found.iterations) >= min_support for found in evidence.values())


def _iteration(item: Any) -> int:
    value = getattr(item, "iteration", item)
    if not is_int(value):
        raise ConfigError(f"irregular_iterations: {item!r} is neither an iteration number nor has an .iteration")
    return int(value)


def _clusters(iterations: list[int], window: int) -> list[list[int]]:
    """Irregular iterations grouped so that each group spans less than one window."""
    groups: list[list[int]] = []
    for iteration in iterations:
        if groups and iteration - groups[-1][0] < window:
            groups[-1].append(iteration)
        else:
            groups.append([iteration])
    return groups


def _apart_by_episode(clusters: list[list[int]], sustained: Sequence[Episode]) -> list[list[int]]:
    """``clusters`` parted where their irregular iterations fall in different sustained episodes: a
    stretch the job did not pay for lies between them, so each is searched on its own fault's
    iterations; an iteration outside every episode stays with the one before it."""
    episode_of = {i: k for k, episode in enumerate(sustained) for i in episode.iterations}
    parted: list[list[int]] = []
    for cluster in clusters:
        current: int | None = None
        for k, iteration in enumerate(cluster):
            found = episode_of.get(iteration)
            if k == 0 or (found is not None and current is not None and found != current):
                parted.append([])
            parted[-1].append(iteration)
            current = found if found is not None else current
    return parted


def searched_across_episodes(incident: Incident, sustained: Sequence[Episode]) -> bool:
    """Whether ``incident``'s cluster found evidence (``attributed.evidence_iterations``) where
    ``localize`` given ``sustained`` episodes would not have searched it: in or past another episode,
    or its iterations in two."""
    cluster = sorted(incident.iterations)
    seen = np.asarray(sorted(evidence_iterations(incident)), dtype=np.int64)
    return (len(_between_other_episodes(seen, cluster, sustained)) < len(seen)
            or len(_apart_by_episode([cluster], sustained)) > 1)


def _between_other_episodes(available: np.ndarray, cluster: list[int], sustained: Sequence[Episode]) -> np.ndarray:
    """The ``available`` iterations a cluster's search may look across: none of another sustained
    episode's or past it, whose later level shift is that episode's fault, not this cluster's."""
    others = [e for e in sustained if not set(cluster) & set(e.iterations)]
    low = max((e.iterations[-1] + 1 for e in others if e.iterations[-1] < cluster[0]), default=None)
    high = min((e.iterations[0] for e in others if e.iterations[0] > cluster[-1]), default=None)
    keep = np.ones(len(available), bool)
    if low is not None:
        keep &= available >= low
    if high is not None:
        keep &= available < high
    return available[keep]


def _check_options(*, top_k: int, window: int, min_support: int, pivot_ops: int) -> None:
    for name, value, low in (("top_k", top_k, 1), ("window", window, 3), ("min_support", min_support, 1), ("pivot_ops", pivot_ops, 1)):
        integer(name, value, low=low)
