"""``explain.separate`` on hand-made roots: which device leads a fault, and its neighbours."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sleuth.errors import ConfigError
from sleuth.localizer.explain import leading_with_own_cables, nic_beside_its_cable, separate
from sleuth.localizer.scoring import Score, leading, tied_advice
from sleuth.localizer.search import Cause, Root
from sleuth.topology import DeviceKind

PRIOR = {DeviceKind.NIC: 0.183, DeviceKind.LINK: 0.095, DeviceKind.LEAF: 0.048}
KIND = {"nic:a": DeviceKind.NIC, "link:a": DeviceKind.LINK, "nic:b": DeviceKind.NIC, "link:b": DeviceKind.LINK,
        "leaf": DeviceKind.LEAF}


def _root(seq: int, ranks: tuple[int, int]) -> Root:
    return Root(seq, Cause.NETWORK, ranks[0], f"pp.{seq}", seq, "send", ranks, ranks, (0, 0), ran=seq)


def _scenario(nic_a: int, stray: int, nic_b: int = 0) -> tuple[list[tuple[Root, float]], dict]:
    """Roots through NIC a and its cable, through NIC b and its cable, and stray ones through
    neither (weakly irregular: R = 0.2); all of them cross the one leaf above both NICs."""
    devices = {}
    rated = []
    for k in range(nic_a + stray + nic_b):
        root = _root(k, (k % 2, 2))
        devices[root.key] = (
            {"nic:a", "link:a", "leaf"} if k < nic_a else {"leaf"} if k < nic_a + stray else {"nic:b", "link:b", "leaf"}
        )
        rated.append((root, 0.2 if nic_a <= k < nic_a + stray else 1.0))
    return rated, devices


def _ranked(devices: dict):
    def ranked(subset):
        evidence: dict[str, float] = {}
        for root, rate in subset:
            for device in devices[root.key]:
                evidence[device] = evidence.get(device, 0.0) + rate
        numerators = {d: e + PRIOR[KIND[d]] for d, e in evidence.items()}
        total = sum(numerators.values())
        scores = [Score(d, KIND[d], numerators[d] / total, evidence[d], 2) for d in evidence]
        return sorted(scores, key=lambda s: (-s.score, s.device))

    return ranked


def test_a_leaf_whose_evidence_is_nearly_all_one_nics_yields_to_that_nic_and_its_cable():
    # 20 delays through NIC a, and two stray ones elsewhere under the leaf: the leaf has the
    # most evidence, yet one NIC explains 98% of it.
    rated, devices = _scenario(nic_a=20, stray=2)
    [fault] = separate(rated, ranked=_ranked(devices), devices_of=lambda r: devices[r.key], top_k=2)
    assert [s.device for s in fault] == ["nic:a", "link:a"]


def test_a_leaf_that_delays_several_nics_leads_its_fault():
    # 10 delays through each of two NICs and 5 weak ones through others: no NIC carries 80% of
    # the leaf's evidence.
    rated, devices = _scenario(nic_a=10, stray=5, nic_b=10)
    [fault] = separate(rated, ranked=_ranked(devices), devices_of=lambda r: devices[r.key], top_k=2)
    assert fault[0].device == "leaf"


def test_with_dominance_off_the_leaf_leads_on_its_evidence():
    rated, devices = _scenario(nic_a=20, stray=2)
    [fault] = separate(rated, ranked=_ranked(devices), devices_of=lambda r: devices[r.key], top_k=2, dominant=1.0)
    assert fault[0].device == "leaf"


def test_a_dominant_share_outside_zero_to_one_is_refused():
    rated, devices = _scenario(nic_a=2, stray=0)
    with pytest.raises(ConfigError, match="dominant"):
        separate(rated, ranked=_ranked(devices), devices_of=lambda r: devices[r.key], top_k=2, dominant=1.5)



def _layer_scenario(leaves: list[str]) -> tuple[dict, list[tuple[Root, float]], dict]:
    """12 delays spread evenly over ``leaves``, every one crossing the spine layer (``spines``,
    a spine set under ECMP) and one NIC of its own: kinds, rated roots, devices per root."""
    kinds = {"spines": DeviceKind.SPINE}
    devices, rated = {}, []
    for k in range(12):
        root = _root(k, (k, 12 + k))
        leaf, nic = leaves[k % len(leaves)], f"nic:{k}"
        kinds.update({leaf: DeviceKind.LEAF, nic: DeviceKind.NIC})
        devices[root.key] = {"spines", leaf, nic}
        rated.append((root, 1.0))
    return kinds, rated, devices


def _ranked_kinds(kinds: dict, devices: dict):
    prior = {DeviceKind.NIC: 0.183, DeviceKind.LEAF: 0.048, DeviceKind.SPINE: 0.048}

    def ranked(subset):
        evidence: dict[str, float] = {}
        for root, rate in subset:
            for device in devices[root.key]:
                evidence[device] = evidence.get(device, 0.0) + rate
        numerators = {d: e + prior[kinds[d]] for d, e in evidence.items()}
        total = sum(numerators.values())
        scores = [Score(d, kinds[d], numerators[d] / total, evidence[d], 2) for d in evidence]
        return sorted(scores, key=lambda s: (-s.score, s.device))

    return ranked


def test_a_spine_layer_whose_delays_spread_over_several_leaves_leads_its_fault():
    kinds, rated, devices = _layer_scenario(["leaf:a", "leaf:b", "leaf:c"])
    [fault] = separate(rated, ranked=_ranked_kinds(kinds, devices), devices_of=lambda r: devices[r.key], top_k=2)
    assert fault[0].device == "spines"


def test_a_spine_layer_whose_evidence_is_all_one_leafs_yields_to_that_leaf():
    # The layer above a faulty leaf gets every one of the leaf's delays and ties with it (sorting
    # first here by name alone): the leaf below it explains them at fewer endpoints.
    kinds, rated, devices = _layer_scenario(["zleaf"])
    [fault] = separate(rated, ranked=_ranked_kinds(kinds, devices), devices_of=lambda r: devices[r.key], top_k=2)
    assert [s.device for s in fault] == ["zleaf", "spines"]


def test_a_nic_and_its_own_cable_are_listed_together_and_compute_suspects_keep_their_places() -> None:
    cable = "link:leaf:p2r2~nic:h0011/2"
    # A flapping cable beside a contended host: the cable's NIC led the fabric's side, another
    # NIC came between them.
    listed = ["host:h0008", "gpu:h0008/2", "nic:h0011/2", "nic:h0008/2", cable, "spines:s0,s1"]
    assert nic_beside_its_cable(listed, str) == ("host:h0008", "gpu:h0008/2", "nic:h0011/2", cable, "nic:h0008/2",
                                                 "spines:s0,s1")
    # The cable first: its NIC follows it among the fabric's suspects, the GPU stays where it was.
    assert nic_beside_its_cable([cable, "gpu:h0001/1", "leaf:p2r2", "nic:h0011/2"], str) == (
        cable, "gpu:h0001/1", "nic:h0011/2", "leaf:p2r2")
    # Another NIC's cable, or a spine's, is not this NIC's.
    other = ["nic:h0011/2", "link:leaf:p2r2~spine:s1", "link:leaf:p0r1~nic:h0001/1"]
    assert nic_beside_its_cable(other, str) == tuple(other)


def test_a_cable_under_its_nics_prior_joins_its_nic_that_ties_another_nic_first():
    # A pipeline pair's two NICs carry only its transfers: they tie, and each one's cable scores just
    # under them (a cable's prior is lower), so the top two alone would name two NICs and no cable.
    cable_a, cable_b = "link:leaf:p0r4~nic:h0/4", "link:leaf:p2r4~nic:h8/4"
    nic_a, nic_b = Score("nic:h0/4", DeviceKind.NIC, 0.1, 1.0, 3), Score("nic:h8/4", DeviceKind.NIC, 0.1, 1.0, 3)
    link_a, link_b = Score(cable_a, DeviceKind.LINK, 0.099, 1.0, 3), Score(cable_b, DeviceKind.LINK, 0.099, 1.0, 3)
    leaf = Score("leaf:p0r4", DeviceKind.LEAF, 0.05, 0.5, 3)
    ranking = [nic_a, nic_b, link_a, link_b, leaf]
    assert [s.device for s in leading_with_own_cables(ranking, 2)] == ["nic:h0/4", "nic:h8/4", cable_a, cable_b]
    # A cable in the top finds its NIC; a device with no NIC (a leaf) finds none; beyond the top k none join.
    cables_first = [replace(link_a, score=0.2), replace(link_b, score=0.2), nic_a, nic_b, leaf]
    assert [s.device for s in leading_with_own_cables(cables_first, 2)] == [cable_a, cable_b, "nic:h0/4", "nic:h8/4"]
    assert [s.device for s in leading_with_own_cables([leaf, nic_a, link_a], 1)] == ["leaf:p0r4"]
    # A tie longer than the top k (a ring's NICs) names none in its top: listed as it is.
    assert [s.device for s in leading_with_own_cables(ranking, 1)] == ["nic:h0/4", "nic:h8/4"]


def test_devices_tied_with_the_first_are_all_kept_beyond_the_top_k():
    ranking = [Score(f"nic:h{h}/2", DeviceKind.NIC, 0.1, 1.0, 3) for h in range(4)]
    ranking += [Score("leaf:p0r2", DeviceKind.LEAF, 0.05, 1.0, 3), Score("nic:h9/2", DeviceKind.NIC, 0.1 * (1 - 1e-6), 1.0, 3)]
    assert [s.device for s in leading(ranking, 2)] == [f"nic:h{h}/2" for h in range(4)]
    assert [s.device for s in leading(ranking[3:], 2)] == ["nic:h3/2", "leaf:p0r2"]
    assert leading([], 2) == ()


def test_more_than_two_devices_tied_first_get_advice_a_nic_and_its_cable_none():
    cable = "link:leaf:p0r2~nic:h0/2"
    assert tied_advice([("nic:h0/2", 0.2), (cable, 0.2), ("gpu:h1/0", 0.1)]) == ""
    assert tied_advice([]) == ""
    ring = [(f"nic:h{h}/2", 0.2) for h in range(10)] + [("leaf:p0r2", 0.1)]
    advice = tied_advice(ring[::-1])  # the best need not be listed first
    assert advice.startswith("10 devices share the first place's evidence (nic:h9/2, nic:h8/2,")
    assert "nic:h2/2 and 2 more): " in advice and "leaf" not in advice
