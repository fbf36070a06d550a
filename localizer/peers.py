"""Is a late rank's slow compute its own, or shared with its peers? (What-if §5, cross-group comparison)

A broken GPU computes slowly alone: the ranks that do the same work next to it (its data-parallel
group: same stage and tensor slice, other replicas) compute at their usual pace. Slowness that
is the job's own work is shared: a heavier last pipeline stage slows every rank of that stage,
long-tailed sequence lengths slow whichever replicas drew the long documents. The search follows
the delay to one late rank either way; comparing that rank's compute excess with a few of its
peers' tells the two apart at the cost of fetching those few ranks.

Compute excess of a rank over some iterations: the sum of its gaps between operators (the time
it spent outside communication) above each gap's baseline, so the rank's waiting, which sits
inside its operators, does not count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sleuth.localizer.fetch import Fetcher
from sleuth.localizer.graph import OperatorGraph
from sleuth.localizer.operators import RankOperators

__all__ = ["PeerShare", "compute_excess", "peer_share"]


@dataclass(frozen=True)
class PeerShare:
    """Of a late rank's sampled peers, the fractions as slow as it: in the same iterations
    (``together``: a slow stage), and in any of the window's later iterations (``anytime``:
    slowness that moves between replicas, or a slow stage)."""

    together: float = 0.0
    anytime: float = 0.0


def compute_excess(ops: RankOperators, columns: Sequence[int]) -> np.ndarray:
    """The rank's compute time above its baseline (ns) in each of ``columns``."""
    present = ops.present[:, columns]
    excess = np.where(present, ops.gap[:, columns] - ops.gap_base[:, None], 0.0)
    return excess.sum(axis=0)


def peer_share(
    fetcher: Fetcher, graph: OperatorGraph, rank: int, columns: Sequence[int], *, sample: int = 4, quantile: float = 0.8
) -> PeerShare:
    """How many of up to ``sample`` data-parallel peers of ``rank`` are as slow as ``rank`` is
    in ``columns`` (compute excess at least half of the rank's mean there): in those same
    columns (their mean), and in the window's non-reference iterations (the ``quantile`` of
    their per-iteration excess). Zeros when the rank has no such group or no excess."""
    group = next((graph.group(int(g)) for g in graph.groups_of(rank) if graph.kinds[int(g)] == "dp"), None)
    if group is None:
        return PeerShare()
    others = [int(m) for m in group if int(m) != rank]
    if not others or not len(columns):
        return PeerShare()
    picked = others[:: max(1, len(others) // sample)][:sample]  # spread over the replicas
    held = fetcher.get([rank, *picked])
    own = float(compute_excess(held[rank], list(columns)).mean())
    if own <= 0:
        return PeerShare()
    later = np.flatnonzero(~fetcher.window.reference).tolist()
    together = [float(compute_excess(held[p], list(columns)).mean()) >= 0.5 * own for p in picked]
    anytime = [float(np.quantile(compute_excess(held[p], later), quantile)) >= 0.5 * own for p in picked]
    return PeerShare(float(np.mean(together)), float(np.mean(anytime)))
