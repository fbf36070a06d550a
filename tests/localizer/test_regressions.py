"""Named regression scenarios: each rule of the localizer that a benchmark seed once showed was
needed, reproduced on an emulated job small enough for every run (128 GPUs, 30 to 100 iterations)
or on a hand-made series of iteration times. Two more, from the attribution's cases, are in
``test_attributed.py`` (``*_regression_seed_7``, ``*_regression_seed_23``).

The emulated scenarios are one slow NIC whose step of a few percent never trips δ beside one GPU
hiccup that is the only δ-irregular iteration (the hiccup alone must not be the answer), and the
nonhw suite's uneven batches (sequence-length imbalance)."""

from __future__ import annotations

import numpy as np
import pytest

from sleuth.layout import ParallelLayout
from sleuth.localizer import localize
from sleuth.localizer.shifts import level_shifts, persists
from sleuth.sim import Emulation, Fault, FaultKind, Scenario, Timing
from sleuth.topology import generate

_NIC = "nic:h0011/6"


def _nic_step_and_hiccup(*, slow: float, hiccup_at: int) -> Emulation:
    """128 GPUs (tp 4, pp 2, dp 16): the NIC slows by ``slow`` from iteration 10, and every random
    hiccup is off but one of 80 ms at ``hiccup_at``."""
    scenario = Scenario(
        topology=generate("fattree:hosts=16,gpus=8,pod=4,spines=4"),
        layout=ParallelLayout(128, 4, 2, 16),
        faults=(Fault(kind=FaultKind.NIC, device=_NIC, slow=slow, start=10),),
        iterations=30,
        timing=Timing(hiccup_rate=0.0, hiccup_ms=80.0, hiccups_at=(hiccup_at,)),
        seed=101,
    )
    return Emulation(scenario)


def _incident(emulation: Emulation):
    irregular = list(emulation.irregular_iterations())
    [incident] = localize(
        emulation, irregular_iterations=irregular, topology=emulation.scenario.topology, window=30, routing="static"
    )
    return irregular, incident


def test_a_nic_step_before_the_only_irregular_iteration_a_hiccup_is_searched_regression_seed_357():
    """The step before the onset is a persistent slowdown in the window: its iterations are
    searched and count toward the support rule, so the hiccup's GPU lacks support."""
    irregular, incident = _incident(_nic_step_and_hiccup(slow=2.0, hiccup_at=27))
    assert irregular == [27]  # the NIC's step never trips δ
    assert str(incident.cause) == "network"
    assert incident.suspects[0].device == _NIC


def test_a_nic_step_after_a_lone_early_hiccup_is_measured_from_the_level_before_it_regression_seed_371():
    """The hiccup at 4 is the only irregular iteration and its level comes back; the NIC's step at
    10 is segmented from the start of the window, not from the hiccup, so that the level it rises
    from has enough columns."""
    irregular, incident = _incident(_nic_step_and_hiccup(slow=2.5, hiccup_at=4))
    assert irregular == [4]
    assert _NIC in {s.device for s in incident.suspects[:2]}


def _gpu_step_after(earlier: tuple[Fault, ...], hiccups_at: tuple[int, ...]):
    """128 GPUs (tp 4, pp 2, dp 16): ``gpu:h0005/3`` 1.5x slower from iteration 20 of 40, after
    ``earlier`` faults and one 80 ms hiccup at each of ``hiccups_at`` (no random ones); seed 101.
    Returns its irregular iterations and its one incident."""
    from sleuth.whatif.attribution import attribute

    scenario = Scenario(
        topology=generate("fattree:hosts=16,gpus=8,pod=4,spines=4"),
        layout=ParallelLayout(128, 4, 2, 16),
        faults=(*earlier, Fault(kind=FaultKind.GPU, device="gpu:h0005/3", slow=1.5, start=20)),
        iterations=40,
        timing=Timing(hiccup_rate=0.0, hiccup_ms=80.0, hiccups_at=hiccups_at),
        seed=101,
    )
    emulation = Emulation(scenario)
    irregular = list(emulation.irregular_iterations())
    attribution = attribute(emulation.records(), emulation.job_spec(), iterations=emulation.iterations())
    [incident] = localize(emulation, irregular_iterations=irregular, topology=scenario.topology, window=40,
                          attribution=attribution)
    assert incident.suspects[0].device == "gpu:h0005/3"
    return irregular, incident


