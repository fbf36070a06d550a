"""What-if attribution against the emulator's fault-free twin of each run (32 GPUs, tp4 pp2 dp4)."""

from __future__ import annotations

import threading
from dataclasses import replace
from functools import cache

import numpy as np
import pytest

from sleuth.errors import ConfigError, RecordError
from sleuth.layout import ParallelLayout
from sleuth.records import RecordBatch
from sleuth.sim import Emulation, Scenario, Timing, parse_fault, suite
from sleuth.topology import generate
from sleuth.whatif import attribution
from sleuth.whatif.attribution import COMPUTE, attribute, newest_slowdowns

from tests.sim.conftest import SMALL

GPU = "gpu:h0005/1,slow=1.5"  # ranks 20-23 are its tensor group (replica 1, stage 1)
NIC = "nic:h0002/0,slow=6"


@cache
def emulation(*faults: str, seed: int = 3, timing: Timing | None = None) -> Emulation:
    layout = ParallelLayout(32, 4, 2, 4, gpus_per_host=4)
    return Emulation(Scenario(topology=generate("fattree:hosts=8,gpus=4,pod=4,spines=2"), layout=layout, model=SMALL,
                              microbatches=4, iterations=12, faults=tuple(parse_fault(f) for f in faults), seed=seed,
                              job="attr", timing=timing or Timing()))


def truth_slowdown(em: Emulation) -> float:
    rows = em.truth().iterations
    return sum(r.time_ns for r in rows) / sum(r.balanced_ns for r in rows)


@cache
def attributed(*faults: str, timing: Timing | None = None):
    em = emulation(*faults, timing=timing)
    return attribute(em.records(), em.job_spec(), iterations=em.iterations())


def test_a_run_without_jitter_or_faults_pays_only_for_its_uneven_split() -> None:
    # The last stage also runs the output layer and loss: spread evenly, its work costs less (§5.2).
    result = attributed(timing=Timing.exact())
    assert result.slowdown > 1.0
    # S_t is measured iteration by iteration, S on the one timeline: the only type paying is S but for
    # the iterations' overlap, which changes little when only the split pays.
    assert result.by_type[COMPUTE] == pytest.approx(result.slowdown, rel=1e-3) and result.last_stage_share > 0.9
    assert all(s == pytest.approx(1.0, abs=1e-9) for t, s in result.by_type.items() if t != COMPUTE)


def _replica_replays(monkeypatch) -> list[int]:
    """Fills, as ``attribute`` runs, with the variants each replay of the replicas' S_w holds."""
    replayed: list[int] = []
    inside = [False]
    real_replicas, real_run = attribution._replicas, attribution._run_variants

    def counted_run(job, keep_gap, keep_transfer, chosen, carry=None):
        # The replicas' replays run on the calling thread; M_S's beside them on another, at any time.
        if inside[0] and threading.current_thread() is threading.main_thread():
            replayed.append(keep_gap.shape[1])
        return real_run(job, keep_gap, keep_transfer, chosen, carry)

    def watched_replicas(*args):
        inside[0] = True
        try:
            return real_replicas(*args)
        finally:
            inside[0] = False

    monkeypatch.setattr(attribution, "_run_variants", counted_run)
    monkeypatch.setattr(attribution, "_replicas", watched_replicas)
    return replayed


def test_a_job_paying_only_for_its_split_replays_one_replica_not_each(monkeypatch) -> None:
    # Keeping one replica's lengths gains at most what keeping every one does (about nothing here,
    # the split aside): that bound stops the replicas' replays after the first, however many there are.
    monkeypatch.setattr(attribution, "_BATCH_VALUES", 1)  # one replica per replay
    replayed = _replica_replays(monkeypatch)
    em = emulation("last_stage,slow=1.5", timing=Timing(hiccup_rate=0.0))  # jitter, no pause
    result = attribute(em.records(), em.job_spec(), iterations=em.iterations())
    assert result.split_slowdown > 1.05 and max(result.by_worker) < 1.01
    assert replayed == [1]  # of 4 replicas


