"""Topology files: YAML in, YAML out, with errors that name the field, the value and the line.

A file is one mapping, in one of two forms.

Explicit form
-------------
::

    version: 1                  # optional; only 1 exists
    hosts:                      # required, in order (the order numbers GPUs and NICs)
      - name: h0000             # required; [A-Za-z0-9][A-Za-z0-9_.-]*
        gpus: 8                 # required, >= 1: gpu:h0000/0..7, nvswitch:h0000, host:h0000
        nics: 8                 # optional, >= 0, default = gpus: nic:h0000/0..7
        gpu_nic: [0, 0, 1, 1]   # optional: NIC index serving each GPU (null: none). Default:
                                #   GPU i uses NIC i*nics//gpus (NIC i when nics >= gpus)
        leaf: l0                # optional: every NIC of the host links to leaf l0, or
        nic_leaves: [l0, l1]    #   optional: NIC i links to nic_leaves[i] (rails); not both
    leaves: [l0, l1]            # required when any NIC is linked; names (or leaf:<name> ids)
    spines: [s0, s1]            # optional, default none
    full_mesh: true             # optional, default false: every leaf links to every spine
    links:                      # optional: more links, each a pair of device ids, any order,
      - [nic:h0000/0, leaf:l1]  #   NIC–leaf (a NIC on several leaves is multi-homed)
      - [leaf:l0, spine:s0]     #   or leaf–spine
    defaults:                   # optional: bandwidth GB/s, latency µs by device kind
      nvlink_gbps: 450          #   keys: the fields of FabricDefaults
      nic_gbps: 50
    attributes:                 # optional: per-device overrides
      "link:leaf:l0~spine:s0": {bandwidth_gbps: 25, latency_us: 1.5}

Every NIC must be linked to at least one leaf (write ``nics: 0`` for a host with none).
A link given twice, by any of ``leaf``, ``nic_leaves``, ``full_mesh`` or ``links``, is an error.

Generated form
--------------
::

    generate: fattree           # or spineleaf
    hosts: 2048                 # the generator's spec keys (see sleuth.topology.generators):
    gpus: 8                     #   fattree: hosts, gpus, pod, spines
    pod: 32                     #   spineleaf: hosts, gpus, nics, per_leaf, spines
    spines: 16
    defaults: {...}             # optional, as above
    attributes: {...}           # optional, as above

Line numbers
------------
The file is composed into a YAML node tree (``yaml.compose``, libyaml when available) rather
than loaded into plain Python objects, so every value keeps the line it came from; every error
is a :class:`TopologyError` reading ``<file> line <n>: <field>: <what is wrong>``.

Writing
-------
:func:`dump_topology` writes the explicit form, as compactly as the structure allows
(``leaf`` / ``nic_leaves`` per host, ``full_mesh`` when complete), or with ``compact=True``
the generated form when the topology is exactly what its generator builds. Loading the output
gives an equal :class:`Topology`.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterable
from typing import Any, NoReturn

import numpy as np
import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from sleuth.errors import TopologyError
from sleuth.topology.generators import GENERATORS, generate, make_spec, parse_spec
from sleuth.topology.ids import DeviceKind, is_valid_name, link_id, parse_device
from sleuth.topology.model import DeviceAttributes, FabricDefaults, Topology
from sleuth.validation import is_int, is_number

__all__ = ["dump_topology", "load_topology", "loads_topology", "save_topology"]

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

_COMMON_FIELDS = ("version", "defaults", "attributes")
_EXPLICIT_FIELDS = ("hosts", "leaves", "spines", "full_mesh", "links", *_COMMON_FIELDS)
_HOST_FIELDS = ("name", "gpus", "nics", "gpu_nic", "leaf", "nic_leaves")
_DEFAULT_FIELDS = tuple(f.name for f in dataclasses.fields(FabricDefaults))
_ATTRIBUTE_FIELDS = tuple(f.name for f in dataclasses.fields(DeviceAttributes))


# ---- reading YAML nodes with their lines --------------------------------------------------


class _Reader:
    """Typed access to YAML nodes; every failure names the source, line and field."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._constructor = SafeConstructor()

    def fail(self, node: Node | None, where: str, message: str) -> NoReturn:
        line = f" line {node.start_mark.line + 1}" if node is not None else ""
        raise TopologyError(f"{self.source}{line}: {where}: {message}")

    def line(self, node: Node) -> int:
        return node.start_mark.line + 1

    def value(self, node: Node) -> Any:
        if not isinstance(node, ScalarNode):
            return {MappingNode: "a mapping", SequenceNode: "a list"}.get(type(node), "a node")
        return self._constructor.construct_object(node)

    def mapping(self, node: Node, where: str, allowed: Iterable[str]) -> dict[str, tuple[Node, Node]]:
        """``{key: (key node, value node)}``; duplicate or unknown keys fail."""
        if not isinstance(node, MappingNode):
            self.fail(node, where, f"expected a mapping, got {self.show(node)}")
        allowed = tuple(allowed)
        out: dict[str, tuple[Node, Node]] = {}
        for key_node, value_node in node.value:
            key = self.value(key_node)
            if not isinstance(key, str) or not isinstance(key_node, ScalarNode):
                self.fail(key_node, where, f"keys must be strings, got {key!r}")
            if key in out:
                self.fail(key_node, where, f"duplicate field {key!r} (first at line {self.line(out[key][0])})")
            if allowed and key not in allowed:
                self.fail(key_node, where, f"unknown field {key!r} (expected one of: {', '.join(allowed)})")
            out[key] = (key_node, value_node)
        return out

    def sequence(self, node: Node, where: str) -> list[Node]:
        if not isinstance(node, SequenceNode):
            self.fail(node, where, f"expected a list, got {self.show(node)}")
        return list(node.value)

    def integer(self, node: Node, where: str, low: int) -> int:
        value = self.value(node)
        if not is_int(value) or value < low:
            self.fail(node, where, f"expected an integer >= {low}, got {self.show(node)}")
        return value

    def number(self, node: Node, where: str) -> float:
        value = self.value(node)
        if not is_number(value) or not math.isfinite(value) or value <= 0:
            self.fail(node, where, f"expected a positive number, got {self.show(node)}")
        return float(value)

    def boolean(self, node: Node, where: str) -> bool:
        value = self.value(node)
        if not isinstance(value, bool):
            self.fail(node, where, f"expected true or false, got {self.show(node)}")
        return value

    def string(self, node: Node, where: str) -> str:
        value = self.value(node)
        if not isinstance(value, str) or not isinstance(node, ScalarNode):
            self.fail(node, where, f"expected a string, got {self.show(node)} (quote it if it is a name)")
        return value

    def name(self, node: Node, where: str, kind: DeviceKind | None = None) -> str:
        """A host/leaf/spine name; for switches, the ``leaf:<name>`` id form is accepted too."""
        text = self.string(node, where)
        if kind is not None and text.startswith(f"{kind.value}:"):
            text = text[len(kind.value) + 1 :]
        if not is_valid_name(text):
            self.fail(node, where, f"bad name {text!r}: names match [A-Za-z0-9][A-Za-z0-9_.-]*")
        return text

    def show(self, node: Node) -> str:
        """A short rendering of a node's value for messages."""
        if isinstance(node, ScalarNode):
            return repr(self.value(node))
        if isinstance(node, SequenceNode):
            items = ", ".join(self.show(item) for item in node.value[:4])
            return f"[{items}{', ...' if len(node.value) > 4 else ''}]"
        return "a mapping"


