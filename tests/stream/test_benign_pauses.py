"""Benign pauses in the streaming localizer: judged once the iterations after them landed, never
before; a pause that recurs on its device, a fault that goes on, and a pause in the warmup page."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

from sleuth.localizer import localize
from sleuth.settings import Settings
from sleuth.sim import Emulation, Timing
from sleuth.storage.memory import MemoryPauseStore
from sleuth.stream.detection import irregular_iterations
from sleuth.stream.services.benign_pauses import judge, localized, settled_through

from .detection.conftest import scenario

SETTINGS = Settings()


def benign_pauses(incidents, source, settings, **judging) -> list[bool]:
    """Which of ``incidents`` ``judge`` holds back as benign pauses."""
    return [reading is None for reading in judge(incidents, source, settings, **judging)]


@cache
def judged(*faults: str, pause_at: tuple[int, ...] = ()):
    """An emulated 64-GPU job with only ``pause_at``'s pauses besides ``faults``, and the incidents of
    its δ-irregular iterations."""
    em = Emulation(scenario(*faults, timing=Timing(hiccup_rate=0.0, hiccups_at=pause_at), iterations=40))
    irregular = list(em.irregular_iterations())
    return em, localize(em, irregular_iterations=irregular, topology=em.scenario.topology, window=100)


def test_a_pause_is_benign_once_the_iterations_after_it_landed_and_not_before() -> None:
    em, incidents = judged(pause_at=(20,))
    [incident] = incidents
    assert incident.iterations == (20,)
    assert settled_through(20, SETTINGS) == 20 + SETTINGS.attribution_sustain
    for through in (None, 20, settled_through(20, SETTINGS) - 1):  # it might still go on: it pages
        assert benign_pauses(incidents, em, SETTINGS, through=through, named_elsewhere=set()) == [False]
    for through in (settled_through(20, SETTINGS), 39):
        assert benign_pauses(incidents, em, SETTINGS, through=through, named_elsewhere=set()) == [True]


def test_a_pause_whose_job_stopped_landing_records_is_judged_on_those_that_landed() -> None:
    """The iterations after a pause at the job's end never land: once the land timeout passed, it is
    judged on those that did, as the finished job is offline; a stall costing the job more than the
    slowdown line's share of the window (an iteration 14 times its length) still pages."""
    em, incidents = judged(pause_at=(20,))
    for through in (20, 21):
        assert benign_pauses(incidents, em, SETTINGS, through=through, named_elsewhere=set(), stopped=True) == [True]
    stalled, [stall] = judged("gpu:h0003/1,slow=30,start=20,end=21")
    assert stall.iterations[0] == 20
    assert benign_pauses([stall], stalled, SETTINGS, through=20, named_elsewhere=set(), stopped=True) == [False]


def test_a_pause_on_a_device_named_before_pages() -> None:
    em, [incident] = judged(pause_at=(20,))
    store = MemoryPauseStore()
    store.record(incident)
    [paused] = store.paused(em.scenario.job)
    assert (paused.first, paused.last, paused.top) == (20, 20, incident.suspects[0].device)
    assert benign_pauses([incident], em, SETTINGS, through=39, named_elsewhere={paused.top}) == [False]
    assert store.paused("another job") == []


def test_a_fault_that_goes_on_pages() -> None:
    em, incidents = judged("gpu:h0003/1,slow=1.5,start=20")
    assert incidents and incidents[0].suspects[0].device == "gpu:h0003/1"
    assert benign_pauses(incidents, em, SETTINGS, through=39, named_elsewhere=set()) == [False] * len(incidents)


def test_a_pause_in_the_warmup_pages_the_attribution_leaves_those_iterations_out() -> None:
    em, [incident] = judged(pause_at=(20,))
    warm = replace(SETTINGS, attribution_warmup=21)
    assert benign_pauses([incident], em, warm, through=39, named_elsewhere=set()) == [False]


def test_a_straggler_cause_the_stragglers_did_not_pay_for_is_recorded_not_paged() -> None:
    # The slowest iterations of a fault-free data-parallel run, read as uneven data by the search.
    from sleuth.layout import ParallelLayout
    from sleuth.sim.scenario import Scenario
    from sleuth.topology import Routing, generate

    topology = generate("fattree:hosts=16,gpus=8,pod=4,spines=4")
    em = Emulation(Scenario(topology=topology, layout=ParallelLayout(128, 2, 1, 64), iterations=40, seed=7001026,
                            routing=Routing.ECMP))
    [incident] = localize(em, irregular_iterations=em.slowest_iterations(since=5), topology=topology, window=100,
                          routing="ecmp")
    assert incident.cause.value == "seqlen_imbalance"
    # Judged with no warmup: one of its roots ran in the iteration before its first.
    assert benign_pauses([incident], em, replace(SETTINGS, attribution_warmup=0), through=39,
                         named_elsewhere=set()) == [True]