def test_without_stages_a_run_without_jitter_or_faults_pays_nothing() -> None:
    em = emulation(timing=Timing.exact())
    result = attribute(em.records(), replace(em.job_spec(), layout=None), iterations=em.iterations())
    assert result.slowdown == pytest.approx(1.0, abs=1e-9)
    assert result.gpu_hours_lost == pytest.approx(0.0, abs=1e-12)
    assert all(s == pytest.approx(1.0, abs=1e-9) for s in result.by_type.values())


def test_an_uneven_split_is_paid_for_by_the_last_stage_and_blames_no_worker() -> None:
    fault = "last_stage,slow=1.5"
    result = attributed(fault)
    # Against an even split of the same work, as the emulator's balanced twin runs it.
    assert result.slowdown == pytest.approx(truth_slowdown(emulation(fault)), rel=0.05) and result.slowdown > 1.05
    assert result.split_slowdown == pytest.approx(result.slowdown, rel=0.01) and result.last_stage_share > 0.8
    assert max(result.by_type, key=result.by_type.get) == COMPUTE
    assert max(result.by_worker) < 1.01  # the split is the stage's, not a straggler's


def test_the_replay_as_recorded_matches_an_exact_run() -> None:
    result = attributed(GPU, timing=Timing.exact())
    assert result.fidelity == pytest.approx(1.0, abs=0.02)


@pytest.mark.parametrize("fault", [GPU, NIC])
def test_slowdown_is_within_five_percent_of_the_fault_free_twin(fault: str) -> None:
    result = attributed(fault)
    assert result.slowdown == pytest.approx(truth_slowdown(emulation(fault)), rel=0.05)
    assert result.slowdown > 1.1


@pytest.mark.parametrize("gpu", ["gpu:h0002/1", "gpu:h0004/1"])  # ranks 9 and 17: stages 1 and 2 of four
def test_a_slow_gpu_on_a_middle_stage_is_put_back_to_its_own_stages_work(gpu: str) -> None:
    # tp2 pp4 dp4: the two middle stages send and receive alike, so one sequence of operators, but
    # at each place one computes a forward where the other a backward: a program is a stage's.
    layout = ParallelLayout(32, 2, 4, 4, gpus_per_host=4)
    em = Emulation(Scenario(topology=generate("fattree:hosts=8,gpus=4,pod=4,spines=2"), layout=layout, model=SMALL,
                            microbatches=4, iterations=12, faults=(parse_fault(f"{gpu},slow=1.8"),), seed=3, job="pp4"))
    result = attribute(em.records(), em.job_spec(), iterations=em.iterations())
    assert result.slowdown == pytest.approx(truth_slowdown(em), rel=0.05)  # 1.11 against 1.21 with the stages mixed


def test_a_nic_slow_from_the_first_step_under_half_a_stage_s_rings_is_put_back_to_the_other_stages_rings() -> None:
    # tp2 pp4 dp8: each stage's slot holds two data-parallel rings, one behind the slow NIC, so the
    # slot's median is half slow; the first and last stages' rings carry the same volume.
    layout = ParallelLayout(64, 2, 4, 8, gpus_per_host=8)
    em = Emulation(Scenario(topology=generate("fattree:hosts=8,gpus=8,pod=2,spines=2"), layout=layout, model=SMALL,
                            microbatches=4, iterations=12, faults=(parse_fault("nic:h0001/0,slow=4"),), seed=3,
                            job="rings"))
    result = attribute(em.records(), em.job_spec(), iterations=em.iterations())
    assert truth_slowdown(em) > 1.1
    assert result.slowdown == pytest.approx(truth_slowdown(em), rel=0.05)
    assert max(result.by_type, key=result.by_type.get) == "dp.all_reduce"


@pytest.mark.parametrize(("shape", "nic"), [((2, 1, 16), "nic:h0001/1"), ((1, 2, 16), "nic:h0001/0")])
def test_a_nic_slow_from_the_first_step_under_one_of_two_rings_is_put_back_to_the_other(shape, nic) -> None:
    # tp2 pp1 (a ring per tensor rank) and tp1 pp2 (a ring per stage): two rings of one volume, one
    # behind the NIC in every step; a median of two is no reference, the faster one is. S read 1.00
    # against a truth of 1.5 before.
    tp, pp, dp = shape
    em = Emulation(Scenario(topology=generate("fattree:hosts=4,gpus=8,pod=2,spines=2"),
                            layout=ParallelLayout(32, tp, pp, dp, gpus_per_host=8), model=SMALL, microbatches=4,
                            iterations=12, faults=(parse_fault(f"{nic},slow=4"),), seed=11, job="pair"))
    result = attribute(em.records(), em.job_spec(), iterations=em.iterations())
    assert truth_slowdown(em) > 1.1
    assert result.slowdown == pytest.approx(truth_slowdown(em), rel=0.05)
    clean = Emulation(replace(em.scenario, faults=()))  # its jitter is no fault: what its twin says (pp2's split)
    assert attribute(clean.records(), clean.job_spec(), iterations=clean.iterations()).slowdown == pytest.approx(
        truth_slowdown(clean), rel=0.01)