def _compose(text: str, source: str) -> Node:
    try:
        root = yaml.compose(text, Loader=_LOADER)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise TopologyError(f"{source}{line}: not valid YAML: {error.problem or error}") from None
    except yaml.YAMLError as error:
        raise TopologyError(f"{source}: not valid YAML: {error}") from None
    if root is None:
        raise TopologyError(f"{source}: empty topology file")
    return root


# ---- loading -------------------------------------------------------------------------------


def load_topology(path: str | os.PathLike[str]) -> Topology:
    """Read a topology file (see the module docstring for the schema).

    A missing or unreadable file raises ``OSError``; bad content raises :class:`TopologyError`.
    """
    with open(path, encoding="utf-8") as file:
        text = file.read()
    return loads_topology(text, source=os.fspath(path))


def loads_topology(text: str, *, source: str = "<string>") -> Topology:
    """Parse topology YAML from a string; ``source`` names it in error messages."""
    r = _Reader(source)
    root = _compose(text, source)
    top = r.mapping(root, "topology", ())
    if "version" in top:
        version_node = top["version"][1]
        if r.value(version_node) != 1 or isinstance(r.value(version_node), bool):
            r.fail(version_node, "version", f"unsupported version {r.show(version_node)} (only 1 exists)")
    defaults = _defaults(r, top["defaults"][1]) if "defaults" in top else FabricDefaults()
    if "generate" in top:
        topology = _generated(r, root, top, defaults)
    else:
        topology = _explicit(r, root, defaults)
    if "attributes" in top:
        overrides = _attributes(r, top["attributes"][1], topology)
        topology = dataclasses.replace(topology, overrides=overrides)
    return topology


