"""Is a late rank's slow compute its own, or shared with its peers? (What-if §5, cross-group comparison)

Two kinds of peers, two questions:

* its **data-parallel peers** (``peer_share``): is the slowness the job's own work?
* the **other GPUs of its host** (``host_share``): is it the GPU, or the host's CPU?

A broken GPU computes slowly alone: the ranks that do the same work next to it (its data-parallel
group: same stage and tensor slice, other replicas) compute at their usual pace. Slowness that
is the job's own work is shared: a heavier last pipeline stage slows every rank of that stage,
long-tailed sequence lengths slow whichever replicas drew the long documents. The search follows
the delay to one late rank either way; comparing that rank's compute excess with a few of its
peers' tells the two apart at the cost of fetching those few ranks.

A contended host CPU launches every kernel late on all of its GPUs at once, so they all spend
longer between operators, together. A broken GPU computes slowly alone: the other GPUs of its
host keep their pace (they wait for it inside the collectives they share with it, which is
waiting, not compute). The search reaches only the one rank each delay comes from, so the host's
other GPUs are fetched (at most gpus-per-host - 1 ranks) and compared with it.

Compute excess of a rank over some iterations: the sum of its gaps between operators (the time
it spent outside communication) above each gap's baseline, so the rank's waiting, which sits
inside its operators, does not count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from sleuth.localizer.fetch import Fetcher
from sleuth.localizer.graph import OperatorGraph
from sleuth.localizer.operators import RankOperators

__all__ = ["PeerShare", "compute_excess", "host_share", "peer_share"]


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
    # Peers on other hosts only: one on the same host shares its CPU, so its slowness would not
    # tell the job's work from a contended host.
    others = [int(m) for m in group if graph.hosts[int(m)] != graph.hosts[rank]]
    if not others or not len(columns):
        return PeerShare()
    picked = others[:: max(1, len(others) // sample)][:sample]  # spread over the replicas
    held = fetcher.get([rank, *picked])
    own = float(compute_excess(held[rank], list(columns)).mean())
    if own <= 0:
        return PeerShare()
    later = np.flatnonzero(~fetcher.window.reference).tolist()
    together = _as_slow(held, picked, columns, own)
    anytime = [float(np.quantile(compute_excess(held[p], later), quantile)) >= 0.5 * own for p in picked]
    return PeerShare(float(np.mean(together)), float(np.mean(anytime)))


def host_share(fetcher: Fetcher, graph: OperatorGraph, rank: int, columns: Sequence[int]) -> float:
    """The fraction of the other ranks on ``rank``'s host that are as slow as ``rank`` is in
    ``columns`` (compute excess at least half of the rank's mean there): near 1 when the host's
    CPU is the common cause, near 0 when the GPU is slow alone. 0 when the rank's compute excess
    there is within 3 spreads of its healthy iterations' (reference columns), or it is alone on
    its host in the job."""
    others = [r for r in graph.host_ranks(rank) if r != rank]
    if not others or not len(columns):
        return 0.0
    held = fetcher.get([rank, *others])
    own = float(compute_excess(held[rank], list(columns)).mean())
    # Only a slowness that stands out of the rank's own noise says anything: half of a jitter-sized
    # excess is reached by chance, and would hand a slow GPU's stray roots to its host.
    healthy = compute_excess(held[rank], np.flatnonzero(fetcher.window.reference).tolist())
    noise = 3 * 1.4826 * float(np.median(np.abs(healthy - np.median(healthy)))) if len(healthy) else 0.0
    if own <= noise:
        return 0.0
    return float(np.mean(_as_slow(held, others, columns, own)))


def _as_slow(held: Mapping[int, RankOperators], others: Sequence[int], columns: Sequence[int], own: float) -> list[bool]:
    """Per rank of ``others``: is its mean compute excess over ``columns`` at least half of ``own``?"""
    return [float(compute_excess(held[p], list(columns)).mean()) >= 0.5 * own for p in others]