def test_pauses_striking_one_rank_then_another_every_few_steps_blame_no_gpu_as_offline() -> None:
    """A real 4-rank DDP job streamed through the stack whose ranks pause in turn every seventh step
    (``gloo_logger/ddp-gc-streamed``): its irregular steps' search named rank 0's GPU, which paused
    twice of six, and the streaming localizer raised it; offline, the attribution reads the pauses
    moving and names no GPU. Judged live on the same attribution, the same."""
    source, topology, _ = _real("ddp-gc-streamed")
    [incident] = localize(source, irregular_iterations=[17, 24, 31, 38, 45, 52], topology=topology, window=100)
    assert incident.suspects and incident.suspects[0].device.startswith("gpu:")  # the search alone blames one
    [reading] = judge([incident], source, SETTINGS, through=59, named_elsewhere=set())
    assert reading is not None and not reading.cause.hardware and not reading.suspects, reading


def test_steps_a_real_job_ran_long_on_every_rank_alike_page_no_gpu_though_a_later_episode_held_one() -> None:
    """A real 4-rank DDP job streamed through the stack whose costly batches move between its ranks
    (``gloo_logger/ddp-seqlen-streamed``): steps 43 and 44 ran long on every rank alike (the replay
    puts nothing back), and the search from them took its evidence from 53-57, a sustained episode of
    the batches' own, past the last landed step's settling (59), so it paged unjudged; 44 alone named
    rank 2's GPU from 44 itself. Kept between the episodes around it, as offline, and read as no
    straggler's, neither pages."""
    import numpy as np

    from sleuth.sources import MemorySource

    source, topology, through = _real("ddp-seqlen-streamed")
    spec, records, rows = source.job_spec(), source.ranks_records(None), source.iterations()
    # The search alone: the GPU paged as first found.
    [found] = localize(source, irregular_iterations=[43, 44], topology=topology, window=SETTINGS.localizer_window)
    assert found.suspects[0].device.startswith("gpu:")
    assert judge([found], source, SETTINGS, through=through, named_elsewhere=set()) == [found]
    for irregular in ([43, 44], [44]):
        judged = localized(source, irregular, topology=topology, settings=SETTINGS, through=through,
                           named_elsewhere=set())
        assert all(reading is None for _, reading in judged), judged
    # Before the later episode landed, its steps were none of the search's: the same.
    landed = MemorySource(spec, records.take(np.flatnonzero(records["iteration"] <= 50)),
                          rows.take(np.flatnonzero(rows["iteration"] <= 50)))
    judged = localized(landed, [43, 44], topology=topology, settings=SETTINGS, through=50, named_elsewhere=set())
    assert all(reading is None or not reading.cause.hardware for _, reading in judged), judged


def test_a_transfer_blip_inside_a_slow_gpus_episode_pages_no_switch() -> None:
    """A real 4-rank DDP job streamed through the stack whose rank 2 computed about three times as
    long from its first step (``gloo_logger/ddp-from0-streamed``): iteration 15's all-reduce ran long
    on every rank, and its search named the host's NVSwitch, which paged beside the slowdown watch's
    GPU. Transfers carried under a tenth of what the job paid there, compute the rest: offline the
    episode's GPU leads that cluster and its network side goes (``paid_sides``); live it is recorded,
    not paged."""
    source, topology, _ = _real("ddp-from0-streamed")
    [found] = localize(source, irregular_iterations=[15], topology=topology, window=SETTINGS.localizer_window)
    assert [s.device for s in found.suspects] == ["nvswitch:vm"]
    judged = localized(source, [15], topology=topology, settings=SETTINGS, through=59, named_elsewhere=set())
    assert [reading for _, reading in judged] == [None]


def _real(name: str, group: str = "gloo_logger"):
    """A real job's records folder under ``tests/localizer/<group>``: (source, topology, its last step)."""
    from pathlib import Path

    from sleuth.jobspec import JobSpec
    from sleuth.records_folder import read_records
    from sleuth.sources import MemorySource
    from sleuth.topology.job_fabric import single_leaf

    folder = Path(__file__).parents[1] / "localizer" / group / name
    spec = JobSpec.read(folder)
    records, rows = read_records(folder)
    return MemorySource(spec, records, rows), single_leaf(spec), int(rows["iteration"].max())


