"""Broken GPUs against sequence-length imbalance (issue 6): a broken GPU is steadily slow from its
fault on, a replica that drew long documents is slow only in the iterations it drew them; two
slow GPUs in one data-parallel group are two GPUs, not slowness moving between replicas; a rank
slow now and then, with peers slow at other times, is still sequence-length imbalance."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np

from sleuth.layout import ParallelLayout
from sleuth.localizer import build_graph, localize
from sleuth.localizer.nonhardware import Straggler, classify
from sleuth.localizer.peers import PeerShare, is_steady
from sleuth.jobspec import JobSpec
from sleuth.sim import Emulation, Fault, FaultKind, suite


def test_a_fault_that_starts_part_way_is_steady_and_a_moving_one_is_not():
    rng = np.random.default_rng(5)
    noise = rng.normal(0, 0.3, 30)
    assert is_steady(noise + np.r_[np.zeros(20), np.full(10, 148.0)])  # slow from iteration 20 on
    assert is_steady(noise + 123.0)
    moving = np.abs(rng.normal(0, 6.0, 30)) * (rng.random(30) < 0.3)  # long documents now and then
    assert not is_steady(moving)
    assert not is_steady(noise + np.r_[np.zeros(29), 148.0])  # a last-iteration peak says nothing yet
    assert not is_steady(np.zeros(30))


def test_a_steadily_slow_rank_is_hardware_even_when_a_peer_is_slow_at_other_times():
    graph = build_graph(JobSpec.from_layout("j", ParallelLayout(64, 4, 2, 8)))
    compute = {5: 3.0, 13: 0.2}
    moving = PeerShare(together=0.0, anytime=0.5, steady=False)
    assert classify(compute, graph=graph, shared={5: moving}).kind is Straggler.SEQLEN_IMBALANCE
    broken = PeerShare(together=0.0, anytime=0.5, steady=True)
    assert classify(compute, graph=graph, shared={5: broken}).kind is Straggler.HARDWARE
    stage = PeerShare(together=1.0, anytime=0.0, steady=True)  # all peers slow with it: not a GPU
    assert classify(compute, graph=graph, shared={5: stage}).kind is not Straggler.HARDWARE


@lru_cache(maxsize=None)
def _two_gpus_in_one_dp_group(seed: int) -> Emulation:
    """The concurrent suite's gpu+gpu scenario with its second GPU moved into the first one's
    data-parallel group (on another host), slowing from iteration 40."""
    [base] = [s for s in suite("concurrent", seed=seed) if s.name == "concurrent-gpu-gpu"]
    first, second = base.faults
    graph = build_graph(Emulation(base).job_spec())
    [rank] = Emulation(base).ranks_on(first.device).tolist()
    group = next(graph.group(int(g)) for g in graph.groups_of(rank) if graph.kinds[int(g)] == "dp")
    peer = next(int(m) for m in group if graph.hosts[int(m)] != graph.hosts[rank])
    return Emulation(replace(base, faults=(first, replace(second, device=graph.gpus[peer]))))


def _incidents(emulation: Emulation, irregular: list[int]):
    return localize(emulation, irregular_iterations=irregular, topology=emulation.scenario.topology, routing="static")


def test_two_slow_gpus_in_one_data_parallel_group_are_both_named_as_gpus():
    emulation = _two_gpus_in_one_dp_group(101)
    devices = {f["device"] for f in emulation.truth().faults}
    irregular = [t.iteration for t in emulation.truth().iterations if t.irregular]
    [incident] = _incidents(emulation, irregular)
    assert str(incident.cause) == "compute"
    assert devices <= {s.device for s in incident.suspects if s.kind == "gpu"}

