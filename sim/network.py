"""Transfer times of communication operators over the topology, and which faults they cross.

Every operator runs over *units*: a collective over one communicator group, a P2P transfer over
one (sender, receiver) pair. A unit's transfer is limited by its slowest member path (NCCL's
ring runs at the pace of its slowest hop), so each unit keeps the bottleneck bandwidth and the
largest latency of the paths it uses:

* ring collectives (all-reduce, all-gather, reduce-scatter): the ring of the group's members in
  rank order, ``members[j] -> members[j+1]`` and back to the first;
* all-to-all (expert parallel): every pair of members;
* P2P (``pp`` between adjacent stages, ``cp`` around the context-parallel ring): its one pair.

A path's bandwidth is the smallest bandwidth of its devices (``Topology.attributes``; switches
have none of their own), its latency the sum of theirs. Equal-cost spines: a flow takes one of
them, chosen by a deterministic ECMP hash of its two GPUs (the same for both directions), so a
congested spine slows the flows hashed onto it, ~1/n_spines of the cross-spine flows
(``sleuth.topology.route`` with ``Routing.STATIC``: the localizer can be told the same).

Costs (n members, B bytes, bottleneck bandwidth W in bytes/ns, latency L in ns), the
standard ring models: all-reduce ``2(n-1)/n·B/W + 2(n-1)·L``; all-gather and reduce-scatter
``(n-1)/n·B/W + (n-1)·L``; all-to-all ``(n-1)/n·B/W + L``; send/recv ``B/W + L``.

A network fault (nvswitch, nic, link, leaf, spine) with slowdown x limits every path through
its device to the device's nominal bandwidth / x; for switches the nominal bandwidth is the
leaf-spine port rate (``FabricDefaults.spine_link_gbps``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sleuth.errors import ConfigError
from sleuth.records import OpKind
from sleuth.topology import DeviceKind, Routing, Topology, route

from sleuth.sim.faults import Fault

__all__ = ["Network", "UnitSet", "transfer_ns"]

_GBPS_TO_BYTES_PER_NS = 1.0  # 1 GB/s is exactly 1 byte/ns


@dataclass(frozen=True)
class UnitSet:
    """The units of one communicator kind: bottleneck bandwidth (bytes/ns) and latency (ns).

    ``exposure`` lists, per network fault (by its index in the scenario), the units whose
    paths cross the fault's device and that device's nominal bandwidth.
    """

    kind: str
    members: int
    bandwidth: np.ndarray
    latency: np.ndarray
    exposure: tuple[tuple[int, np.ndarray, float], ...]

    def bandwidth_under(self, slow: np.ndarray) -> np.ndarray:
        """Unit bandwidths while fault ``k`` slows its device by ``slow[k]`` (1 = healthy)."""
        if not self.exposure:
            return self.bandwidth
        out = self.bandwidth
        copied = False
        for index, units, nominal in self.exposure:
            factor = float(slow[index])
            if factor == 1.0 or not len(units):
                continue
            if not copied:
                out, copied = out.copy(), True
            out[units] = np.minimum(out[units], nominal / factor)
        return out


def transfer_ns(op: OpKind, members: int, nbytes: int, bandwidth: np.ndarray, latency: np.ndarray) -> np.ndarray:
    """Transfer time (float ns) of ``op`` moving ``nbytes`` over units of ``members`` ranks."""
    n = members
    if op is OpKind.ALL_REDUCE:
        return 2 * (n - 1) / n * nbytes / bandwidth + 2 * (n - 1) * latency
    if op in (OpKind.ALL_GATHER, OpKind.REDUCE_SCATTER):
        return (n - 1) / n * nbytes / bandwidth + (n - 1) * latency
    if op is OpKind.ALL_TO_ALL:
        return (n - 1) / n * nbytes / bandwidth + latency
    if op in (OpKind.SEND, OpKind.RECV):
        return nbytes / bandwidth + latency
    raise ConfigError(f"no transfer model for {op.label}")


class Network:
    """Units of every communicator kind of a job on a topology, with the faults they cross.

    ``gpu_of_rank[r]`` is the topology's global GPU index of rank ``r``. Paths are computed
    once per distinct GPU pair (a few tens of thousands at 16k GPUs).
    """

    def __init__(self, topology: Topology, gpu_of_rank: np.ndarray, faults: Sequence[Fault]) -> None:
        self._topology = topology
        self._gpu = np.asarray(gpu_of_rank, dtype=np.int64)
        self._faults = [(k, f.device) for k, f in enumerate(faults) if f.kind.network]
        self._nominal = {device: self._nominal_bandwidth(device) for _, device in self._faults}  # type: ignore[arg-type]  # a network fault always names its device
        self._device_cost: dict[str, tuple[float, float]] = {}
        self._pairs: dict[tuple[int, int], tuple[float, float, frozenset[str] | tuple[str, ...]]] = {}
        self._sets: dict[str, UnitSet] = {}

    def _nominal_bandwidth(self, device: str) -> float:
        kind = self._topology.kind(device)
        if kind in (DeviceKind.LEAF, DeviceKind.SPINE):
            return self._topology.defaults.spine_link_gbps * _GBPS_TO_BYTES_PER_NS
        bandwidth = self._topology.attributes(device).bandwidth_gbps
        if bandwidth is None:  # pragma: no cover - every non-switch network device has one
            raise ConfigError(f"device {device!r} has no bandwidth to degrade")
        return bandwidth * _GBPS_TO_BYTES_PER_NS

    def _cost(self, device: str) -> tuple[float, float]:
        found = self._device_cost.get(device)
        if found is None:
            attributes = self._topology.attributes(device)
            bandwidth = attributes.bandwidth_gbps * _GBPS_TO_BYTES_PER_NS if attributes.bandwidth_gbps else np.inf
            latency = (attributes.latency_us or 0.0) * 1e3
            found = self._device_cost[device] = (bandwidth, latency)
        return found

    def pair(self, rank_a: int, rank_b: int) -> tuple[float, float, tuple[str, ...]]:
        """Bandwidth (bytes/ns), latency (ns) and devices of the path between two ranks' GPUs."""
        a, b = int(self._gpu[rank_a]), int(self._gpu[rank_b])
        key = (a, b) if a <= b else (b, a)
        found = self._pairs.get(key)
        if found is None:
            # Deterministic ECMP: one hash per unordered GPU pair picks the spine.
            devices = route(self._topology, key[0], key[1], routing=Routing.STATIC).devices()
            bandwidth, latency = np.inf, 0.0
            for device in devices:
                bw, lat = self._cost(device)
                bandwidth = min(bandwidth, bw)
                latency += lat
            found = self._pairs[key] = (bandwidth, latency, devices)
        return found  # type: ignore[return-value]

    def units(self, kind: str, pairs: Sequence[tuple[int, int, int]], n_units: int, members: int) -> UnitSet:
        """The unit set of ``kind`` from ``(unit, rank_a, rank_b)`` pairs; cached by kind."""
        found = self._sets.get(kind)
        if found is not None:
            return found
        bandwidth = np.full(n_units, np.inf)
        latency = np.zeros(n_units)
        hit: dict[int, set[int]] = {index: set() for index, _ in self._faults}
        for unit, a, b in pairs:
            bw, lat, devices = self.pair(a, b)
            if bw < bandwidth[unit]:
                bandwidth[unit] = bw
            if lat > latency[unit]:
                latency[unit] = lat
            for index, device in self._faults:
                if device in devices:
                    hit[index].add(unit)
        exposure = tuple(
            (index, np.array(sorted(hit[index]), dtype=np.int64), self._nominal[device])
            for index, device in self._faults
            if hit[index]
        )
        if np.isinf(bandwidth).any():
            # Only a unit whose members share a GPU could have no limit; layouts never do that.
            raise ConfigError(f"{kind}: a unit has no bandwidth limit on its paths")
        found = self._sets[kind] = UnitSet(kind, members, bandwidth, latency, exposure)
        return found
