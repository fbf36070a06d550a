from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import sleuth.topology as topology_package
from sleuth.errors import TopologyError
from sleuth.topology import (
    DeviceAttributes,
    FabricDefaults,
    Topology,
    dump_topology,
    generate,
    load_topology,
    loads_topology,
    path,
    save_topology,
)

from .conftest import MULTI_HOMED, TWO_LEAVES

EXAMPLES = sorted((Path(topology_package.__file__).parent / "examples").glob("*.yaml"))


def test_examples_exist_and_load() -> None:
    assert {p.name for p in EXAMPLES} >= {"small-spineleaf.yaml", "small-rail.yaml", "rail-fattree-16k.yaml"}
    for example in EXAMPLES:
        assert load_topology(example).num_gpus > 0


def test_explicit_rail_example_is_what_the_generator_builds() -> None:
    example = load_topology(Path(topology_package.__file__).parent / "examples" / "small-rail.yaml")
    assert example == generate("fattree:hosts=4,gpus=4,pod=2,spines=2")


@pytest.mark.parametrize("compact", [False, True])
@pytest.mark.parametrize(
    "make",
    [
        lambda: generate("fattree:hosts=16,gpus=8,pod=4,spines=4"),
        lambda: generate("spineleaf:hosts=6,gpus=4,nics=2,per_leaf=4,spines=3"),
        lambda: loads_topology(TWO_LEAVES),
        lambda: loads_topology(MULTI_HOMED),
    ],
)
def test_round_trip(make, compact: bool, tmp_path: Path) -> None:
    original: Topology = make()
    text = dump_topology(original, compact=compact)
    again = loads_topology(text)
    assert again == original
    assert again.devices() == original.devices()
    save_topology(original, tmp_path / "t.yaml", compact=compact)
    assert load_topology(tmp_path / "t.yaml") == original
    if compact and original.generator:
        assert "generate:" in text and "hosts:\n" not in text


def test_round_trip_keeps_defaults_and_attributes() -> None:
    base = generate("fattree:hosts=4,gpus=2,pod=2,spines=2")
    tuned = dataclasses.replace(
        base,
        defaults=FabricDefaults(nic_gbps=25.0, switch_latency_us=0.9),
        overrides={"spine:s1": DeviceAttributes(bandwidth_gbps=10.0), "nic:h0001/1": DeviceAttributes(latency_us=7.5)},
    )
    for compact in (False, True):
        again = loads_topology(dump_topology(tuned, compact=compact))
        assert again == tuned
        assert again.attributes("spine:s1").bandwidth_gbps == 10.0
        assert again.defaults.nic_gbps == 25.0


def test_compact_dump_falls_back_to_explicit_when_edited() -> None:
    base = generate("spineleaf:hosts=4,gpus=1,per_leaf=2,spines=2")
    edited = dataclasses.replace(base, leaf_spine=base.leaf_spine[:-1].copy())  # drop a link, keep the label
    text = dump_topology(edited, compact=True)
    assert "generate:" not in text
    assert loads_topology(text) == edited


def test_generated_form_in_a_file() -> None:
    t = loads_topology("generate: spineleaf\nhosts: 8\ngpus: 2\nper_leaf: 2\nspines: 3\ndefaults: {nic_gbps: 12.5}\n")
    expected = generate("spineleaf:hosts=8,gpus=2,per_leaf=2,spines=3")
    assert t == dataclasses.replace(expected, defaults=FabricDefaults(nic_gbps=12.5))
    assert t.generator == expected.generator
    assert len(path(t, "gpu:h0000/0", "gpu:h0007/1").branches) == 3


HOST = "hosts:\n  - {name: h0, gpus: 1, leaf: l0}\nleaves: [l0]\n"

