"""Stragglers that are not broken hardware (What-if paper §5.2, §5.3).

Compute evidence that sits on one GPU, a few GPUs or one host is hardware. Evidence spread over
many ranks is not: it is the job's own work that is uneven.

* **Stage imbalance**: the late ranks are (nearly) all in the last pipeline stage, many of
  them, persistently. The last stage also runs the loss and logit layers; an even split of the
  transformer layers leaves it the slowest (What-if §5.2).
* **Sequence-length imbalance**: the late ranks are many and in several data-parallel replicas
  and stages: attention cost grows with the square of each document's length, so micro-batches
  of long documents straggle, on whichever replica drew them (What-if §5.3).

"Many" is: covering ``cover`` (80%) of the compute evidence takes at least ``diffuse_ranks``
ranks, and no single host holds ``cover`` of it (a slow host CPU also spreads over its GPUs).
Or, when the search reached only a few late ranks (it follows the largest delay, so a slow
stage shows as the one rank the pivot waits for): ``cover`` of the compute evidence sits on
ranks whose slowness their data-parallel peers share (``shared``, from ``peers.peer_share``):
nearly all of them (``stage_together``) in the same iterations, or, for a rank not steadily slow,
at least ``shared_min`` of them at some time (slowness that moves between replicas; a steadily
slow rank whose peers are not slow with it is a broken GPU, whatever else its peers do); then
nearly all peers slow in the same iterations on the last stage is stage imbalance, and otherwise
sequence-length imbalance. Stage imbalance is persistent: it also needs the late ranks to be
steadily slow (``PeerShare.steady``); peers slow together now and then is a set of replicas that
drew long documents in the same (slowest) iterations.

Or, whatever the evidence's size, when the slowness is seen *moving* (``late``: the iterations
each rank was found late in): a broken GPU or host is the late one in every irregular iteration
it causes, so its host recurs; a replica that drew long documents is the late one in that
iteration only, and the next slow iteration finds another. The slowness moves when the searched
iterations found late ranks on at least ``moves`` hosts in at least ``moves`` iterations, at most
1 - ``cover`` of the compute evidence sits on hosts found late in several (where a broken device
would be), and at least half of it on hosts found late once whose slowness is confirmed: the
rank's compute excess stands out of its own noise (``outstanding``, ``peers.stands_out``) and at
least half its sampled data-parallel peers were as slow in some iteration too (``PeerShare.ever``).
The confirmation keeps out the slowest iterations of a healthy job, which are each late somewhere
by chance (a garbage-collection pause on one rank): that moves too, but the paused rank's peers
never compute that slowly. Then it is sequence-length imbalance (stage imbalance if the peer
evidence says so). One long-document iteration can tower over everything else the window holds,
so comparing sizes (the peer rule above) misses it; where it happened does not.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping
from dataclasses import dataclass

import numpy as np


from sleuth.localizer.graph import OperatorGraph
from sleuth.localizer.peers import PeerShare
from sleuth.localizer.rules import LOCALIZER_RULES
from sleuth.validation import fraction, integer

__all__ = ["ADVICE", "Diagnosis", "Straggler", "classify"]


class Straggler(enum.Enum):
    HARDWARE = "hardware"
    STAGE_IMBALANCE = "stage_imbalance"
    SEQLEN_IMBALANCE = "seqlen_imbalance"
    SCATTERED_PAUSES = "scattered_pauses"

    def __str__(self) -> str:
        return self.value


ADVICE = {
    Straggler.HARDWARE: "",
    Straggler.STAGE_IMBALANCE: (
        "The last pipeline stage is persistently the slowest (it also runs the loss and logit layers): "
        "give it fewer transformer layers (an uneven pipeline split, e.g. Megatron-LM's "
        "--decoder-last-pipeline-num-layers). No hardware needs replacing."
    ),
    Straggler.SEQLEN_IMBALANCE: (
        "Compute slowness moves across data-parallel ranks from iteration to iteration: long-tailed "
        "sequence lengths make some micro-batches much costlier (attention is quadratic in document length). "
        "Balance sequences across DP ranks and micro-batches by estimated attention cost. No hardware needs replacing."
    ),
    Straggler.SCATTERED_PAUSES: (
        "Each slow iteration waits for one worker's pause, a different worker each time, and every other worker "
        "waits for it: Python's garbage collector stopping one process at a time, or CPU contention on the hosts. "
        "Collect garbage on every rank at the same step (gc.disable() or gc.freeze() after start-up, then "
        "gc.collect() every N steps), and leave the training processes their cores (data-loader workers, other "
        "jobs). No hardware needs replacing."
    ),
}


@dataclass(frozen=True)
class Diagnosis:
    kind: Straggler
    ranks_to_cover: int  # ranks holding `cover` of the compute evidence
    last_stage_share: float  # share of the compute evidence on the last pipeline stage
    replicas: int  # data replicas among those ranks
    one_off_share: float = 0.0  # share of the compute evidence confirmed and on hosts found late once

    @property
    def advice(self) -> str:
        return ADVICE[self.kind]


def classify(
    compute: Mapping[int, float],
    *,
    graph: OperatorGraph,
    cover: float = LOCALIZER_RULES.imbalance_cover,
    diffuse_ranks: int = LOCALIZER_RULES.diffuse_ranks,
    shared: Mapping[int, PeerShare] | None = None,
    shared_min: float = LOCALIZER_RULES.peers_moving_share,
    stage_together: float = LOCALIZER_RULES.stage_together,
    late: Mapping[int, Collection[int]] | None = None,
    outstanding: Collection[int] | None = None,
    moves: int = LOCALIZER_RULES.moves,
) -> Diagnosis:
    """Hardware, stage imbalance or sequence-length imbalance, from compute evidence per rank
    and, optionally, the share of each rank's peers that are as slow and the iterations each
    rank was found late in (see the module docstring). ``outstanding``: the late ranks whose
    compute excess stands out of their own noise (None: all); only their evidence can show
    slowness moving, so that the slowest iterations of a healthy job, each late somewhere by
    chance, are not taken for it."""
    fraction("cover", cover)
    integer("diffuse_ranks", diffuse_ranks, low=2)
    integer("moves", moves, low=2)
    ranks = np.array([r for r, v in compute.items() if v > 0], dtype=np.int64)
    values = np.array([compute[int(r)] for r in ranks], dtype=np.float64)
    total = float(values.sum())
    if total <= 0:
        return Diagnosis(Straggler.HARDWARE, 0, 0.0, 0)
    order = np.argsort(-values, kind="stable")
    ranks, values = ranks[order], values[order]
    covering = int(np.searchsorted(np.cumsum(values), cover * total - 1e-12) + 1)
    top = ranks[:covering]
    hosts: dict[str, float] = {}
    for rank, value in zip(ranks.tolist(), values.tolist()):
        host = graph.hosts[rank]
        hosts[host] = hosts.get(host, 0.0) + value
    last_share = 0.0
    if graph.stage is not None and graph.last_stage > 0:
        last_share = float(values[graph.stage[ranks] == graph.last_stage].sum() / total)
    replicas = len(set(graph.replica[top].tolist())) if graph.replica is not None else 0
    diffuse = covering >= diffuse_ranks and max(hosts.values()) < cover * total
    shared = shared or {}
    pairs = list(zip(ranks.tolist(), values.tolist()))
    on_shared = sum(v for r, v in pairs if _is_shared(shared.get(r, PeerShare()), shared_min, stage_together))
    together = sum(shared.get(r, PeerShare()).together * v for r, v in pairs) / total
    steady = sum(v for r, v in pairs if shared.get(r, PeerShare()).steady) / total
    stage = last_share >= cover and together >= stage_together and steady >= cover
    # Evidence that can show slowness moving: the late rank stands out of its own noise, and its
    # data-parallel peers were as slow at some time too (a benign pause strikes one rank alone).
    real = {
        r: v for r, v in compute.items()
        if (outstanding is None or r in outstanding) and shared.get(r, PeerShare()).ever >= 0.5
    }
    one_off, recurrent, moved = _one_off_share(compute, real, late or {}, graph=graph, moves=moves)
    moving = moved and one_off >= 0.5 and recurrent <= 1 - cover
    if moving or not diffuse and on_shared >= cover * total:
        kind = Straggler.STAGE_IMBALANCE if stage else Straggler.SEQLEN_IMBALANCE
    elif not diffuse:
        kind = Straggler.HARDWARE
    elif last_share >= cover:
        kind = Straggler.STAGE_IMBALANCE
    elif replicas >= 2:
        kind = Straggler.SEQLEN_IMBALANCE
    else:
        kind = Straggler.HARDWARE
    return Diagnosis(kind, covering, last_share, replicas, one_off)


def _one_off_share(
    compute: Mapping[int, float],
    real: Mapping[int, float],
    late: Mapping[int, Collection[int]],
    *,
    graph: OperatorGraph,
    moves: int,
) -> tuple[float, float, bool]:
    """The shares of the compute evidence that are ``real`` and on hosts found late in a single
    iteration, and on hosts found late in several (where a broken device would be); and whether
    the late ranks moved at all: found on at least ``moves`` hosts in at least ``moves`` iterations.

    Hosts, not ranks: a contended CPU makes whichever of its GPUs the search reaches the late one,
    so its ranks take turns while the host recurs.
    """
    on_host: dict[str, set[int]] = {}
    for rank, iterations in late.items():
        on_host.setdefault(graph.hosts[int(rank)], set()).update(int(i) for i in iterations)
    iterations = set().union(*on_host.values()) if on_host else set()
    moved = len(on_host) >= moves and len(iterations) >= moves
    total = sum(v for v in compute.values() if v > 0)
    if total <= 0:
        return 0.0, 0.0, moved
    found = {host: len(iterations) for host, iterations in on_host.items()}
    once = sum(v for r, v in real.items() if v > 0 and found.get(graph.hosts[int(r)]) == 1)
    again = sum(v for r, v in compute.items() if v > 0 and found.get(graph.hosts[int(r)], 0) > 1)
    return once / total, again / total, moved


def _is_shared(share: PeerShare, shared_min: float, stage_together: float) -> bool:
    """Do a late rank's peers share its slowness: nearly all at once (a slow stage), or, when its
    own slowness comes and goes, enough of them at other times (it moves between replicas)?"""
    return share.together >= stage_together or (not share.steady and share.anytime >= shared_min)
