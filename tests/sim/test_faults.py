"""Faults show up where the design says they must, and the grammar names what is wrong."""

from __future__ import annotations

import numpy as np
import pytest

from sleuth.errors import ConfigError
from sleuth.irregularity import IrregularityKind
from sleuth.records import OpKind
from sleuth.sim import Fault, FaultKind, Profile, parse_fault
from sleuth.sim.scenario import DELTA
from sleuth.topology import DeviceKind, generate, link_id

from tests.sim.conftest import emulate


def _durations(batch) -> np.ndarray:
    return batch["t_end_ns"] - batch["t_start_ns"]


def test_a_slow_gpu_makes_its_peers_wait_while_its_own_operators_stay_normal() -> None:
    # tp4 pp1 dp2 on 2 hosts of 4 GPUs; rank 1 is gpu:h0000/1.
    emulation = emulate(tp=4, pp=1, dp=2, fabric="fattree:hosts=2,gpus=4,pod=2,spines=1",
                        faults=[parse_fault("gpu:h0000/1,slow=2")], microbatches=2, iterations=3)
    for rank in range(4):
        records = emulation.ranks_records([rank])
        abnormal, base = emulation.abnormal([rank])
        tp = np.array([c.startswith("tp.") for c in records.decoded("comm")])
        if rank == 1:
            assert not abnormal[tp].any()
            assert np.array_equal(_durations(records)[tp], base[tp])
        else:
            assert abnormal[tp].all()
            assert (_durations(records)[tp] > 2 * base[tp]).all()
    # The other tp group (ranks 4-7) waits on nobody inside its own tp operators.
    abnormal, _ = emulation.abnormal([5])
    records = emulation.ranks_records([5])
    assert not abnormal[[c.startswith("tp.") for c in records.decoded("comm")]].any()


def test_a_slow_link_lengthens_the_transfer_on_both_ends() -> None:
    # pp2: stage 0 on h0000 (pod 0), stage 1 on h0002 (pod 1); rank 0 sends to rank 4 on gpu:h0002/0.
    fabric = "fattree:hosts=4,gpus=2,pod=2,spines=1"
    topology = generate(fabric)
    nic = topology.nic_of("gpu:h0002/0")
    link = link_id(topology.leaves_of(nic)[0], nic)
    emulation = emulate(tp=2, pp=2, dp=2, fabric=fabric, faults=[Fault(kind=FaultKind.LINK, device=link, slow=8.0)],
                        microbatches=2, iterations=2)
    sends = emulation.ranks_records([0])
    recvs = emulation.ranks_records([4])
    send_mask = sends["op"] == OpKind.SEND
    recv_mask = (recvs["op"] == OpKind.RECV) & (recvs["peer"] == 0)
    flags_s, base_s = emulation.abnormal([0])
    flags_r, base_r = emulation.abnormal([4])
    assert flags_s[send_mask].all() and flags_r[recv_mask].all()
    # Both ends of each transfer end together, later than without the fault.
    assert np.array_equal(sends["t_end_ns"][send_mask], recvs["t_end_ns"][recv_mask])
    # Transfer part (end - the later of the two starts): longer on the link's pair (0 -> 4), the
    # same on a pair that does not cross it (1 -> 5, another rail), which only waits longer.
    for sender, receiver, slower in ((0, 4, True), (1, 5, False)):
        now = _transfers(emulation.timeline, emulation, sender, receiver)
        before = _transfers(emulation.counterfactual, emulation, sender, receiver)
        assert (now > 1.05 * before).all() if slower else np.array_equal(now, before)


def _transfers(timeline, emulation, sender: int, receiver: int) -> np.ndarray:
    """Transfer time of every send from ``sender`` to ``receiver`` (stage 0 to stage 1)."""
    plan = emulation.plan
    out = []
    for stage, rank, op in ((0, sender, OpKind.SEND), (1, receiver, OpKind.RECV)):
        slots = [j for j, slot in enumerate(plan.stages[stage].slots) if slot.op is op and slot.kind == "pp"]
        position = plan.position[rank]
        out.append((timeline.starts[stage][:, slots, position], timeline.ends[stage][:, slots, position]))
    (send_start, end), (recv_start, _) = out
    return (end - np.maximum(send_start, recv_start)).ravel()


