from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sleuth.errors import TopologyError
from sleuth.topology import (
    DeviceKind,
    PathScope,
    Routing,
    Topology,
    generate,
    loads_topology,
    nics_below,
    nics_below_all,
    nics_below_by_kind,
    path,
    route,
    spine_layer,
)

# ---- exact paths on hand-built fabrics -------------------------------------------------------


def test_same_host_goes_through_the_nvswitch(one_leaf: Topology) -> None:
    p = path(one_leaf, "gpu:a/0", "gpu:a/1")
    assert p.scope is PathScope.SAME_HOST
    assert p.devices() == ("gpu:a/0", "nvswitch:a", "gpu:a/1")
    assert p.branches == ()


def test_same_gpu_is_just_the_gpu(one_leaf: Topology) -> None:
    p = path(one_leaf, "gpu:b/1", "gpu:b/1")
    assert p.scope is PathScope.SAME_GPU
    assert p.weighted() == (("gpu:b/1", 1.0),)


def test_one_leaf_path_has_no_spine(one_leaf: Topology) -> None:
    p = path(one_leaf, "gpu:a/0", "gpu:b/1")
    assert p.scope is PathScope.SAME_LEAF
    assert p.devices() == (
        "gpu:a/0",
        "nic:a/0",
        "link:leaf:l0~nic:a/0",
        "leaf:l0",
        "link:leaf:l0~nic:b/1",
        "nic:b/1",
        "gpu:b/1",
    )
    assert all(weight == 1.0 for _, weight in p.weighted())


def test_cross_spine_path_lists_each_spine_as_an_alternative(two_leaves: Topology) -> None:
    p = path(two_leaves, "gpu:h0/1", "gpu:h3/0")
    assert p.scope is PathScope.CROSS_SPINE
    assert p.head == ("gpu:h0/1", "nic:h0/1", "link:leaf:l0~nic:h0/1", "leaf:l0")
    assert p.branches == (
        ("link:leaf:l0~spine:s0", "spine:s0", "link:leaf:l1~spine:s0"),
        ("link:leaf:l0~spine:s1", "spine:s1", "link:leaf:l1~spine:s1"),
    )
    assert p.tail == ("leaf:l1", "link:leaf:l1~nic:h3/0", "nic:h3/0", "gpu:h3/0")
    assert p.branch_weight == 0.5
    assert p.weighted() == (
        ("gpu:h0/1", 1.0),
        ("nic:h0/1", 1.0),
        ("link:leaf:l0~nic:h0/1", 1.0),
        ("leaf:l0", 1.0),
        ("link:leaf:l0~spine:s0", 0.5),
        ("spine:s0", 0.5),
        ("link:leaf:l1~spine:s0", 0.5),
        ("link:leaf:l0~spine:s1", 0.5),
        ("spine:s1", 0.5),
        ("link:leaf:l1~spine:s1", 0.5),
        ("leaf:l1", 1.0),
        ("link:leaf:l1~nic:h3/0", 1.0),
        ("nic:h3/0", 1.0),
        ("gpu:h3/0", 1.0),
    )


def test_the_spine_layer_of_a_cross_spine_path_is_its_equal_cost_spines(two_leaves: Topology) -> None:
    assert spine_layer(two_leaves, path(two_leaves, "gpu:h0/1", "gpu:h3/0")) == "spines:s0,s1"
    # One known route crosses one spine, and a path under one leaf crosses none: no set to name.
    assert spine_layer(two_leaves, route(two_leaves, "gpu:h0/1", "gpu:h3/0", routing=Routing.STATIC)) is None
    assert spine_layer(two_leaves, path(two_leaves, "gpu:h0/1", "gpu:h1/0")) is None


def test_the_spine_layer_of_multi_homed_nics_holds_the_spines_of_every_branch(multi_homed: Topology) -> None:
    assert spine_layer(multi_homed, path(multi_homed, "gpu:x/0", "gpu:z/0")) == "spines:s0,s1"


def test_paths_accept_global_gpu_indices(two_leaves: Topology) -> None:
    assert path(two_leaves, 1, 6) == path(two_leaves, "gpu:h0/1", "gpu:h3/0")


def test_multi_homed_nics_share_a_leaf(multi_homed: Topology) -> None:
    # x is on l0 and l1, y only on l0: the one shared leaf is the whole story.
    p = path(multi_homed, "gpu:x/0", "gpu:y/0")
    assert p.scope is PathScope.SAME_LEAF
    assert p.devices() == ("gpu:x/0", "nic:x/0", "link:leaf:l0~nic:x/0", "leaf:l0", "link:leaf:l0~nic:y/0", "nic:y/0", "gpu:y/0")
    # x and w share both leaves: two branches, one per leaf.
    p = path(multi_homed, "gpu:x/0", "gpu:w/0")
    assert p.head == ("gpu:x/0", "nic:x/0")
    assert p.branches == (
        ("link:leaf:l0~nic:x/0", "leaf:l0", "link:leaf:l0~nic:w/0"),
        ("link:leaf:l1~nic:x/0", "leaf:l1", "link:leaf:l1~nic:w/0"),
    )
    assert p.tail == ("nic:w/0", "gpu:w/0")


