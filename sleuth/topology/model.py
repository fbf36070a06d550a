"""The topology model: one immutable description of a two-tier GPU fabric.

What it holds
-------------
Hosts, each with GPUs, one NVSwitch, a CPU (``host:`` device) and NICs; the NIC serving each
GPU; leaves and spines; and the links, each itself a device: NIC–leaf links and leaf–spine
links. NVLink inside a host is not modelled as separate link devices: the NVSwitch stands for
the whole NVLink domain of its host.

How it is stored, and why
-------------------------
Everything is integer-indexed numpy arrays, not a graph: a 16,384-GPU fabric has ~60,000
devices, and a networkx graph of it is slow to build and slower to search, while the
structure of a two-tier Clos lets paths be computed directly (see :mod:`sleuth.topology.paths`).

* GPUs and NICs have a *global index*, host-major: host 0's GPUs first, then host 1's, ...
  With uniform hosts, GPU ``g`` is GPU ``g % gpus_per_host`` of host ``g // gpus_per_host``,
  the same order the default parallel layout gives ranks.
* Leaves and spines are indexed in the order given.
* ``nic_leaf`` rows ``(nic, leaf)`` and ``leaf_spine`` rows ``(leaf, spine)`` are the links,
  kept sorted so that equal fabrics compare equal. Link ``k`` (the index among link devices)
  is row ``k`` of ``nic_leaf``, then row ``k - len(nic_leaf)`` of ``leaf_spine``.

String ids (:mod:`sleuth.topology.ids`) are made lazily, the first time a caller asks for
them, and then kept: a benchmark loop over arrays never pays for 60,000 f-strings.

The object is frozen; derived data (ids, adjacency, counts) are computed once on demand and
cached on the instance (``functools.cached_property`` or :meth:`Topology.cached`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import cached_property
from types import MappingProxyType
from typing import Any, TypeVar

import numpy as np

from sleuth.errors import TopologyError
from sleuth.validation import first_duplicate, is_int, positive_number
from sleuth.topology.ids import (
    DeviceKind,
    gpu_id,
    host_id,
    is_valid_name,
    leaf_id,
    link_id,
    nic_id,
    nvswitch_id,
    spine_id,
)

__all__ = ["DeviceAttributes", "DeviceKind", "FabricDefaults", "Topology"]

T = TypeVar("T")


@dataclass(frozen=True)
class FabricDefaults:
    """Bandwidth (GB/s, bytes not bits) and latency (µs) of each kind of device.

    The emulator reads them; per-device overrides live in :attr:`Topology.overrides`.
    Defaults follow an H100-class node: NVLink 450 GB/s per direction, 400 Gb/s (50 GB/s)
    NICs and switch ports.
    """

    nvlink_gbps: float = 450.0  # gpu and nvswitch: a GPU's NVLink bandwidth through the switch
    nvlink_latency_us: float = 1.0
    nic_gbps: float = 50.0  # 400 Gb/s
    nic_latency_us: float = 2.0  # NIC + PCIe, one way
    nic_link_gbps: float = 50.0  # NIC–leaf cable
    spine_link_gbps: float = 50.0  # leaf–spine cable
    link_latency_us: float = 0.05  # a few metres of cable and serdes
    switch_latency_us: float = 0.5  # leaf or spine forwarding; switches are non-blocking

    def __post_init__(self) -> None:
        for f in fields(self):
            object.__setattr__(self, f.name, positive_number(f.name, getattr(self, f.name), error=TopologyError))


@dataclass(frozen=True)
class DeviceAttributes:
    """Bandwidth (GB/s) and latency (µs) of one device; ``None`` means "not a limit"."""

    bandwidth_gbps: float | None = None
    latency_us: float | None = None

    def __post_init__(self) -> None:
        for name in ("bandwidth_gbps", "latency_us"):
            value = getattr(self, name)
            if value is None:
                continue
            object.__setattr__(self, name, positive_number(name, value, error=TopologyError))


def _names(value: Sequence[str], what: str) -> tuple[str, ...]:
    names = tuple(value)
    for name in names:
        if not is_valid_name(name):
            raise TopologyError(f"bad {what} name {name!r}: names match [A-Za-z0-9][A-Za-z0-9_.-]*")
    twice = first_duplicate(names)
    if twice is not None:
        raise TopologyError(f"duplicate {what} {twice!r}")
    return names


def _int_array(value: Any, what: str, ndim: int) -> np.ndarray:
    array = np.array(value, dtype=np.int64, copy=True)
    if ndim == 2 and array.size == 0:
        array = array.reshape(0, 2)
    if array.ndim != ndim or (ndim == 2 and array.shape[1] != 2):
        raise TopologyError(f"{what} must be a {'list of pairs' if ndim == 2 else 'list of integers'}, got shape {array.shape}")
    return array


def _canonical_pairs(pairs: np.ndarray, what: str, limits: tuple[int, int], names: tuple[str, str]) -> np.ndarray:
    """Check index ranges and duplicates, and sort rows (first column, then second)."""
    for column, (limit, name) in enumerate(zip(limits, names)):
        bad = (pairs[:, column] < 0) | (pairs[:, column] >= limit)
        if bad.any():
            raise TopologyError(f"{what}: {name} index {int(pairs[bad][0, column])} out of range (0..{limit - 1})")
    order = np.lexsort((pairs[:, 1], pairs[:, 0]))
    pairs = pairs[order]
    if len(pairs) > 1:
        same = np.all(pairs[1:] == pairs[:-1], axis=1)
        if same.any():
            row = pairs[1:][same][0]
            raise TopologyError(f"{what}: duplicate link between {names[0]} {int(row[0])} and {names[1]} {int(row[1])}")
    pairs.setflags(write=False)
    return pairs


def _csr(keys: np.ndarray, values: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Group ``values`` by ``keys`` (0..n-1): (row pointers, values, original row numbers)."""
    order = np.argsort(keys, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=ptr[1:])
    return ptr, values[order], order


