"""Who and what inside a worker the slowdown comes from: finer what-if variants on an attribution.

The paper's worker slowdown gives a whole tensor group one value (``attribution``); the device
search needs the rank, and for the network, the groups whose transfers were put back. Both run on
the attribution's worker iterations only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sleuth.errors import ConfigError
from sleuth.whatif.attribution import Attribution, _run_variants
from sleuth.whatif.keys import dense_ids, first_of_each
from sleuth.whatif.rules import ATTRIBUTION_RULES

__all__ = ["SlowGroup", "TransferGroup", "compute_put_back", "rank_compute_slowdowns", "slow_groups", "transfer_groups"]


@dataclass(frozen=True)
class SlowGroup:
    """A communicator's transfers among the same members (a collective's, a pair's) put back in one
    iteration: its costliest instance (``seq``, ``op``) and what all of them were put back."""

    iteration: int
    comm: str
    seq: int
    op: str
    ranks: tuple[int, ...]
    excess_ns: float  # over its instances, the longest of each one's members' transfers over their ideal


@dataclass(frozen=True)
class TransferGroup:
    """A communicator's transfers among the same members over some iterations: how many instances
    ran, and how many of them the replay put back (a member's transfer beyond its peers' spread)."""

    comm: str
    op: str
    ranks: tuple[int, ...]
    instances: int
    slow: int


def _job(attribution: Attribution, iterations: Sequence[int] | None = None):
    """The replayable job and the dense ids of ``iterations`` (default: the worker iterations)."""
    if attribution.replayable is None or not attribution.worker_iterations:
        raise ConfigError("this attribution keeps no replayable job (made without records?)")
    job = attribution.replayable
    chosen = np.flatnonzero(np.isin(job.steps, attribution.worker_iterations if iterations is None else list(iterations)))
    return job, chosen


def compute_put_back(attribution: Attribution) -> np.ndarray:
    """Per rank, the compute the replay put back to its peers' over the worker iterations (ns): a
    slow GPU's excess is its own, where a worker slowdown also counts the waits its slow transfers cause."""
    job, chosen = _job(attribution)
    mine = np.isin(job.iteration, chosen)
    return np.bincount(job.rank[mine], weights=(job.gap - job.hardware_gap)[mine], minlength=attribution.world)


def rank_compute_slowdowns(attribution: Attribution, ranks: list[int], iterations: Sequence[int] | None = None) -> np.ndarray:
    """Per worker iteration (rows; or per one of ``iterations``, in the job's order) and rank (columns): that
    iteration's time with everything fixed but the rank's own compute gaps, over its ideal time (the
    paper's S_w of one type, compute, one iteration at a time). Its transfers are fixed too: a rank
    on a slow ring or behind a slow NIC waits in its transfers, which are the network's to explain,
    not its GPU's."""
    job, chosen = _job(attribution, iterations)
    if not ranks:
        return np.zeros((len(chosen), 0))
    # The last variant keeps nothing: each iteration's ideal replayed on its own as the others are
    # (the attribution's ideal lengths are on the job's one timeline).
    keep = job.rank[:, None] == np.r_[np.asarray(ranks, np.int64), -1][None, :]
    times = _run_variants(job, keep, np.zeros_like(keep), chosen)
    return times[:, :-1] / times[:, -1:]


