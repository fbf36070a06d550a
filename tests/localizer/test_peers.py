"""Broken GPUs against sequence-length imbalance (issue 6): a broken GPU is steadily slow from its
fault on, a replica that drew long documents is slow only in the iterations it drew them; two
slow GPUs in one data-parallel group are two GPUs, not slowness moving between replicas; a rank
slow now and then, with peers slow at other times, is still sequence-length imbalance."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np
import pytest

from sleuth.layout import ParallelLayout
from sleuth.localizer import build_graph, localize
from sleuth.localizer.nonhardware import Straggler, classify
from sleuth.localizer.peers import PeerShare, is_steady
from sleuth.jobspec import JobSpec
from sleuth.sim import Emulation, suite


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
    devices = {f["device"] for f in emulation.fault_truths()}
    irregular = list(emulation.irregular_iterations())
    [incident] = _incidents(emulation, irregular)
    assert str(incident.cause) == "compute"
    assert devices <= {s.device for s in incident.suspects if s.kind == "gpu"}



def test_late_ranks_that_move_between_iterations_are_seqlen_and_a_recurring_one_is_hardware():
    graph = build_graph(JobSpec.from_layout("j", ParallelLayout(64, 4, 2, 8)))
    # One long-document iteration carries nearly all the evidence; the other iterations found
    # their late ranks elsewhere (other hosts, other replicas).
    compute = {5: 3.0, 13: 0.1, 22: 0.0, 41: 0.05}
    moving = {5: {40}, 13: {33}, 22: {39}, 41: {82}}
    # Its peers were as slow as it at some other time, none of them nearly as often (80th percentile).
    peers = {r: PeerShare(together=0.0, anytime=0.0, steady=False, ever=0.75) for r in compute}
    diagnosis = classify(compute, graph=graph, late=moving, shared=peers)
    assert diagnosis.kind is Straggler.SEQLEN_IMBALANCE and diagnosis.one_off_share > 0.9
    assert "sequence" in diagnosis.advice.lower()
    # Only slowness that stands out of the rank's own noise counts.
    assert classify(compute, graph=graph, late=moving, shared=peers, outstanding={13}).kind is Straggler.HARDWARE
    # A pause on one rank: its peers never that slow.
    alone = {r: PeerShare(ever=0.25) for r in compute}
    assert classify(compute, graph=graph, late=moving, shared=alone).kind is Straggler.HARDWARE
    recurring = {5: {33, 40, 76}, 13: {39}, 41: {82}}  # the same GPU late again and again: broken
    assert classify(compute, graph=graph, late=recurring, shared=peers).kind is Straggler.HARDWARE
    # A contended host: its GPUs take turns being the late one, the host recurs.
    host = {8: 1.0, 9: 1.0, 10: 1.0}
    turns = {8: {20}, 9: {31}, 10: {47}}
    assert classify(host, graph=graph, late=turns, shared={r: peers[5] for r in host}).kind is Straggler.HARDWARE
    # Too little movement to tell: one iteration, or two hosts.
    assert classify({5: 3.0}, graph=graph, late={5: {40}}, shared=peers).kind is Straggler.HARDWARE
    assert classify({5: 3.0, 13: 0.1}, graph=graph, late={5: {40}, 13: {33}}, shared=peers).kind is Straggler.HARDWARE


def test_a_last_stage_slow_together_now_and_then_is_not_stage_imbalance_but_steadily_is():
    graph = build_graph(JobSpec.from_layout("j", ParallelLayout(64, 4, 2, 8)))
    compute = {32: 1.0}
    now_and_then = PeerShare(together=0.75, anytime=1.0, steady=False)  # replicas that drew long documents at once
    assert classify(compute, graph=graph, shared={32: now_and_then}).kind is Straggler.SEQLEN_IMBALANCE
    persistent = PeerShare(together=1.0, anytime=0.0, steady=True)
    assert classify(compute, graph=graph, shared={32: persistent}).kind is Straggler.STAGE_IMBALANCE


@lru_cache(maxsize=None)
def _suite_emulation(name: str, scenario: str, seed: int) -> Emulation:
    [found] = [s for s in suite(name, seed=seed) if s.name == scenario]
    return Emulation(found)


# 201: where each late rank was found is the iteration searched; labelling roots with the
# iteration their operator ran in (the one before, for a delay from its end) read as a GPU.
@pytest.mark.parametrize("seed", [102, 103, 201])
def test_sequence_length_imbalance_is_reported_as_such_not_as_a_gpu(seed):
    emulation = _suite_emulation("nonhw", "nonhw-seqlen", seed)
    # No iteration of a sequence-length imbalance is δ-irregular: the slowest after it starts.
    [incident] = _incidents(emulation, emulation.slowest_iterations())
    assert str(incident.cause) == "seqlen_imbalance"
    assert not any(s.kind in ("gpu", "host") for s in incident.suspects)
    assert "sequence" in incident.advice.lower()


# 5879: six one-iteration spikes, two per window, whose ranks drowned in the other columns' noise.
@pytest.mark.parametrize("seed", [101, 103, 5879])
def test_a_gpu_that_only_spikes_is_still_a_broken_gpu(seed):
    emulation = _suite_emulation("types", "types-spike-gpu", seed)
    [gpu] = (f["device"] for f in emulation.fault_truths())
    irregular = list(emulation.irregular_iterations())
    [incident] = _incidents(emulation, irregular)
    assert str(incident.cause) == "compute"
    assert gpu in {s.device for s in incident.suspects}