def _inter_host_paths_through(emulation, device: str) -> int:
    network = emulation.network  # the emulator's own path model, as the faults see it
    world = emulation.scenario.layout.world
    hosts = np.arange(world) // emulation.scenario.layout.gpus_per_host
    count = 0
    for a in range(world):
        for b in range(a + 1, world):
            if hosts[a] != hosts[b] and device in network.pair(a, b)[2]:
                count += 1
    return count


def test_a_spine_lies_on_more_inter_host_paths_than_a_leaf() -> None:
    fabric = "fattree:hosts=16,gpus=8,pod=4,spines=4"
    emulation = emulate(tp=4, pp=2, dp=16, fabric=fabric, iterations=1)
    topology = emulation.scenario.topology
    spine = _inter_host_paths_through(emulation, topology.devices(DeviceKind.SPINE)[0])
    leaf = _inter_host_paths_through(emulation, topology.devices(DeviceKind.LEAF)[0])
    assert spine > leaf > 0
    # And so a congested spine slows the transfers of more communicator units than a leaf.
    exposed = {}
    for device in (topology.devices(DeviceKind.SPINE)[0], topology.devices(DeviceKind.LEAF)[0]):
        kind = FaultKind.SPINE if device.startswith("spine") else FaultKind.LEAF
        faulty = emulate(tp=4, pp=2, dp=16, fabric=fabric, faults=[Fault(kind=kind, device=device, slow=4.0)],
                         iterations=1)
        exposed[kind] = sum(len(units) for unit_set in faulty.plan.units.values() for _, units, _ in unit_set.exposure)
    assert exposed[FaultKind.SPINE] > exposed[FaultKind.LEAF] > 0


def test_a_host_fault_slows_launches_of_all_its_gpus() -> None:
    emulation = emulate(tp=4, pp=1, dp=2, fabric="fattree:hosts=2,gpus=4,pod=2,spines=1",
                        faults=[parse_fault("host:h0001,slow=3")], iterations=2, microbatches=2)
    launch = emulation.timeline.launch
    assert (launch[:, 4:] == 15000).all() and (launch[:, :4] == 5000).all()
    records = emulation.ranks_records([0])
    # rank 0's DP peer is on the slow host: rank 0 waits for it.
    assert emulation.abnormal([0])[0][np.char.startswith(records.decoded("comm").astype(str), "dp.")].all()


def test_nonhardware_faults_slow_compute_but_name_no_device() -> None:
    last = emulate(tp=2, pp=2, dp=2, fabric="fattree:hosts=4,gpus=2,pod=2,spines=1",
                   faults=[parse_fault("last_stage,slow=1.5")], iterations=3, microbatches=4)
    truth = last.truth()
    assert truth.faults[0]["device"] is None and truth.faults[0]["ranks"] == [4, 5, 6, 7]
    assert all(row.time_ns > 1.1 * row.counterfactual_ns for row in truth.iterations)
    seqlen = emulate(tp=2, pp=2, dp=2, fabric="fattree:hosts=4,gpus=2,pod=2,spines=1",
                     faults=[parse_fault("seqlen,alpha=0.1")], iterations=3, microbatches=4)
    assert any(row.time_ns != row.counterfactual_ns for row in seqlen.truth().iterations)


def test_profiles() -> None:
    persistent = Fault(kind=FaultKind.GPU, device="gpu:h0000/0", slow=2.0, start=3, ramp=4).factors(10, seed=1)
    assert persistent[:3].tolist() == [1.0, 1.0, 1.0]
    assert persistent[3:8].tolist() == [1.25, 1.5, 1.75, 2.0, 2.0]
    fluctuation = Fault(kind=FaultKind.GPU, device="gpu:h0000/0", profile=Profile.FLUCTUATION).factors(60, seed=3)
    on = np.flatnonzero(fluctuation > 1)
    gaps = np.diff(on[::2])
    assert len(set(gaps.tolist())) == 1 and 6 <= gaps[0] <= 9
    spike = Fault(kind=FaultKind.GPU, device="gpu:h0000/0", profile=Profile.SPIKE, rate=0.1).factors(200, seed=5)
    assert 5 <= (spike > 1).sum() <= 40
    assert np.array_equal(spike, Fault(kind=FaultKind.GPU, device="gpu:h0000/0", profile=Profile.SPIKE,
                                       rate=0.1).factors(200, seed=5))


