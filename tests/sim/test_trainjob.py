"""The demo job's fault and workload shapes (sleuth.sim.trainjob), as the ranks compute them:
a ramp, a fault from the first iteration, uneven stages and per-batch sequence-length jitter."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from sleuth.sim.trainjob import JobOptions, parse_args  # noqa: E402


def test_a_fault_from_iteration_0_slows_every_iteration_of_its_range_and_no_other():
    options, _ = parse_args(["--slow-rank", "5", "--slow-factor", "200", "--slow-iters", "0:30"])
    assert [options.factor(i) for i in (0, 1, 29)] == [200.0] * 3 and options.factor(30) == 1.0


def test_a_ramp_grows_linearly_from_1_at_the_first_slow_iteration_to_f_at_the_last():
    options, _ = parse_args(["--slow-rank", "5", "--slow-factor", "201", "--slow-iters", "5:30", "--ramp"])
    assert options.factor(4) == 1.0 and options.factor(5) == 1.0 and options.factor(29) == 201.0
    steps = [options.factor(i + 1) - options.factor(i) for i in range(5, 29)]
    assert steps == pytest.approx([200 / 24] * 24)  # the same growth every iteration
    assert options.factor(30) == 1.0


def test_uneven_stages_make_every_rank_of_the_last_stage_compute_f_times_as_long_every_iteration():
    options, _ = parse_args(["--uneven-stages", "3"])
    assert {options.work_factor(i, stage=1, replica=r) for i in range(30) for r in range(2)} == {3.0}
    assert {options.work_factor(i, stage=0, replica=r) for i in range(30) for r in range(2)} == {1.0}
    flat, _ = parse_args(["--uneven-stages", "3", "--pp", "1", "--dp", "4"])  # one stage: nothing uneven
    assert flat.work_factor(0, stage=0, replica=0) == 1.0


def test_sequence_length_jitter_is_the_same_on_every_rank_and_moves_between_replicas():
    options = JobOptions(tp=2, pp=1, dp=4, seed=3, seqlen_jitter=200)
    draws = [options.replica_factors(i) for i in range(30)]
    # Every rank draws from the seed alone: the ranks of a replica, and a rerun, agree.
    assert draws == [JobOptions(tp=2, pp=1, dp=4, seed=3, seqlen_jitter=200).replica_factors(i) for i in range(30)]
    assert all(max(d) == 200 and min(d) >= 1 for d in draws)
    slowest = [d.index(200) for d in draws]
    # The long batch lands on every replica equally often in each epoch of four iterations.
    assert all(sorted(slowest[e:e + 4]) == [0, 1, 2, 3] for e in range(0, 28, 4)), slowest
    assert sum(a != b for a, b in zip(slowest, slowest[1:])) >= 15  # and moves between most iterations
    assert draws != [JobOptions(tp=2, pp=1, dp=4, seed=4, seqlen_jitter=200).replica_factors(i) for i in range(30)]
    assert JobOptions(dp=4).replica_factors(7) == [1.0] * 4
    assert options.work_factor(5, stage=0, replica=2) == draws[5][2]  # one stage: the batch alone


@pytest.mark.parametrize("option", ["--slow-factor", "--uneven-stages", "--seqlen-jitter"])
def test_a_factor_below_1_fails_before_the_job_starts(option, capsys):
    with pytest.raises(SystemExit):
        parse_args([option, "0.5"])
    assert option in capsys.readouterr().err


@pytest.mark.parametrize("job", ["trainjob", "frameworkjob"])
def test_the_base_delay_is_the_compute_time_the_factors_multiply(job, capsys):
    from importlib import import_module

    job_args = import_module(f"sleuth.sim.{job}").parse_args
    options, _ = job_args(["--base-delay-ms", "20"])
    assert options.base_delay_s == pytest.approx(0.02)
    with pytest.raises(SystemExit):
        job_args(["--base-delay-ms", "0"])
    assert "--base-delay-ms" in capsys.readouterr().err


@pytest.mark.parametrize("job", ["trainjob", "frameworkjob"])
@pytest.mark.parametrize("iters", ["3-5", "x:4", "5:3", "-1:4"])
def test_every_real_job_names_bad_slow_iterations_before_it_starts(job, iters, capsys):
    from importlib import import_module

    with pytest.raises(SystemExit):
        import_module(f"sleuth.sim.{job}").parse_args(["--slow-rank", "1", "--slow-iters", iters])
    assert "--slow-iters" in capsys.readouterr().err


def test_the_slow_rank_alone_is_slowed_and_only_in_its_iterations():
    from sleuth.sim.frameworkjob import parse_args as framework_args

    options, _ = framework_args(["--slow-rank", "2", "--slow-factor", "3", "--slow-iters", "10:20"])
    assert [options.factor(rank, 15) for rank in range(4)] == [1.0, 1.0, 3.0, 1.0]
    assert options.factor(2, 9) == options.factor(2, 20) == 1.0


@pytest.mark.parametrize("option", ["--tp", "--dp"])
def test_a_tensor_or_data_parallel_group_of_one_fails_before_the_job_starts(option, capsys):
    # The job runs each group's collectives: a group of one rank is refused by name, not a KeyError in every rank.
    with pytest.raises(SystemExit):
        parse_args([option, "1"])
    assert f"{option} must be 2 or more" in capsys.readouterr().err


def _write_threads(rank: int, folder: str) -> None:
    import torch

    with open(f"{folder}/threads-{rank}", "w") as file:
        file.write(str(torch.get_num_threads()))


def test_ranks_compute_on_one_thread_each_as_torchrun_starts_them_unless_omp_num_threads_says(tmp_path, monkeypatch):
    from sleuth.sim.trainjob import start_ranks

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    start_ranks(_write_threads, (str(tmp_path),), 2)
    assert [(tmp_path / f"threads-{r}").read_text() for r in range(2)] == ["1", "1"]
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # the user's choice is left to torch
    import torch

    start_ranks(_write_threads, (str(tmp_path),), 2)
    assert [(tmp_path / f"threads-{r}").read_text() for r in range(2)] == [str(torch.get_num_threads())] * 2
