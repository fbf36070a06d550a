from __future__ import annotations

import pytest

from sleuth.errors import TopologyError
from sleuth.topology import DeviceKind, PathScope, generate, parse_spec, path, rail_optimized, spine_leaf

K = DeviceKind


def test_rail_optimized_16_hosts_counts() -> None:
    t = rail_optimized(hosts=16, gpus_per_host=8, hosts_per_pod=4, spines=4)
    assert t.counts() == {
        K.GPU: 128,
        K.NVSWITCH: 16,
        K.NIC: 128,
        K.HOST: 16,
        K.LEAF: 32,  # 4 pods x 8 rails
        K.SPINE: 4,
        K.LINK: 128 + 32 * 4,  # one per NIC, plus every leaf to every spine
    }
    assert t.hosts[:2] == ("h0000", "h0001")
    assert t.devices(K.LEAF)[:9] == tuple(f"leaf:p0r{r}" for r in range(8)) + ("leaf:p1r0",)
    assert t.generator == "fattree:hosts=16,gpus=8,pod=4,spines=4"


def test_rail_optimized_rails_and_pods() -> None:
    t = rail_optimized(hosts=16, gpus_per_host=8, hosts_per_pod=4, spines=4)
    assert t.leaves_of("nic:h0005/3") == ("leaf:p1r3",)
    assert all(t.nic_of(f"gpu:h0005/{i}") == f"nic:h0005/{i}" for i in range(8))
    assert path(t, "gpu:h0004/3", "gpu:h0007/3").scope is PathScope.SAME_LEAF  # same rail, same pod
    assert path(t, "gpu:h0004/3", "gpu:h0008/3").scope is PathScope.CROSS_SPINE  # other pod
    assert path(t, "gpu:h0004/3", "gpu:h0005/2").scope is PathScope.CROSS_SPINE  # other rail
    assert len(path(t, "gpu:h0004/3", "gpu:h0005/2").branches) == 4


def test_rail_optimized_partial_last_pod() -> None:
    t = rail_optimized(hosts=10, gpus_per_host=2, hosts_per_pod=4, spines=1)
    assert len(t.leaves) == 6
    assert t.nics_of("leaf:p2r1") == ("nic:h0008/1", "nic:h0009/1")


def test_spine_leaf_counts_and_shared_nics() -> None:
    t = spine_leaf(hosts=16, gpus_per_host=8, hosts_per_leaf=4, spines=2)
    assert t.counts() == {K.GPU: 128, K.NVSWITCH: 16, K.NIC: 128, K.HOST: 16, K.LEAF: 4, K.SPINE: 2, K.LINK: 128 + 8}
    shared = spine_leaf(hosts=16, gpus_per_host=8, nics_per_host=2, hosts_per_leaf=4, spines=2)
    assert shared.counts()[K.NIC] == 32
    assert [shared.nic_of(f"gpu:h0003/{i}") for i in (0, 3, 4, 7)] == ["nic:h0003/0"] * 2 + ["nic:h0003/1"] * 2
    assert shared.leaves_of("nic:h0003/1") == ("leaf:l0",)
    assert shared.leaves_of("nic:h0004/0") == ("leaf:l1",)


def test_default_host_names_match_the_layout_convention() -> None:
    t = rail_optimized(hosts=3, gpus_per_host=4, hosts_per_pod=2, spines=1)
    for rank in range(t.num_gpus):
        assert t.devices(K.GPU)[rank] == f"gpu:h{rank // 4:04d}/{rank % 4}"


def test_spec_strings_build_the_same_fabric_as_keywords() -> None:
    assert generate("fattree:hosts=16,gpus=8,pod=4,spines=4") == rail_optimized(
        hosts=16, gpus_per_host=8, hosts_per_pod=4, spines=4
    )
    assert generate(" spineleaf: hosts=16, per_leaf=4 ") == spine_leaf(hosts=16, hosts_per_leaf=4)
    assert str(parse_spec("fattree:spines=2,hosts=4")) == "fattree:hosts=4,spines=2"


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("fatree:hosts=4", "'fatree'"),
        ("fattree:hosts=4,podz=3", "'podz'"),
        ("fattree:hosts=4,pod", "'pod'"),
        ("fattree:hosts=4,pod=x", "'x'"),
        ("fattree:hosts=4,pod=-1", "'-1'"),
        ("fattree:hosts=4,hosts=5", "'hosts'"),
        ("fattree:gpus=4", "hosts"),
        ("fattree:hosts=0", "hosts"),
        ("spineleaf:hosts=8,per_leaf=2,spines=0", "spines=0"),
    ],
)
def test_bad_specs_name_the_bad_token(spec: str, fragment: str) -> None:
    with pytest.raises(TopologyError) as info:
        generate(spec)
    assert fragment in str(info.value)


def test_generator_keywords_are_checked_before_work() -> None:
    with pytest.raises(TopologyError, match="hosts_per_pod"):
        rail_optimized(hosts=4, hosts_per_pod=0)
    with pytest.raises(TopologyError, match="gpus_per_host"):
        spine_leaf(hosts=4, gpus_per_host=2.5)  # type: ignore[arg-type]
