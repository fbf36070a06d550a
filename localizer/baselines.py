"""Baselines the benchmark compares the localizer with. Each reads every rank (no progressive
fetching) and returns suspect GPU ids, best first.

* ``earliest_abnormal`` (Holmes figure 14c): per irregular iteration, the rank whose abnormal
  operator started first gets a vote.
* ``random_walk`` (Holmes §5.1.2 "RW", after MicroRCA): personalized PageRank from the pivot on
  the rank graph, edges between members of a group weighted by that group's abnormal delay.
* ``relative_median`` (NVIDIA resiliency extension's straggler detector): a rank's relative
  performance score is the median compute time over ranks divided by its own; below the
  threshold (0.75) it is a straggler.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sleuth.sources import RecordSource

from sleuth.localizer.fetch import Fetcher
from sleuth.localizer.graph import build_graph
from sleuth.localizer.operators import Thresholds, make_window

__all__ = ["earliest_abnormal", "random_walk", "relative_median"]


def _everything(source: RecordSource, irregular: Sequence[int], window: int):
    graph = build_graph(source.job_spec())
    frame = make_window(source.iteration_ids(), irregular, size=window)
    fetcher = Fetcher(source, graph, frame, thresholds=Thresholds())
    return graph, frame, fetcher.get(range(graph.world))


def earliest_abnormal(source: RecordSource, *, irregular_iterations: Sequence[int], top_k: int = 2, window: int = 100) -> list[str]:
    graph, frame, ops = _everything(source, irregular_iterations, window)
    votes: dict[int, int] = {}
    for iteration in irregular_iterations:
        col = frame.column(iteration)
        first, who = None, -1
        for rank, held in ops.items():
            rows = np.flatnonzero(held.abnormal[:, col])
            if len(rows):
                start = int(held.start[rows, col].min())
                if first is None or start < first:
                    first, who = start, rank
        if who >= 0:
            votes[who] = votes.get(who, 0) + 1
    ranked = sorted(votes, key=lambda r: (-votes[r], r))
    return [graph.gpus[r] for r in ranked[:top_k]]


def random_walk(
    source: RecordSource, *, irregular_iterations: Sequence[int], pivot: int = 0, top_k: int = 2, window: int = 100
) -> list[str]:
    import networkx as nx

    graph, frame, ops = _everything(source, irregular_iterations, window)
    cols = [frame.column(i) for i in irregular_iterations]
    delay = np.zeros(graph.n_groups)
    for held in ops.values():
        for col in cols:
            rows = np.flatnonzero(held.abnormal[:, col])
            excess = (held.end[rows, col] - held.start[rows, col]) - held.base[rows]
            np.add.at(delay, held.slot_comm[rows], np.clip(excess, 0, None))
    walk = nx.Graph()
    walk.add_nodes_from(range(graph.world))
    for g in np.flatnonzero(delay > 0):
        members = graph.group(int(g)).tolist()
        for a, b in zip(members, members[1:] + members[:1]):
            if a != b:
                weight = walk.get_edge_data(a, b, {"weight": 0.0})["weight"] + float(delay[g])
                walk.add_edge(a, b, weight=weight)
    rank = nx.pagerank(walk, alpha=0.85, personalization={pivot: 1.0}, weight="weight")
    ranked = sorted((r for r in rank if r != pivot), key=lambda r: (-rank[r], r))
    return [graph.gpus[r] for r in ranked[:top_k]]


def relative_median(
    source: RecordSource, *, irregular_iterations: Sequence[int], threshold: float = 0.75, top_k: int = 2, window: int = 100
) -> list[str]:
    graph, frame, ops = _everything(source, irregular_iterations, window)
    cols = [frame.column(i) for i in irregular_iterations]
    compute = np.array([float(ops[r].gap[:, cols].sum()) for r in range(graph.world)])
    median = float(np.median(compute))
    score = np.where(compute > 0, median / np.maximum(compute, 1.0), 1.0)
    stragglers = np.flatnonzero(score < threshold)
    ranked = stragglers[np.argsort(score[stragglers], kind="stable")]
    return [graph.gpus[int(r)] for r in ranked[:top_k]]