def test_multi_homed_nic_across_spines_branches_at_its_leaves(multi_homed: Topology) -> None:
    p = path(multi_homed, "gpu:x/0", "gpu:z/0")
    assert p.scope is PathScope.CROSS_SPINE
    assert p.head == ("gpu:x/0", "nic:x/0")
    assert p.branches == (
        ("link:leaf:l0~nic:x/0", "leaf:l0", "link:leaf:l0~spine:s0", "spine:s0", "link:leaf:l2~spine:s0"),
        ("link:leaf:l1~nic:x/0", "leaf:l1", "link:leaf:l1~spine:s1", "spine:s1", "link:leaf:l2~spine:s1"),
    )
    assert p.tail == ("leaf:l2", "link:leaf:l2~nic:z/0", "nic:z/0", "gpu:z/0")


def test_no_route_raises_naming_the_gpus() -> None:
    t = loads_topology(
        """
hosts: [{name: a, gpus: 1, leaf: l0}, {name: b, gpus: 1, leaf: l1}, {name: c, gpus: 1, nics: 0}]
leaves: [l0, l1]
"""
    )
    with pytest.raises(TopologyError, match="gpu:a/0 and gpu:b/0"):
        path(t, "gpu:a/0", "gpu:b/0")
    with pytest.raises(TopologyError, match="gpu:c/0 has no NIC"):
        path(t, "gpu:a/0", "gpu:c/0")
    with pytest.raises(TopologyError, match="gpu:zz/0"):
        path(t, "gpu:a/0", "gpu:zz/0")
    with pytest.raises(TopologyError, match="out of range"):
        path(t, 0, 3)


# ---- C(d) ------------------------------------------------------------------------------------


def test_nics_below_on_two_leaves(two_leaves: Topology) -> None:
    c = nics_below_all(two_leaves)
    assert c["nic:h0/0"] == 1
    assert c["link:leaf:l0~nic:h0/0"] == 1
    assert c["leaf:l0"] == c["leaf:l1"] == 4
    assert c["link:leaf:l0~spine:s1"] == 4
    assert c["spine:s0"] == c["spine:s1"] == 8
    assert c["gpu:h1/1"] == 1
    assert c["nvswitch:h1"] == c["host:h1"] == 2
    assert len(c) == len(two_leaves)
    assert nics_below(two_leaves, "spine:s1") == 8


def test_nics_below_counts_a_multi_homed_nic_once(multi_homed: Topology) -> None:
    c = nics_below_all(multi_homed)
    assert [c[f"leaf:{name}"] for name in ("l0", "l1", "l2")] == [3, 2, 1]
    assert c["spine:s0"] == 4  # x, y, w under l0; z under l2
    assert c["spine:s1"] == 3  # x, w under l1; z under l2


def test_nics_below_a_spine_set_counts_the_nics_below_any_of_its_spines(multi_homed: Topology) -> None:
    assert nics_below(multi_homed, "spines:s0,s1") == 4  # x, y, w, z; x and w once each
    with pytest.raises(TopologyError, match="spine:s9"):
        nics_below(multi_homed, "spines:s0,s9")


def test_nics_below_arrays_align_with_device_ids(two_leaves: Topology) -> None:
    by_kind = nics_below_by_kind(two_leaves)
    for kind in DeviceKind:
        assert len(by_kind[kind]) == len(two_leaves.devices(kind))
    assert nics_below_by_kind(two_leaves) is by_kind  # cached
    with pytest.raises(TopologyError, match="leaf:nope"):
        nics_below(two_leaves, "leaf:nope")


def test_a_spine_lies_on_more_inter_host_paths_than_a_leaf() -> None:
    t = generate("fattree:hosts=8,gpus=2,pod=2,spines=2")
    on = {"spine:s0": 0.0, "leaf:p0r0": 0.0}
    hits = {"spine:s0": 0, "leaf:p0r0": 0}
    for a, b in itertools.combinations(range(t.num_gpus), 2):
        if t.gpu_host[a] == t.gpu_host[b]:
            continue
        weights = dict(path(t, a, b).weighted())
        for device in on:
            if device in weights:
                hits[device] += 1
                on[device] += weights[device]
    assert hits["spine:s0"] > hits["leaf:p0r0"]
    assert on["spine:s0"] > on["leaf:p0r0"]  # even after sharing evidence with the other spine
    assert nics_below(t, "spine:s0") > nics_below(t, "leaf:p0r0")


# ---- properties ------------------------------------------------------------------------------