def test_a_hiccup_twelve_iterations_before_a_gpu_s_step_is_not_its_onset():
    """A pause and a GPU's step, both δ-irregular within one window, are searched as one cluster;
    the GPU's incident began at the pause (the real job's case: ``test_gloo_traces.py``). Here the
    pause is another rank's hiccup at 8. The GPU's own earlier turn at 8 stays in its incident."""
    irregular, incident = _gpu_step_after((), (8,))
    assert irregular[0] == 8 and 20 in irregular
    assert min(incident.iterations) == 20 and incident.incident == "sim-20-25", incident
    its_own = (Fault(kind=FaultKind.GPU, device="gpu:h0005/3", slow=3.0, start=8, end=9),)
    irregular, incident = _gpu_step_after(its_own, ())
    assert irregular[0] == 8 and min(incident.iterations) == 8, incident.iterations


def test_a_lone_onset_persists_on_a_pivot_noisier_than_the_job_regression_seed_318():
    """A 3% step against a pivot's noise of over a third of it reaches t of about 6 over 10
    columns each side: under ``level_shifts``' bar of 8, over the lower bar of a step at a known column."""
    rng = np.random.default_rng(1)
    times = np.r_[np.full(10, 100.0), 115.0, np.full(19, 103.0)] + rng.normal(0, 1.2, 30)
    healthy = np.arange(30) < 10
    shift = persists(times, at=10, reference=healthy, probe=10)
    assert shift is not None and shift.at == 10 and shift.since == 0
    assert shift.ratio == pytest.approx(1.03, abs=0.01)
    assert level_shifts(times, start=11) == []  # no step after the onset: the onset alone carries it


def _seqlen_on_its_slowest_iterations(seed: int) -> list:
    """``nonhw-seqlen`` of ``seed``, localized from its five slowest iterations after its start."""
    from sleuth.sim import suite
    from sleuth.whatif.attribution import attribute

    [scenario] = [s for s in suite("nonhw", seed=seed) if s.name == "nonhw-seqlen"]
    emulation = Emulation(scenario)
    slowest = emulation.slowest_iterations()
    attribution = attribute(emulation.records(), emulation.job_spec(), iterations=emulation.iterations())
    return localize(emulation, irregular_iterations=slowest, topology=scenario.topology, window=100,
                    attribution=attribution)


def test_uneven_batches_whose_search_finds_one_gpu_late_twice_are_the_data_regression_seed_1511():
    """Sequence-length imbalance under the slowdown line, searched on its five slowest iterations: a
    different replica computes longest in each, at every place, but the clusters' search found one
    rank late in two of them (sixteen replicas, five iterations: as likely as not). The replay of
    every rank reads the work moving, so no GPU is blamed."""
    incidents = _seqlen_on_its_slowest_iterations(1511)
    assert [(str(i.cause), i.suspects) for i in incidents] == [("seqlen_imbalance", ())]


def test_uneven_batches_whose_search_reads_mixed_are_the_data_regression_seed_2211():
    """The same, where the costly replica's late sends made the search read compute and network
    (mixed: a GPU, its host and two NICs); compute carries most of those iterations' S_t."""
    incidents = _seqlen_on_its_slowest_iterations(2211)
    assert [(str(i.cause), i.suspects) for i in incidents] == [("seqlen_imbalance", ())]


def test_a_moderate_nic_step_names_no_gpu_beside_it_regression_seed_2211():
    """A NIC twice as slow from iteration 20 (the job pays about 5%; no iteration δ-irregular),
    searched from its five slowest iterations too: the emulator's compute jitter carries a third of
    what the job pays, another rank the costliest in each iteration, so no GPU stands apart and the
    incident names the NIC's side alone (it listed two GPUs and a host after it)."""
    from sleuth.sim import suite
    from sleuth.whatif.attribution import attribute

    [scenario] = [s for s in suite("moderate", seed=2211) if s.name == "moderate-nic-2"]
    emulation = Emulation(scenario)
    slowest = emulation.slowest_iterations(since=20)
    attribution = attribute(emulation.records(), emulation.job_spec(), iterations=emulation.iterations())
    incidents = localize(emulation, irregular_iterations=slowest, topology=scenario.topology, window=100,
                         attribution=attribution, routing="static")
    [device] = [f["device"] for f in emulation.fault_truths()]
    assert incidents and all(str(i.cause) == "network" for i in incidents), incidents
    assert {i.suspects[0].device for i in incidents} == {device}
    assert not [s.device for i in incidents for s in i.suspects if s.device.startswith(("gpu:", "host:"))]


def test_a_fluctuating_nic_whose_two_turns_a_pause_joins_into_an_episode_is_the_nic_regression_seed_2911():
    """A NIC four times as slow two iterations in six from iteration 20: a pause in iteration 48
    joins its turns 44-45 and 50-51 into one sustained episode, whose transfers cost no more than
    those of the NIC's other turns, short runs outside it. Compared with those, the episode read as
    scattered pauses and replaced the irregular iterations' NIC incident; compared with the quiet
    iterations, under the line, its transfers pay more, the same ones each time: the NIC."""
    emulation, incidents = _from_its_irregular_iterations("types", "types-fluctuation-nic", seed=2911)
    [device] = [f["device"] for f in emulation.fault_truths()]
    assert [str(i.cause) for i in incidents] == ["network"], incidents
    assert device in [s.device for s in incidents[0].suspects[:2]], incidents


