"""The fabric a job runs on: devices, the paths between GPUs, and C(d) for topology decay.

Modules, one job each:

* :mod:`~sleuth.topology.ids` — device ids (``gpu:h0000/3``, ``link:leaf:p0r3~nic:h0000/3``...)
* :mod:`~sleuth.topology.model` — the immutable :class:`Topology` (integer-indexed arrays)
* :mod:`~sleuth.topology.paths` — :func:`path` between two GPUs and :func:`nics_below` (C(d))
* :mod:`~sleuth.topology.generators` — rail-optimized fat tree, spine-leaf, spec strings
* :mod:`~sleuth.topology.yaml_io` — topology files, with line numbers in every error
* :mod:`~sleuth.topology.summary` — counts and sample paths for ``sleuth topology show``

Example files live in ``sleuth/topology/examples/``.
"""

from __future__ import annotations

from sleuth.topology.generators import GeneratorSpec, generate, parse_spec, rail_optimized, spine_leaf
from sleuth.topology.ids import (
    DeviceKind, DeviceRef, host_name, kind_of, link_id, parse_device, spine_set_id, spine_set_members,
)
from sleuth.topology.model import DeviceAttributes, FabricDefaults, Topology
from sleuth.topology.paths import (
    GpuPath, PathScope, Routing, ecmp_branch, nics_below, nics_below_all, nics_below_by_kind, path, route, spine_layer,
)
from sleuth.topology.summary import TopologySummary, summarize
from sleuth.topology.yaml_io import dump_topology, load_topology, loads_topology, save_topology

__all__ = [
    "DeviceAttributes",
    "DeviceKind",
    "DeviceRef",
    "FabricDefaults",
    "GeneratorSpec",
    "GpuPath",
    "PathScope",
    "Routing",
    "Topology",
    "TopologySummary",
    "dump_topology",
    "ecmp_branch",
    "generate",
    "host_name",
    "kind_of",
    "link_id",
    "load_topology",
    "loads_topology",
    "nics_below",
    "nics_below_all",
    "nics_below_by_kind",
    "parse_device",
    "parse_spec",
    "path",
    "rail_optimized",
    "route",
    "save_topology",
    "spine_layer",
    "spine_leaf",
    "spine_set_id",
    "spine_set_members",
    "summarize",
]
