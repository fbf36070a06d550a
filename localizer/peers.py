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

When in time the slowness sits tells them apart too. A broken GPU is slow in (nearly) every
iteration after its fault starts: its slowness is *steady*. Sequence-length imbalance draws each
micro-batch's documents afresh every iteration, so a replica is slow only in the iterations it drew
long ones and the slowest replica moves. A late rank that is steadily slow is therefore a broken
GPU unless nearly all its peers are slow with it (a slow stage); and a peer that is steadily slow
is a second broken GPU, not a sign that the slowness moves.

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
from sleuth.localizer.rules import LOCALIZER_RULES

__all__ = ["PeerShare", "compute_excess", "host_share", "is_steady", "peer_share", "stands_out"]


@dataclass(frozen=True)
class PeerShare:
    """Of a late rank's sampled peers, the fractions as slow as it: in the same iterations
    (``together``: a slow stage), and, of those whose slowness is not steady, in any of the
    window's later iterations (``anytime``: slowness that moves between replicas), or in at least
    one of them (``ever``: what one long document does once). ``steady``:
    the late rank itself is slow in nearly every later iteration since it first was (a broken
    GPU, or a slow stage)."""

    together: float = 0.0
    anytime: float = 0.0
    steady: bool = False
    ever: float = 0.0


def compute_excess(ops: RankOperators, columns: Sequence[int]) -> np.ndarray:
    """The rank's compute time above its baseline (ns) in each of ``columns``."""
    present = ops.present[:, columns]
    excess = np.where(present, ops.gap[:, columns] - ops.gap_base[:, None], 0.0)
    return excess.sum(axis=0)


def peer_share(
    fetcher: Fetcher, graph: OperatorGraph, rank: int, columns: Sequence[int], *, sample: int = LOCALIZER_RULES.peer_sample,
    quantile: float = LOCALIZER_RULES.peer_quantile,
) -> PeerShare:
    """How many of up to ``sample`` data-parallel peers of ``rank`` are as slow as ``rank`` is
    in ``columns`` (compute excess at least half of the rank's mean there): in those same
    columns (their mean), and in the window's non-reference iterations (the ``quantile`` of
    their per-iteration excess, and its maximum; steadily slow peers left out, see ``is_steady``); and whether
    ``rank`` is itself steadily slow there. Zeros when the rank has no such group or no excess."""
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
    series = {p: compute_excess(held[p], later) for p in picked}
    moving = [p for p in picked if not is_steady(series[p])]
    anytime = [float(np.quantile(series[p], quantile)) >= 0.5 * own for p in moving]
    ever = [float(series[p].max()) >= 0.5 * own for p in moving]
    steady = is_steady(compute_excess(held[rank], later))
    return PeerShare(float(np.mean(together)), sum(anytime) / len(picked), steady, sum(ever) / len(picked))


def is_steady(excess: np.ndarray, *, share: float = LOCALIZER_RULES.steady_share,
              min_run: int = LOCALIZER_RULES.steady_min_run) -> bool:
    """Is a rank slow (compute excess at least half its peak) in at least ``share`` of the
    iterations from the first one it was slow in to the last, and in at least ``min_run`` of them?

    A fault that starts part-way through the window is steady from its start on, which is why
    the count begins at the first slow iteration. ``min_run``: a peak in the window's last
    iteration or two says nothing about what follows it.
    """
    if not len(excess) or float(excess.max()) <= 0:
        return False
    slow = excess >= 0.5 * float(excess.max())
    since = slow[int(np.argmax(slow)) :]
    return int(since.sum()) >= min_run and float(since.mean()) >= share


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
    if not stands_out(fetcher, rank, columns):
        return 0.0
    return float(np.mean(_as_slow(held, others, columns, own)))


def stands_out(fetcher: Fetcher, rank: int, columns: Sequence[int], *,
               spreads: float = LOCALIZER_RULES.stands_out_spreads) -> bool:
    """Is the rank's mean compute excess over ``columns`` more than ``spreads`` robust spreads
    (scaled median absolute deviation) of its excess in the window's healthy iterations?"""
    if not len(columns):
        return False
    ops = fetcher.one(rank)
    own = float(compute_excess(ops, list(columns)).mean())
    healthy = compute_excess(ops, np.flatnonzero(fetcher.window.reference).tolist())
    noise = spreads * 1.4826 * float(np.median(np.abs(healthy - np.median(healthy)))) if len(healthy) else 0.0
    return own > noise


def _as_slow(held: Mapping[int, RankOperators], others: Sequence[int], columns: Sequence[int], own: float) -> list[bool]:
    """Per rank of ``others``: is its mean compute excess over ``columns`` at least half of ``own``?"""
    return [float(compute_excess(held[p], list(columns)).mean()) >= 0.5 * own for p in others]