def test_a_nic_slow_every_other_step_under_one_of_two_rings_is_measured_against_the_other_ring_s_jitter() -> None:
    # The slow ring's own spread over its iterations is the fault's (fast, slow, fast, ...): judged
    # against the larger of the two rings' spreads, no step of it was beyond (S 1.00 against 1.27
    # on the random suite's random-5-link-tp2-pp1-dp64, seed 5947).
    em = Emulation(Scenario(topology=generate("fattree:hosts=4,gpus=8,pod=2,spines=2"),
                            layout=ParallelLayout(32, 2, 1, 16, gpus_per_host=8), model=SMALL, microbatches=4,
                            iterations=16, seed=11, job="flapping",
                            faults=(parse_fault("nic:h0001/1,slow=6,profile=fluctuation,period=4,duty=2"),)))
    result = attribute(em.records(), em.job_spec(), iterations=em.iterations())
    assert truth_slowdown(em) > 1.1
    assert result.slowdown == pytest.approx(truth_slowdown(em), rel=0.05)
    assert max(result.by_type, key=result.by_type.get) == "dp.all_reduce"


@pytest.mark.parametrize("spine", ["spine:s0", "spine:s3"])
def test_a_spine_slow_from_the_first_step_under_most_rings_is_put_back_to_the_rings_it_missed(spine) -> None:
    # tp8 pp1 dp8: a ring per rail, each hashing its cross-pod hops onto the spines: most of the eight
    # cross the slow spine, a few miss it. The slowed rings are the majority of the peers, so their
    # median is slow: the rings the spine missed are the fabric's pace (S read 1.00 against 1.22).
    em = Emulation(Scenario(topology=generate("fattree:hosts=8,gpus=8,pod=2,spines=4"),
                            layout=ParallelLayout(64, 8, 1, 8, gpus_per_host=8), model=SMALL, microbatches=4,
                            iterations=12, faults=(parse_fault(f"{spine},slow=4"),), seed=3, job="spine"))
    result = attribute(em.records(), em.job_spec(), iterations=em.iterations())
    assert truth_slowdown(em) > 1.1
    assert result.slowdown == pytest.approx(truth_slowdown(em), rel=0.05)
    assert max(result.by_type, key=result.by_type.get) == "dp.all_reduce"
    clean = Emulation(replace(em.scenario, faults=()))  # rings at one level: none put back
    assert attribute(clean.records(), clean.job_spec(), iterations=clean.iterations()).slowdown == pytest.approx(
        truth_slowdown(clean), rel=0.01)


def test_transfers_within_one_host_are_no_peers_of_the_same_transfers_across_two() -> None:
    # tp1 pp2 dp6 on hosts of 8 GPUs: stage 0's ring runs on host 0 (NVLink), stage 1's across both
    # hosts (their NICs), and so do half of the pipeline's pairs: a fault-free run, whose
    # NIC-crossing transfers were put back to NVLink's pace (S 1.115 against 1.040).
    em = Emulation(Scenario(topology=generate("fattree:hosts=2,gpus=8,pod=2,spines=2"),
                            layout=ParallelLayout(12, 1, 2, 6, gpus_per_host=8), model=SMALL, microbatches=4,
                            iterations=16, seed=3, job="uneven"))
    result = attribute(em.records(), em.job_spec(), iterations=em.iterations())
    assert result.slowdown == pytest.approx(truth_slowdown(em), rel=0.02)
    assert all(result.by_type[kind] < 1.01 for kind in ("dp.all_reduce", "embd.all_reduce", "pp.send_recv"))


