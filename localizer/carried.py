"""What a network device carried: the share of its transfers that ran slow.

A slow device (a NIC, a cable, a switch) slows every transfer through it at each step it is slow.
Evidence from slow transfers goes to every device on their paths, so a device that only sat on
the same rings as the slow one ties with it: each host's NVSwitch on every data-parallel ring a
congested spine slows, every NIC of a ring one slow NIC slows. What tells them apart is the
other traffic they carried: a device whose other transfers ran at their peers' length is not
the one that slowed the rest. ``weighed`` scales each network device's score by the share of its
transfers (instances of the communicator groups whose paths cross it) that the replay put back;
a set of equal-cost spines (ECMP), by that share over the share one slow spine of it would slow.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from sleuth.topology import DeviceKind, Routing, Topology, spine_set_members
from sleuth.whatif.contributors import TransferGroup

from sleuth.localizer.rules import LOCALIZER_RULES
from sleuth.localizer.scoring import Score, layer_crossings, root_devices, through_ties
from sleuth.localizer.search import Cause, Root

__all__ = ["weighed"]

_RULES = LOCALIZER_RULES


def weighed(ranking: Sequence[Score], carried: Callable[[Sequence[int]], Sequence[TransferGroup]], *,
            topology: Topology, gpus: Sequence[str], routing: Routing, head_size: int = _RULES.carried_head) -> list[Score]:
    """The head of a network ranking (its first ``head_size`` and any tied with the last of them:
    ``scoring.through_ties``) with each score times the device's slow share (``_slow_share``),
    scaled back to the head's total and sorted again; the rest dropped.
    ``carried(ranks)``: the transfer groups with a member among ``ranks``."""
    # A tie the head's cut falls in is read whole (a tie with the first longer than the head among
    # them): a device the sort happened to put below the cut may be the one that carried the slow transfers.
    head = list(through_ties(ranking, head_size))
    if not head:
        return list(ranking)
    near = _ranks_near(topology, gpus)
    around = {s.device: _spread(near(s.device), _RULES.carried_sample) for s in head}
    groups = carried(sorted({r for ranks in around.values() for r in ranks}))
    if not groups:
        return list(ranking)
    by_rank: dict[int, list[int]] = {}
    for g, group in enumerate(groups):
        for rank in group.ranks:
            by_rank.setdefault(rank, []).append(g)
    devices: dict[int, dict[str, float]] = {}
    shares = [_slow_share(s.device, groups, by_rank, around[s.device], devices, topology=topology, gpus=gpus,
                          routing=routing) for s in head]
    scaled = [s.score * share for s, share in zip(head, shares)]
    total, kept = sum(s.score for s in head), sum(scaled)
    if kept <= 0:
        return head
    out = [dataclasses.replace(s, score=value * total / kept) for s, value in zip(head, scaled)]
    return sorted(out, key=lambda s: -s.score)


def _slow_share(device: str, groups: Sequence[TransferGroup], by_rank: dict[int, list[int]], ranks: Sequence[int],
               devices: dict[int, dict[str, float]], *, topology: Topology, gpus: Sequence[str], routing: Routing) -> float:
    """Of the transfer instances whose paths cross ``device`` (among the groups with a member in
    ``ranks``, at most ``carried_sample`` of them, evenly spread), the share the replay put back; 1 where
    none is found (nothing to clear it with). For a set of equal-cost spines, that over the share one
    slow spine of them would slow (at most 1): each hop took one spine, so a layer with one slow spine
    slows a hop in as many as it has, and a NIC whose flows all hashed onto it does not outrank it.
    ``devices`` caches each group's path devices."""
    candidates = _spread(sorted({g for rank in ranks for g in by_rank.get(rank, ())}), _RULES.carried_sample)
    spines = spine_set_members(device)
    instances = slow = expected = 0.0
    for g in candidates:
        if g not in devices:
            devices[g] = root_devices(_root(groups[g]), topology=topology, gpus=gpus, routing=routing)
        if device in devices[g]:
            instances += groups[g].instances
            slow += groups[g].slow
            if spines is not None:
                # Each hop through equal-cost spines took one of them: one slow spine slows a hop in len(spines).
                hops = layer_crossings(_root(groups[g]), device, topology=topology, gpus=gpus, routing=routing)
                expected += groups[g].instances * (1.0 - (1.0 - 1.0 / len(spines)) ** hops)
    if spines is not None and expected > 0:
        return min(1.0, slow / expected)
    return slow / instances if instances else 1.0


def _root(group: TransferGroup) -> Root:
    """A network root over a transfer group's members, for the devices its paths cross."""
    return Root(0, Cause.NETWORK, group.ranks[0], group.comm, 0, group.op, group.ranks, group.ranks, (), 0)


def _spread(items: Sequence[int], most: int) -> list[int]:
    """At most ``most`` of ``items``, evenly spaced."""
    if len(items) <= most:
        return list(items)
    step = len(items) / most
    return [items[int(k * step)] for k in range(most)]


def _ranks_near(topology: Topology, gpus: Sequence[str]):
    """``near(device)``: the ranks whose transfers can cross ``device`` (a host's for its NVSwitch,
    a NIC's GPUs for it and its cable, the GPUs below a leaf or spine for those and their links)."""
    host = [topology.host_of(g) for g in gpus]
    nic = [topology.nic_of(g) for g in gpus]

    def below(nics: set[str]) -> list[int]:
        return [r for r, n in enumerate(nic) if n in nics]

    def leaves_below(leaves: Sequence[str]) -> list[int]:
        return below({n for leaf in leaves for n in topology.nics_of(leaf)})

    def near(device: str) -> list[int]:
        members = spine_set_members(device)
        if members is not None:
            return leaves_below([leaf for spine in members for leaf in topology.leaves_under(spine)])
        kind = topology.kind(device)
        if kind in (DeviceKind.NVSWITCH, DeviceKind.HOST):
            return [r for r, h in enumerate(host) if h == topology.host_of(device)]
        if kind is DeviceKind.NIC:
            return below({device})
        if kind is DeviceKind.LEAF:
            return leaves_below([device])
        if kind is DeviceKind.SPINE:
            return leaves_below(topology.leaves_under(device))
        if kind is DeviceKind.LINK:
            leaf, other = topology.link_ends(device)
            return below({other}) if topology.kind(other) is DeviceKind.NIC else leaves_below([leaf])
        return []

    return near
