"""What the report shows, gathered from an incident, a ``RecordSource`` and the topology.

Kept apart from drawing (``figures``) and from the page (``render``), so that tests can compare
each figure's data with what its SQL (``sleuth.storage.report_queries``) returns from ClickHouse.

* iteration times: the mean over the ranks the search visited (the incident's traversal) of
  each iteration's duration, ``context`` iterations either side of the irregular ones;
* the timeline: every operator of the visited ranks and of the root operators' groups in one
  irregular iteration (the first root's), with the root operators and the operators the search
  examined marked;
* the neighbourhood of the suspects in the fabric (``neighbourhood``);
* per-worker slowdown on the job's data-parallel x pipeline grid (``heatmap``: every rank's
  records of the incident's iterations, replayed by the what-if attribution).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from sleuth.errors import ConfigError
from sleuth.localizer.incident import Incident
from sleuth.records import OpKind
from sleuth.sources import RecordSource
from sleuth.topology import Topology
from sleuth.topology.ids import gpu_id

from sleuth.report.heatmap import WorkerHeatmap, worker_heatmap
from sleuth.report.neighbourhood import Neighbourhood, around
from sleuth.storage.report_queries import IncidentQueries

__all__ = ["IterationSeries", "ReportData", "Role", "Timeline", "gather"]

#: Iterations shown before the first and after the last irregular one.
CONTEXT_ITERATIONS = 100
#: Most ranks drawn on the timeline (visited ranks first).
MAX_TIMELINE_RANKS = 48


class Role(enum.IntEnum):
    """What an operator on the timeline is to the incident."""

    OTHER = 0
    VISITED = 1  # the search examined it
    ROOT = 2  # a root operator


@dataclass(frozen=True)
class IterationSeries:
    iterations: np.ndarray  # int64, ascending
    times_ms: np.ndarray  # mean over the visited ranks
    irregular: np.ndarray  # bool
    baseline_ms: float


@dataclass(frozen=True)
class Timeline:
    iteration: int
    ranks: tuple[int, ...]  # rows, top to bottom
    rank: np.ndarray  # one entry per operator
    start_ns: np.ndarray
    end_ns: np.ndarray
    role: np.ndarray  # Role values
    label: tuple[str, ...]  # "comm#seq op"

    @property
    def origin_ns(self) -> int:
        return int(self.start_ns.min()) if len(self.start_ns) else 0


@dataclass(frozen=True)
class ReportData:
    incident: Incident
    iterations: IterationSeries
    timeline: Timeline
    neighbourhood: Neighbourhood
    queries: dict[str, tuple[str, ...]]  # figure id -> the SQL that reproduces it
    topology_note: str  # where the topology came from
    heatmap: WorkerHeatmap  # S_w per (dp, pp), or a note why there is none


def gather(
    incident: Incident,
    source: RecordSource,
    topology: Topology,
    *,
    database: str = "sleuth",
    topology_note: str = "",
    context: int = CONTEXT_ITERATIONS,
) -> ReportData:
    """Everything the report draws. Raises :class:`ConfigError` when the source is another job's."""
    spec = source.job_spec()
    if spec.job != incident.job:
        raise ConfigError(f"the records are of job {spec.job!r}, the incident {incident.incident!r} of job {incident.job!r}")
    series = iteration_series(incident, source, context=context)
    timeline = timeline_of(incident, source)
    placements = {r: gpu_id(spec.placement(r).host, spec.placement(r).gpu) for r in range(spec.world)}
    involved = [placements[r] for root in incident.roots for r in root.ranks if r in placements]
    labels: dict[str, list[int]] = {}
    for rank in sorted(set(incident.traversal) | {r for root in incident.roots for r in root.ranks}):
        if rank in placements:
            labels.setdefault(placements[rank], []).append(rank)
    neighbourhood = around(
        topology, [s.device for s in incident.suspects], involved=list(dict.fromkeys(involved)),
        rank_labels={g: "r" + ",".join(map(str, ranks)) for g, ranks in labels.items()},
    )
    q = IncidentQueries(database, incident.job, incident.incident)
    first, last = (int(series.iterations[0]), int(series.iterations[-1])) if len(series.iterations) else (0, -1)
    queries = {
        "iterations": (q.iteration_times(first, last),),
        "timeline": (q.timeline(timeline.iteration, timeline.ranks), q.root_operators()),
        "traversal": (q.traversal(),),
        "topology": (q.suspects(), q.placements()),
        "scores": (q.suspects(),),
        "impact": (q.impact(),),
    }
    return ReportData(incident, series, timeline, neighbourhood, queries, topology_note, worker_heatmap(incident, source))