def _defaults(r: _Reader, node: Node) -> FabricDefaults:
    fields = r.mapping(node, "defaults", _DEFAULT_FIELDS)
    return FabricDefaults(**{key: r.number(value, f"defaults.{key}") for key, (_, value) in fields.items()})


def _attributes(r: _Reader, node: Node, topology: Topology) -> dict[str, DeviceAttributes]:
    out: dict[str, DeviceAttributes] = {}
    for device, (key_node, value_node) in r.mapping(node, "attributes", ()).items():
        if device not in topology:
            _check_device_id(r, key_node, "attributes", device)
            r.fail(key_node, "attributes", f"unknown device {device!r}")
        fields = r.mapping(value_node, f"attributes[{device!r}]", _ATTRIBUTE_FIELDS)
        out[device] = DeviceAttributes(
            **{key: r.number(value, f"attributes[{device!r}].{key}") for key, (_, value) in fields.items()}
        )
    return out


def _check_device_id(r: _Reader, node: Node, where: str, device: str) -> None:
    try:
        parse_device(device)
    except TopologyError as error:
        r.fail(node, where, str(error))


def _generated(r: _Reader, root: Node, top: dict[str, tuple[Node, Node]], defaults: FabricDefaults) -> Topology:
    kind_node = top["generate"][1]
    kind = r.string(kind_node, "generate")
    if kind not in GENERATORS:
        r.fail(kind_node, "generate", f"unknown generator {kind!r} (expected one of: {', '.join(GENERATORS)})")
    allowed = ("generate", *GENERATORS[kind], *_COMMON_FIELDS)
    fields = r.mapping(root, f"generate: {kind}", allowed)
    params = {}
    for key, (_, value_node) in fields.items():
        if key in GENERATORS[kind]:
            params[key] = r.integer(value_node, key, 0 if key == "spines" else 1)
    try:
        spec = make_spec(kind, params)
        return generate(spec, defaults=defaults)
    except TopologyError as error:
        r.fail(kind_node, f"generate: {kind}", str(error))


class _Links:
    """Links collected from every place a file can give them, each remembering its line."""

    def __init__(self, r: _Reader) -> None:
        self.r = r
        self.nic_leaf: dict[tuple[int, int], Node] = {}
        self.leaf_spine: dict[tuple[int, int], Node] = {}

    def add(self, table: dict[tuple[int, int], Node], pair: tuple[int, int], node: Node, where: str, name: str) -> None:
        first = table.get(pair)
        if first is not None:
            self.r.fail(node, where, f"duplicate link {name!r} (first given at line {self.r.line(first)})")
        table[pair] = node


