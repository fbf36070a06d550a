"""``sleuth localize`` on a real DDP job's records from a loaded machine (``loaded_ddp/README.md``):
its jitter, which strikes one process and then another, is never blamed on a device."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sleuth.cli import main

RUNS = Path(__file__).parent / "loaded_ddp"


@pytest.mark.parametrize("run", [
    "spike",  # three paying steps of compute jitter, two on rank 0: as often as chance allows
    "spike-mixed",  # compute jitter on every rank in turn, all-reduces as costly as after the fault
    "spike-dips",  # all-reduce jitter in four of seven steps, none in the three between them
])
def test_the_machines_jitter_before_the_slowed_steps_blames_no_device_beside_the_slowed_gpu(run, capsys):
    assert main(["localize", "--records", str(RUNS / run), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert {i["suspects"][0]["device"] for i in found if i["suspects"]} == {"gpu:vm/2"}, found
    jitter = [i for i in found if not set(i["iterations"]) & set(range(15, 25))]
    assert jitter and all(i["cause"] == "scattered_pauses" for i in jitter), found


def test_uneven_batches_whose_long_one_fell_twice_on_one_rank_in_three_paying_steps_blame_no_gpu(capsys):
    # Three paying steps in 5-8, rank 3 the costliest of two: four ranks alike do that one time in sixteen.
    assert main(["localize", "--records", str(RUNS / "seqlen"), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found and not [i for i in found if i["suspects"]], found
    assert max(found, key=lambda i: len(i["iterations"]))["cause"] == "seqlen_imbalance", found


def test_the_demo_jobs_pause_two_steps_before_its_slowed_gpu_stays_apart_and_the_gpu_comes_first(capsys):
    assert main(["localize", "--records", str(RUNS / "demo-pause"), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert {i["suspects"][0]["device"] for i in found if i["suspects"]} == {"gpu:vm/5"}, found
    before = [i for i in found if not set(i["iterations"]) & set(range(15, 32))]
    assert all(i["cause"] == "scattered_pauses" and not i["suspects"] for i in before), found