# (file text, offending value, line) — every message must name both.
BAD = {
    "unknown leaf in a link": (HOST + "spines: [s0]\nlinks:\n  - [leaf:l0, spine:s0]\n  - [leaf:l9, spine:s0]\n", "leaf:l9", 7),
    "unknown spine in a link": (HOST + "links:\n  - [leaf:l0, spine:s4]\n", "spine:s4", 5),
    "unknown host in a link": (HOST + "links:\n  - [nic:h7/0, leaf:l0]\n", "nic:h7/0", 5),
    "NIC index out of range": (HOST + "links:\n  - [nic:h0/2, leaf:l0]\n", "nic:h0/2", 5),
    "dangling link": (HOST + "links:\n  - [nic:h0/0]\n", "nic:h0/0", 5),
    "unknown kind prefix": (HOST + "links:\n  - [nic:h0/0, tor:l0]\n", "tor", 5),
    "link between wrong kinds": (HOST + "links:\n  - [gpu:h0/0, leaf:l0]\n", "gpu:h0/0", 5),
    "duplicate link": (HOST + "links:\n  - [leaf:l0, nic:h0/0]\n", "link:leaf:l0~nic:h0/0", 5),
    "duplicate host": ("hosts:\n  - {name: h0, gpus: 1, nics: 0}\n  - {name: h0, gpus: 2, nics: 0}\n", "h0", 3),
    "duplicate leaf": ("hosts: []\nleaves:\n  - l0\n  - l1\n  - l0\n", "l0", 5),
    "duplicate field": ("hosts: []\nleaves: []\nleaves: [l1]\n", "leaves", 3),
    "unknown field": ("hosts: []\nspine: [s0]\n", "spine", 2),
    "unknown host field": ("hosts:\n  - name: h0\n    gpu: 1\n", "gpu", 3),
    "gpus not an integer": ("hosts:\n  - name: h0\n    gpus: eight\n", "eight", 3),
    "gpus zero": ("hosts:\n  - name: h0\n    gpus: 0\n", "0", 3),
    "name not a string": ("hosts:\n  - name: [h0]\n    gpus: 1\n", "h0", 2),
    "bad name": ("hosts:\n  - name: h 0\n    gpus: 1\n", "h 0", 2),
    "hosts not a list": ("hosts: 3\n", "3", 1),
    "gpu_nic too short": ("hosts:\n  - name: h0\n    gpus: 2\n    gpu_nic: [0]\n    leaf: l0\nleaves: [l0]\n", "gpu_nic", 4),
    "gpu_nic out of range": ("hosts:\n  - name: h0\n    gpus: 2\n    gpu_nic: [0, 4]\n    leaf: l0\nleaves: [l0]\n", "NIC 4", 4),
    "unknown leaf on a host": ("hosts:\n  - {name: h0, gpus: 1, leaf: l5}\nleaves: [l0]\n", "l5", 2),
    "NIC not linked": ("leaves: [l0]\nhosts:\n  - {name: h0, gpus: 2, nics: 1}\n", "nic:h0/0", 3),
    "full_mesh not a bool": ("hosts: []\nfull_mesh: yes please\n", "yes please", 2),
    "bad default": ("hosts: []\ndefaults:\n  nic_gbps: -5\n", "-5", 3),
    "unknown default": ("hosts: []\ndefaults:\n  nic_gbs: 5\n", "nic_gbs", 3),
    "unknown attribute device": (HOST + "attributes:\n  leaf:l3: {latency_us: 2}\n", "leaf:l3", 5),
    "bad attribute id": (HOST + "attributes:\n  router:x: {latency_us: 2}\n", "router", 5),
    "unknown generator": ("generate: torus\nhosts: 4\n", "torus", 1),
    "bad generator size": ("generate: fattree\nhosts: 4\npod: none\n", "none", 3),
    "explicit field in generated form": ("generate: fattree\nhosts: 4\nleaves: [l0]\n", "leaves", 3),
    "bad version": ("version: 2\nhosts: []\n", "2", 1),
    "not YAML": ("hosts: [h0,\nleaves: {\n", "YAML", 3),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_names_the_value_and_the_line(case: str) -> None:
    text, value, line = BAD[case]
    with pytest.raises(TopologyError) as info:
        loads_topology(text, source="fabric.yaml")
    message = str(info.value)
    assert value in message, message
    assert f"fabric.yaml line {line}:" in message, message


def test_empty_file() -> None:
    with pytest.raises(TopologyError, match="empty"):
        loads_topology("# nothing\n")


def test_missing_file_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_topology(tmp_path / "absent.yaml")
