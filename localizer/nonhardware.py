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
sequence-length imbalance.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from sleuth.errors import ConfigError

from sleuth.localizer.graph import OperatorGraph
from sleuth.localizer.peers import PeerShare

__all__ = ["ADVICE", "Diagnosis", "Straggler", "classify"]


class Straggler(enum.Enum):
    HARDWARE = "hardware"
    STAGE_IMBALANCE = "stage_imbalance"
    SEQLEN_IMBALANCE = "seqlen_imbalance"

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
}


@dataclass(frozen=True)
class Diagnosis:
    kind: Straggler
    ranks_to_cover: int  # ranks holding `cover` of the compute evidence
    last_stage_share: float  # share of the compute evidence on the last pipeline stage
    replicas: int  # data replicas among those ranks

    @property
    def advice(self) -> str:
        return ADVICE[self.kind]


def classify(
    compute: Mapping[int, float],
    *,
    graph: OperatorGraph,
    cover: float = 0.8,
    diffuse_ranks: int = 4,
    shared: Mapping[int, PeerShare] | None = None,
    shared_min: float = 0.25,
    stage_together: float = 0.75,
) -> Diagnosis:
    """Hardware, stage imbalance or sequence-length imbalance, from compute evidence per rank
    and, optionally, the share of each rank's peers that are as slow (see the module docstring)."""
    if not 0 < cover <= 1:
        raise ConfigError(f"cover must be in (0, 1], got {cover!r}")
    if diffuse_ranks < 2:
        raise ConfigError(f"diffuse_ranks must be >= 2, got {diffuse_ranks!r}")
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
    if not diffuse and on_shared >= cover * total:
        together = sum(shared.get(r, PeerShare()).together * v for r, v in pairs) / total
        kind = Straggler.STAGE_IMBALANCE if last_share >= cover and together >= stage_together else Straggler.SEQLEN_IMBALANCE
    elif not diffuse:
        kind = Straggler.HARDWARE
    elif last_share >= cover:
        kind = Straggler.STAGE_IMBALANCE
    elif replicas >= 2:
        kind = Straggler.SEQLEN_IMBALANCE
    else:
        kind = Straggler.HARDWARE
    return Diagnosis(kind, covering, last_share, replicas)


def _is_shared(share: PeerShare, shared_min: float, stage_together: float) -> bool:
    """Do a late rank's peers share its slowness: nearly all at once (a slow stage), or, when its
    own slowness comes and goes, enough of them at other times (it moves between replicas)?"""
    return share.together >= stage_together or (not share.steady and share.anytime >= shared_min)
