"""The JAX job's options (jax itself runs it on the GPU machine: ``bench_nccl_gpu.py --parts jax_fault``)."""

import pytest

from sleuth.sim.jaxjob import JaxJobOptions, parse_args
from sleuth.sim.trainjob import SlowRank


def test_only_the_slow_rank_computes_more_and_only_in_its_iterations():
    options = JaxJobOptions(world=4, slow=SlowRank(rank=2, factor=3.0, iters=(10, 20)), base_units=24)
    assert [options.units(rank, 15) for rank in range(4)] == [24, 24, 72, 24]
    assert options.units(2, 9) == 24 and options.units(2, 20) == 24


def test_a_ramp_grows_the_slow_ranks_compute_from_its_base_to_the_factor():
    options = JaxJobOptions(world=4, slow=SlowRank(rank=1, factor=2.0, iters=(0, 11), ramp=True), base_units=20)
    assert [options.units(1, i) for i in (0, 5, 10)] == [20, 30, 40]


def test_a_rank_is_started_by_a_launcher(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SystemExit):
        parse_args(["--iters", "5"])
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("MASTER_PORT", "29500")
    options, platform, out = parse_args(["--iters", "5", "--slow-rank", "1", "--slow-iters", "2:4", "--out", "x"])
    assert (options.world, options.slow, platform, out) == (4, SlowRank(rank=1, iters=(2, 4)), "cuda", "x")


def test_bad_slow_iterations_are_named(monkeypatch, capsys):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("MASTER_PORT", "29500")
    with pytest.raises(SystemExit):
        parse_args(["--slow-iters", "3-5"])
    assert "--slow-iters" in capsys.readouterr().err