def test_a_slow_gpu_is_a_compute_straggler_of_its_own_worker() -> None:
    result = attributed(GPU)
    assert max(result.by_type, key=result.by_type.get) == COMPUTE
    faulty = emulation(GPU).ranks_on("gpu:h0005/1")
    top = [rank for rank, _ in result.top_workers(4)]
    assert set(faulty.tolist()) <= set(top) and result.worker_unit == "replica x stage"
    # Fixing its worker (the top 3%: one rank of 32) explains most of what the job pays.
    assert result.worker_share > 0.5 and result.host_share >= result.worker_share - 1e-9  # its host holds it
    assert result.gpu_hours_lost == pytest.approx((1 - 1 / result.slowdown) * result.wall_ns * 32 / 3.6e12)


def test_a_stretch_of_the_job_is_measured_against_the_peers_of_every_iteration() -> None:
    # Two GPUs on different replicas, each slow in half the run: the whole job names the costlier.
    first, second = "gpu:h0001/2,slow=1.4,end=6", "gpu:h0006/1,slow=2,start=6"
    whole = attributed(first, second)
    em = emulation(first, second)
    early, late = whole.over(range(0, 6)), whole.over(range(6, 12))
    assert not set(em.ranks_on("gpu:h0001/2").tolist()) & {r for r, _ in whole.top_workers(4)}
    assert set(em.ranks_on("gpu:h0001/2").tolist()) <= {r for r, _ in early.top_workers(4)}
    assert set(em.ranks_on("gpu:h0006/1").tolist()) <= {r for r, _ in late.top_workers(4)}
    # Its iterations' S are the whole job's: every operator is put back to the same peers.
    assert early.per_iteration == pytest.approx(whole.per_iteration[:6]) and early.iterations == whole.iterations[:6]
    assert sum(early.by_type_ns.sum(axis=0)) > 0 and early.wall_ns < whole.wall_ns
    with pytest.raises(ConfigError, match="none of those iterations"):
        whole.over([40, 41])


def test_a_gpu_slower_by_less_than_the_jitter_runs_most_of_its_gaps_above_its_peers_median_not_beyond_their_spread() -> None:
    # Each compute step's jitter (sigma 0.3) is wider than the GPU's 1.3x: few of its gaps are beyond
    # the spread, but most are above the median, which the others' are half the time.
    em = emulation("gpu:h0005/1,slow=1.3", timing=Timing(compute_jitter=0.3))
    found = attribute(em.records(), em.job_spec(), iterations=em.iterations())
    [rank] = em.ranks_on("gpu:h0005/1").tolist()
    sides, persistent = found.gaps_above_median, found.persistent_compute
    assert sides is not None and persistent is not None
    assert (sides[:, rank, 1] > 0).all() and (sides[:, rank, 0] >= 0.7 * sides[:, rank, 1]).all()
    assert persistent[:, rank].mean() < 0.5
    others = np.delete(sides, rank, axis=1)
    assert 0.4 < others[..., 0].sum() / others[..., 1].sum() < 0.6


def test_a_slow_nic_is_a_data_parallel_transfer_straggler() -> None:
    result = attributed(NIC)
    worst = max(result.by_type, key=result.by_type.get)
    assert worst.startswith("dp.") and result.by_type[COMPUTE] < result.by_type[worst]


def test_a_slow_nics_transfers_run_long_every_step_and_jitters_in_scattered_ones() -> None:
    slow_nic = attributed(NIC)
    assert slow_nic.persistent_transfers(slow_nic.iterations, most=0.5) > 0.9
    jittery = attributed(timing=Timing(comm_jitter=0.3))
    assert jittery.slowdown > 1.05 and jittery.persistent_transfers(jittery.iterations, most=0.5) < 0.1


def test_without_a_layout_each_rank_is_a_worker() -> None:
    em = emulation(GPU)
    spec = replace(em.job_spec(), layout=None)
    result = attribute(em.records(iterations=range(4)), spec)
    assert result.worker_unit == "rank"
    assert int(np.argmax(result.by_worker)) in em.ranks_on("gpu:h0005/1").tolist()


