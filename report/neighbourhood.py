"""The part of the fabric around an incident's suspects, laid out in tiers for drawing.

Tiers, bottom up: hosts, GPUs, NICs, leaves, spines. The hosts drawn are those of the suspects
and of the GPUs the root operators involve (suspects first), at most ``max_hosts`` of them; with
them come all their GPUs, the NICs serving those GPUs, the leaves of those NICs and the spines of
those leaves (at most ``max_spines``, suspects always kept). A suspect switch or link whose hosts
are not among them brings in hosts below it, so that it is drawn with some context.

Only the layout is computed here (positions on a unit grid); ``figures`` draws it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sleuth.topology import DeviceKind, Topology, kind_of, link_id
from sleuth.topology.ids import host_id

__all__ = ["Neighbourhood", "Node", "around"]

TIERS = (DeviceKind.HOST, DeviceKind.GPU, DeviceKind.NIC, DeviceKind.LEAF, DeviceKind.SPINE)
_IN_HOST = (DeviceKind.GPU, DeviceKind.NIC, DeviceKind.HOST, DeviceKind.NVSWITCH)


@dataclass(frozen=True)
class Node:
    device: str
    tier: int  # index into TIERS
    x: float
    label: str


@dataclass(frozen=True)
class Neighbourhood:
    nodes: tuple[Node, ...]
    edges: tuple[tuple[str, str, str], ...]  # (device a, device b, the link id or "" inside a host)
    suspects: frozenset[str]  # suspect ids drawn (devices or links)
    involved: frozenset[str]  # GPUs of the root operators
    left_out: tuple[str, ...]  # suspects that could not be drawn (not in this topology)

    def highlighted(self, device: str) -> bool:
        return device in self.suspects


def _suspect_hosts(topology: Topology, device: str) -> list[str]:
    kind = kind_of(device)
    if kind in _IN_HOST:
        return [topology.host_of(device)]
    if kind is DeviceKind.LEAF:
        return [topology.host_of(nic) for nic in topology.nics_of(device)]
    if kind is DeviceKind.SPINE:
        return [topology.host_of(nic) for leaf in topology.leaves_under(device) for nic in topology.nics_of(leaf)]
    if kind is DeviceKind.LINK:
        return [h for end in topology.link_ends(device) for h in _suspect_hosts(topology, end)]
    return []


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def around(
    topology: Topology,
    suspects: Sequence[str],
    *,
    involved: Sequence[str] = (),
    rank_labels: Mapping[str, str] | None = None,
    max_hosts: int = 6,
    max_spines: int = 8,
) -> Neighbourhood:
    """The neighbourhood of ``suspects`` and the ``involved`` GPUs; ``rank_labels`` name GPUs (e.g. ``r26``)."""
    drawable = [s for s in suspects if s in topology]
    left_out = tuple(s for s in suspects if s not in topology)
    gpus = [g for g in involved if g in topology]
    # Each suspect brings its first host, then the involved GPUs theirs, then more of the suspects'.
    per_suspect = [_unique(_suspect_hosts(topology, s)) for s in drawable]
    hosts = _unique([h[0] for h in per_suspect if h] + [topology.host_of(g) for g in gpus]
                    + [h for hs in per_suspect for h in hs[1:2]])[:max_hosts]

    labels = dict(rank_labels or {})
    nodes: list[Node] = []
    edges: list[tuple[str, str, str]] = []
    x = 0.0
    gpu_x: dict[str, float] = {}
    nic_xs: dict[str, list[float]] = {}
    for host in hosts:
        first = x
        h = topology.hosts.index(host)
        for i in range(int(topology.host_gpus[h])):
            gpu = topology.gpu(host, i)
            gpu_x[gpu] = x
            label = f"{i}" + (f"\n{labels[gpu]}" if gpu in labels else "")
            nodes.append(Node(gpu, 1, x, label))
            edges.append((host_id(host), gpu, ""))
            nic = topology.nic_of(gpu)
            if nic is not None:
                nic_xs.setdefault(nic, []).append(x)
                edges.append((gpu, nic, ""))
            x += 1.0
        nodes.append(Node(host_id(host), 0, (first + x - 1) / 2, host))
        x += 0.6  # a gap between hosts

    leaf_xs: dict[str, list[float]] = {}
    for nic, xs in nic_xs.items():
        nx = sum(xs) / len(xs)
        nodes.append(Node(nic, 2, nx, nic.rsplit("/", 1)[-1]))
        for leaf in topology.leaves_of(nic):
            leaf_xs.setdefault(leaf, []).append(nx)
            edges.append((nic, leaf, link_id(leaf, nic)))
    for leaf, xs in leaf_xs.items():
        nodes.append(Node(leaf, 3, sum(xs) / len(xs), leaf.split(":", 1)[1]))

    spines = _unique(s for leaf in leaf_xs for s in topology.spines_of(leaf))
    wanted = [s for s in drawable if kind_of(s) is DeviceKind.SPINE and s in spines]
    spines = _unique(wanted + spines)[:max(max_spines, len(wanted))]
    width = max(x - 1.6, 0.0)
    for k, spine in enumerate(spines):
        sx = width * (k + 0.5) / len(spines) if len(spines) > 1 else width / 2
        nodes.append(Node(spine, 4, sx, spine.split(":", 1)[1]))
        edges.extend((leaf, spine, link_id(leaf, spine)) for leaf in leaf_xs if spine in topology.spines_of(leaf))

    drawn = {n.device for n in nodes} | {link for _, _, link in edges if link}
    as_drawn = {s: _drawn_as(topology, s) for s in drawable}
    shown = frozenset(v for v in as_drawn.values() if v in drawn)
    missing = left_out + tuple(s for s, v in as_drawn.items() if v not in drawn)
    return Neighbourhood(tuple(nodes), tuple(edges), shown, frozenset(gpus) & drawn, missing)


def _drawn_as(topology: Topology, device: str) -> str:
    # The host tier stands for the host's CPU and its NVSwitch alike.
    return host_id(topology.host_of(device)) if kind_of(device) is DeviceKind.NVSWITCH else device
