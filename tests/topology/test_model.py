from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest

from sleuth.errors import TopologyError
from sleuth.topology import DeviceAttributes, DeviceKind, FabricDefaults, Topology, loads_topology


def test_accessors_on_two_leaves(two_leaves: Topology) -> None:
    t = two_leaves
    assert t.hosts == ("h0", "h1", "h2", "h3")
    assert t.gpus_per_host == 2
    assert t.nic_of("gpu:h2/1") == "nic:h2/1"
    assert t.leaves_of("nic:h2/1") == ("leaf:l1",)
    assert t.nics_of("leaf:l0") == ("nic:h0/0", "nic:h0/1", "nic:h1/0", "nic:h1/1")
    assert t.spines_of("leaf:l1") == ("spine:s0", "spine:s1")
    assert t.leaves_under("spine:s1") == ("leaf:l0", "leaf:l1")
    assert t.link_ends("link:leaf:l1~spine:s0") == ("leaf:l1", "spine:s0")
    assert t.link_between("spine:s0", "leaf:l1") == "link:leaf:l1~spine:s0"
    assert t.host_of("nic:h3/0") == "h3"
    assert t.gpu("h1", 1) == "gpu:h1/1"
    assert t.gpu(3, 0) == "gpu:h3/0"
    assert t.kind("link:leaf:l0~nic:h0/0") is DeviceKind.LINK
    assert "spine:s1" in t and "spine:s2" not in t
    assert len(t) == len(set(t.devices())) == 8 + 4 + 8 + 4 + 2 + 2 + 12


def test_global_gpu_order_is_host_major(two_leaves: Topology) -> None:
    gpus = two_leaves.devices(DeviceKind.GPU)
    assert gpus[:3] == ("gpu:h0/0", "gpu:h0/1", "gpu:h1/0")
    assert two_leaves.gpu_host.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert two_leaves.gpu_nic.tolist() == list(range(8))


def test_unknown_devices_raise(two_leaves: Topology) -> None:
    with pytest.raises(TopologyError, match="leaf:l9"):
        two_leaves.locate("leaf:l9")
    with pytest.raises(TopologyError, match="no link"):
        two_leaves.link_between("leaf:l0", "nic:h2/0")
    with pytest.raises(TopologyError, match="expected a nic"):
        two_leaves.leaves_of("gpu:h0/0")


def test_topology_is_immutable(two_leaves: Topology) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        two_leaves.hosts = ()  # type: ignore[misc]
    with pytest.raises(ValueError):
        two_leaves.nic_leaf[0, 0] = 3
    with pytest.raises(TypeError):
        two_leaves.overrides["gpu:h0/0"] = DeviceAttributes(1.0)  # type: ignore[index]


def test_equality_ignores_link_order_and_hashes_alike(two_leaves: Topology) -> None:
    shuffled = dataclasses.replace(two_leaves, leaf_spine=two_leaves.leaf_spine[::-1].copy(), generator="x")
    assert shuffled == two_leaves
    assert hash(shuffled) == hash(two_leaves)
    assert dataclasses.replace(two_leaves, spines=("s0", "s9")) != two_leaves


def test_attributes_defaults_and_overrides() -> None:
    t = loads_topology(
        """
hosts: [{name: h0, gpus: 1, leaf: l0}]
leaves: [l0]
spines: [s0]
full_mesh: true
defaults: {nic_gbps: 25, spine_link_gbps: 100}
attributes:
  "link:leaf:l0~spine:s0": {latency_us: 9}
"""
    )
    assert t.attributes("gpu:h0/0") == DeviceAttributes(450.0, 1.0)
    assert t.attributes("nic:h0/0") == DeviceAttributes(25.0, 2.0)
    assert t.attributes("link:leaf:l0~nic:h0/0") == DeviceAttributes(50.0, 0.05)
    assert t.attributes("link:leaf:l0~spine:s0") == DeviceAttributes(100.0, 9.0)
    assert t.attributes("leaf:l0") == DeviceAttributes(None, 0.5)
    assert t.attributes("host:h0") == DeviceAttributes(None, None)


def test_mixed_hosts_have_no_single_gpus_per_host() -> None:
    t = loads_topology("hosts: [{name: a, gpus: 2, nics: 0}, {name: b, gpus: 4, nics: 0}]")
    assert t.gpus_per_host is None
    assert t.nic_of("gpu:b/3") is None


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"hosts": ("a", "a")}, "duplicate host 'a'"),
        ({"leaves": ("l 0",)}, "'l 0'"),
        ({"host_gpus": [2, 0]}, "host b has 0 GPUs"),
        ({"gpu_nic_local": [0, 5, 0, 0]}, "gpu:a/1 is served by NIC 5"),
        ({"nic_leaf": [[0, 0], [0, 0], [1, 0], [2, 0], [3, 0]]}, "duplicate link"),
        ({"nic_leaf": [[0, 0], [1, 0], [2, 0]]}, "nic:b/1 is not linked"),
        ({"nic_leaf": [[0, 0], [1, 0], [2, 0], [3, 7]]}, "leaf index 7 out of range"),
        ({"overrides": {"leaf:zz": DeviceAttributes(1.0)}}, "leaf:zz"),
    ],
)
def test_construction_validates(one_leaf: Topology, change: dict, fragment: str) -> None:
    fields = {
        "hosts": one_leaf.hosts,
        "host_gpus": one_leaf.host_gpus,
        "host_nics": one_leaf.host_nics,
        "gpu_nic_local": one_leaf.gpu_nic_local,
        "leaves": one_leaf.leaves,
        "spines": one_leaf.spines,
        "nic_leaf": one_leaf.nic_leaf,
        "leaf_spine": one_leaf.leaf_spine,
    }
    fields.update(change)
    with pytest.raises(TopologyError) as info:
        Topology(**fields)
    assert fragment in str(info.value)


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), "fast", True])
def test_fabric_defaults_must_be_positive_numbers(value: object) -> None:
    with pytest.raises(TopologyError, match="nic_gbps"):
        FabricDefaults(nic_gbps=value)  # type: ignore[arg-type]


def test_empty_link_arrays_are_fine() -> None:
    t = Topology(("h0",), [2], [0], [-1, -1], (), (), np.empty((0, 2)), [])
    assert t.counts()[DeviceKind.LINK] == 0


def test_pickle_round_trip_drops_caches(two_leaves: Topology) -> None:
    tuned = dataclasses.replace(two_leaves, overrides={"spine:s0": DeviceAttributes(latency_us=3.0)})
    tuned.devices()  # fill caches
    again = pickle.loads(pickle.dumps(tuned))
    assert again == tuned
    assert again.attributes("spine:s0").latency_us == 3.0
