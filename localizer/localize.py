"""``localize``: irregular iterations in, incidents out (Holmes §4.3-4.4 end to end).

For each cluster of irregular iterations (those within one window of T iterations):

1. build the grouped operator graph from the job spec (``graph``);
2. per irregular iteration, search from the pivot ranks' abnormal operators to root operators,
   fetching ranks only as the search reaches them (``search``, ``fetch``);
3. rate each root by its irregularity rate R over the window (``cross_iteration``);
4. accumulate R onto devices and score them by MAP with topology decay (``scoring``);
5. decide: stragglers that are not hardware (``nonhardware``), or the top K suspects with
   enough support; estimate the impact (``impact``) and build the ``Incident``.

Scoring is kept apart from deciding: steps 1-4 rank every device with evidence; step 5 alone
applies the support rule (a suspect needs evidence from at least ``min_support`` irregular
iterations, so one random hiccup never raises an incident) and the top K cut.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from sleuth.errors import ConfigError, TopologyError
from sleuth.sources import RecordSource
from sleuth.topology import DeviceKind, Topology

from sleuth.localizer.cross_iteration import irregularity_rate, iteration_times, root_series
from sleuth.localizer.fetch import AbnormalFn, Fetcher
from sleuth.localizer.graph import OperatorGraph, build_graph
from sleuth.localizer.impact import estimate
from sleuth.localizer.incident import Incident, IncidentCause, RootOperator, Suspect
from sleuth.localizer.nonhardware import Straggler, classify
from sleuth.localizer.operators import Thresholds, make_window
from sleuth.localizer.scoring import DEFAULT_PRIORS, Priors, accumulate, map_scores
from sleuth.localizer.search import Cause, Root, search

__all__ = ["localize"]

_COMPUTE_KINDS = (DeviceKind.GPU, DeviceKind.HOST)


def localize(
    source: RecordSource,
    *,
    irregular_iterations: Iterable[Any],
    topology: Topology,
    abnormal: AbnormalFn | None = None,
    pivots: Sequence[int] = (0,),
    top_k: int = 2,
    window: int = 100,
    priors: Priors = DEFAULT_PRIORS,
    thresholds: Thresholds | None = None,
    min_support: int = 2,
    pivot_ops: int = 3,
    graph: OperatorGraph | None = None,
) -> list[Incident]:
    """Incidents for the irregular iterations of the job behind ``source``.

    ``irregular_iterations``: training steps (ints), or detector results with an ``iteration``
    attribute. ``abnormal``: a detector's abnormal-operator mask function; without it the
    search judges operators by their slot baselines and blocking/transfer times. ``pivots``:
    the monitored ranks the search starts from. Returns one incident per cluster of irregular
    iterations that has hardware suspects or a non-hardware diagnosis (possibly none).
    """
    started = time.perf_counter()
    wanted = sorted({_iteration(item) for item in irregular_iterations})
    _check_options(top_k=top_k, window=window, min_support=min_support, pivot_ops=pivot_ops)
    thresholds = thresholds or Thresholds()
    spec = source.job_spec()
    graph = graph or build_graph(spec)
    for pivot in pivots:
        if not isinstance(pivot, (int, np.integer)) or not 0 <= int(pivot) < graph.world:
            raise ConfigError(f"pivot rank {pivot!r} is outside the world of {graph.world}")
    missing = next((gpu for gpu in graph.gpus if gpu not in topology), None)
    if missing is not None:
        raise TopologyError(f"the job's GPU {missing} is not in the topology")
    if not wanted:
        return []
    available = source.iteration_ids()
    incidents = []
    for cluster in _clusters(wanted, window):
        incident = _localize_cluster(
            source, graph, cluster, available, topology=topology, abnormal=abnormal, pivots=[int(p) for p in pivots],
            top_k=top_k, window=window, priors=priors, thresholds=thresholds, min_support=min_support,
            pivot_ops=pivot_ops, started=started,
        )
        if incident is not None:
            incidents.append(incident)
    return incidents


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
) -> Incident | None:
    frame = make_window(available, cluster, size=window)
    fetcher = Fetcher(source, graph, frame, thresholds=thresholds, abnormal=abnormal)
    roots: list[Root] = []
    steps = []
    for iteration in cluster:
        result = search(fetcher, graph, iteration=iteration, pivots=pivots, thresholds=thresholds, pivot_ops=pivot_ops)
        roots.extend(result.roots)
        steps.extend(result.steps)

    times = iteration_times(source, ranks=pivots, window=frame)
    held = fetcher.get(fetcher.order)
    rates: dict[tuple, float] = {}
    for root in roots:
        if root.key not in rates:
            rates[root.key] = irregularity_rate(root_series(root, held), times)
    rated = [(root, rates[root.key]) for root in roots]

    # Scoring: every device with evidence, ranked.
    evidence = accumulate(rated, topology=topology, gpus=graph.gpus)
    ranking = map_scores(evidence, topology=topology, priors=priors)

    # Deciding.
    compute: dict[int, float] = {}
    for root, rate in rated:
        if root.cause is Cause.COMPUTE:
            compute[root.rank] = compute.get(root.rank, 0.0) + rate
    diagnosis = classify(compute, graph=graph)
    support = min(min_support, len(cluster))
    supported = [s for s in ranking if s.support >= support and not _one_gpu_host(s.device, evidence, graph)]
    if diagnosis.kind is not Straggler.HARDWARE:
        cause = IncidentCause(diagnosis.kind.value)
        # Network devices may still be at fault beside the imbalance; compute ones are explained.
        chosen = [s for s in supported if s.kind not in _COMPUTE_KINDS][:top_k]
    else:
        chosen = supported[:top_k]
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
        suspects=tuple(Suspect(s.device, s.kind.value, s.score) for s in chosen),
        roots=tuple(
            RootOperator(r.iteration, r.cause.value, r.rank, r.comm, r.seq, r.op, r.ranks, rate) for r, rate in rated
        ),
        traversal=traversal,
        steps=tuple(steps),
        ranks_fetched=fetcher.ranks_fetched,
        world=graph.world,
        impact=estimate(times, frame, world=graph.world),
        advice=diagnosis.advice,
        seconds=time.perf_counter() - started,
    )


def _one_gpu_host(device: str, evidence: dict, graph: OperatorGraph) -> bool:
    """A host whose compute evidence is (>= 80%) one GPU's: that GPU explains it, not the CPU.

    A host collects all its GPUs' evidence, so without this rule two slow GPUs of one host, or a
    slow GPU next to a second fault, would be outranked by the host they share.
    """
    if not device.startswith("host:"):
        return False
    prefix = "gpu:" + device[len("host:") :] + "/"
    gpus = [found.total for name, found in evidence.items() if name.startswith(prefix)]
    return bool(gpus) and max(gpus) >= 0.8 * evidence[device].total


def _iteration(item: Any) -> int:
    value = getattr(item, "iteration", item)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
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


def _check_options(*, top_k: int, window: int, min_support: int, pivot_ops: int) -> None:
    for name, value, low in (("top_k", top_k, 1), ("window", window, 3), ("min_support", min_support, 1), ("pivot_ops", pivot_ops, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")