def test_a_fluctuating_nic_is_not_led_by_a_spine_from_an_episode_of_three_iterations_regression_seed_3111():
    """A NIC four times as slow in turns from iteration 20: its incident's search read 17 irregular
    iterations and named the NIC and its cable. The one sustained episode inside it paid in 3, whose
    what-if search also counted jitter's transfers through the NIC's spine and put that spine first;
    the search over more of the fault's iterations orders the suspects of a side."""
    emulation, incidents = _from_its_irregular_iterations("types", "types-fluctuation-nic", seed=3111)
    [device] = [f["device"] for f in emulation.fault_truths()]
    [network] = [i for i in incidents if str(i.cause) == "network"]
    assert device in [s.device for s in network.suspects[:2]], incidents


def test_a_gpu_masked_by_a_slower_one_is_named_beside_it_regression_seed_2911():
    """Two slow GPUs: x1.5 from iteration 20, x1.6 from 40 in another replica and stage. The job runs
    at the first one's pace throughout (482 ms with both as with the first alone), so S has no step
    at 40 and the worker slowdowns, replayed on the three slowest iterations (one of them after 40),
    named the first alone. The second is the costliest rank of most iterations, far beyond chance:
    replayed on its own slowest ones, it is named beside the first."""
    emulation, incidents = _from_its_irregular_iterations("concurrent", "concurrent-gpu-gpu", seed=2911)
    devices = {f["device"] for f in emulation.fault_truths()}
    assert [str(i.cause) for i in incidents] == ["compute"], incidents
    assert {s.device for s in incidents[0].suspects[:2]} == devices, incidents


def _from_its_irregular_iterations(suite_name: str, name: str, *, seed: int) -> tuple[Emulation, list]:
    """The scenario ``name`` of ``suite_name``, localized from the iterations its emulator marks
    irregular and its attribution, as ``bench_localizer.py`` does."""
    from sleuth.sim import suite
    from sleuth.whatif.attribution import attribute

    [scenario] = [s for s in suite(suite_name, seed=seed) if s.name == name]
    emulation = Emulation(scenario)
    irregular = list(emulation.irregular_iterations())
    attribution = attribute(emulation.records(), emulation.job_spec(), iterations=emulation.iterations())
    return emulation, localize(emulation, irregular_iterations=irregular, topology=scenario.topology, window=100,
                               attribution=attribution, routing=scenario.routing)


def test_a_hiccup_in_a_job_paying_for_its_uneven_split_names_no_gpu_regression_seed_5832():
    """A pp8 job whose last stage costs every iteration 7.6% (the output layer and loss) and one
    pause in iteration 12: every iteration's S stood over the 1.05 line, so the pause sat in a
    sustained run and its irregular iteration's incident named a GPU. The split is the same in
    every iteration; the pause is a hiccup of the stragglers' part of S."""
    from sleuth.whatif.attribution import attribute

    scenario = Scenario(topology=generate("fattree:hosts=32,gpus=8,pod=4,spines=4"), layout=ParallelLayout(256, 4, 8, 8),
                        seed=5832, iterations=30, job="hiccup-split", timing=Timing(hiccup_rate=0.0, hiccups_at=(12,)))
    emulation = Emulation(scenario)
    attribution = attribute(emulation.records(), emulation.job_spec(), iterations=emulation.iterations())
    assert attribution.split_slowdown > 1.05 and list(emulation.irregular_iterations()) == [12]
    incidents = localize(emulation, irregular_iterations=[12], topology=scenario.topology, window=30,
                         attribution=attribution, routing=scenario.routing)
    assert [str(i.cause) for i in incidents] == ["stage_imbalance"]
    assert not any(i.suspects for i in incidents)