def _explicit(r: _Reader, root: Node, defaults: FabricDefaults) -> Topology:
    fields = r.mapping(root, "topology", _EXPLICIT_FIELDS)
    if "hosts" not in fields:
        r.fail(root, "topology", "missing field 'hosts' (or 'generate' for a generated fabric)")

    leaves, leaf_index = _switches(r, fields, "leaves", DeviceKind.LEAF)
    spines, spine_index = _switches(r, fields, "spines", DeviceKind.SPINE)
    links = _Links(r)

    names: list[str] = []
    host_index: dict[str, tuple[int, Node]] = {}
    gpus_per: list[int] = []
    nics_per: list[int] = []
    gpu_nic: list[int] = []
    host_nodes: list[Node] = []
    nic_offset = 0
    for h, host_node in enumerate(r.sequence(fields["hosts"][1], "hosts")):
        where = f"hosts[{h}]"
        host = r.mapping(host_node, where, _HOST_FIELDS)
        if "name" not in host:
            r.fail(host_node, where, "missing field 'name'")
        if "gpus" not in host:
            r.fail(host_node, where, "missing field 'gpus'")
        name_node = host["name"][1]
        name = r.name(name_node, f"{where}.name")
        if name in host_index:
            first_line = r.line(host_index[name][1])
            r.fail(name_node, f"{where}.name", f"duplicate host {name!r} (first at line {first_line})")
        host_index[name] = (h, name_node)
        gpus = r.integer(host["gpus"][1], f"{where}.gpus", 1)
        nics = r.integer(host["nics"][1], f"{where}.nics", 0) if "nics" in host else gpus
        gpu_nic.extend(_gpu_nic(r, host, where, gpus, nics))
        nic_leaves = _host_leaves(r, host, where, nics)
        for i, (leaf, leaf_node, field) in enumerate(nic_leaves):
            if leaf not in leaf_index:
                r.fail(leaf_node, field, f"unknown leaf {leaf!r} (not declared under leaves)")
            pair = (nic_offset + i, leaf_index[leaf])
            links.add(links.nic_leaf, pair, leaf_node, field, link_id(f"leaf:{leaf}", f"nic:{name}/{i}"))
        names.append(name)
        gpus_per.append(gpus)
        nics_per.append(nics)
        host_nodes.append(host_node)
        nic_offset += nics

    if "full_mesh" in fields and r.boolean(fields["full_mesh"][1], "full_mesh"):
        node = fields["full_mesh"][1]
        for j in range(len(leaves)):
            for s in range(len(spines)):
                links.add(links.leaf_spine, (j, s), node, "full_mesh", link_id(f"leaf:{leaves[j]}", f"spine:{spines[s]}"))

    nic_offsets = np.concatenate(([0], np.cumsum(nics_per, dtype=np.int64))).tolist()
    if "links" in fields:
        for k, link_node in enumerate(r.sequence(fields["links"][1], "links")):
            _explicit_link(r, link_node, f"links[{k}]", links, host_index, nics_per, nic_offsets, leaf_index, spine_index)

    linked = {nic for nic, _ in links.nic_leaf}
    for h, name in enumerate(names):
        for i in range(nics_per[h]):
            if nic_offsets[h] + i not in linked:
                r.fail(
                    host_nodes[h],
                    f"hosts[{h}]",
                    f"nic:{name}/{i} is not linked to any leaf (give leaf, nic_leaves or links, or set nics: 0)",
                )

    return Topology(
        hosts=tuple(names),
        host_gpus=np.array(gpus_per, dtype=np.int64),
        host_nics=np.array(nics_per, dtype=np.int64),
        gpu_nic_local=np.array(gpu_nic, dtype=np.int64),
        leaves=tuple(leaves),
        spines=tuple(spines),
        nic_leaf=np.array(list(links.nic_leaf), dtype=np.int64).reshape(-1, 2),
        leaf_spine=np.array(list(links.leaf_spine), dtype=np.int64).reshape(-1, 2),
        defaults=defaults,
    )


def _switches(
    r: _Reader, fields: dict[str, tuple[Node, Node]], key: str, kind: DeviceKind
) -> tuple[list[str], dict[str, int]]:
    names: list[str] = []
    index: dict[str, int] = {}
    lines: dict[str, int] = {}
    if key not in fields:
        return names, index
    for j, node in enumerate(r.sequence(fields[key][1], key)):
        name = r.name(node, f"{key}[{j}]", kind)
        if name in index:
            r.fail(node, f"{key}[{j}]", f"duplicate {kind} {name!r} (first at line {lines[name]})")
        index[name] = j
        lines[name] = r.line(node)
        names.append(name)
    return names, index