def test_fault_kinds_are_the_device_kinds_and_the_two_non_hardware_causes() -> None:
    assert {kind.device_kind for kind in FaultKind if kind.hardware} == set(DeviceKind)
    assert all(kind.value == kind.device_kind.value and kind.name == kind.device_kind.name
               for kind in FaultKind if kind.device_kind is not None)
    assert [kind for kind in FaultKind if not kind.hardware] == [FaultKind.LAST_STAGE, FaultKind.SEQLEN]
    assert {kind for kind in FaultKind if kind.network} == {
        FaultKind.NVSWITCH, FaultKind.NIC, FaultKind.LINK, FaultKind.LEAF, FaultKind.SPINE}
    # A profile is the kind of irregularity the iteration monitor reports for it.
    assert Profile is IrregularityKind and Profile("spike") is IrregularityKind.SPIKE


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ("gpu:h0000/1,slo=2", "'slo=2'"),
        ("gpu:h0000/1,slow", "'slow'"),
        ("gpu:h0000/1,slow=abc", "'slow=abc'"),
        ("gpu:h0000/1,profile=wave", "'profile=wave'"),
        ("tpu:h0000/1", "'tpu:h0000/1'"),
        ("gpu:h0000,slow=2", "'gpu:h0000'"),
        ("gpu:h0000/1,slow=0.5", "slow"),
        ("last_stage,slow=2,slow=3", "'slow'"),
    ],
)
def test_a_bad_fault_spec_fails_naming_the_token(spec: str, named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace("(", r"\(")) as error:
        parse_fault(spec)
    assert spec in str(error.value)


def test_a_fault_on_a_device_outside_the_topology_fails_before_work() -> None:
    with pytest.raises(ConfigError, match="gpu:h0099/0"):
        emulate(tp=2, pp=1, dp=2, fabric="fattree:hosts=1,gpus=4,pod=1,spines=1",
                faults=[parse_fault("gpu:h0099/0,slow=2")])


def _own_work(timeline, plan) -> np.ndarray:
    """Per rank, its time outside communication summed over the run: from the end of each
    collective to the start of the rank's next operator (the rank's clock is the collective's end
    there; after a send or receive it is not, so those gaps are left out)."""
    work = np.zeros(plan.layout.world, np.int64)
    for stage in plan.stages:
        after_collective = [j for j in range(len(stage.slots) - 1) if not stage.slots[j].peer]
        for j in after_collective:
            gaps = timeline.starts[stage.stage][:, j + 1, :] - timeline.ends[stage.stage][:, j, :]
            work[stage.ranks] += gaps.sum(axis=0)
    return work


def test_a_host_fault_slows_the_compute_of_exactly_its_gpus() -> None:
    # Issue 35: tp4 pp4 dp6 on 12 hosts of 8 GPUs; host:h0005 holds ranks 40-47. A host fault
    # that only lengthened the 5 us launch overhead left the iteration time unchanged.
    emulation = emulate(tp=4, pp=4, dp=6, fabric="fattree:hosts=12", faults=[parse_fault("host:h0005,slow=3")],
                        iterations=2, microbatches=4)
    truth = emulation.truth()
    assert truth.faults[0]["ranks"] == list(range(40, 48))
    assert all(row.time_ns > DELTA * row.counterfactual_ns for row in truth.iterations)
    slowed = _own_work(emulation.timeline, emulation.plan) > _own_work(emulation.counterfactual, emulation.plan)
    assert np.flatnonzero(slowed).tolist() == list(range(40, 48))
