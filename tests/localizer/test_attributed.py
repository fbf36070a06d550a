"""Incidents from what the job pays: episodes, non-hardware causes, and ``sleuth localize`` end to end."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from sleuth.cli import main
from sleuth.errors import ConfigError
from sleuth.localizer.attributed import Part, diagnose, diagnose_episode, episodes
from sleuth.localizer import localize
from sleuth.localizer.nonhardware import Straggler
from sleuth.sources import MemorySource
from sleuth.stream.detection import irregular_iterations
from sleuth.whatif.attribution import COMPUTE, Attribution, attribute
from tests.sim.conftest import paused_emulation


def attribution(per_iteration=(1.0,) * 10, *, by_type=None, worker_share=0.0, host_share=0.0, last_stage_share=0.0,
                last_stage_evenness=0.0, costliest_replica=(), costliest_host=None, costliest_breadth=(), replicas=16,
                split=1.0) -> Attribution:
    """An attribution with the given per-iteration slowdowns (ideal 100 ns each), of which an even
    pipeline split would save ``split``."""
    n = len(per_iteration)
    return Attribution(
        job="j", world=8, iterations=tuple(range(n)), original_ns=tuple(100.0 * s for s in per_iteration),
        ideal_ns=(100.0,) * n, hardware_ideal_ns=(100.0 * split,) * n, recorded_ns=(100.0,) * n, by_type=by_type or {COMPUTE: 1.2, "dp.all_reduce": 1.0},
        by_worker=(1.0,) * 8, worker_unit="replica x stage", worker_share=worker_share, host_share=host_share,
        last_stage_share=last_stage_share, last_stage_evenness=last_stage_evenness, wall_ns=1e9,
        costliest_replica=costliest_replica, costliest_breadth=costliest_breadth, replicas=replicas, hosts=replicas,
        costliest_host=tuple(f"h{r}" for r in costliest_replica) if costliest_host is None else costliest_host,
    )


def test_a_run_of_sustain_iterations_over_the_line_is_an_episode_and_shorter_ones_are_not() -> None:
    found = attribution((1.0, 1.2, 1.2, 1.2, 1.0, 1.0, 1.0, 1.06, 1.07, 1.0, 1.0, 1.0, 1.3))
    sustained, short = episodes(found, slowdown=1.05, sustain=3)
    assert [e.iterations for e in sustained] == [(1, 2, 3)]
    assert [e.iterations for e in short] == [(7, 8), (12,)]


def test_a_dip_shorter_than_sustain_does_not_end_an_episode() -> None:
    # 1-3 over the line, one under, 5 over: one episode; 9 and 13-15 are runs of their own, short.
    per = (1.0, 1.2, 1.2, 1.2, 1.0, 1.3, 1.0, 1.0, 1.0, 1.06, 1.0, 1.0, 1.0, 1.4, 1.0, 1.4, 1.0)
    sustained, short = episodes(attribution(per), slowdown=1.05, sustain=3)
    assert [e.iterations for e in sustained] == [(1, 2, 3, 4, 5)]
    assert [e.iterations for e in short] == [(9,), (13, 14, 15)]


@pytest.mark.parametrize("iterations", [40, 4000])
def test_an_episode_s_transfers_are_in_play_only_where_they_cost_more_than_outside_every_episode(iterations) -> None:
    # A link slow in the middle half: its transfers pay there alone. Jitter: as much outside as in.
    rng = np.random.default_rng(1)
    inside = np.zeros(iterations, bool)
    inside[iterations // 4: 3 * iterations // 4] = True
    per = np.where(inside, 1.2, 1.0)
    link = np.where(inside, 0.2, 0.0) + rng.uniform(0, 0.01, iterations)
    jitter = rng.choice([0.0, 0.2], iterations)
    for transfers, expected in ((link, True), (jitter, False)):
        by_type_ns = 100.0 * np.stack([np.ones(iterations), 1.0 + transfers], axis=1)
        [episode], _ = episodes(replace(attribution(tuple(per)), by_type_ns=by_type_ns), slowdown=1.05, sustain=3)
        assert episode.transfers is expected


def _noisy(levels, *, seed: int, jitter: float = 0.08) -> tuple[float, ...]:
    """Per-iteration S at ``levels``, each times log-normal noise of ``jitter`` (a loaded machine's)."""
    rng = np.random.default_rng(seed)
    return tuple(float(v) for v in np.asarray(levels) * np.exp(jitter * rng.standard_normal(len(levels))))


@pytest.mark.parametrize("seed", range(5))
def test_a_second_cause_joining_is_cut_from_the_level_before_it_and_keeps_its_tail(seed) -> None:
    # Contention all along (S about 1.12), a GPU failing in iterations 10-19 beside it (about 1.85):
    # the GPU's episode starts where it stepped up, and the contention after it is its tail.
    per = _noisy([1.12] * 10 + [1.85] * 10 + [1.12] * 10, seed=seed)
    sustained, _ = episodes(attribution(per), slowdown=1.05, sustain=3)
    # An iteration beside the step that noise put nearer the other level may go with it.
    assert len(sustained) == 2 and sustained[1].iterations[-1] >= 25, sustained  # noise may dip the run's last under the line
    assert sustained[1].iterations[0] in (9, 10, 11) and all(e.cut for e in sustained), sustained


@pytest.mark.parametrize("seed", range(5))
def test_a_step_up_that_stays_is_cut_where_it_steps(seed) -> None:
    per = _noisy([1.0] * 5 + [1.15] * 15 + [1.6] * 15, seed=seed)
    sustained, _ = episodes(attribution(per), slowdown=1.05, sustain=3)
    assert sustained[-1].iterations == tuple(range(20, 35)), sustained


@pytest.mark.parametrize("seed", range(5))
def test_one_cause_at_one_level_or_growing_is_one_episode(seed) -> None:
    flat = _noisy([1.5] * 30, seed=seed)
    ramp = _noisy(np.linspace(1.1, 2.0, 30), seed=seed, jitter=0.03)
    for per in (flat, ramp):
        sustained, _ = episodes(attribution(per), slowdown=1.05, sustain=3)
        assert [(e.iterations, e.cut) for e in sustained] == [(tuple(range(30)), False)], per


@pytest.mark.parametrize("seed", range(5))
def test_a_second_cause_joining_while_the_first_lasts_is_cut_at_both_steps_regression_random_two_tp4_pp4(seed) -> None:
    # The split costs 7% from the start, a GPU slows from iteration 10, a NIC from 25 while the GPU
    # is still slow: a staircase over the line, which a line fits better than any two levels; each
    # level is an episode of its own, so the NIC's is searched where it joined.
    per = _noisy([1.07] * 10 + [1.55] * 15 + [2.0] * 15, seed=seed, jitter=0.01)
    sustained, _ = episodes(attribution(per), slowdown=1.05, sustain=3)
    assert [(e.iterations[0], e.iterations[-1]) for e in sustained] == [(0, 9), (10, 24), (25, 39)], sustained
    assert all(e.cut for e in sustained), sustained


@pytest.mark.parametrize("began", [2.0, 3.0])
def test_the_iteration_a_step_began_in_goes_with_the_step_regression_loaded_torch_profiler_job(began) -> None:
    # A loaded machine's jitter (S 1.1-1.4), a rank sleeping in iterations 8-13 (S about 8) that
    # began partway into iteration 8: nearer the jitter's level than the sleep's, above all of it.
    per = (1.12, 1.3, 1.05, 1.4, 1.2, 1.1, 1.25, 1.15) + (began,) + (8.0, 7.1, 9.2, 8.4, 7.7) + (1.2, 1.1, 1.3)
    sustained, _ = episodes(attribution(per), slowdown=1.05, sustain=3)
    assert [e.iterations for e in sustained] == [tuple(range(8)), tuple(range(8, 17))], sustained


def test_the_iteration_a_step_began_in_goes_with_the_step_where_the_level_before_pays_at_the_line() -> None:
    # A layout's uneven split costs 5% from the start (at the line, dips under it); a host slows from 3 on.
    per = (1.061, 1.049, 1.051) + (1.217,) * 20
    sustained, _ = episodes(attribution(per), slowdown=1.05, sustain=3)
    assert [e.iterations for e in sustained] == [tuple(range(3, 23))], sustained


def test_a_step_smaller_than_the_slowdown_line_is_no_cut() -> None:
    per = (1.2,) * 15 + (1.23,) * 15
    sustained, _ = episodes(attribution(per), slowdown=1.05, sustain=3)
    assert [e.iterations for e in sustained] == [tuple(range(30))]


@pytest.mark.parametrize("shares, expected", [
    (dict(worker_share=0.1, last_stage_share=0.8, split=1.15), Straggler.STAGE_IMBALANCE),  # ln 1.15 / ln 1.2 = 0.77
    (dict(worker_share=0.1, last_stage_share=0.8, split=1.05), Straggler.HARDWARE),  # the stragglers pay most
    (dict(worker_share=0.9, split=1.15), Straggler.STAGE_IMBALANCE),  # workers explain the rest, the split most
    (dict(worker_share=0.1, last_stage_share=0.2, costliest_replica=(0, 3, 5, 1, 9, 3, 2, 7, 0, 4)), Straggler.SEQLEN_IMBALANCE),
    (dict(worker_share=0.1, last_stage_share=0.2, costliest_replica=(3,) * 10), Straggler.HARDWARE),
    # Two broken GPUs in two replicas take turns; a third replica in turn is the data.
    (dict(worker_share=0.1, last_stage_share=0.2, costliest_replica=(3, 5) * 5), Straggler.HARDWARE),
    # A slow GPU's replica is the costliest in nearly every iteration: jitter takes one of ten.
    (dict(worker_share=0.1, last_stage_share=0.2, costliest_replica=(3,) * 9 + (4,)), Straggler.HARDWARE),
    # With two replicas, each in turn is all the data can show, and the slow one is half the workers.
    (dict(worker_share=0.6, costliest_replica=(0, 1, 1, 0, 1, 0, 0, 1, 0, 1), replicas=2), Straggler.SEQLEN_IMBALANCE),
    (dict(worker_share=0.6, costliest_replica=(0, 1, 1, 0, 1, 0, 0, 1, 0, 1)), Straggler.HARDWARE),  # two of 16: two devices
    (dict(worker_share=0.6, costliest_replica=(1,) * 10, replicas=2), Straggler.HARDWARE),
    # Three replicas taking turns, all on one host: a contended host, not the data.
    (dict(worker_share=0.1, costliest_replica=(2, 3, 4) * 3 + (2,), costliest_host=("h1",) * 10), Straggler.HARDWARE),
    (dict(worker_share=0.7, last_stage_share=0.9), Straggler.HARDWARE),  # a few workers explain it
    (dict(worker_share=0.4, host_share=0.9, last_stage_share=0.9), Straggler.HARDWARE),  # one host does
    (dict(worker_share=0.1, last_stage_share=0.9, by_type={COMPUTE: 1.01, "dp.all_reduce": 1.3}), Straggler.HARDWARE),
    (dict(worker_share=0.1, last_stage_share=0.2, costliest_replica=(0, 3, 5, 1, 9, 3, 2, 7, 0, 4),
          by_type={COMPUTE: 1.06, "dp.all_reduce": 1.08}), Straggler.HARDWARE),  # transfers carry most of it
])
def test_non_hardware_causes_follow_the_papers_shares(shares: dict, expected: Straggler) -> None:
    assert diagnose(attribution((1.2,) * 10, **shares)) is expected


def test_jitter_taking_turns_beside_a_slow_replica_is_not_moving_work() -> None:
    # Two replicas: 1's GPU slows iterations 10-19 (S 1.5-1.8); this loaded machine's jitter pays up
    # to 1.25 in the ten before, where either replica is the costliest. The work does not move: the
    # fault's step is its own episode, and there replica 1 is the costliest of every iteration.
    noise = (1.2, 1.1, 1.25, 1.05, 1.15, 1.2, 1.1, 1.08, 1.22, 1.12)
    fault = (1.5, 1.7, 1.6, 1.8, 1.55, 1.65, 1.75, 1.6, 1.5, 1.7)
    costliest = (0, 1) * 5 + (1,) * 10
    found = attribution(noise + fault, worker_share=0.6, costliest_replica=costliest, replicas=2)
    sustained, _ = episodes(found, slowdown=1.05, sustain=3)
    [faulty] = [e for e in sustained if 10 in e.iterations]
    assert faulty.iterations == tuple(range(10, 20))
    assert diagnose_episode(found, faulty, part=Part.WHOLE) is Straggler.HARDWARE
    # A loaded machine's real job (rank 5 slowed in iterations 15-24 of 5-30): the other replica's
    # two costliest iterations pay like the fault's weakest, but the slow replica is the costliest
    # of fourteen of the sixteen that pay half the mean.
    loaded = (1.168, 1.041, 1.141, 1.394, 1.267, 1.403, 1.196, 1.465, 1.225, 1.107, 1.863, 1.951, 1.732,
              1.856, 1.884, 1.894, 1.84, 1.795, 1.74, 1.764, 1.072, 1.078, 1.101, 1.494, 1.083, 1.499)
    replicas = (0, 1, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0)
    assert diagnose(attribution(loaded, worker_share=0.6, costliest_replica=replicas, replicas=2)) is Straggler.HARDWARE
    # Data taking turns pays alike whichever replica drew the long batch.
    turns = (0, 1, 1, 0, 1, 0, 0, 1, 0, 1) * 2
    assert diagnose(attribution(noise + fault, worker_share=0.6, costliest_replica=turns, replicas=2)) \
        is Straggler.SEQLEN_IMBALANCE


def test_one_replica_drawing_the_three_costliest_of_eight_long_batches_is_still_moving_work_regression_loaded_ddp() -> None:
    # A real 4-rank DDP job with uneven batches (steps 5-20) beside a busy core: replica 3 drew the
    # three costliest of the eight batches paying half the mean, which one of four replicas alike
    # does one time in sixteen (Mann-Whitney p 0.018, 0.07 corrected for picking the top replica).
    # A slow GPU's replica is the costliest of all of them.
    paid = (3.48, 1.0, 2.32, 3.82, 1.03, 1.05, 1.15, 1.0, 1.04, 3.85, 1.93, 1.0, 3.06, 1.09, 2.56, 2.19)
    costliest = (3, 2, 1, 3, 1, 2, 0, 2, 3, 3, 0, 0, 2, 3, 1, 2)
    found = attribution(paid, worker_share=0.6, costliest_replica=costliest, replicas=4)
    assert diagnose(found) is Straggler.SEQLEN_IMBALANCE
    slow = tuple(3 if s >= 1.9 else r for s, r in zip(paid, costliest))
    assert diagnose(attribution(paid, worker_share=0.6, costliest_replica=slow, replicas=4)) is Straggler.HARDWARE


@pytest.mark.parametrize("breadth, expected", [
    ((1.0, 0.9, 1.0, 1.0, 0.8, 1.0, 1.0, 1.0, 0.9, 1.0), Straggler.SEQLEN_IMBALANCE),  # long batches: every place
    ((0.4, 0.6, 0.5, 0.5, 0.3, 0.6, 0.4, 0.5, 0.5, 0.6), Straggler.HARDWARE),  # one place each: two devices
])
def test_replicas_taking_turns_are_the_data_only_when_costly_at_every_place(breadth, expected) -> None:
    turns = (0, 1, 1, 0, 1, 0, 0, 1, 0, 1)
    found = attribution((1.2,) * 10, worker_share=0.6, costliest_replica=turns, costliest_breadth=breadth, replicas=2)
    assert diagnose(found) is expected


@pytest.mark.parametrize("above, expected", [
    (14, Straggler.SEQLEN_IMBALANCE),  # a long batch lengthens every layer, each within the peers' spread
    (10, Straggler.SCATTERED_PAUSES),  # a pause lengthens one gap; the rest are above and below by chance
])
def test_one_rank_replicas_whose_gaps_run_above_their_peers_are_the_data_though_little_is_beyond_the_spread(above, expected) -> None:
    # FSDP's 18 gaps a step, 4 ranks: the costliest rank moves, and under a fifth of its work is
    # beyond its peers' spread in every iteration (each rank's compute varies widely).
    turns = (0, 1, 2, 3, 1, 0, 3, 2, 0, 1)
    sides = np.zeros((10, 4, 2), np.int64)
    sides[:, :, 1] = 18
    sides[:, :, 0] = 9
    sides[np.arange(10), turns, 0] = above
    found = replace(attribution((1.2,) * 10, worker_share=0.6, costliest_replica=turns, replicas=4),
                    world=4, costliest_rank=turns, persistent_compute=np.full((10, 4), 0.2), gaps_above_median=sides)
    assert diagnose(found) is expected


def _localized(tmp_path, capsys, sim: list[str], *localize: str) -> list[dict]:
    """The incidents ``sleuth localize --json`` prints for the run ``sleuth sim`` makes of ``sim``."""
    out = tmp_path / "run"
    assert main(["sim", *sim, "--no-labels", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["localize", "--records", str(out), *localize, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_two_equally_slow_gpus_in_a_two_replica_job_are_both_named_not_read_as_seqlen_regression_seed_7(tmp_path, capsys) -> None:
    # tp4 pp2 dp2: h0000/1 is replica 0's first stage, h0001/6 replica 1's second; either replica is the
    # costliest of an iteration by its jitter, as with data taking turns, but each only at its slow GPU's place.
    incidents = _localized(tmp_path, capsys, ["--generate", "fattree:hosts=2,gpus=8,pod=2,spines=2", "--tp", "4",
                                              "--pp", "2", "--dp", "2", "--iterations", "30", "--seed", "7",
                                              "--fault", "gpu:h0000/1,slow=1.5", "--fault", "gpu:h0001/6,slow=1.5"])
    assert incidents and all(i["cause"] == "compute" for i in incidents), incidents
    assert {"gpu:h0000/1", "gpu:h0001/6"} <= {s["device"] for i in incidents for s in i["suspects"][:2]}


def _sim(tmp_path, *words: str) -> None:
    assert main(["sim", "--generate", "fattree:hosts=16,gpus=8,pod=4,spines=4", "--tp", "4", "--pp", "2", "--dp", "16",
                 "--iterations", "30", "--seed", "5", "--no-labels", *words]) == 0


def _truth_slowdown(folder) -> float:
    rows = json.loads((folder / "truth.json").read_text())["iterations"]
    return sum(r["time_ns"] for r in rows) / sum(r["balanced_ns"] for r in rows)


def test_localize_names_a_gpu_slow_from_the_first_iteration(tmp_path, capsys) -> None:
    out = tmp_path / "run"
    _sim(tmp_path, "--fault", "gpu:h0006/2,slow=1.5", "--out", str(out))
    capsys.readouterr()
    assert main(["localize", "--records", str(out), "--routing", "static", "--json"]) == 0
    incidents = json.loads(capsys.readouterr().out)
    [incident] = [i for i in incidents if i["attribution"]["trigger"] == "slowdown"]
    assert incident["suspects"][0]["device"] == "gpu:h0006/2" and incident["cause"] == "compute"
    assert incident["attribution"]["slowdown"] == pytest.approx(_truth_slowdown(out), rel=0.05)
    assert incident["attribution"]["gpu_hours_lost"] > 0
    assert {r["rank"] for r in incident["attribution"]["top_ranks"]} >= {50}  # h0006/2 is rank 50
    assert incident["attribution"]["top_types"][0]["type"] == COMPUTE
    # Without the attribution, the δ rule alone sees nothing: the job is as slow in every iteration.
    assert main(["localize", "--records", str(out), "--json", "--no-attribution"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_an_uneven_split_and_a_gpu_slow_from_the_first_iteration_are_two_incidents(tmp_path, capsys) -> None:
    out = tmp_path / "run"
    # h0009/2 holds a last-stage rank: on the first stage, waiting on the heavy last one anyway,
    # the same GPU costs the job 3%, under the line (its part is measured, and small).
    _sim(tmp_path, "--fault", "last_stage,slow=1.5", "--fault", "gpu:h0009/2,slow=1.5", "--out", str(out))
    capsys.readouterr()
    assert main(["localize", "--records", str(out), "--routing", "static", "--json"]) == 0
    incidents = json.loads(capsys.readouterr().out)
    split = [i for i in incidents if i["cause"] == "stage_imbalance"]
    gpu = [i for i in incidents if i["suspects"] and i["suspects"][0]["device"] == "gpu:h0009/2"]
    assert len(split) == 1 and not split[0]["suspects"] and len(gpu) == 1, incidents
    # Each costs its own part: together about what the job pays against its balanced twin.
    together = split[0]["impact"]["slowdown"] * gpu[0]["impact"]["slowdown"]
    assert together == pytest.approx(_truth_slowdown(out), rel=0.05)


def test_a_split_and_a_gpu_each_under_the_line_together_over_it_are_both_named(tmp_path, capsys) -> None:
    # tp2 pp4 dp16: the layout's split costs 4.9%, a GPU x1.31 from the first iteration 4.6%; the
    # whole (9.7%) was read as the split alone, which pays most of it.
    incidents = _localized(tmp_path, capsys, ["--generate", "fattree:hosts=16,gpus=8,pod=4,spines=4", "--tp", "2",
                                              "--pp", "4", "--dp", "16", "--iterations", "40", "--seed", "7002021",
                                              "--fault", "gpu:h0001/5,slow=1.31"], "--routing", "static")
    split = [i for i in incidents if i["cause"] == "stage_imbalance"]
    gpu = [i for i in incidents if i["suspects"] and i["suspects"][0]["device"] == "gpu:h0001/5"]
    assert len(split) == 1 and len(gpu) == 1, incidents
    assert split[0]["impact"]["slowdown"] < 1.05 and gpu[0]["impact"]["slowdown"] < 1.05


def test_a_gpu_slow_from_iteration_10_then_a_nic_from_30_are_each_first_on_their_side_regression_seed_23(tmp_path, capsys) -> None:
    # The NIC slows a data-parallel ring of stage 1, so every stage-1 worker is costly (S_w) and the
    # GPU on stage 0 must be found by its own compute; the ring's ranks wait in transfers, not compute.
    incidents = _localized(tmp_path, capsys, ["--generate", "fattree:hosts=16,gpus=8,pod=4,spines=4", "--tp", "4",
                                              "--pp", "2", "--dp", "16", "--iterations", "50", "--seed", "23",
                                              "--fault", "gpu:h0006/2,slow=1.5,start=10",
                                              "--fault", "nic:h0011/5,slow=5,start=30"], "--routing", "static")
    compute = [s["device"] for i in incidents for s in i["suspects"] if s["kind"] in ("gpu", "host")]
    network = [s["device"] for i in incidents for s in i["suspects"] if s["kind"] not in ("gpu", "host")]
    assert compute[:1] == ["gpu:h0006/2"] and network[:1] == ["nic:h0011/5"], incidents


def test_two_gpus_slow_in_two_stretches_are_each_named_over_their_own_iterations(tmp_path, capsys) -> None:
    # Each episode is searched on its own iterations (``Attribution.over``): the whole job's worker
    # slowdowns name the costlier GPU, which would lead the other episode's incident too.
    incidents = _localized(tmp_path, capsys, ["--generate", "fattree:hosts=16,gpus=8,pod=4,spines=4", "--tp", "4",
                                              "--pp", "2", "--dp", "16", "--iterations", "60", "--seed", "29",
                                              "--fault", "gpu:h0003/1,slow=1.4,start=8,end=22",
                                              "--fault", "gpu:h0012/6,slow=1.8,start=36"], "--routing", "static")
    first = {i["suspects"][0]["device"]: (min(i["iterations"]), max(i["iterations"])) for i in incidents if i["suspects"]}
    assert set(first) == {"gpu:h0003/1", "gpu:h0012/6"}, incidents
    assert first["gpu:h0003/1"][1] < 30 <= first["gpu:h0012/6"][0]


def test_a_clean_run_with_one_hiccup_pages_nothing(tmp_path, capsys) -> None:
    out = tmp_path / "suite"
    assert main(["sim", "suite", "hiccups", "--seed", "5", "--iterations", "40", "--out", str(out), "--no-labels"]) == 0
    capsys.readouterr()
    assert main(["localize", "--records", str(out / "hiccups-1"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["attribute", "--records", str(out / "hiccups-1"), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["episodes"] == [] and document["slowdown"] == pytest.approx(1.0, abs=0.05)


def test_a_straggler_cause_is_unpaid_where_no_iteration_of_it_paid_the_slowdown_line() -> None:
    from sleuth.localizer.attributed import unpaid_straggler_cause

    found = attribution((1.0, 1.02, 1.0, 1.06, 1.0))
    for cause, iterations, unpaid in [("seqlen_imbalance", (0, 1, 2), True), ("scattered_pauses", (1, 2), True),
                                      ("seqlen_imbalance", (2, 3), False), ("compute", (0, 1, 2), False)]:
        incident = replace(_incident(cause), iterations=iterations)
        assert unpaid_straggler_cause(incident, found, slowdown=1.05) is unpaid, (cause, iterations)


def test_a_compute_device_is_unpaid_where_its_iterations_ran_long_alike_and_the_replay_saw_stragglers_elsewhere() -> None:
    from sleuth.localizer.attributed import unpaid_compute

    spec = _pause_spec()
    found = attribution((1.0, 1.02, 1.0, 1.06, 1.0))
    for cause, iterations, unpaid in [("compute", (0, 1, 2), True), ("compute", (2, 3), False),
                                      ("compute", (4, 5), False), ("network", (0, 1, 2), False)]:
        incident = replace(_incident(cause), iterations=iterations)  # 5 was never replayed: nothing to tell
        assert unpaid_compute(incident, found, slowdown=1.05, spec=spec) is unpaid, (cause, iterations)
    incident = replace(_incident("compute"), iterations=(0, 1, 2))
    # A replay that put nothing back anywhere may be blind to the job's compute; a coarse clock the same.
    assert not unpaid_compute(incident, attribution((1.0,) * 5), slowdown=1.05, spec=spec)
    assert not unpaid_compute(incident, found, slowdown=1.05, spec=replace(spec, time_resolution_ns=1_000_000))


def test_a_side_is_unpaid_where_the_stragglers_paid_the_line_and_it_carried_under_a_tenth() -> None:
    from sleuth.localizer.attributed import unpaid_side

    compute_paid = attribution((1.2, 1.2, 1.2), by_type={COMPUTE: 1.2, "dp.all_reduce": 1.01})
    network, gpu = _incident("network", ("nvswitch:h0", "nvswitch")), _incident("compute", ("gpu:h0/1", "gpu"))
    assert unpaid_side(network, compute_paid, slowdown=1.05)
    assert not unpaid_side(gpu, compute_paid, slowdown=1.05)
    # Both sides named, or the transfers carrying a tenth, or nothing paid: the side stays.
    assert not unpaid_side(_incident("mixed", ("gpu:h0/1", "gpu"), ("nic:h0/1", "nic")), compute_paid, slowdown=1.05)
    assert not unpaid_side(network, attribution((1.2,) * 3, by_type={COMPUTE: 1.2, "dp.all_reduce": 1.03}), slowdown=1.05)
    assert not unpaid_side(network, attribution((1.0,) * 3, by_type={COMPUTE: 1.2, "dp.all_reduce": 1.01}), slowdown=1.05)


def test_the_slowest_iterations_of_a_clean_data_parallel_run_name_no_straggler_cause() -> None:
    # A change-point detector hands the search the slowest iterations of a fault-free run: its data
    # reading said sequence-length imbalance where the stragglers cost the job 0.2% (S 1.002).
    from sleuth.layout import ParallelLayout
    from sleuth.sim import Emulation
    from sleuth.sim.scenario import Scenario
    from sleuth.topology import Routing, generate

    topology = generate("fattree:hosts=16,gpus=8,pod=4,spines=4")
    emulation = Emulation(Scenario(topology=topology, layout=ParallelLayout(128, 2, 1, 64), iterations=40,
                                   seed=7001026, routing=Routing.ECMP))
    found = attribute(emulation.records(), emulation.job_spec(), iterations=emulation.iterations())
    slowest = emulation.slowest_iterations()
    assert found.slowdown < 1.01
    assert localize(emulation, irregular_iterations=slowest, topology=topology, window=40, routing="ecmp") != []
    assert localize(emulation, irregular_iterations=slowest, topology=topology, window=40, routing="ecmp",
                    attribution=found) == []


def test_attribution_options_are_checked(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit):
        main(["attribute", "--records", str(tmp_path), "--slowdown", "0.9"])
    assert "above 1" in capsys.readouterr().err
    from sleuth.localizer import localize
    with pytest.raises(ConfigError, match="sustain"):
        localize(None, irregular_iterations=[], topology=None, sustain=0)


def _incident(cause: str, *suspects: tuple[str, str]):
    from sleuth.localizer.impact import Impact
    from sleuth.localizer.incident import Incident, IncidentCause, Suspect
    from sleuth.topology import DeviceKind

    return Incident(job="j", incident="j-1-2", t_from_ns=0, t_to_ns=1, iterations=(1, 2), cause=IncidentCause(cause),
                    suspects=tuple(Suspect(d, DeviceKind(k), 0.5) for d, k in suspects), roots=(), traversal=(), steps=(),
                    ranks_fetched=1, world=8, impact=Impact(1.1, 1.0, 1.1, 0.0, 2), advice="", seconds=0.0)


def test_a_side_the_irregular_search_left_unexplained_is_complemented_by_the_whatif_suspects() -> None:
    from sleuth.localizer.attributed import complement
    from sleuth.localizer.incident import Suspect
    from sleuth.topology import DeviceKind

    whatif = (Suspect("gpu:h0/1", DeviceKind.GPU, 0.6), Suspect("nic:h3/0", DeviceKind.NIC, 0.2))
    merged = complement(_incident("compute", ("gpu:h0/1", "gpu")), whatif)
    assert [s.device for s in merged.suspects] == ["gpu:h0/1", "nic:h3/0"] and merged.cause.value == "mixed"
    # A side the two searches disagree on lists both; one they agree on, or no hardware cause, adds nothing.
    both = _incident("mixed", ("gpu:h0/1", "gpu"), ("nic:h5/0", "nic"))
    assert [s.device for s in complement(both, whatif).suspects] == ["gpu:h0/1", "nic:h5/0", "nic:h3/0"]
    agreed = _incident("mixed", ("gpu:h0/1", "gpu"), ("nic:h3/0", "nic"))
    assert complement(agreed, whatif) == agreed
    stage = _incident("stage_imbalance")
    assert complement(stage, whatif) == stage
    # A side whose first what-if suspect the incident lacks gets the what-if's, after its own.
    two = (Suspect("gpu:h0/5", DeviceKind.GPU, 0.5), Suspect("gpu:h0/1", DeviceKind.GPU, 0.4))
    assert [s.device for s in complement(_incident("compute", ("gpu:h0/1", "gpu")), two).suspects] == ["gpu:h0/1", "gpu:h0/5"]
    # Agreed on the first: a mate on the same host adds nothing, a GPU on another host is a second straggler.
    mate = (Suspect("gpu:h0/1", DeviceKind.GPU, 0.5), Suspect("gpu:h0/2", DeviceKind.GPU, 0.1))
    one = _incident("compute", ("gpu:h0/1", "gpu"))
    assert complement(one, mate) == one
    other = (Suspect("gpu:h0/1", DeviceKind.GPU, 0.5), Suspect("gpu:h7/3", DeviceKind.GPU, 0.4))
    assert [s.device for s in complement(one, other).suspects] == ["gpu:h0/1", "gpu:h7/3"]


def test_the_side_the_job_pays_most_for_leads_the_incident_and_the_other_stays_listed() -> None:
    from sleuth.localizer.attributed import lead

    mixed = _incident("mixed", ("nvswitch:h0", "nvswitch"), ("gpu:h0/5", "gpu"), ("gpu:h0/2", "gpu"))
    compute_led = attribution((1.6,) * 10, by_type={COMPUTE: 1.59, "tp.broadcast": 1.005, "dp.all_reduce": 1.006})
    assert [s.device for s in lead(mixed, compute_led).suspects] == ["gpu:h0/5", "gpu:h0/2", "nvswitch:h0"]
    network_led = attribution((1.3,) * 10, by_type={COMPUTE: 1.01, "dp.all_reduce": 1.3})
    assert lead(mixed, network_led) == mixed
    assert [s.device for s in lead(lead(mixed, compute_led), network_led).suspects] == ["nvswitch:h0", "gpu:h0/5", "gpu:h0/2"]
    # Within the leading side, what the what-if search also names comes first, in its order.
    from sleuth.localizer.incident import Suspect
    from sleuth.topology import DeviceKind

    contended = _incident("mixed", ("host:h0", "host"), ("gpu:h0/5", "gpu"), ("nvswitch:h0", "nvswitch"), ("gpu:h0/1", "gpu"))
    whatif = (Suspect("gpu:h0/5", DeviceKind.GPU, 0.9), Suspect("gpu:h0/3", DeviceKind.GPU, 0.1))
    assert [s.device for s in lead(contended, compute_led, whatif).suspects] == ["gpu:h0/5", "host:h0", "gpu:h0/1", "nvswitch:h0"]



def test_a_side_the_job_barely_pays_for_names_no_suspect_beside_the_other_regression_loaded_gloo_nvswitch() -> None:
    from sleuth.localizer.attributed import paid_sides

    # A slow GPU on a loaded host: transfer jitter pays under a tenth of what the job pays, and every
    # network root of the irregular search lies on the host's NVSwitch.
    mixed = _incident("mixed", ("gpu:h0/5", "gpu"), ("nvswitch:h0", "nvswitch"))
    compute_led = attribution((1.9,) * 10, by_type={COMPUTE: 1.86, "pp.send": 1.02, "dp.all_reduce": 1.02})
    found = paid_sides(mixed, compute_led)
    assert [s.device for s in found.suspects] == ["gpu:h0/5"] and found.cause.value == "compute"
    network_led = attribution((1.3,) * 10, by_type={COMPUTE: 1.01, "dp.all_reduce": 1.3})
    assert [s.device for s in paid_sides(mixed, network_led).suspects] == ["nvswitch:h0"]
    # Both sides paying a minor share or more, the only side named, nothing paid, or no hardware cause: as it was.
    assert paid_sides(mixed, attribution((1.3,) * 10, by_type={COMPUTE: 1.2, "dp.all_reduce": 1.1})) == mixed
    network = _incident("network", ("nvswitch:h0", "nvswitch"))
    assert paid_sides(network, compute_led) == network
    assert paid_sides(mixed, attribution(by_type={COMPUTE: 1.0, "dp.all_reduce": 1.0})) == mixed
    pauses = _incident("scattered_pauses")
    assert paid_sides(pauses, compute_led) == pauses


def test_an_irregular_cluster_inside_a_sustained_episode_grows_to_the_episode(tmp_path, capsys) -> None:
    from sleuth.jobspec import JobSpec
    from sleuth.localizer import localize
    from sleuth.records_folder import read_records
    from sleuth.sources import MemorySource
    from sleuth.topology.job_fabric import single_leaf
    from sleuth.whatif.attribution import attribute

    out = tmp_path / "run"
    _sim(tmp_path, "--fault", "gpu:h0006/2,slow=1.5,start=12", "--out", str(out))
    records, iterations = read_records(out)
    spec = JobSpec.read(out)
    # A loaded machine's δ rule may flag two iterations of a long episode, far apart: the real job's case.
    found = localize(MemorySource(spec, records, iterations), irregular_iterations=[16, 20], topology=single_leaf(spec),
                     attribution=attribute(records, spec, iterations=iterations))
    [incident] = [i for i in found if i.suspects and i.suspects[0].device == "gpu:h0006/2"]
    assert incident.attribution.trigger == "irregular"  # the cluster's search leads ...
    assert set(range(12, 30)) <= set(incident.iterations), incident.iterations  # ... over the whole episode
    rows = json.loads((out / "truth.json").read_text())["iterations"]
    paid = [r for r in rows if r["iteration"] in incident.iterations]
    assert incident.impact.slowdown == pytest.approx(sum(r["time_ns"] for r in paid) / sum(r["balanced_ns"] for r in paid),
                                                     rel=0.05)


def test_a_pause_is_a_hiccup_when_brief_cheap_and_not_recurring_on_its_device() -> None:
    from dataclasses import replace

    from sleuth.localizer.attributed import hiccup, tied_devices
    from sleuth.localizer.incident import RootOperator
    from sleuth.localizer.search import Cause

    per = [1.0] * 60
    per[10] = per[30] = per[50] = 1.4  # three pauses, far apart: 0.4 of one iteration each, 2% of the window
    found = attribution(tuple(per))
    spec = _pause_spec()
    at = {k: replace(_incident("compute", (f"gpu:h{k}/1", "gpu")), iterations=(k,)) for k in (10, 30, 50)}
    assert all(hiccup(at[k], tied_devices(o for j, o in at.items() if j != k), found, spec=spec, slowdown=1.05,
                      sustain=3) for k in at)
    # The same device pausing again is a fault, however brief.
    again = replace(at[50], suspects=at[10].suspects)
    assert not hiccup(at[10], tied_devices([at[30], again]), found, spec=spec, slowdown=1.05, sustain=3)
    # Evidence found beyond the pause's run (a probed step) is not a pause's.
    probed = replace(at[30], roots=(RootOperator(36, Cause.COMPUTE, 1, "", -1, "compute", (1,), 1.0, 36),))
    assert not hiccup(probed, set(), found, spec=spec, slowdown=1.05, sustain=3)
    # A pause the job pays for (a third of the window's time in one iteration) pages.
    costly = list(per)
    costly[30] = 21.0
    assert not hiccup(at[30], set(), attribution(tuple(costly)), spec=spec, slowdown=1.05, sustain=3)
    # Beside a sustained episode it is that episode's.
    stepped = list(per)
    stepped[31:40] = [1.2] * 9
    assert not hiccup(at[30], set(), attribution(tuple(stepped)), spec=spec, slowdown=1.05, sustain=3)


def _pause_spec():
    """Eight ranks, one GPU each on hosts h0 to h70 (``h<10 r>``, GPU 1): rank r on ``gpu:h<10 r>/1``."""
    from sleuth.jobspec import JobSpec, RankPlacement

    return JobSpec("j", 8, None, tuple(RankPlacement(r, f"h{10 * r}", 1) for r in range(8)), ())


def test_a_pause_the_replay_saw_another_rank_pay_for_is_a_hiccup_though_its_device_pauses_again() -> None:
    from dataclasses import replace

    from sleuth.localizer.attributed import hiccup, tied_devices
    from sleuth.localizer.incident import Suspect
    from sleuth.topology import DeviceKind

    per = [1.0] * 60
    per[10] = per[30] = 1.4
    # The search of the pause at 10 named gpu:h30/1 (rank 3), which pauses again at 30; the replay,
    # which saw every rank, found rank 5 the costliest at 10 and rank 3 at 30.
    costliest = [0] * 60
    costliest[10], costliest[30] = 5, 3
    found = replace(attribution(tuple(per)), costliest_rank=tuple(costliest))
    chance = replace(_incident("compute", ("gpu:h30/1", "gpu")), iterations=(10,))
    again = replace(_incident("compute", ("gpu:h30/1", "gpu")), iterations=(30,))
    spec = _pause_spec()
    assert hiccup(chance, tied_devices([again]), found, spec=spec, slowdown=1.05, sustain=3)
    # The pause at 30, the replay's own rank 3 paying for it, pauses again on its device: a fault.
    assert not hiccup(again, tied_devices([chance]), found, spec=spec, slowdown=1.05, sustain=3)
    # Its host named, the same; a NIC's ranks are not the placements', nor a set of equal-cost
    # spines' (an id no single device parses as): named again, each pages.
    host = replace(chance, suspects=(Suspect("host:h30", DeviceKind.HOST, 0.5),))
    assert hiccup(host, {"host:h30"}, found, spec=spec, slowdown=1.05, sustain=3)
    for device, kind in (("nic:h30/0", DeviceKind.NIC), ("spines:s0,s1", DeviceKind.SPINE)):
        fabric = replace(chance, suspects=(Suspect(device, kind, 0.5),))
        assert not hiccup(fabric, {device}, found, spec=spec, slowdown=1.05, sustain=3)


def test_a_slow_gpu_runs_long_in_most_of_its_work_and_a_pause_in_one_step_of_it() -> None:
    em = paused_emulation("gpu:h0005/1,slow=2,start=10,end=20", seed=7, iterations=30)
    found = attribute(em.records(), em.job_spec(), iterations=em.iterations())
    persistent, costliest = found.persistent_compute, found.costliest_rank
    assert persistent is not None
    rank = next(p.rank for p in em.job_spec().placements if (p.host, p.gpu) == ("h0005", 1))
    assert all(persistent[i, rank] > 0.9 for i in range(10, 20))
    # Elsewhere the costliest rank of each iteration is the one a pause stopped, in one step of its work.
    assert all(persistent[i, costliest[i]] < 0.2 for i in [*range(0, 10), *range(21, 30)])


@pytest.mark.parametrize("seed", [3, 7])
def test_a_gpu_failing_for_a_while_amid_scattered_pauses_is_its_own_incident(seed) -> None:
    # The pauses make the job pay in every iteration; the GPU, twice as slow in 10-19, pays more there.
    found, incidents = _paused_job("gpu:h0005/1,slow=2,start=10,end=20", seed=seed, iterations=30)
    gpu = [i for i in incidents if i.suspects and i.suspects[0].device == "gpu:h0005/1"]
    # It starts where the GPU stepped up; the pauses after it are its tail.
    assert len(gpu) == 1 and set(range(10, 20)) <= set(gpu[0].iterations) and gpu[0].iterations[0] >= 8, incidents
    others = [i for i in incidents if i is not gpu[0]]
    assert [i.cause.value for i in others] == ["scattered_pauses"] and not others[0].suspects, incidents
    assert max(others[0].iterations) < 10, incidents


def _paused_job(*faults: str, seed: int, iterations: int = 12):
    """``paused_emulation``'s job attributed and localized from its attribution alone."""
    em = paused_emulation(*faults, seed=seed, iterations=iterations)
    spec, records, iterations = em.job_spec(), em.records(), em.iterations()
    found = attribute(records, spec, iterations=iterations)
    return found, localize(MemorySource(spec, records, iterations), irregular_iterations=[],
                           topology=em.scenario.topology, attribution=found)


@pytest.mark.parametrize("seed", [4, 5])
def test_pauses_striking_another_rank_each_iteration_are_scattered_pauses_and_blame_no_device(seed) -> None:
    found, incidents = _paused_job(seed=seed)
    assert found.slowdown > 1.1  # the job pays for them
    assert diagnose(found) is Straggler.SCATTERED_PAUSES
    assert [i.cause.value for i in incidents] == ["scattered_pauses"] and not incidents[0].suspects
    assert "gc.collect()" in incidents[0].advice


@pytest.mark.parametrize("seed", [3, 5])
def test_a_gpu_slow_in_every_iteration_beside_such_pauses_is_named(seed) -> None:
    # Seed 5: the GPU is the costliest rank of only 3 of 12 iterations; the pauses take the others.
    found, incidents = _paused_job("gpu:h0005/1,slow=1.3", seed=seed)
    assert diagnose(found) is Straggler.HARDWARE
    assert incidents and incidents[0].suspects[0].device == "gpu:h0005/1"


@pytest.mark.parametrize("seed", [3, 7])
def test_a_nic_slow_every_few_steps_beside_costlier_pauses_is_named_where_it_costs_the_line_alone(seed) -> None:
    # Compute carries 63-73% of what the job pays (the pauses); the NIC's transfers alone, 5-7%.
    found, incidents = _paused_job("nic:h0002/1,slow=3,profile=fluctuation", seed=seed, iterations=16)
    (episode,) = episodes(found, slowdown=1.05, sustain=3)[0]
    assert episode.network
    assert diagnose(found, iterations=episode.paid, sustained=episode) is Straggler.HARDWARE
    assert [i.cause.value for i in incidents] == ["network"], incidents
    assert incidents[0].suspects[0].device == "nic:h0002/1"


def test_a_cluster_reading_another_non_hardware_cause_gives_way_to_its_episode_regression_paused_seed_3() -> None:
    # The irregular iterations' search read the pauses as uneven batches; the replay of every rank, as pauses.
    em = paused_emulation(seed=3, iterations=30)
    spec, records, iterations = em.job_spec(), em.records(), em.iterations()
    found = attribute(records, spec, iterations=iterations)
    incidents = localize(MemorySource(spec, records, iterations), irregular_iterations=irregular_iterations(iterations),
                         topology=em.scenario.topology, attribution=found)
    assert [i.cause.value for i in incidents] == ["scattered_pauses"] and not incidents[0].suspects, incidents


@pytest.mark.parametrize("seed", [0, 12])
def test_a_rank_pauses_struck_five_times_in_27_steps_is_no_device_regression_paused_seeds_0_12(seed) -> None:
    # 5 of 27 among 32 ranks: 0.043 by one of the three counts of a rank the costliest, 0.13 for the three.
    found, incidents = _paused_job(seed=seed, iterations=30)
    assert [i.cause.value for i in incidents] == ["scattered_pauses"] and not incidents[0].suspects, incidents


def _drawn(suite: str, seed: int, name: str, *, slowest: bool = False) -> list:
    """The incidents ``localize`` raises for one drawn scenario of ``bench_localizer.py`` from its
    attribution alone, or also from its five slowest iterations (as the bench searches clean runs)."""
    from sleuth.sim import Emulation
    from sleuth.sim.suites import SUITES

    scenario = {s.name: s for s in SUITES[suite](seed)}[name]
    em = Emulation(scenario)
    spec, records, iterations = em.job_spec(), em.records(), em.iterations()
    found = attribute(records, spec, iterations=iterations)
    return localize(MemorySource(spec, records, iterations), topology=scenario.topology, attribution=found,
                    irregular_iterations=em.slowest_iterations() if slowest else [])


def test_a_link_costing_under_the_line_beside_an_uneven_split_is_named_regression_random_17_seed_5976() -> None:
    # The split costs 4.5% and is compute's; the link 4%: read beside the split without the split's
    # compute, the stragglers are the link's transfers, not pauses.
    incidents = _drawn("random", 5976, "random-17-link-tp1-pp4-dp16")
    assert sorted(i.cause.value for i in incidents) == ["network", "stage_imbalance"], incidents
    network = next(i for i in incidents if i.cause.value == "network")
    assert {s.device for s in network.suspects[:2]} == {"nic:h0006/2", "link:leaf:p1r2~nic:h0006/2"}


def test_a_host_whose_ranks_take_turns_as_the_costliest_is_named_not_pauses_regression_random_14_seed_5977() -> None:
    # A contended host (x1.53, on and off from iteration 20) slows whichever of its 8 ranks it starves:
    # 5 ranks take the 6 steps that paid in 26-39, so no rank stands apart; their host, of 8, does.
    incidents = _drawn("random", 5977, "random-14-host-tp8-pp2-dp4")
    assert [i.cause.value for i in incidents] == ["compute"], incidents
    assert incidents[0].suspects[0].device == "host:h0007"


def test_a_noisy_clean_run_s_slowest_steps_beside_an_uneven_split_blame_nothing_regression_noisy_20_seed_5978() -> None:
    # The split costs 3.9%; beside it the stragglers pay under 2% and the episode's search finds no
    # device: the slowest steps' cluster (transfer jitter up to 20%) rests on what they paid alone.
    incidents = _drawn("random-noisy", 5978, "noisy-20-none-tp4-pp4-dp16", slowest=True)
    assert [(i.cause.value, i.suspects) for i in incidents] == [("stage_imbalance", ())], incidents


def test_a_contended_host_beside_costlier_pauses_is_named_regression_noisy_1_seed_5977() -> None:
    # Pauses of up to 100 ms cost the job 40%, the host (x1.34 from step 20) 7%: the slowest steps are
    # the pauses', but the host's 8 ranks are steady stragglers, and their roots name it first.
    incidents = _drawn("random-noisy", 5977, "noisy-1-host-tp8-pp2-dp4")
    compute = [i for i in incidents if i.cause.value == "compute"]
    assert compute and compute[0].suspects[0].device == "host:h0006", incidents


def test_a_link_costing_its_episode_more_than_the_split_is_named_regression_random_18_seed_5979() -> None:
    # A link slow every few steps from the start (x2.67) costs its episode more than the pipeline's
    # split does, which outweighs it over the whole job: the episode is read over its own iterations.
    incidents = _drawn("random", 5979, "random-18-link-tp4-pp4-dp4")
    assert [i.cause.value for i in incidents] == ["network"], incidents
    assert {s.device for s in incidents[0].suspects[:2]} == {"nic:h0001/7", "link:leaf:p0r7~nic:h0001/7"}