def test_bad_input_is_refused_with_a_reason() -> None:
    em = emulation()
    records = em.records(iterations=[0])
    with pytest.raises(RecordError, match="no records with a known iteration"):
        attribute(RecordBatch.empty(), em.job_spec())
    with pytest.raises(RecordError, match="outside the job's world"):
        attribute(records, replace(em.job_spec(), world=8, layout=None, placements=em.job_spec().placements[:8],
                                   communicators=()))
    with pytest.raises(ConfigError, match="worker_iterations"):
        attribute(records, em.job_spec(), worker_iterations=0)
    with pytest.raises(ConfigError, match="top_workers"):
        attribute(records, em.job_spec(), top_workers=0.0)


def test_records_whose_order_contradicts_their_groups_are_refused() -> None:
    # Rank 0 runs all-reduce A then B, rank 1 B then A (skewed clocks): no replay can order them.
    from sleuth.jobspec import JobSpec
    from sleuth.records import OpKind

    spec = JobSpec.from_layout("skewed", ParallelLayout(2, 2, 1, 1, gpus_per_host=2))
    records = RecordBatch.from_columns(
        job="skewed", rank=[0, 0, 1, 1], comm="tp.0", seq=[0, 1, 1, 0], op=[int(OpKind.ALL_REDUCE)] * 4,
        peer=[-1] * 4, nbytes=[8] * 4, iteration=[0] * 4, t_issue_ns=[0, 20, 0, 20], t_start_ns=[0, 20, 0, 20],
        t_end_ns=[10, 30, 10, 30],
    )
    with pytest.raises(RecordError, match="contradicts"):
        attribute(records, spec)


def test_a_job_on_one_host_names_no_host() -> None:
    # Fixing the one host that holds every rank fixes the whole job, whatever the cause: no evidence for a host.
    from sleuth.jobspec import RankPlacement

    em = emulation(GPU)
    spec = em.job_spec()
    one_host = replace(spec, placements=tuple(RankPlacement(p.rank, "h0000", p.rank) for p in spec.placements))
    spread = attributed(GPU)
    together = attribute(em.records(), one_host, iterations=em.iterations())
    assert spread.host_share > 0.5 and together.host_share == 0.0
    assert together.worker_share == pytest.approx(spread.worker_share)


def span(em: Emulation, first: int, last: int):
    """The records and iteration rows of iterations [first, last]."""
    return em.records(iterations=range(first, last + 1)), em.iterations(iterations=range(first, last + 1))


@pytest.mark.parametrize("faults", [(GPU,), (NIC,), ()])
def test_the_newest_iterations_slowdown_from_the_earlier_ones_history_is_the_whole_windows(faults) -> None:
    # The streaming localizer replays only the iteration that landed; its peers across iterations
    # (a transfer's other iterations, a stage's work) come from what the earlier ones left.
    em = emulation(*faults)
    spec = em.job_spec()

    first, first_rows = span(em, 0, 7)
    _, _, history = newest_slowdowns(first, spec, iterations=first_rows)
    for newest in range(8, 12):
        new, new_rows = span(em, newest, newest)
        steps, slowdowns, left = newest_slowdowns(new, spec, iterations=new_rows,
                                                  history=[history[i] for i in range(newest - 8, newest)])
        history.update(left)
        window_records, window_rows = span(em, newest - 8, newest)
        window_steps, window, _ = newest_slowdowns(window_records, spec, iterations=window_rows)
        assert steps.tolist() == [newest] and set(left) == {newest}
        # The window's replay opens its first iteration with every rank at 0, the stream's goes on
        # from the one before: the same where the window starts the run, within the stagger after.
        rel = 1e-12 if newest == 8 else 5e-3
        assert slowdowns[0] == pytest.approx(window[window_steps.tolist().index(newest)], rel=rel)