def test_a_mixed_incident_is_judged_on_the_side_its_steps_paid_for_as_offline() -> None:
    """A real DDP job whose rank 0 saves a checkpoint every 100 steps (``gloo_logger/ddp-ckpt100-2``):
    the search from its irregular steps 16-100 named the host's NVSwitch, then rank 2's GPU (mixed).
    Transfers carried under a tenth of what the job paid there: judged as offline reports it, on the
    GPU alone (``paid_sides``), which those steps' straggler cost was charged to under the line
    (``uncharged_device``): recorded, not paged. Judged whole, it paged both."""
    source, topology, last = _real("ddp-ckpt100-2")
    irregular = [i.iteration for i in irregular_iterations(source.iterations()) if 16 <= i.iteration <= 100]
    [(found, reading)] = localized(source, irregular, topology=topology, settings=SETTINGS, through=last,
                                   named_elsewhere=set())
    assert found.cause.value == "mixed" and {s.device for s in found.suspects} == {"nvswitch:vm", "gpu:vm/2"}
    assert reading is None


def test_a_hardware_incident_inside_episodes_read_as_moving_batches_is_read_as_they_are() -> None:
    """A real 8-rank job whose batches' cost moves between replicas (``loaded_gloo/train-seqlen``):
    the search from steps 19 and 26 named the host's NVSwitch, then two GPUs. Both sustained episodes
    it lies in (18-20, 24-28) read as sequence-length imbalance: offline the episodes' incidents
    replace it; live it is read as that, no device (and merges with the slowdown watch's)."""
    source, topology, last = _real("train-seqlen", "loaded_gloo")
    [(found, reading)] = localized(source, [19, 26], topology=topology, settings=SETTINGS, through=last,
                                   named_elsewhere=set(), stopped=True)
    assert found.cause.value == "network" and found.suspects[0].device == "nvswitch:vm"
    assert reading is not None and reading.cause.value == "seqlen_imbalance" and not reading.suspects


def test_transfer_jitter_inside_a_slow_gpus_episode_pages_no_switch_the_watch_names_the_gpu() -> None:
    """A real FSDP job on the loaded machine whose rank 2 computes 3 times as long from step 10
    (``loaded_gloo/fsdp-moderate``): the search from its irregular steps 13-29 named the host's
    NVSwitch, for all-gathers delayed in one step here and another there (under a tenth of what
    transfers ran long in carried by ones long in most steps). The episode it lies in reads as a
    device's: offline its what-if search names rank 2's GPU and the jitter's side goes; live the
    slowdown watch raises that, and this one is recorded, not paged."""
    source, topology, last = _real("fsdp-moderate", "loaded_gloo")
    irregular = [i.iteration for i in irregular_iterations(source.iterations()) if i.iteration >= 5]
    [(found, reading)] = localized(source, irregular, topology=topology, settings=SETTINGS, through=last,
                                   named_elsewhere=set(), stopped=True)
    assert [s.device for s in found.suspects] == ["nvswitch:vm"]
    assert reading is None


def test_a_gpu_a_device_episode_charged_nothing_pages_not_beside_the_watchs() -> None:
    """A real DDP job on an H200 whose rank 2 computes 4 times as long from step 50 of 150
    (``h200_ddp/fault``), its steps gathered at once as a 2-second job's are live: the search from
    a jitter spike at 29 named rank 1's GPU and the hosts' NICs, and, its clusters merged, so did
    the incident (rank 2's compute was its slots' baseline from 49 on). The job paid for compute
    there: trimmed to rank 1's GPU, which the episode's straggler cost was charged under the line
    of (rank 2 the costliest in every step). Recorded, not paged: the slowdown watch raises rank 2's."""
    source, topology, last = _real("fault", "h200_ddp")
    irregular = [i.iteration for i in irregular_iterations(source.iterations()) if i.iteration >= 5]
    [(found, reading)] = localized(source, irregular, topology=topology, settings=SETTINGS, through=last,
                                   named_elsewhere=set(), stopped=True)
    assert "gpu:node1/0" in {s.device for s in found.suspects}
    assert "gpu:node2/0" not in {s.device for s in found.suspects}
    assert reading is None


def test_a_cluster_read_as_uneven_batches_inside_an_episode_of_pauses_is_read_as_pauses_as_offline() -> None:
    """Pauses striking another rank each iteration (``paused_emulation``, seed 3): the irregular
    iterations' search reads them as uneven batches, the replay of every rank as pauses; judged live
    on that replay, the incident says what the episode it lies in reads, as offline."""
    from sleuth.sources import MemorySource
    from tests.sim.conftest import paused_emulation

    em = paused_emulation(seed=3, iterations=30)
    source = MemorySource(em.job_spec(), em.records(), em.iterations())
    irregular = [i for i in irregular_iterations(em.iterations()) if i.iteration >= SETTINGS.attribution_warmup]
    [incident] = localize(source, irregular_iterations=irregular, topology=em.scenario.topology, window=100)
    assert incident.cause.value == "seqlen_imbalance"
    [reading] = judge([incident], source, SETTINGS, through=29, named_elsewhere=set(), stopped=True)
    assert reading is not None and reading.cause.value == "scattered_pauses" and not reading.suspects, reading