@dataclass(frozen=True, eq=False)
class Topology:
    """An immutable two-tier fabric. Build one with a generator or the YAML loader, or directly.

    Parameters (all validated at construction; bad values raise :class:`TopologyError`):

    hosts
        Host names, in order; the order defines global GPU and NIC indices.
    host_gpus, host_nics
        GPUs (>= 1) and NICs (>= 0) on each host.
    gpu_nic_local
        For every GPU in global order, the index (on its own host) of the NIC that serves it,
        or -1 when it has none (then it can only reach GPUs of its own host).
    leaves, spines
        Switch names, in order.
    nic_leaf
        Pairs ``(global NIC index, leaf index)``, one per NIC–leaf link. Every NIC needs at
        least one; a NIC on several leaves is multi-homed (equal-cost alternatives).
    leaf_spine
        Pairs ``(leaf index, spine index)``, one per leaf–spine link.
    defaults, overrides
        Bandwidth and latency by device kind, and per device id.
    generator
        The canonical generator spec this fabric came from, if any (kept for display and for
        a compact dump; not part of equality).
    """

    hosts: tuple[str, ...]
    host_gpus: np.ndarray
    host_nics: np.ndarray
    gpu_nic_local: np.ndarray
    leaves: tuple[str, ...]
    spines: tuple[str, ...]
    nic_leaf: np.ndarray
    leaf_spine: np.ndarray
    defaults: FabricDefaults = field(default_factory=FabricDefaults)
    overrides: Mapping[str, DeviceAttributes] = field(default_factory=dict)
    generator: str | None = None
    _memo: dict[str, Any] = field(default_factory=dict, init=False, repr=False)

    # ---- construction -------------------------------------------------------------------

    def __post_init__(self) -> None:
        put = object.__setattr__  # frozen: normalise fields once, here
        put(self, "hosts", _names(self.hosts, "host"))
        put(self, "leaves", _names(self.leaves, "leaf"))
        put(self, "spines", _names(self.spines, "spine"))
        n_hosts = len(self.hosts)

        host_gpus = _int_array(self.host_gpus, "host_gpus", 1)
        host_nics = _int_array(self.host_nics, "host_nics", 1)
        for what, array in (("host_gpus", host_gpus), ("host_nics", host_nics)):
            if len(array) != n_hosts:
                raise TopologyError(f"{what} has {len(array)} entries for {n_hosts} hosts")
        if n_hosts and host_gpus.min() < 1:
            raise TopologyError(f"host {self.hosts[int(np.argmin(host_gpus))]} has {int(host_gpus.min())} GPUs; need at least 1")
        if n_hosts and host_nics.min() < 0:
            raise TopologyError(f"host {self.hosts[int(np.argmin(host_nics))]} has a negative NIC count")

        gpu_nic_local = _int_array(self.gpu_nic_local, "gpu_nic_local", 1)
        n_gpus = int(host_gpus.sum())
        if len(gpu_nic_local) != n_gpus:
            raise TopologyError(f"gpu_nic_local has {len(gpu_nic_local)} entries for {n_gpus} GPUs")
        limit = np.repeat(host_nics, host_gpus)
        bad = (gpu_nic_local < -1) | (gpu_nic_local >= limit)
        if bad.any():
            g = int(np.flatnonzero(bad)[0])
            host, local = self._gpu_place(host_gpus, g)
            raise TopologyError(
                f"gpu:{self.hosts[host]}/{local} is served by NIC {int(gpu_nic_local[g])}, "
                f"but host {self.hosts[host]} has {int(host_nics[host])} NICs"
            )
        n_nics = int(host_nics.sum())
        nic_leaf = _canonical_pairs(
            _int_array(self.nic_leaf, "nic_leaf", 2), "nic_leaf", (n_nics, len(self.leaves)), ("NIC", "leaf")
        )
        leaf_spine = _canonical_pairs(
            _int_array(self.leaf_spine, "leaf_spine", 2),
            "leaf_spine",
            (len(self.leaves), len(self.spines)),
            ("leaf", "spine"),
        )
        linked = np.zeros(n_nics, dtype=bool)
        linked[nic_leaf[:, 0]] = True
        if not linked.all():
            n = int(np.flatnonzero(~linked)[0])
            raise TopologyError(f"{self._nic_name(host_nics, n)} is not linked to any leaf")

        for array in (host_gpus, host_nics, gpu_nic_local):
            array.setflags(write=False)
        put(self, "host_gpus", host_gpus)
        put(self, "host_nics", host_nics)
        put(self, "gpu_nic_local", gpu_nic_local)
        put(self, "nic_leaf", nic_leaf)
        put(self, "leaf_spine", leaf_spine)
        if not isinstance(self.defaults, FabricDefaults):
            raise TopologyError(f"defaults must be FabricDefaults, got {type(self.defaults).__name__}")
        overrides = dict(self.overrides)
        for device, attributes in overrides.items():
            if not isinstance(attributes, DeviceAttributes):
                raise TopologyError(f"attributes of {device!r} must be DeviceAttributes")
            self.locate(device)  # unknown device: TopologyError naming it
        put(self, "overrides", MappingProxyType(overrides))

    def _gpu_place(self, host_gpus: np.ndarray, g: int) -> tuple[int, int]:
        offsets = np.concatenate(([0], np.cumsum(host_gpus)))
        host = int(np.searchsorted(offsets, g, side="right") - 1)
        return host, g - int(offsets[host])

    def _nic_name(self, host_nics: np.ndarray, n: int) -> str:
        offsets = np.concatenate(([0], np.cumsum(host_nics)))
        host = int(np.searchsorted(offsets, n, side="right") - 1)
        return nic_id(self.hosts[host], n - int(offsets[host]))

    # ---- equality, display --------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Topology):
            return NotImplemented
        return (
            self.hosts == other.hosts
            and self.leaves == other.leaves
            and self.spines == other.spines
            and np.array_equal(self.host_gpus, other.host_gpus)
            and np.array_equal(self.host_nics, other.host_nics)
            and np.array_equal(self.gpu_nic_local, other.gpu_nic_local)
            and np.array_equal(self.nic_leaf, other.nic_leaf)
            and np.array_equal(self.leaf_spine, other.leaf_spine)
            and self.defaults == other.defaults
            and dict(self.overrides) == dict(other.overrides)
        )

    def __hash__(self) -> int:
        return self.cached(
            "hash",
            lambda: hash(
                (
                    self.hosts,
                    self.leaves,
                    self.spines,
                    self.host_gpus.tobytes(),
                    self.host_nics.tobytes(),
                    self.gpu_nic_local.tobytes(),
                    self.nic_leaf.tobytes(),
                    self.leaf_spine.tobytes(),
                    self.defaults,
                )
            ),
        )

    def __repr__(self) -> str:
        counts = ", ".join(f"{kind}={n}" for kind, n in self.counts().items())
        source = f", generator={self.generator!r}" if self.generator else ""
        return f"Topology({counts}{source})"

    def __reduce__(self) -> tuple[type[Topology], tuple[Any, ...]]:
        # Pickle the definition only (the caches are rebuilt on demand, and a MappingProxyType
        # cannot be pickled): lets topologies cross process boundaries (emulator workers).
        return (
            Topology,
            (
                self.hosts,
                self.host_gpus,
                self.host_nics,
                self.gpu_nic_local,
                self.leaves,
                self.spines,
                self.nic_leaf,
                self.leaf_spine,
                self.defaults,
                dict(self.overrides),
                self.generator,
            ),
        )

    def cached(self, key: str, compute: Callable[[], T]) -> T:
        """Derived data computed once per topology (the object is immutable, so it never goes stale).

        Other modules of this package keep their indexes here (e.g. ``paths`` keeps C(d)).
        """
        try:
            return self._memo[key]
        except KeyError:
            value = self._memo[key] = compute()
            return value

    # ---- sizes ---------------------------------------------------------------------------

    @property
    def num_hosts(self) -> int:
        return len(self.hosts)

    @property
    def num_gpus(self) -> int:
        return int(self.gpu_offsets[-1])

    @property
    def num_nics(self) -> int:
        return int(self.nic_offsets[-1])

    @property
    def gpus_per_host(self) -> int | None:
        """GPUs on every host when all hosts have the same number, else ``None``."""
        if self.num_hosts == 0:
            return None
        first = int(self.host_gpus[0])
        return first if bool(np.all(self.host_gpus == first)) else None

    def counts(self) -> dict[DeviceKind, int]:
        """Number of devices of each kind, in :class:`DeviceKind` order."""
        return {
            DeviceKind.GPU: self.num_gpus,
            DeviceKind.NVSWITCH: self.num_hosts,
            DeviceKind.NIC: self.num_nics,
            DeviceKind.HOST: self.num_hosts,
            DeviceKind.LEAF: len(self.leaves),
            DeviceKind.SPINE: len(self.spines),
            DeviceKind.LINK: len(self.nic_leaf) + len(self.leaf_spine),
        }

    # ---- index arrays (read-only) ---------------------------------------------------------

    @cached_property
    def gpu_offsets(self) -> np.ndarray:
        """Global index of each host's first GPU; one extra entry, the total."""
        return _frozen(np.concatenate(([0], np.cumsum(self.host_gpus))).astype(np.int64))

    @cached_property
    def nic_offsets(self) -> np.ndarray:
        """Global index of each host's first NIC; one extra entry, the total."""
        return _frozen(np.concatenate(([0], np.cumsum(self.host_nics))).astype(np.int64))

    @cached_property
    def gpu_host(self) -> np.ndarray:
        """Host index of each GPU."""
        return _frozen(np.repeat(np.arange(self.num_hosts, dtype=np.int64), self.host_gpus))

    @cached_property
    def gpu_local(self) -> np.ndarray:
        """Index of each GPU on its own host."""
        return _frozen(np.arange(self.num_gpus, dtype=np.int64) - self.gpu_offsets[self.gpu_host])

    @cached_property
    def gpu_nic(self) -> np.ndarray:
        """Global index of the NIC serving each GPU, -1 for none."""
        nic = self.gpu_nic_local + self.nic_offsets[self.gpu_host]
        return _frozen(np.where(self.gpu_nic_local < 0, -1, nic))

    @cached_property
    def nic_host(self) -> np.ndarray:
        """Host index of each NIC."""
        return _frozen(np.repeat(np.arange(self.num_hosts, dtype=np.int64), self.host_nics))

    @cached_property
    def nic_local(self) -> np.ndarray:
        """Index of each NIC on its own host."""
        return _frozen(np.arange(self.num_nics, dtype=np.int64) - self.nic_offsets[self.nic_host])

    @cached_property
    def nic_leaves(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """CSR of NIC → leaves: ``(ptr, leaf index, link index)``; NIC n's rows are ptr[n]:ptr[n+1]."""
        ptr, leaves, rows = _csr(self.nic_leaf[:, 0], self.nic_leaf[:, 1], self.num_nics)
        return _frozen(ptr), _frozen(leaves), _frozen(rows)

    @cached_property
    def leaf_nics(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """CSR of leaf → NICs: ``(ptr, NIC index, link index)``."""
        ptr, nics, rows = _csr(self.nic_leaf[:, 1], self.nic_leaf[:, 0], len(self.leaves))
        return _frozen(ptr), _frozen(nics), _frozen(rows)

    @cached_property
    def leaf_spines(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """CSR of leaf → spines: ``(ptr, spine index, link index)``."""
        ptr, spines, rows = _csr(self.leaf_spine[:, 0], self.leaf_spine[:, 1], len(self.leaves))
        return _frozen(ptr), _frozen(spines), _frozen(rows + len(self.nic_leaf))

    @cached_property
    def spine_leaves(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """CSR of spine → leaves: ``(ptr, leaf index, link index)``."""
        ptr, leaves, rows = _csr(self.leaf_spine[:, 1], self.leaf_spine[:, 0], len(self.spines))
        return _frozen(ptr), _frozen(leaves), _frozen(rows + len(self.nic_leaf))

    # ---- ids -----------------------------------------------------------------------------

    def devices(self, kind: DeviceKind | None = None) -> tuple[str, ...]:
        """Device ids of one kind in index order, or of every kind (in :class:`DeviceKind` order)."""
        if kind is None:
            return tuple(device for k in DeviceKind for device in self._ids[k])
        return self._ids[kind]

    def __iter__(self) -> Iterator[str]:
        return iter(self.devices())

    def __len__(self) -> int:
        return sum(self.counts().values())

    def __contains__(self, device: object) -> bool:
        return isinstance(device, str) and device in self._index

    def locate(self, device: str) -> tuple[DeviceKind, int]:
        """``(kind, index among devices of that kind)`` of a device id; unknown ids raise."""
        try:
            return self._index[device]
        except (KeyError, TypeError):
            raise TopologyError(f"unknown device {device!r}") from None

    def kind(self, device: str) -> DeviceKind:
        return self.locate(device)[0]

    def gpu(self, host: str | int, index: int) -> str:
        """The id of GPU ``index`` on a host given by name or index (checked)."""
        h = self._host_index(host)
        if not 0 <= index < int(self.host_gpus[h]):
            raise TopologyError(f"host {self.hosts[h]} has no GPU {index}")
        return self._ids[DeviceKind.GPU][int(self.gpu_offsets[h]) + index]

    def host_of(self, device: str) -> str:
        """Host name of a gpu, nic, nvswitch or host device."""
        kind, i = self.locate(device)
        if kind is DeviceKind.GPU:
            return self.hosts[int(self.gpu_host[i])]
        if kind is DeviceKind.NIC:
            return self.hosts[int(self.nic_host[i])]
        if kind in (DeviceKind.NVSWITCH, DeviceKind.HOST):
            return self.hosts[i]
        raise TopologyError(f"{device!r} is a {kind}, not inside a host")

    def nic_of(self, gpu: str) -> str | None:
        """The NIC serving a GPU, or ``None``."""
        n = int(self.gpu_nic[self._expect(gpu, DeviceKind.GPU)])
        return None if n < 0 else self._ids[DeviceKind.NIC][n]

    def leaves_of(self, nic: str) -> tuple[str, ...]:
        """Leaves a NIC is linked to."""
        n = self._expect(nic, DeviceKind.NIC)
        ptr, leaves, _ = self.nic_leaves
        return tuple(self._ids[DeviceKind.LEAF][int(j)] for j in leaves[ptr[n] : ptr[n + 1]])

    def nics_of(self, leaf: str) -> tuple[str, ...]:
        """NICs linked to a leaf."""
        j = self._expect(leaf, DeviceKind.LEAF)
        ptr, nics, _ = self.leaf_nics
        return tuple(self._ids[DeviceKind.NIC][int(n)] for n in nics[ptr[j] : ptr[j + 1]])

    def spines_of(self, leaf: str) -> tuple[str, ...]:
        """Spines a leaf is linked to."""
        j = self._expect(leaf, DeviceKind.LEAF)
        ptr, spines, _ = self.leaf_spines
        return tuple(self._ids[DeviceKind.SPINE][int(s)] for s in spines[ptr[j] : ptr[j + 1]])

    def leaves_under(self, spine: str) -> tuple[str, ...]:
        """Leaves linked to a spine."""
        s = self._expect(spine, DeviceKind.SPINE)
        ptr, leaves, _ = self.spine_leaves
        return tuple(self._ids[DeviceKind.LEAF][int(j)] for j in leaves[ptr[s] : ptr[s + 1]])

    def link_ends(self, link: str) -> tuple[str, str]:
        """The two devices a link joins, in canonical order (leaf first)."""
        k = self._expect(link, DeviceKind.LINK)
        if k < len(self.nic_leaf):
            n, j = self.nic_leaf[k]
            return self._ids[DeviceKind.LEAF][int(j)], self._ids[DeviceKind.NIC][int(n)]
        j, s = self.leaf_spine[k - len(self.nic_leaf)]
        return self._ids[DeviceKind.LEAF][int(j)], self._ids[DeviceKind.SPINE][int(s)]

    def link_between(self, a: str, b: str) -> str:
        """The link joining two devices; raises when they are not linked."""
        link = link_id(a, b)
        if link not in self._index:
            raise TopologyError(f"no link between {a!r} and {b!r}")
        return link

    def attributes(self, device: str) -> DeviceAttributes:
        """Bandwidth and latency of a device: its override, else the default for its kind.

        Leaves and spines have no bandwidth limit by default (non-blocking switches); a host
        (CPU) has neither figure unless overridden.
        """
        kind, k = self.locate(device)
        d = self.defaults
        if kind in (DeviceKind.GPU, DeviceKind.NVSWITCH):
            base = DeviceAttributes(d.nvlink_gbps, d.nvlink_latency_us)
        elif kind is DeviceKind.NIC:
            base = DeviceAttributes(d.nic_gbps, d.nic_latency_us)
        elif kind is DeviceKind.LINK:
            gbps = d.nic_link_gbps if k < len(self.nic_leaf) else d.spine_link_gbps
            base = DeviceAttributes(gbps, d.link_latency_us)
        elif kind in (DeviceKind.LEAF, DeviceKind.SPINE):
            base = DeviceAttributes(None, d.switch_latency_us)
        else:
            base = DeviceAttributes()
        override = self.overrides.get(device)
        if override is None:
            return base
        return DeviceAttributes(
            override.bandwidth_gbps if override.bandwidth_gbps is not None else base.bandwidth_gbps,
            override.latency_us if override.latency_us is not None else base.latency_us,
        )

    # ---- internals -----------------------------------------------------------------------

    def _host_index(self, host: str | int) -> int:
        if is_int(host):
            if not 0 <= host < self.num_hosts:
                raise TopologyError(f"host index {host} out of range (0..{self.num_hosts - 1})")
            return int(host)
        if not isinstance(host, str):
            raise TopologyError(f"a host is a name or an index, got {host!r}")
        return self._expect(host_id(host), DeviceKind.HOST)

    def _expect(self, device: str, kind: DeviceKind) -> int:
        actual, i = self.locate(device)
        if actual is not kind:
            raise TopologyError(f"{device!r} is a {actual}, expected a {kind}")
        return i

    @cached_property
    def _ids(self) -> dict[DeviceKind, tuple[str, ...]]:
        hosts = self.hosts
        gpus = tuple(
            gpu_id(host, i) for host, count in zip(hosts, self.host_gpus.tolist()) for i in range(count)
        )
        nics = tuple(
            nic_id(host, i) for host, count in zip(hosts, self.host_nics.tolist()) for i in range(count)
        )
        leaves = tuple(leaf_id(name) for name in self.leaves)
        spines = tuple(spine_id(name) for name in self.spines)
        # Canonical link order: ends sorted as strings; "leaf:" sorts before "nic:" and "spine:".
        links = tuple(f"link:{leaves[j]}~{nics[n]}" for n, j in self.nic_leaf.tolist()) + tuple(
            f"link:{leaves[j]}~{spines[s]}" for j, s in self.leaf_spine.tolist()
        )
        return {
            DeviceKind.GPU: gpus,
            DeviceKind.NVSWITCH: tuple(nvswitch_id(host) for host in hosts),
            DeviceKind.NIC: nics,
            DeviceKind.HOST: tuple(host_id(host) for host in hosts),
            DeviceKind.LEAF: leaves,
            DeviceKind.SPINE: spines,
            DeviceKind.LINK: links,
        }

    @cached_property
    def _index(self) -> dict[str, tuple[DeviceKind, int]]:
        index: dict[str, tuple[DeviceKind, int]] = {}
        for kind, ids in self._ids.items():
            index.update(zip(ids, ((kind, i) for i in range(len(ids)))))
        return index


def _frozen(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array
