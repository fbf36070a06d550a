"""Paths between GPUs, and C(d): how many NICs sit below a network device.

Both are computed from the structure of a two-tier Clos, never by graph search: a GPU reaches
another through its NIC, a leaf of that NIC, and, when the two NICs share no leaf, one spine
linked to a leaf of each. That is a handful of set operations per query (microseconds at
16,384 GPUs), where a shortest-path search over a graph of the whole fabric costs milliseconds.

The path (docs/design.md, "Topology and devices")
--------------------------------------------
* same GPU: ``[gpu]``;
* same host: ``[gpu a, nvswitch, gpu b]`` (NVLink through the host's NVSwitch);
* NICs on a common leaf: ``[gpu a, nic a, link, leaf, link, nic b, gpu b]``;
* otherwise ``[gpu a, nic a, link, leaf a]`` + one branch ``[leaf–spine link, spine,
  spine–leaf link]`` per equal-cost spine + ``[leaf b, link, nic b, gpu b]``.

Every shortest route is enumerated (for multi-homed NICs that includes every pair of their
leaves), then the devices common to all routes are factored out into ``head`` and ``tail``
and the rest are the equal-cost ``branches``. Evidence is shared equally between branches
(docs/design.md: "Equal-cost spines share a path's evidence equally"), so
:meth:`GpuPath.weighted` gives each device on the single part weight 1 and each device in the
branches weight ``(number of branches holding it) / (number of branches)``.

The spine layer
---------------
Under ECMP a cross-spine path is known to cross *one* of its equal-cost spines, never which;
:func:`spine_layer` names that set (``spines:s0,s1,...``, :func:`sleuth.topology.ids.spine_set_id`):
a device every branch holds one member of, so the path's whole evidence is on it (weight 1)
where each member spine has 1/n.

C(d)
----
Holmes (appendix D) decays a device's irregularity rate by ``H(d) = ln(C(d) + ε - 1) / C(d)``
where C(d) is the number of downside NICs a network device connects to:

* NIC: 1; NIC–leaf link: 1;
* leaf: the NICs linked to it;
* leaf–spine link: the NICs below its leaf;
* spine: the distinct NICs below all of its leaves (a multi-homed NIC counts once);
* spine set: the distinct NICs below all the leaves of its spines.

Devices inside a host have no NICs below them; there C(d) counts GPUs instead, the endpoints
below them: GPU 1, NVSwitch and host (CPU) the GPUs of their host.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from sleuth.errors import TopologyError
from sleuth.topology.ids import DeviceKind, kind_of, spine_set_id, spine_set_members
from sleuth.topology.model import Topology
from sleuth.validation import is_int

__all__ = [
    "GpuPath", "PathScope", "Routing", "ecmp_branch", "nics_below", "nics_below_all", "nics_below_by_kind", "path", "route",
    "spine_layer",
]


class PathScope(enum.Enum):
    """How far apart two GPUs are."""

    SAME_GPU = "same_gpu"
    SAME_HOST = "same_host"
    SAME_LEAF = "same_leaf"
    CROSS_SPINE = "cross_spine"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class GpuPath:
    """The devices between two GPUs: a single part (``head`` + ``tail``) and equal-cost branches.

    Reading order is ``head``, then one of ``branches``, then ``tail``; ``head`` starts with
    ``src`` and ``tail`` ends with ``dst`` (for a path within one host, ``tail`` is empty and
    ``head`` holds the whole path).
    """

    src: str
    dst: str
    scope: PathScope
    head: tuple[str, ...]
    branches: tuple[tuple[str, ...], ...] = ()
    tail: tuple[str, ...] = ()

    @property
    def branch_weight(self) -> float:
        """The share of evidence each branch gets: 1 / number of branches (1 when none)."""
        return 1.0 / len(self.branches) if self.branches else 1.0

    def devices(self) -> tuple[str, ...]:
        """Every device on the path once, in reading order (branches in order)."""
        return tuple(device for device, _ in self.weighted())

    def weighted(self) -> tuple[tuple[str, float], ...]:
        """``(device, weight)`` for every device once: 1 on the single part, k/n in branches."""
        out = [(device, 1.0) for device in self.head]
        if self.branches:
            seen: dict[str, int] = {}
            for branch in self.branches:
                for device in branch:
                    seen[device] = seen.get(device, 0) + 1
            n = len(self.branches)
            out.extend((device, count / n) for device, count in seen.items())
        out.extend((device, 1.0) for device in self.tail)
        return tuple(out)

    def __contains__(self, device: object) -> bool:
        return device in self.head or device in self.tail or any(device in b for b in self.branches)


class _Router:
    """Per-topology lookup tables for path queries (plain Python lists: fastest to index)."""

    def __init__(self, topology: Topology) -> None:
        ids = topology.devices
        self.gpus = ids(DeviceKind.GPU)
        self.nics = ids(DeviceKind.NIC)
        self.leaves = ids(DeviceKind.LEAF)
        self.spines = ids(DeviceKind.SPINE)
        self.links = ids(DeviceKind.LINK)
        self.nvswitches = ids(DeviceKind.NVSWITCH)
        self.gpu_host = topology.gpu_host.tolist()
        self.gpu_nic = topology.gpu_nic.tolist()
        ptr, leaf, link = (a.tolist() for a in topology.nic_leaves)
        # NIC n → ((leaf index, NIC–leaf link index), ...)
        self.nic_leaves = [tuple(zip(leaf[ptr[n] : ptr[n + 1]], link[ptr[n] : ptr[n + 1]])) for n in range(len(ptr) - 1)]
        ptr, spine, link = (a.tolist() for a in topology.leaf_spines)
        # leaf j → {spine index: leaf–spine link index}, spines in index order
        self.leaf_spines = [dict(zip(spine[ptr[j] : ptr[j + 1]], link[ptr[j] : ptr[j + 1]])) for j in range(len(ptr) - 1)]
        self._middles: dict[tuple[int, int], tuple[tuple[str, str, str], ...]] = {}
        self._gpu_index: dict[str, int] | None = None

    def gpu_index(self, gpu: str | int) -> int:
        if is_int(gpu):
            if not 0 <= gpu < len(self.gpus):
                raise TopologyError(f"GPU index {gpu} out of range (0..{len(self.gpus) - 1})")
            return int(gpu)
        if self._gpu_index is None:
            self._gpu_index = {g: i for i, g in enumerate(self.gpus)}
        try:
            return self._gpu_index[gpu]  # type: ignore[index]  # any other key falls to the except below
        except (KeyError, TypeError):
            raise TopologyError(f"unknown GPU {gpu!r}") from None

    def middles(self, la: int, lb: int) -> tuple[tuple[str, str, str], ...]:
        """``(leaf a–spine link, spine, spine–leaf b link)`` for every spine linked to both leaves."""
        key = (la, lb)
        found = self._middles.get(key)
        if found is None:
            up, down = self.leaf_spines[la], self.leaf_spines[lb]
            links, spines = self.links, self.spines
            found = tuple((links[up[s]], spines[s], links[down[s]]) for s in up if s in down)
            self._middles[key] = found
        return found


def _router(topology: Topology) -> _Router:
    return topology.cached("paths.router", lambda: _Router(topology))


def path(topology: Topology, gpu_a: str | int, gpu_b: str | int) -> GpuPath:
    """The path from ``gpu_a`` to ``gpu_b`` (ids, or global GPU indices).

    Raises :class:`TopologyError` for an unknown GPU, or when no route exists (a GPU without
    a NIC, leaves with no common spine).
    """
    r = _router(topology)
    a, b = r.gpu_index(gpu_a), r.gpu_index(gpu_b)
    src, dst = r.gpus[a], r.gpus[b]
    if a == b:
        return GpuPath(src, dst, PathScope.SAME_GPU, (src,))
    host_a = r.gpu_host[a]
    if host_a == r.gpu_host[b]:
        return GpuPath(src, dst, PathScope.SAME_HOST, (src, r.nvswitches[host_a], dst))
    na, nb = r.gpu_nic[a], r.gpu_nic[b]
    for gpu, nic in ((src, na), (dst, nb)):
        if nic < 0:
            raise TopologyError(f"no route between {src} and {dst}: {gpu} has no NIC")
    nic_a, nic_b = r.nics[na], r.nics[nb]
    leaves_a, leaves_b = r.nic_leaves[na], r.nic_leaves[nb]
    links, leaves = r.links, r.leaves

    # Single-homed NICs (every generated fabric): no route enumeration needed.
    if len(leaves_a) == 1 and len(leaves_b) == 1:
        (la, ka), (lb, kb) = leaves_a[0], leaves_b[0]
        if la == lb:
            head: tuple[str, ...] = (src, nic_a, links[ka], leaves[la], links[kb], nic_b, dst)
            return GpuPath(src, dst, PathScope.SAME_LEAF, head)
        middles = r.middles(la, lb)
        if not middles:
            raise TopologyError(f"no route between {src} and {dst}: {leaves[la]} and {leaves[lb]} share no spine")
        head = (src, nic_a, links[ka], leaves[la])
        tail = (leaves[lb], links[kb], nic_b, dst)
        if len(middles) == 1:
            return GpuPath(src, dst, PathScope.CROSS_SPINE, head + middles[0] + tail)
        return GpuPath(src, dst, PathScope.CROSS_SPINE, head, middles, tail)

    # Multi-homed NICs: enumerate every shortest route between the two NICs, then factor.
    down_b = dict(leaves_b)
    shared = [(la, ka) for la, ka in leaves_a if la in down_b]
    if shared:
        scope = PathScope.SAME_LEAF
        routes: list[tuple[str, ...]] = [(links[ka], leaves[la], links[down_b[la]]) for la, ka in shared]
    else:
        scope = PathScope.CROSS_SPINE
        routes = [
            (links[ka], leaves[la], *middle, leaves[lb], links[kb])
            for la, ka in leaves_a
            for lb, kb in leaves_b
            for middle in r.middles(la, lb)
        ]
        if not routes:
            raise TopologyError(f"no route between {src} and {dst}: their leaves share no spine")
    return _factor(src, dst, scope, (src, nic_a), routes, (nic_b, dst))


class Routing(enum.Enum):
    """What is known of how a flow picks among equal-cost spines.

    * ``ECMP``: unknown (per-flow hashing on headers sleuth never sees): a path's evidence is
      shared equally by its equal-cost branches (docs/design.md);
    * ``STATIC``: deterministic, one known branch per GPU pair (:func:`ecmp_branch`), as on an
      InfiniBand fabric whose subnet manager programs fixed routes, or static ECMP. The emulator
      routes this way, so a congested spine slows only the flows routed through it.
    """

    ECMP = "ecmp"
    STATIC = "static"

    def __str__(self) -> str:
        return self.value


_MASK64 = (1 << 64) - 1


def ecmp_branch(gpu_a: int, gpu_b: int, branches: int) -> int:
    """The branch a STATIC fabric routes the GPU pair over: a hash of the unordered pair of
    global GPU indices (the same in both directions), mixed (SplitMix64's finalizer) so that
    pairs with a regular stride, such as a rail-optimized fabric's rings, spread over every
    spine: a plain multiplicative hash taken modulo a power of two sent them all to one."""
    low, high = (gpu_a, gpu_b) if gpu_a <= gpu_b else (gpu_b, gpu_a)
    h = (low * 0x9E3779B97F4A7C15 + high) & _MASK64
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (h ^ (h >> 31)) % branches


def route(topology: Topology, gpu_a: str | int, gpu_b: str | int, *, routing: Routing = Routing.ECMP) -> GpuPath:
    """:func:`path`, with the branches resolved to the one chosen under ``STATIC`` routing."""
    found = path(topology, gpu_a, gpu_b)
    if routing is Routing.ECMP or not found.branches:
        return found
    r = _router(topology)
    choice = ecmp_branch(r.gpu_index(gpu_a), r.gpu_index(gpu_b), len(found.branches))
    if r.gpu_index(gpu_a) > r.gpu_index(gpu_b):
        # The hash indexes the branches as listed from the lower GPU's side: take the same
        # physical route in both directions.
        wanted = set(path(topology, gpu_b, gpu_a).branches[choice])
        choice = next(k for k, branch in enumerate(found.branches) if set(branch) == wanted)
    return GpuPath(found.src, found.dst, found.scope, found.head + found.branches[choice] + found.tail)


def spine_layer(topology: Topology, found: GpuPath) -> str | None:
    """The id of the set of equal-cost spines ``found``'s branches cross (see the module
    docstring), spines in the topology's order; None when they cross fewer than two spines."""
    spines = {device for branch in found.branches for device in branch if kind_of(device) is DeviceKind.SPINE}
    if len(spines) < 2:
        return None
    return spine_set_id(sorted(spines, key=lambda spine: topology.locate(spine)[1]))


