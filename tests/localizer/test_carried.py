"""localizer.carried: a network device's score weighed by the share of its transfers that ran slow."""

from __future__ import annotations

import pytest

from sleuth.localizer.carried import weighed
from sleuth.localizer.scoring import Score
from sleuth.topology import DeviceKind, Routing, generate
from sleuth.whatif.contributors import TransferGroup

# Two hosts of two GPUs, rail-optimized: GPU i of each host on leaf p0r{i}, one spine.
TOPOLOGY = generate("fattree:hosts=2,gpus=2,pod=2,spines=1")
GPUS = ["gpu:h0000/0", "gpu:h0000/1", "gpu:h0001/0", "gpu:h0001/1"]


# Two pods of two hosts of two GPUs under four equal-cost spines: a hop between pods takes one of them.
ECMP_FABRIC = generate("fattree:hosts=4,gpus=2,pod=2,spines=4")
ECMP_GPUS = [f"gpu:h000{h}/{g}" for h in range(4) for g in range(2)]
LAYER = "spines:s0,s1,s2,s3"


def _weighed(ranking: list[Score], groups: list[TransferGroup], *, ecmp: bool = False, **options) -> dict[str, float]:
    def carried(ranks):
        return [g for g in groups if set(g.ranks) & set(ranks)]

    fabric = dict(topology=ECMP_FABRIC, gpus=ECMP_GPUS, routing=Routing.ECMP) if ecmp else \
        dict(topology=TOPOLOGY, gpus=GPUS, routing=Routing.STATIC)
    return {s.device: s.score for s in weighed(ranking, carried, **fabric, **options)}


def test_a_device_whose_other_transfers_ran_at_their_peers_length_falls_behind_one_whose_all_ran_slow():
    ranking = [Score("nvswitch:h0000", DeviceKind.NVSWITCH, 0.5, 1.0, 3), Score("nic:h0000/0", DeviceKind.NIC, 0.5, 1.0, 3)]
    groups = [TransferGroup("dp.0", "all_reduce", (0, 2), instances=10, slow=10),  # across hosts: NICs, leaf
              TransferGroup("tp.0", "all_reduce", (0, 1), instances=30, slow=3)]  # inside host 0: its NVSwitch
    scores = _weighed(ranking, groups)
    assert list(scores) == ["nic:h0000/0", "nvswitch:h0000"]
    assert scores["nic:h0000/0"] == pytest.approx(1.0 / 1.1)  # the head's total kept: 0.5 + 0.05 scaled to 1
    assert scores["nvswitch:h0000"] == pytest.approx(0.1 / 1.1)


def test_devices_that_carried_the_same_transfers_stay_tied():
    ranking = [Score("nic:h0000/0", DeviceKind.NIC, 0.5, 1.0, 3), Score("nic:h0001/0", DeviceKind.NIC, 0.5, 1.0, 3)]
    groups = [TransferGroup("dp.0", "all_reduce", (0, 2), instances=10, slow=7)]
    scores = _weighed(ranking, groups)
    assert scores["nic:h0000/0"] == pytest.approx(scores["nic:h0001/0"]) == pytest.approx(0.5)


def test_a_device_no_transfer_is_seen_crossing_keeps_its_score():
    ranking = [Score("spine:s0", DeviceKind.SPINE, 0.6, 1.0, 3), Score("nvswitch:h0001", DeviceKind.NVSWITCH, 0.4, 1.0, 3)]
    groups = [TransferGroup("tp.0", "all_reduce", (0, 1), instances=10, slow=0)]  # inside host 0 only
    assert _weighed(ranking, groups) == {"spine:s0": pytest.approx(0.6), "nvswitch:h0001": pytest.approx(0.4)}


def test_a_tie_longer_than_the_head_is_weighed_whole():
    # A ring's NICs tie (its members end each collective together): cutting the tie at the head's
    # length would drop some of them by the sort's order alone.
    nics = [f"nic:h000{h}/{g}" for h in range(2) for g in range(2)]
    ranking = [Score(nic, DeviceKind.NIC, 0.25, 1.0, 3) for nic in nics]
    groups = [TransferGroup("dp.0", "all_reduce", (0, 1, 2, 3), instances=10, slow=10)]
    assert set(_weighed(ranking, groups, head_size=2)) == set(nics)


def test_a_tie_the_head_s_cut_falls_in_is_weighed_whole_so_a_switch_sorted_below_the_cut_can_lead_regression_seed_5940():
    # Each host's NVSwitch sits on every data-parallel ring a slow spine slows, so they tie with the
    # spine (the first a hair ahead); the sort put the spine below the head's cut. Its transfers all
    # ran slow, the NVSwitches' own tensor-parallel ones did not: read whole, the spine leads.
    ranking = [Score("nvswitch:h0000", DeviceKind.NVSWITCH, 0.2501, 1.0, 3),
               Score("nvswitch:h0001", DeviceKind.NVSWITCH, 0.25, 1.0, 3), Score("spine:s0", DeviceKind.SPINE, 0.25, 1.0, 3)]
    groups = [TransferGroup("dp.0", "all_reduce", (0, 2), instances=10, slow=10),  # across hosts: the spine
              TransferGroup("tp.0", "all_reduce", (0, 1), instances=30, slow=1),  # inside host 0
              TransferGroup("tp.1", "all_reduce", (2, 3), instances=30, slow=1)]  # inside host 1
    assert list(_weighed(ranking, groups, head_size=2))[0] == "spine:s0"


def _between_pods(instances: tuple[int, int, int, int], slow: tuple[int, int, int, int]) -> list[TransferGroup]:
    """Four transfers from pod 0 to pod 1, the first from rank 0 (behind nic:h0000/0)."""
    pairs = ((0, 4), (2, 6), (1, 5), (3, 7))
    return [TransferGroup(f"pp.{k}", "all_reduce", pair, instances=n, slow=s)
            for k, (pair, n, s) in enumerate(zip(pairs, instances, slow))]


def test_one_slow_spine_of_four_under_ecmp_keeps_the_layer_ahead_of_a_nic_hashed_onto_it_regression_seed_5924():
    ranking = [Score(LAYER, DeviceKind.SPINE, 0.6, 1.0, 3), Score("nic:h0000/0", DeviceKind.NIC, 0.4, 1.0, 3)]
    scores = _weighed(ranking, _between_pods((10, 10, 10, 10), (10, 0, 0, 0)), ecmp=True)
    assert list(scores) == [LAYER, "nic:h0000/0"]
    assert scores[LAYER] == pytest.approx(0.6)  # a hop in four slow: what one slow spine of four slows


def test_a_slow_nic_stays_ahead_of_the_spine_layer_its_transfers_crossed_where_fewer_than_one_hop_in_four_ran_slow():
    ranking = [Score(LAYER, DeviceKind.SPINE, 0.5, 1.0, 3), Score("nic:h0000/0", DeviceKind.NIC, 0.5, 1.0, 3)]
    scores = _weighed(ranking, _between_pods((10, 30, 30, 30), (10, 0, 0, 0)), ecmp=True)
    assert list(scores) == ["nic:h0000/0", LAYER]
    assert scores[LAYER] == pytest.approx(0.4 / 1.4)  # 10 of 100 slow against the 25 one slow spine would slow