def slow_groups(attribution: Attribution, *, per_iteration: int = ATTRIBUTION_RULES.groups_per_iteration) -> list[SlowGroup]:
    """The ``per_iteration`` groups with the most transfer put back in each worker iteration, a group
    being one communicator's transfers among the same members (a collective's, a pair's), summed over
    its instances: a slow device lengthens every transfer through it, and many short ones it slowed
    outweigh one long transfer that ran past its spread."""
    job, chosen = _job(attribution)
    excess = job.transfer - job.ideal_transfer
    group = job.deps.group
    by_group = np.argsort(group, kind="stable")
    bounds = np.r_[0, np.cumsum(np.bincount(group))]
    lowest, highest = _rank_span(group, job.rank, len(bounds) - 1)
    out: list[SlowGroup] = []
    for k in chosen.tolist():
        mine = np.flatnonzero((job.iteration == k) & (excess > 0))
        if not len(mine):
            continue
        # One operator per instance: its member with the most put back.
        order = mine[np.lexsort((-excess[mine], group[mine]))]
        heads = order[np.r_[True, group[order][1:] != group[order][:-1]]]
        same = dense_ids(job.comm[heads], lowest[group[heads]], highest[group[heads]])
        totals = np.bincount(same, weights=excess[heads])
        by_excess = np.argsort(-excess[heads], kind="stable")
        first = first_of_each(same[by_excess])
        costliest = np.empty(len(totals), np.int64)  # per group, its instance with the most put back
        costliest[same[by_excess][first]] = heads[by_excess][first]
        for s in np.argsort(-totals, kind="stable")[:per_iteration].tolist():
            op, g = int(costliest[s]), int(group[costliest[s]])
            members = np.unique(job.rank[by_group[bounds[g] : bounds[g + 1]]])
            name = job.kinds[int(job.kind[op])]
            out.append(SlowGroup(int(job.steps[k]), job.comms[int(job.comm[op])], int(job.seq[op]),
                                 name.split(".", 1)[-1], tuple(int(r) for r in members), float(totals[s])))
    return out


def transfer_groups(attribution: Attribution, iterations: Sequence[int] | None = None, *,
                    ranks: Sequence[int] | None = None) -> list[TransferGroup]:
    """Every group of complete transfers (a communicator's collectives among the same members, a
    pair's transfers) in the ``iterations`` (default: the worker iterations), slow or not, or
    those with a member among ``ranks``: the traffic each device carried, which ``slow_groups``
    picks the slowest of."""
    job, chosen = _job(attribution, iterations)
    wanted = _marked(chosen, len(job.steps))[job.iteration] & (job.transfer > 0)
    if ranks is not None:
        near = wanted & _marked(np.asarray(ranks, np.int64), attribution.world)[job.rank]
        wanted &= _marked(job.deps.group[near], int(job.deps.group.max()) + 1)[job.deps.group]
    mine = np.flatnonzero(wanted)
    if not len(mine):
        return []
    instance = job.deps.group[mine]
    ids, local = np.unique(instance, return_inverse=True)
    slow = np.bincount(local, weights=(job.transfer[mine] > job.ideal_transfer[mine]).astype(np.float64)) > 0
    lowest, highest = _rank_span(local, job.rank[mine], len(ids))
    comm = np.zeros(len(ids), np.int64)
    comm[local] = job.comm[mine]
    kind = np.zeros(len(ids), np.int64)
    kind[local] = job.kind[mine]
    signature = dense_ids(comm, lowest, highest)
    instances = np.bincount(signature)
    slow_instances = np.bincount(signature, weights=slow.astype(np.float64)).astype(np.int64)
    # One instance stands for its signature's members: a communicator's collective has the same every time.
    stand_in = np.full(len(instances), -1)
    stand_in[signature] = np.arange(len(ids))
    by_instance = np.argsort(local, kind="stable")
    bounds = np.r_[0, np.cumsum(np.bincount(local, minlength=len(ids)))]
    out: list[TransferGroup] = []
    for s, k in enumerate(stand_in.tolist()):
        members = np.unique(job.rank[mine[by_instance[bounds[k] : bounds[k + 1]]]])
        name = job.kinds[int(kind[k])]
        out.append(TransferGroup(job.comms[int(comm[k])], name.split(".", 1)[-1], tuple(int(r) for r in members),
                                 int(instances[s]), int(slow_instances[s])))
    return out


def _rank_span(instance: np.ndarray, rank: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Each of ``size`` instances' lowest and highest member rank: with its communicator, what tells
    its members apart (a pair's two ranks, a collective's communicator)."""
    lowest = np.full(size, np.iinfo(np.int64).max)
    highest = np.full(size, -1)
    np.minimum.at(lowest, instance, rank)
    np.maximum.at(highest, instance, rank)
    return lowest, highest


def _marked(ids: np.ndarray, size: int) -> np.ndarray:
    """A mask of ``size`` with ``ids`` set: looked up by index, where ``np.isin`` sorts."""
    mask = np.zeros(size, bool)
    mask[ids] = True
    return mask
