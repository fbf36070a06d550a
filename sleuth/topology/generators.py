"""Generators for common fabrics, and the spec strings that name them on the command line.

Rail-optimized fat tree (``fattree``)
-------------------------------------
Hosts are grouped into pods of ``hosts_per_pod``. Each host has one NIC per GPU (NIC i serves
GPU i) and NIC i of every host in a pod links to the pod's rail-i leaf ``p{pod}r{i}``, so GPUs
of the same rail in the same pod are one leaf apart. Every leaf links to every spine (the
common design where each rail's leaves reach all spines; planes per rail would make cross-rail
traffic impossible without NVLink forwarding, which sleuth does not model). Everything that is
not same-pod-same-rail therefore crosses a spine, with all spines as equal-cost alternatives.
The last pod may be partial when ``hosts`` is not a multiple of ``hosts_per_pod``.

Spine-leaf (``spineleaf``)
--------------------------
Hosts are grouped ``hosts_per_leaf`` to a leaf ``l{j}``; all NICs of a host link to its leaf;
leaves are fully meshed with spines ``s{k}``. With fewer NICs than GPUs, GPU i uses NIC
``i * nics // gpus`` (consecutive GPUs share a NIC, as on PCIe switches); with more, GPU i uses
NIC i and the rest serve no GPU.

Both name hosts ``h0000``, ``h0001``, ... (:func:`sleuth.topology.ids.host_name`), which the
default parallel layout relies on.

Spec strings
------------
``fattree:hosts=2048,gpus=8,pod=32,spines=16`` and
``spineleaf:hosts=16,gpus=8,nics=8,per_leaf=4,spines=2``. Every key but ``hosts`` has a
default; :func:`parse_spec` fails naming the bad token. The same keys name a generator in a
topology YAML file (``generate: fattree`` plus the keys).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from sleuth.errors import TopologyError
from sleuth.topology.ids import host_name
from sleuth.topology.model import FabricDefaults, Topology
from sleuth.validation import integer, is_int

__all__ = ["GENERATORS", "GeneratorSpec", "generate", "make_spec", "parse_spec", "rail_optimized", "spine_leaf"]


def _check_sizes(**sizes: int | None) -> None:
    """Fail before any work on a size that is not a positive integer (``spines`` may be 0)."""
    for name, value in sizes.items():
        if value is None:
            continue
        integer(name, value, low=0 if name == "spines" else 1, error=TopologyError)


def _full_mesh(n_leaves: int, n_spines: int) -> np.ndarray:
    leaves = np.repeat(np.arange(n_leaves, dtype=np.int64), n_spines)
    spines = np.tile(np.arange(n_spines, dtype=np.int64), n_leaves)
    return np.stack((leaves, spines), axis=1)


def _spine_names(n: int) -> list[str]:
    return [f"s{k}" for k in range(n)]


def rail_optimized(
    *,
    hosts: int,
    gpus_per_host: int = 8,
    hosts_per_pod: int = 32,
    spines: int = 16,
    defaults: FabricDefaults | None = None,
) -> Topology:
    """A rail-optimized two-tier fat tree (see the module docstring)."""
    _check_sizes(hosts=hosts, gpus_per_host=gpus_per_host, hosts_per_pod=hosts_per_pod, spines=spines)
    hosts, g = int(hosts), int(gpus_per_host)
    pods = -(-hosts // int(hosts_per_pod))
    n_leaves = pods * g
    if spines == 0 and n_leaves > 1:
        raise TopologyError(f"spines=0 leaves the {n_leaves} leaves unconnected; need spines >= 1")
    # NIC n = host h, rail r (n = h*g + r) links to leaf (pod of h)*g + r.
    nic = np.arange(hosts * g, dtype=np.int64)
    leaf = (nic // g // int(hosts_per_pod)) * g + nic % g
    topology = Topology(
        hosts=tuple(host_name(h) for h in range(hosts)),
        host_gpus=np.full(hosts, g, dtype=np.int64),
        host_nics=np.full(hosts, g, dtype=np.int64),
        gpu_nic_local=np.tile(np.arange(g, dtype=np.int64), hosts),
        leaves=tuple(f"p{p}r{r}" for p in range(pods) for r in range(g)),
        spines=tuple(_spine_names(int(spines))),
        nic_leaf=np.stack((nic, leaf), axis=1),
        leaf_spine=_full_mesh(n_leaves, int(spines)),
        defaults=defaults or FabricDefaults(),
        generator=str(GeneratorSpec("fattree", {"hosts": hosts, "gpus": g, "pod": int(hosts_per_pod), "spines": int(spines)})),
    )
    return topology


def spine_leaf(
    *,
    hosts: int,
    gpus_per_host: int = 8,
    nics_per_host: int | None = None,
    hosts_per_leaf: int = 4,
    spines: int = 2,
    defaults: FabricDefaults | None = None,
) -> Topology:
    """A plain spine-leaf fabric (see the module docstring); ``nics_per_host`` defaults to one per GPU."""
    _check_sizes(
        hosts=hosts, gpus_per_host=gpus_per_host, nics_per_host=nics_per_host, hosts_per_leaf=hosts_per_leaf, spines=spines
    )
    hosts, g = int(hosts), int(gpus_per_host)
    nics = g if nics_per_host is None else int(nics_per_host)
    n_leaves = -(-hosts // int(hosts_per_leaf))
    if spines == 0 and n_leaves > 1:
        raise TopologyError(f"spines=0 leaves the {n_leaves} leaves unconnected; need spines >= 1")
    local = np.arange(g, dtype=np.int64)
    gpu_nic = local * nics // g if nics <= g else local
    nic = np.arange(hosts * nics, dtype=np.int64)
    topology = Topology(
        hosts=tuple(host_name(h) for h in range(hosts)),
        host_gpus=np.full(hosts, g, dtype=np.int64),
        host_nics=np.full(hosts, nics, dtype=np.int64),
        gpu_nic_local=np.tile(gpu_nic, hosts),
        leaves=tuple(f"l{j}" for j in range(n_leaves)),
        spines=tuple(_spine_names(int(spines))),
        nic_leaf=np.stack((nic, nic // nics // int(hosts_per_leaf)), axis=1),
        leaf_spine=_full_mesh(n_leaves, int(spines)),
        defaults=defaults or FabricDefaults(),
        generator=str(
            GeneratorSpec(
                "spineleaf",
                {"hosts": hosts, "gpus": g, "nics": nics, "per_leaf": int(hosts_per_leaf), "spines": int(spines)},
            )
        ),
    )
    return topology


# Spec keys → (generator keyword, default); ``None`` default means required.
GENERATORS: Mapping[str, Mapping[str, tuple[str, int | None]]] = {
    "fattree": {
        "hosts": ("hosts", None),
        "gpus": ("gpus_per_host", 8),
        "pod": ("hosts_per_pod", 32),
        "spines": ("spines", 16),
    },
    "spineleaf": {
        "hosts": ("hosts", None),
        "gpus": ("gpus_per_host", 8),
        "nics": ("nics_per_host", None),
        "per_leaf": ("hosts_per_leaf", 4),
        "spines": ("spines", 2),
    },
}
_OPTIONAL = {("spineleaf", "nics")}  # optional without a fixed default (follows gpus)
_FUNCTIONS = {"fattree": rail_optimized, "spineleaf": spine_leaf}


@dataclass(frozen=True)
class GeneratorSpec:
    """A generator name and its sizes, as written in a spec string or a YAML ``generate`` file."""

    kind: str
    params: Mapping[str, int]

    def __str__(self) -> str:
        return f"{self.kind}:" + ",".join(f"{key}={value}" for key, value in self.params.items())

    def build(self, *, defaults: FabricDefaults | None = None) -> Topology:
        """The topology this spec describes."""
        return generate(self, defaults=defaults)


def make_spec(kind: str, params: Mapping[str, int]) -> GeneratorSpec:
    """Check a generator name and its keys (not yet the sizes: the generator checks those)."""
    keys = GENERATORS.get(kind)
    if keys is None:
        raise TopologyError(f"unknown generator {kind!r} (expected one of: {', '.join(GENERATORS)})")
    for key in params:
        if key not in keys:
            raise TopologyError(f"unknown {kind} key {key!r} (expected one of: {', '.join(keys)})")
    missing = [key for key, (_, default) in keys.items() if default is None and (kind, key) not in _OPTIONAL and key not in params]
    if missing:
        raise TopologyError(f"{kind} needs {', '.join(missing)}")
    ordered = {key: params[key] for key in keys if key in params}
    return GeneratorSpec(kind, ordered)


def parse_spec(spec: str) -> GeneratorSpec:
    """Parse ``kind:key=value,...``; a bad token raises :class:`TopologyError` naming it."""
    if not isinstance(spec, str):
        raise TopologyError(f"a generator spec must be a string, got {spec!r}")
    kind, _, rest = spec.strip().partition(":")
    kind = kind.strip()
    if kind not in GENERATORS:
        raise TopologyError(f"unknown generator {kind!r} in spec {spec!r} (expected one of: {', '.join(GENERATORS)})")
    params: dict[str, int] = {}
    for token in filter(None, (t.strip() for t in rest.split(","))):
        key, eq, value = (part.strip() for part in token.partition("="))
        if not eq or not key:
            raise TopologyError(f"bad token {token!r} in spec {spec!r}: expected key=value")
        if key not in GENERATORS[kind]:
            raise TopologyError(
                f"unknown key {key!r} in spec {spec!r} (expected one of: {', '.join(GENERATORS[kind])})"
            )
        if key in params:
            raise TopologyError(f"key {key!r} given twice in spec {spec!r}")
        if not value.isdigit():
            raise TopologyError(f"bad value {value!r} for {key} in spec {spec!r}: expected a non-negative integer")
        params[key] = int(value)
    return make_spec(kind, params)


def generate(spec: str | GeneratorSpec, *, defaults: FabricDefaults | None = None) -> Topology:
    """Build the fabric a spec string (or parsed spec) describes."""
    parsed = parse_spec(spec) if isinstance(spec, str) else make_spec(spec.kind, spec.params)
    for key, value in parsed.params.items():
        # Checked here too so the message uses the spec's key names, not the keyword names.
        low = 0 if key == "spines" else 1
        if not is_int(value) or value < low:
            raise TopologyError(f"bad value {value!r} for {key} in spec {str(parsed)!r}: must be an integer >= {low}")
    keys = GENERATORS[parsed.kind]
    kwargs = {keys[key][0]: value for key, value in parsed.params.items()}
    for key, (name, default) in keys.items():
        if key not in parsed.params and default is not None:
            kwargs[name] = default
    return _FUNCTIONS[parsed.kind](**kwargs, defaults=defaults)  # type: ignore[operator]  # both generators take the spec keys as keywords