def _gpu_nic(r: _Reader, host: dict[str, tuple[Node, Node]], where: str, gpus: int, nics: int) -> list[int]:
    if "gpu_nic" not in host:
        if nics == 0:
            return [-1] * gpus
        return [i * nics // gpus if nics <= gpus else i for i in range(gpus)]
    node = host["gpu_nic"][1]
    items = r.sequence(node, f"{where}.gpu_nic")
    if len(items) != gpus:
        r.fail(node, f"{where}.gpu_nic", f"has {len(items)} entries for {gpus} GPUs")
    out = []
    for i, item in enumerate(items):
        if r.value(item) is None:
            out.append(-1)
            continue
        value = r.integer(item, f"{where}.gpu_nic[{i}]", 0)
        if value >= nics:
            r.fail(item, f"{where}.gpu_nic[{i}]", f"NIC {value} does not exist (the host has {nics} NICs)")
        out.append(value)
    return out


def _host_leaves(
    r: _Reader, host: dict[str, tuple[Node, Node]], where: str, nics: int
) -> list[tuple[str, Node, str]]:
    """``(leaf name, node, field)`` for NIC 0, 1, ... as given by ``leaf`` or ``nic_leaves``."""
    if "leaf" in host and "nic_leaves" in host:
        r.fail(host["nic_leaves"][0], where, "give either leaf or nic_leaves, not both")
    if "leaf" in host:
        node = host["leaf"][1]
        leaf = r.name(node, f"{where}.leaf", DeviceKind.LEAF)
        return [(leaf, node, f"{where}.leaf")] * nics
    if "nic_leaves" in host:
        node = host["nic_leaves"][1]
        items = r.sequence(node, f"{where}.nic_leaves")
        if len(items) != nics:
            r.fail(node, f"{where}.nic_leaves", f"has {len(items)} entries for {nics} NICs")
        return [
            (r.name(item, f"{where}.nic_leaves[{i}]", DeviceKind.LEAF), item, f"{where}.nic_leaves[{i}]")
            for i, item in enumerate(items)
        ]
    return []


def _explicit_link(
    r: _Reader,
    node: Node,
    where: str,
    links: _Links,
    host_index: dict[str, tuple[int, Node]],
    nics_per: list[int],
    nic_offsets: list[int],
    leaf_index: dict[str, int],
    spine_index: dict[str, int],
) -> None:
    ends = r.sequence(node, where)
    if len(ends) != 2:
        r.fail(node, where, f"a link joins exactly two devices, got {len(ends)}: {r.show(node)}")
    refs = []
    for end in ends:
        text = r.string(end, where)
        try:
            ref = parse_device(text)
        except TopologyError as error:
            r.fail(end, where, str(error))
        refs.append((ref, text, end))
    by_kind = {ref.kind: (ref, text, end) for ref, text, end in refs}
    kinds = set(by_kind)
    if kinds not in ({DeviceKind.NIC, DeviceKind.LEAF}, {DeviceKind.LEAF, DeviceKind.SPINE}):
        a, b = refs[0][1], refs[1][1]
        r.fail(node, where, f"a link joins a NIC to a leaf or a leaf to a spine, not {a!r} and {b!r}")
    leaf_ref, leaf_text, leaf_node = by_kind[DeviceKind.LEAF]
    if leaf_ref.name not in leaf_index:
        r.fail(leaf_node, where, f"unknown device {leaf_text!r} (leaf {leaf_ref.name!r} is not declared under leaves)")
    name = link_id(refs[0][1], refs[1][1])
    if DeviceKind.NIC in kinds:
        nic_ref, nic_text, nic_node = by_kind[DeviceKind.NIC]
        if nic_ref.name not in host_index:
            r.fail(nic_node, where, f"unknown device {nic_text!r} (host {nic_ref.name!r} is not declared under hosts)")
        h = host_index[nic_ref.name][0]
        if nic_ref.index >= nics_per[h]:
            r.fail(nic_node, where, f"unknown device {nic_text!r} (host {nic_ref.name} has {nics_per[h]} NICs)")
        pair = (nic_offsets[h] + nic_ref.index, leaf_index[leaf_ref.name])
        links.add(links.nic_leaf, pair, node, where, name)
    else:
        spine_ref, spine_text, spine_node = by_kind[DeviceKind.SPINE]
        if spine_ref.name not in spine_index:
            r.fail(spine_node, where, f"unknown device {spine_text!r} (spine {spine_ref.name!r} is not declared under spines)")
        links.add(links.leaf_spine, (leaf_index[leaf_ref.name], spine_index[spine_ref.name]), node, where, name)


# ---- writing -------------------------------------------------------------------------------


def dump_topology(topology: Topology, *, compact: bool = False) -> str:
    """The topology as YAML text that :func:`loads_topology` reads back to an equal topology.

    ``compact=True`` writes the generated form when the topology is exactly what its
    generator spec builds (checked by rebuilding), else the explicit form.
    """
    data: dict[str, Any] = {"version": 1}
    if compact and topology.generator is not None and _regenerates(topology):
        spec = parse_spec(topology.generator)
        data["generate"] = spec.kind
        data.update(spec.params)
    else:
        data.update(_explicit_data(topology))
    if topology.defaults != FabricDefaults():
        base = FabricDefaults()
        data["defaults"] = {
            f.name: getattr(topology.defaults, f.name)
            for f in dataclasses.fields(FabricDefaults)
            if getattr(topology.defaults, f.name) != getattr(base, f.name)
        }
    if topology.overrides:
        data["attributes"] = {
            device: {key: value for key, value in dataclasses.asdict(attrs).items() if value is not None}
            for device, attrs in topology.overrides.items()
        }
    header = f"# sleuth topology: {', '.join(f'{n} {kind}' for kind, n in topology.counts().items())}\n"
    if topology.generator:
        header += f"# generated by {topology.generator}\n"
    # One top-level key at a time: keeps the top level in block style while short lists and
    # host entries stay on one line each (flow style for collections of scalars).
    body = "".join(
        yaml.dump(
            {key: value},
            Dumper=_DUMPER,
            sort_keys=False,
            default_flow_style=None if isinstance(value, (list, dict)) else False,
            width=120,
        )
        for key, value in data.items()
    )
    return header + body


def save_topology(topology: Topology, path: str | os.PathLike[str], *, compact: bool = False) -> None:
    """Write :func:`dump_topology` output to a file."""
    with open(path, "w", encoding="utf-8") as file:
        file.write(dump_topology(topology, compact=compact))


def _regenerates(topology: Topology) -> bool:
    try:
        rebuilt = generate(topology.generator or "", defaults=topology.defaults)
    except TopologyError:
        return False
    return rebuilt == dataclasses.replace(topology, overrides={})


def _explicit_data(topology: Topology) -> dict[str, Any]:
    leaves, spines = topology.leaves, topology.spines
    ptr, nic_leaf_idx, _ = (a.tolist() for a in topology.nic_leaves)
    gpu_nic = topology.gpu_nic_local.tolist()
    hosts: list[dict[str, Any]] = []
    extra_links: list[list[str]] = []
    g0 = 0
    n0 = 0
    for h, name in enumerate(topology.hosts):
        gpus, nics = int(topology.host_gpus[h]), int(topology.host_nics[h])
        entry: dict[str, Any] = {"name": name, "gpus": gpus}
        if nics != gpus:
            entry["nics"] = nics
        mapping = gpu_nic[g0 : g0 + gpus]
        default = [-1] * gpus if nics == 0 else [i * nics // gpus if nics <= gpus else i for i in range(gpus)]
        if mapping != default:
            entry["gpu_nic"] = [None if n < 0 else n for n in mapping]
        per_nic = [nic_leaf_idx[ptr[n] : ptr[n + 1]] for n in range(n0, n0 + nics)]
        if nics and all(len(js) == 1 for js in per_nic):
            names = [leaves[js[0]] for js in per_nic]
            if len(set(names)) == 1:
                entry["leaf"] = names[0]
            else:
                entry["nic_leaves"] = names
        else:
            extra_links.extend([f"nic:{name}/{i}", f"leaf:{leaves[j]}"] for i, js in enumerate(per_nic) for j in js)
        hosts.append(entry)
        g0 += gpus
        n0 += nics
    data: dict[str, Any] = {"hosts": hosts, "leaves": list(leaves), "spines": list(spines)}
    pairs = topology.leaf_spine
    if len(leaves) and len(spines) and len(pairs) == len(leaves) * len(spines):
        data["full_mesh"] = True  # rows are unique and sorted, so a full count means complete
    else:
        extra_links.extend([f"leaf:{leaves[j]}", f"spine:{spines[s]}"] for j, s in pairs.tolist())
    if extra_links:
        data["links"] = extra_links
    return data