def test_a_nic_costing_under_the_line_beside_a_split_over_it_is_named_regression_seeds_5901_5904():
    """A pp8 job paying 7.6% for its split, and from iteration 10 a NIC at a third of its bandwidth
    that trips δ in no iteration and costs too little for the run to be cut where it began: only the
    split's part stood over the line on its own, so its incident alone opened and the NIC went
    unnamed (so at 8,192 GPUs on held-out seeds 5901 and 5904), where a split a little smaller would
    have left the NIC in the whole episode, searched."""
    from sleuth.localizer.attributed import Part, episodes
    from sleuth.whatif.attribution import attribute

    topology = generate("fattree:hosts=32,gpus=8,pod=4,spines=4")
    scenario = Scenario(topology=topology, layout=ParallelLayout(256, 4, 8, 8), seed=5910, iterations=30, job="nic-split",
                        faults=(Fault(kind=FaultKind.NIC, device="nic:h0005/1", slow=3.0, start=10),))
    emulation = Emulation(scenario)
    attribution = attribute(emulation.records(), emulation.job_spec(), iterations=emulation.iterations())
    [episode] = episodes(attribution, slowdown=1.05, sustain=3)[0]
    assert Part.SPLIT.slowdown(attribution, episode.iterations) > 1.05 > Part.STRAGGLERS.slowdown(attribution, episode.iterations)
    assert list(emulation.irregular_iterations()) == []
    incidents = localize(emulation, irregular_iterations=[], topology=topology, window=30, attribution=attribution,
                         routing=scenario.routing)
    assert [(str(i.cause), i.suspects[0].device if i.suspects else None) for i in incidents] == [
        ("stage_imbalance", None), ("network", "nic:h0005/1")]


def test_a_nic_failing_after_the_gpu_s_irregular_iterations_stays_listed_regression_seed_5854():
    """A GPU at x1.2 from iteration 10 (two δ-irregular iterations, 10 and 11), then a NIC at half
    its bandwidth from iteration 30 (2% more, no step): the episode's what-if search names the NIC,
    its transfers persistent over the episode, and the cluster's incident dropped it again because
    its own two iterations, before the NIC slowed, showed the transfers as jitter."""
    from sleuth.sim import suite
    from sleuth.whatif.attribution import attribute

    [scenario] = suite("two-moderate", seed=5854)
    emulation = Emulation(scenario)
    gpu, nic = (f.device for f in scenario.faults)
    attribution = attribute(emulation.records(), emulation.job_spec(), iterations=emulation.iterations())
    irregular = list(emulation.irregular_iterations())
    assert irregular == [10, 11]
    [incident] = localize(emulation, irregular_iterations=irregular, topology=scenario.topology, window=100,
                          attribution=attribution, routing=scenario.routing)
    devices = [s.device for s in incident.suspects]
    assert devices[0] == gpu
    assert nic in [s.device for s in incident.suspects if not s.device.startswith(("gpu:", "host:"))][:2]


def test_transfer_jitter_of_a_noisy_fault_free_run_names_no_nvswitch_regression_seed_5959():
    """A fault-free run on noisy hosts (tp4, dp16), none of its iterations δ-irregular, its slowest
    searched as the benchmark does then: all-reduces through host 0's NVSwitch ran long in a few
    whose transfers cost the job well under the line there, and their cluster, outside every episode,
    named the NVSwitch (``attributed.uncharged_device``)."""
    from sleuth.sim import suite
    from sleuth.whatif.attribution import attribute

    [scenario] = [s for s in suite("random-noisy", seed=5959) if s.name == "noisy-22-none-tp4-pp1-dp16"]
    emulation = Emulation(scenario)
    assert not emulation.truth().faults and not list(emulation.irregular_iterations())
    assert emulation.slowest_iterations() == [6, 11, 17, 26, 32]
    attribution = attribute(emulation.records(), emulation.job_spec(), iterations=emulation.iterations())
    incidents = localize(emulation, irregular_iterations=[6, 11, 17, 26, 32], topology=scenario.topology,
                         window=scenario.iterations, attribution=attribution, routing=scenario.routing)
    assert not [i for i in incidents if i.suspects], incidents


def test_transfer_jitter_of_a_noisy_fault_free_run_paid_in_no_iteration_names_no_nic_regression_seed_5965():
    """A fault-free run on noisy hosts (tp8, dp8) whose slowest iterations, searched, found one rail's
    all-reduces long: no iteration's stragglers cost it the line (S 1.006), and the replay measures
    transfers from their members' starts, so that cluster's transfers were jitter
    (``attributed.uncharged_device``); it named the rail's NICs."""
    from sleuth.sim import suite
    from sleuth.whatif.attribution import attribute

    [scenario] = [s for s in suite("random-noisy", seed=5965) if s.name == "noisy-10-none-tp8-pp1-dp8"]
    emulation = Emulation(scenario)
    assert not emulation.truth().faults and not list(emulation.irregular_iterations())
    slowest = emulation.slowest_iterations()
    assert slowest == [5, 22, 33, 35, 39]
    attribution = attribute(emulation.records(), emulation.job_spec(), iterations=emulation.iterations())
    assert attribution.slowdown < 1.01
    incidents = localize(emulation, irregular_iterations=slowest, topology=scenario.topology,
                         window=scenario.iterations, attribution=attribution, routing=scenario.routing)
    assert not [i for i in incidents if i.suspects], incidents