@st.composite
def generated_fabrics(draw: st.DrawFn) -> Topology:
    hosts = draw(st.integers(1, 10))
    gpus = draw(st.integers(1, 4))
    spines = draw(st.integers(1, 3))
    if draw(st.booleans()):
        return generate(f"fattree:hosts={hosts},gpus={gpus},pod={draw(st.integers(1, 4))},spines={spines}")
    nics = draw(st.integers(1, gpus + 1))
    return generate(f"spineleaf:hosts={hosts},gpus={gpus},nics={nics},per_leaf={draw(st.integers(1, 4))},spines={spines}")


@st.composite
def random_fabrics(draw: st.DrawFn) -> Topology:
    """Explicit fabrics with multi-homed NICs and partial leaf-spine wiring."""
    n_leaves = draw(st.integers(1, 4))
    n_spines = draw(st.integers(0, 3))
    leaves = [f"l{j}" for j in range(n_leaves)]
    lines = ["hosts:"]
    links = []
    for h in range(draw(st.integers(1, 5))):
        lines.append(f"  - {{name: h{h}, gpus: {draw(st.integers(1, 2))}, nics: 1}}")
        for leaf in draw(st.sets(st.sampled_from(leaves), min_size=1)):
            links.append(f"  - [nic:h{h}/0, leaf:{leaf}]")
    for s in range(n_spines):
        for leaf in draw(st.sets(st.sampled_from(leaves))):
            links.append(f"  - [leaf:{leaf}, spine:s{s}]")
    lines.append(f"leaves: [{', '.join(leaves)}]")
    lines.append(f"spines: [{', '.join(f's{s}' for s in range(n_spines))}]")
    lines.append("links:")
    lines.extend(links)
    return loads_topology("\n".join(lines) + "\n")


fabrics = st.one_of(generated_fabrics(), random_fabrics())


def _routes(p) -> list[tuple[str, ...]]:
    return [p.head + branch + p.tail for branch in p.branches] or [p.head + p.tail]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=fabrics, data=st.data())
def test_path_properties(fabric: Topology, data: st.DataObject) -> None:
    a = data.draw(st.integers(0, fabric.num_gpus - 1))
    b = data.draw(st.integers(0, fabric.num_gpus - 1))
    try:
        p = path(fabric, a, b)
    except TopologyError as error:
        assert "no route" in str(error)
        assume(False)
    back = path(fabric, b, a)
    gpus = fabric.devices(DeviceKind.GPU)
    assert set(p.devices()) == set(back.devices())
    assert p.scope is back.scope
    for route in _routes(p):
        assert route[0] == gpus[a] and route[-1] == gpus[b]
        assert len(set(route)) == len(route)
        for before, link, after in zip(route, route[1:], route[2:]):
            if fabric.kind(link) is DeviceKind.LINK:
                assert set(fabric.link_ends(link)) == {before, after}
    weights = dict(p.weighted())
    assert all(0 < w <= 1 for w in weights.values())
    assert sum(p.branch_weight for _ in p.branches) == pytest.approx(1.0 if p.branches else 0.0)
    by_kind: dict[DeviceKind, float] = {}
    for device, weight in weights.items():
        by_kind[fabric.kind(device)] = by_kind.get(fabric.kind(device), 0.0) + weight
    if p.scope is PathScope.CROSS_SPINE:
        assert by_kind[DeviceKind.SPINE] == pytest.approx(1.0)
        assert by_kind[DeviceKind.LEAF] == pytest.approx(2.0)
    elif p.scope is PathScope.SAME_LEAF:
        assert by_kind[DeviceKind.LEAF] == pytest.approx(1.0)
        assert DeviceKind.SPINE not in by_kind


@settings(max_examples=100, deadline=None)
@given(fabric=fabrics)
def test_spines_have_at_least_the_nics_of_each_leaf_below(fabric: Topology) -> None:
    c = nics_below_by_kind(fabric)
    for j, s in fabric.leaf_spine.tolist():
        assert c[DeviceKind.SPINE][s] >= c[DeviceKind.LEAF][j]
    assert int(c[DeviceKind.LEAF].sum()) == len(fabric.nic_leaf)
    assert all(c[DeviceKind.SPINE] <= fabric.num_nics)


def test_static_routes_are_one_branch_the_same_both_ways_and_spread_over_spines():
    from collections import Counter

    from sleuth.topology import Routing, route

    topology = generate("fattree:hosts=16,gpus=8,pod=4,spines=4")
    used = Counter()
    for a in range(0, 32, 1):
        b = a + 96  # the same rail in another pod: a cross-spine pair with a regular stride
        forward = route(topology, a, b, routing=Routing.STATIC)
        backward = route(topology, b, a, routing=Routing.STATIC)
        assert not forward.branches and set(forward.devices()) == set(backward.devices())
        assert set(forward.devices()) <= set(path(topology, a, b).devices())
        used.update(d for d in forward.devices() if d.startswith("spine:"))
    assert len(used) == 4  # every spine carries some of them
    assert route(topology, 0, 96).branches  # ECMP keeps the equal-cost branches