def _factor(
    src: str,
    dst: str,
    scope: PathScope,
    start: tuple[str, ...],
    routes: list[tuple[str, ...]],
    end: tuple[str, ...],
) -> GpuPath:
    """Move what all (equal-length) routes share at their start and end out of the branches."""
    first = routes[0]
    if len(routes) == 1:
        return GpuPath(src, dst, scope, start + first + end)
    size = len(first)
    p = 0
    while p < size and all(route[p] == first[p] for route in routes):
        p += 1
    q = 0
    while q < size - p and all(route[size - 1 - q] == first[size - 1 - q] for route in routes):
        q += 1
    branches = tuple(route[p : size - q] for route in routes)
    return GpuPath(src, dst, scope, start + first[:p], branches, first[size - q :] + end)


def nics_below_by_kind(topology: Topology) -> Mapping[DeviceKind, np.ndarray]:
    """C(d) of every device: one read-only array per kind, aligned with ``topology.devices(kind)``.

    Vectorized and cached on the topology; see the module docstring for the definition.
    """
    return topology.cached("paths.nics_below", lambda: _nics_below_by_kind(topology))


def _nics_below_by_kind(topology: Topology) -> Mapping[DeviceKind, np.ndarray]:
    n_nics, n_leaves, n_spines = topology.num_nics, len(topology.leaves), len(topology.spines)
    nic_leaf, leaf_spine = topology.nic_leaf, topology.leaf_spine
    leaf = np.bincount(nic_leaf[:, 1], minlength=n_leaves).astype(np.int64)
    multi_homed = n_nics > 0 and int(np.bincount(nic_leaf[:, 0], minlength=n_nics).max()) > 1
    if not multi_homed:
        # Each NIC hangs below exactly one leaf, so a spine's NICs are the sum over its leaves.
        spine = np.bincount(leaf_spine[:, 1], weights=leaf[leaf_spine[:, 0]], minlength=n_spines)
        spine = np.rint(spine).astype(np.int64)
    else:
        ptr, spine_leaves, _ = topology.spine_leaves
        spine = np.zeros(n_spines, dtype=np.int64)
        for s in range(n_spines):
            under = np.zeros(n_leaves, dtype=bool)
            under[spine_leaves[ptr[s] : ptr[s + 1]]] = True
            spine[s] = np.unique(nic_leaf[under[nic_leaf[:, 1]], 0]).size
    links = np.concatenate((np.ones(len(nic_leaf), dtype=np.int64), leaf[leaf_spine[:, 0]]))
    result = {
        DeviceKind.GPU: np.ones(topology.num_gpus, dtype=np.int64),
        DeviceKind.NVSWITCH: np.array(topology.host_gpus, dtype=np.int64),
        DeviceKind.NIC: np.ones(n_nics, dtype=np.int64),
        DeviceKind.HOST: np.array(topology.host_gpus, dtype=np.int64),
        DeviceKind.LEAF: leaf,
        DeviceKind.SPINE: spine,
        DeviceKind.LINK: links,
    }
    for array in result.values():
        array.setflags(write=False)
    return MappingProxyType(result)


def nics_below(topology: Topology, device: str) -> int:
    """C(d) of one device or spine set (see the module docstring); unknown devices raise TopologyError."""
    members = spine_set_members(device)
    if members is not None:
        ptr, spine_leaves, _ = topology.spine_leaves
        under = np.zeros(len(topology.leaves), dtype=bool)
        for spine in members:
            s = topology.locate(spine)[1]
            under[spine_leaves[ptr[s] : ptr[s + 1]]] = True
        return int(np.unique(topology.nic_leaf[under[topology.nic_leaf[:, 1]], 0]).size)
    kind, i = topology.locate(device)
    return int(nics_below_by_kind(topology)[kind][i])


def nics_below_all(topology: Topology) -> dict[str, int]:
    """C(d) of every device, by id (builds all ids: prefer :func:`nics_below_by_kind` in loops)."""
    by_kind = nics_below_by_kind(topology)
    out: dict[str, int] = {}
    for kind in DeviceKind:
        out.update(zip(topology.devices(kind), by_kind[kind].tolist()))
    return out