@pytest.mark.parametrize("faults", [(GPU,), (NIC,), ()])
def test_an_episodes_attribution_gives_its_newest_iteration_the_slowdown_and_history_measuring_it_alone_gives(faults) -> None:
    # A streaming round that opens an episode attributes it and measures its newest iteration from
    # one preparation: the newest one's peers are the same either way (all the others are earlier).
    em = emulation(*faults)
    spec = em.job_spec()

    def measured(first: int, last: int, history: dict) -> tuple[np.ndarray, dict]:
        part, part_rows = span(em, first, last)
        _, slowdowns, left = newest_slowdowns(part, spec, iterations=part_rows, history=list(history.values()))
        return slowdowns, left

    history = measured(0, 8, {})[1]
    earlier = list(history.values())
    history |= measured(9, 10, history)[1]
    [alone], alone_left = measured(11, 11, history)
    episode, episode_rows = span(em, 9, 11)
    together, lefts = attribution.attribute_and_leave(episode, spec, iterations=episode_rows, history=earlier)
    assert together.iterations == (9, 10, 11) and set(lefts) == {11}
    left = lefts[11]
    assert together.per_iteration[-1] == alone  # to the bit
    assert np.array_equal(left.keys, alone_left[11].keys) and np.array_equal(left.transfer, alone_left[11].transfer)
    assert (left.stage_work is None) == (alone_left[11].stage_work is None)
    if left.stage_work is not None:
        assert np.array_equal(left.stage_work, alone_left[11].stage_work, equal_nan=True)
    assert together.per_iteration == attribute(episode, spec, iterations=episode_rows, history=earlier).per_iteration


@pytest.mark.parametrize("faults", [(GPU,), (NIC,)])
def test_an_episodes_attribution_gives_its_newest_iterations_the_slowdowns_and_history_measuring_it_gives(faults) -> None:
    # A localizer a few iterations behind measures all that landed within the analysis they open:
    # their peers are the episode's records and the history before it, either way.
    em = emulation(*faults)
    spec = em.job_spec()
    before, before_rows = span(em, 0, 8)
    _, _, history = newest_slowdowns(before, spec, iterations=before_rows)
    earlier = [history[i] for i in range(9)]
    episode, episode_rows = span(em, 9, 11)
    steps, alone, alone_left = newest_slowdowns(episode, spec, iterations=episode_rows, history=earlier)
    together, lefts = attribution.attribute_and_leave(episode, spec, iterations=episode_rows, history=earlier, newest=2)
    assert steps.tolist() == [9, 10, 11] and set(lefts) == {10, 11}
    assert together.per_iteration == tuple(alone.tolist())  # to the bit
    for it in (10, 11):
        assert np.array_equal(lefts[it].keys, alone_left[it].keys)
        assert np.array_equal(lefts[it].transfer, alone_left[it].transfer)


def test_a_slow_gpu_among_many_replicas_is_found_with_one_replay_of_groups_not_one_per_replica(monkeypatch) -> None:
    # Keeping a group of replicas' lengths bounds each member's slowdown (replays grow with the lengths
    # kept): after the likeliest replicas, the groups that pay nothing drop out whole.
    layout = ParallelLayout(128, 4, 2, 16, gpus_per_host=4)
    em = Emulation(Scenario(topology=generate("fattree:hosts=32,gpus=4,pod=4,spines=2"), layout=layout, model=SMALL,
                            microbatches=4, iterations=8, faults=(parse_fault("gpu:h0005/1,slow=1.5"),), seed=3,
                            job="attr", timing=Timing(compute_jitter=0.1, comm_jitter=0.1, hiccup_rate=0.0)))
    monkeypatch.setattr(attribution, "_BATCH_VALUES", 1)  # batches of two replicas: the top eighth of sixteen
    replayed = _replica_replays(monkeypatch)
    spec = em.job_spec()
    result = attribute(em.records(), spec, iterations=em.iterations(), top_workers=0.125)
    slow = next(r for r, p in enumerate(spec.placements) if (p.host, p.gpu) == ("h0005", 1))
    assert result.by_worker[slow] == max(result.by_worker) > 1.05
    # The two likeliest replicas, then the rest in two groups, which pay nothing: not eight batches of two.
    assert replayed == [2, 2], replayed