def iteration_series(incident: Incident, source: RecordSource, *, context: int) -> IterationSeries:
    """Mean iteration time of the visited ranks around the irregular iterations."""
    held = source.iteration_ids()
    lo, hi = min(incident.iterations) - context, max(incident.iterations) + context
    wanted = held[(held >= lo) & (held <= hi)]
    batch = source.iterations(ranks=list(incident.traversal), iterations=wanted.tolist())
    ids, inverse = np.unique(batch["iteration"], return_inverse=True)
    span = (batch["t_end_ns"] - batch["t_start_ns"]).astype(np.float64)
    times = np.bincount(inverse.reshape(-1), weights=span, minlength=len(ids)) / np.maximum(
        np.bincount(inverse.reshape(-1), minlength=len(ids)), 1
    )
    return IterationSeries(
        iterations=ids.astype(np.int64),
        times_ms=times / 1e6,
        irregular=np.isin(ids, np.asarray(incident.iterations, dtype=np.int64)),
        baseline_ms=incident.impact.baseline_ns / 1e6,
    )


def timeline_ranks(incident: Incident, source: RecordSource, iteration: int) -> tuple[int, ...]:
    """Visited ranks, then the members of the root operators' groups, at most ``MAX_TIMELINE_RANKS``."""
    spec = source.job_spec()
    members: list[int] = []
    for root in incident.roots:
        if root.ran == iteration:
            members.extend(root.ranks)
            try:
                members.extend(spec.communicator(root.comm).ranks)
            except KeyError:
                pass  # a communicator the spec does not list: its ranks are still the root's
    ranks = list(dict.fromkeys([*incident.traversal, *members]))
    return tuple(ranks[:MAX_TIMELINE_RANKS])


def timeline_of(incident: Incident, source: RecordSource) -> Timeline:
    """The operators of one irregular iteration on the timeline's ranks, with their roles."""
    # The iteration the first root operator ran in: its seq, and the steps', belong to that one.
    iteration = incident.roots[0].ran if incident.roots else incident.iterations[0]
    ranks = timeline_ranks(incident, source, iteration)
    batch = source.ranks_records(ranks, iterations=[iteration])
    # Sources return records in their own order (ClickHouse by key, files as written): one order here.
    batch = batch.take(np.lexsort((batch["seq"], batch["t_start_ns"], batch["rank"])))
    comm = batch.decoded("comm")
    rank, seq, op = batch["rank"].astype(np.int64), batch["seq"].astype(np.int64), batch["op"]
    role = np.full(len(batch), int(Role.OTHER), dtype=np.int8)
    keys = list(zip(rank.tolist(), comm.tolist(), seq.tolist()))
    visited = {(s.rank, s.comm, s.seq) for s in incident.steps if s.iteration == iteration}
    roots = {(r.comm, r.seq) for r in incident.roots if r.ran == iteration}
    for k, (r, c, s) in enumerate(keys):
        if (c, s) in roots:
            role[k] = int(Role.ROOT)
        elif (r, c, s) in visited:
            role[k] = int(Role.VISITED)
    names = {k.value: k.label for k in OpKind}
    labels = tuple(f"{c}#{s} {names.get(int(o), 'unknown')}" for (_, c, s), o in zip(keys, op.tolist()))
    return Timeline(iteration, ranks, rank, batch["t_start_ns"], batch["t_end_ns"], role, labels)
