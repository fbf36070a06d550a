"""Baselines the benchmark compares the localizer with. They read every rank (no progressive
fetching: :func:`read_all`, once, shared by all three) and return suspect GPU ids, best first.
None of them scores network devices, so they cannot be right on a NIC, link or switch fault.

* ``earliest_abnormal`` (the naive rule Holmes's search refines, §4.3): per irregular
  iteration, take the abnormal operator instance that started first anywhere in the job and
  blame the member of its group that launched it last (the one the others waited for); the
  GPU with most votes wins. Unlike the search it never follows the delay further back, so a
  late launch that was itself caused upstream (a pipeline wait) is blamed on the waiter.
* ``random_walk`` (Holmes §5.1.2 "RW", after MicroRCA): a graph of ranks where each rank that
  waited in a group's abnormal operators points at the member of that group that waited least
  (the late launcher), weighted by the wait; personalized PageRank with the restart spread over
  the waiting ranks in proportion to their wait, so that rank flows to whom everyone waits on.
* ``relative_median`` (NVIDIA resiliency extension's straggler detector): a rank's relative
  performance score is the median compute time over ranks divided by its own; below the
  threshold (0.75) it is a straggler.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sleuth.errors import ConfigError
from sleuth.sources import RecordSource

from sleuth.localizer.fetch import Fetcher
from sleuth.localizer.graph import OperatorGraph, build_graph
from sleuth.localizer.operators import COLLECTIVE, RECV, SEND, RankOperators, Thresholds, Window, make_window

__all__ = ["AllRanks", "earliest_abnormal", "random_walk", "read_all", "relative_median"]


@dataclass(frozen=True, eq=False)
class AllRanks:
    """Every rank's operators over the window around the irregular iterations."""

    graph: OperatorGraph
    window: Window
    ops: dict[int, RankOperators]
    irregular: tuple[int, ...]

    @property
    def columns(self) -> list[int]:
        return [self.window.column(i) for i in self.irregular]


def read_all(source: RecordSource, *, irregular_iterations: Sequence[int], window: int = 100) -> AllRanks:
    """Fetch every rank of ``source`` (what a method without progressive fetching pays)."""
    if not list(irregular_iterations):
        raise ConfigError("no irregular iterations to localize")
    graph = build_graph(source.job_spec())
    frame = make_window(source.iteration_ids(), irregular_iterations, size=window)
    fetcher = Fetcher(source, graph, frame, thresholds=Thresholds())
    return AllRanks(graph, frame, fetcher.get(range(graph.world)), tuple(int(i) for i in irregular_iterations))


def _instance_starts(every: AllRanks, rank: int, row: int, col: int) -> dict[int, int]:
    """Start time of each member's copy of operator instance (``rank``, ``row``) in ``col``."""
    held = every.ops[rank]
    comm, cls, seq = int(held.slot_comm[row]), int(held.slot_class[row]), int(held.seq[row, col])
    if cls == COLLECTIVE:
        members = [(int(m), COLLECTIVE, -1) for m in every.graph.group(comm)]
    else:
        peer = int(held.slot_peer[row])
        members = [(rank, cls, peer), (peer, RECV if cls == SEND else SEND, rank)]
    starts = {}
    for member, member_cls, member_peer in members:
        other = every.ops[member]
        found = other.find(comm, member_cls, member_peer, seq, col)
        if found >= 0:
            starts[member] = int(other.start[found, col])
    return starts


def earliest_abnormal(every: AllRanks, *, top_k: int = 2) -> list[str]:
    votes: dict[int, int] = {}
    for col in every.columns:
        first, where = None, None
        for rank, held in every.ops.items():
            rows = np.flatnonzero(held.abnormal[:, col])
            if len(rows):
                row = int(rows[np.argmin(held.start[rows, col])])
                start = int(held.start[row, col])
                if first is None or start < first:
                    first, where = start, (rank, row)
        if where is None:
            continue
        starts = _instance_starts(every, where[0], where[1], col)
        late = max(starts, key=lambda r: (starts[r], -r))
        votes[late] = votes.get(late, 0) + 1
    ranked = sorted(votes, key=lambda r: (-votes[r], r))
    return [every.graph.gpus[r] for r in ranked[:top_k]]


def random_walk(every: AllRanks, *, top_k: int = 2, damping: float = 0.85) -> list[str]:
    import networkx as nx

    graph, cols = every.graph, every.columns
    # Each rank's wait per group: its abnormal operators' excess over their baselines.
    wait: dict[int, dict[int, float]] = {}
    for rank, held in every.ops.items():
        sub = held.abnormal[:, cols]
        rows, which = np.nonzero(sub)
        if not len(rows):
            continue
        excess = (held.end[rows, np.asarray(cols)[which]] - held.start[rows, np.asarray(cols)[which]]) - held.base[rows]
        per_group = np.zeros(graph.n_groups)
        np.add.at(per_group, held.slot_comm[rows], np.clip(excess, 0, None))
        for g in np.flatnonzero(per_group > 0):
            wait.setdefault(int(g), {})[rank] = float(per_group[g])
    walk = nx.DiGraph()
    walk.add_nodes_from(range(graph.world))
    restart = np.zeros(graph.world)
    for g, waited in wait.items():
        members = graph.group(g).tolist()
        late = min(members, key=lambda m: (waited.get(m, 0.0), m))
        for member, amount in waited.items():
            restart[member] += amount
            if member != late:
                previous = walk.get_edge_data(member, late, {"weight": 0.0})["weight"]
                walk.add_edge(member, late, weight=previous + amount)
    if not restart.any():
        return []
    personalization = {int(r): float(restart[r]) for r in np.flatnonzero(restart)}
    score = nx.pagerank(walk, alpha=damping, personalization=personalization, weight="weight")
    ranked = sorted(score, key=lambda r: (-score[r], r))
    return [graph.gpus[r] for r in ranked[:top_k]]


def relative_median(every: AllRanks, *, threshold: float = 0.75, top_k: int = 2) -> list[str]:
    graph, cols = every.graph, every.columns
    compute = np.array([float(every.ops[r].gap[:, cols].sum()) for r in range(graph.world)])
    median = float(np.median(compute))
    score = np.where(compute > 0, median / np.maximum(compute, 1.0), 1.0)
    stragglers = np.flatnonzero(score < threshold)
    ranked = stragglers[np.argsort(score[stragglers], kind="stable")]
    return [graph.gpus[int(r)] for r in ranked[:top_k]]
