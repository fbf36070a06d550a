"""A short description of a topology: device counts and a few sample paths with C(d).

The CLI's ``sleuth topology show`` prints it; the sample paths are picked structurally so the
three scopes a fabric has (same host, same leaf, across spines) each appear once when present.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sleuth.errors import TopologyError
from sleuth.topology.ids import DeviceKind
from sleuth.topology.model import Topology
from sleuth.topology.paths import GpuPath, nics_below_by_kind, path

__all__ = ["PathDevice", "SamplePath", "TopologySummary", "describe", "sample_pairs", "summarize"]


@dataclass(frozen=True)
class PathDevice:
    """One device on a path: its evidence weight and C(d)."""

    device: str
    kind: DeviceKind
    weight: float
    nics_below: int


@dataclass(frozen=True)
class SamplePath:
    label: str
    path: GpuPath
    devices: tuple[PathDevice, ...]


@dataclass(frozen=True)
class TopologySummary:
    source: str | None
    counts: Mapping[DeviceKind, int]
    gpus_per_host: int | None
    sample_paths: tuple[SamplePath, ...]

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: ``counts`` ({kind: n}) and ``sample_paths``."""
        return {
            "source": self.source,
            "gpus_per_host": self.gpus_per_host,
            "counts": {str(kind): n for kind, n in self.counts.items()},
            "sample_paths": [
                {
                    "label": sample.label,
                    "from": sample.path.src,
                    "to": sample.path.dst,
                    "scope": str(sample.path.scope),
                    "branches": len(sample.path.branches),
                    "devices": [
                        {"device": d.device, "kind": str(d.kind), "weight": d.weight, "nics_below": d.nics_below}
                        for d in sample.devices
                    ],
                }
                for sample in self.sample_paths
            ],
        }

    def to_text(self) -> str:
        """Human-readable tables."""
        lines = [f"topology: {self.source}" if self.source else "topology"]
        lines.append(f"  {'kind':<10}{'count':>8}")
        lines.extend(f"  {str(kind):<10}{n:>8}" for kind, n in self.counts.items())
        for sample in self.sample_paths:
            p = sample.path
            branches = f", {len(p.branches)} equal-cost branches" if p.branches else ""
            lines.append("")
            lines.append(f"{sample.label}: {p.src} -> {p.dst} ({p.scope}{branches})")
            width = max(len("device"), *(len(d.device) for d in sample.devices))
            lines.append(f"  {'device':<{width}}  {'kind':<9}{'weight':>8}{'C(d)':>8}")
            # Many equal-cost branches look alike: show two, then say how many more.
            shown = {device for branch in p.branches[:2] for device in branch}
            hidden = {device for branch in p.branches[2:] for device in branch} - shown
            elided = False
            for d in sample.devices:
                if d.device in hidden:
                    if not elided:
                        lines.append(f"  ... {len(p.branches) - 2} more branches like the above ({len(hidden)} devices)")
                        elided = True
                    continue
                lines.append(f"  {d.device:<{width}}  {str(d.kind):<9}{d.weight:>8.3g}{d.nics_below:>8}")
        return "\n".join(lines)


def sample_pairs(topology: Topology) -> list[tuple[str, int, int]]:
    """``(label, gpu a, gpu b)`` global GPU indices: one pair per scope the fabric has."""
    pairs: list[tuple[str, int, int]] = []
    gpu_host, gpu_nic = topology.gpu_host, topology.gpu_nic
    multi = np.flatnonzero(topology.host_gpus >= 2)
    if len(multi):
        first = int(topology.gpu_offsets[multi[0]])
        pairs.append(("same host", first, first + 1))
    with_nic = np.flatnonzero(gpu_nic >= 0)
    if len(with_nic) == 0:
        return pairs
    a = int(with_nic[0])
    ptr, leaves, _ = topology.nic_leaves
    nic_a = int(gpu_nic[a])
    on_a_leaves = np.zeros(len(topology.leaves), dtype=bool)
    on_a_leaves[leaves[ptr[nic_a] : ptr[nic_a + 1]]] = True
    # A NIC shares a leaf with NIC a when any of its leaf links lands on one of a's leaves.
    nic_shares = np.zeros(topology.num_nics, dtype=bool)
    np.logical_or.at(nic_shares, topology.nic_leaf[:, 0], on_a_leaves[topology.nic_leaf[:, 1]])
    other = with_nic[gpu_host[with_nic] != gpu_host[a]]
    same_leaf = other[nic_shares[gpu_nic[other]]]
    if len(same_leaf):
        pairs.append(("same leaf", a, int(same_leaf[0])))
    across = other[~nic_shares[gpu_nic[other]]]
    if len(across):
        pairs.append(("across spines", a, int(across[-1])))  # the farthest host
    return pairs


def describe(topology: Topology, p: GpuPath, label: str) -> SamplePath:
    """A path with each device's kind, weight and C(d)."""
    c = nics_below_by_kind(topology)
    devices = []
    for device, weight in p.weighted():
        kind, i = topology.locate(device)
        devices.append(PathDevice(device, kind, weight, int(c[kind][i])))
    return SamplePath(label, p, tuple(devices))


def summarize(
    topology: Topology, *, source: str | None = None, extra_pairs: Sequence[tuple[str, str]] = ()
) -> TopologySummary:
    """Counts and sample paths; ``extra_pairs`` adds paths between given GPU ids."""
    samples = []
    for label, a, b in sample_pairs(topology):
        try:
            samples.append(describe(topology, path(topology, a, b), label))
        except TopologyError:
            continue  # e.g. leaves with no common spine: the sample is skipped, not the summary
    for a, b in extra_pairs:  # type: ignore[assignment]  # path() takes GPU ids as well as indices
        samples.append(describe(topology, path(topology, a, b), "requested"))
    return TopologySummary(
        source=source or topology.generator,
        counts=topology.counts(),
        gpus_per_host=topology.gpus_per_host,
        sample_paths=tuple(samples),
    )