def test_a_transfer_that_steps_up_with_its_message_size_is_not_put_back_to_its_smaller_self() -> None:
    # A spine slowed from iteration 20 on slows the job's one data-parallel ring: only each transfer's
    # own level before the step shows its length. The same records with those messages grown from
    # iteration 20 are a job whose messages grew: nothing of the same size was shorter. (With rings
    # beside it that the spine's hashed hops missed, those would be shorter at the same size.)
    em = Emulation(Scenario(topology=generate("fattree:hosts=4,gpus=8,pod=2,spines=2"),
                            layout=ParallelLayout(32, 1, 1, 32, gpus_per_host=8), model=SMALL, microbatches=4,
                            iterations=40, faults=(parse_fault("spine:s0,slow=4,start=20"),), seed=7, job="grown"))
    records = em.records()
    stepped = attribute(records, em.job_spec(), iterations=em.iterations())
    dp = np.array([name.startswith("dp.") for name in records.strings])[records["comm"]]
    columns = dict(records.columns)
    columns["nbytes"] = np.where(dp & (records["iteration"] >= 20), 2 * records["nbytes"], records["nbytes"])
    grown = attribute(RecordBatch(columns, records.strings), em.job_spec(), iterations=em.iterations())
    assert stepped.by_type["dp.all_reduce"] > 1.1, stepped.by_type
    assert grown.by_type["dp.all_reduce"] < 1.01, grown.by_type


@pytest.mark.parametrize("width", [1, 3, 8, 17])
def test_a_masks_rows_moved_as_bytes_are_its_fancy_indexed_rows(width: int) -> None:
    rng = np.random.default_rng(width)
    mask = rng.random((1000, width)) < 0.3
    rows = rng.permutation(1000)[:700]
    one_row = np.broadcast_to(mask[0], mask.shape)  # what _every_operator makes
    for laid_out in (mask, np.asfortranarray(mask), mask[::-1], one_row):
        assert np.array_equal(attribution._mask_rows(laid_out, rows), laid_out[rows])
    assert attribution._mask_rows(mask, rows[:0]).shape == (0, width)


def test_a_slow_nic_staggering_a_pp8_job_s_stages_costs_what_its_twin_says_regression_seed_5817() -> None:
    # The NIC's rank runs into each next iteration late while the other stages go on: replaying each
    # iteration from a common start counted that overlap again every iteration (S 1.178 for 1.132).
    scenario = Scenario(topology=generate("fattree:hosts=32,gpus=8,pod=4,spines=4"), layout=ParallelLayout(256, 4, 8, 8),
                        faults=(parse_fault("nic:h0024/2,slow=8,start=10"),), seed=5817, iterations=30, job="stagger")
    em = Emulation(scenario)
    found = attribute(em.records(), em.job_spec(), iterations=em.iterations())
    assert found.fidelity == pytest.approx(1.0, abs=0.01)  # the replay as recorded lasts what the job did
    assert found.slowdown == pytest.approx(truth_slowdown(em), rel=0.01)


def test_sequence_length_skew_is_spread_over_the_replicas_as_its_balanced_twin_spreads_it() -> None:
    # Costly micro-batches lengthen every gap their replica runs on them, mostly within each gap's
    # spread: the ideal evens each micro-batch's work over the replicas (What-if §5.3), so S per
    # iteration follows the twin without the skew (put-back alone: ~0.03 under it).
    [scenario] = [s for s in suite("nonhw", seed=1) if s.name == "nonhw-seqlen"]
    em = Emulation(scenario)
    result = attribute(em.records(), em.job_spec(), iterations=em.iterations())
    truth = np.array([r.time_ns / r.balanced_ns for r in em.truth().iterations])
    skewed = slice(scenario.faults[0].start, None)
    assert np.abs(np.asarray(result.per_iteration) - truth)[skewed].mean() < 0.012
    # Before the skew, only the stage split pays: jitter is not rebalanced.
    assert np.abs(np.asarray(result.per_iteration) - truth)[: scenario.faults[0].start].mean() < 0.006


@pytest.mark.parametrize("seed", [1, 2])
def test_a_contended_host_holding_half_of_a_stage_is_measured_against_the_stage_s_other_host(seed) -> None:
    # tp2 dp8 pp4 on hosts of 8 GPUs: each stage's 16 ranks on two hosts, four replicas each. The
    # slot's median is half slowed with h0001, so only the other host shows what the work takes.
    layout = ParallelLayout(64, 2, 4, 8)
    em = Emulation(Scenario(topology=generate("fattree:hosts=8,gpus=8,pod=4,spines=4"), layout=layout, iterations=24,
                            faults=(parse_fault("host:h0001,slow=1.5,start=8"),), seed=seed, job="half-stage"))
    result = attribute(em.records(), em.job_spec(), iterations=em.iterations())
    assert result.slowdown == pytest.approx(truth_slowdown(em), rel=0.02)
