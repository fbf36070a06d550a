"""``sleuth localize`` on real DDP and JAX jobs' records from an H200 under NCCL (``h200_ddp/README.md``,
``h200_jax/README.md``): uneven batches blame no GPU, and a slow GPU leads its incident however its
slowdown arrived."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sleuth.cli import main

RUNS = Path(__file__).parent / "h200_ddp"


def incidents(run: str, capsys) -> list[dict]:
    assert main(["localize", "--records", str(RUNS / run), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_uneven_batches_under_nccl_are_sequence_length_imbalance(capsys):
    found = incidents("seqlen", capsys)
    costliest = max(found, key=lambda i: i["impact"]["gpu_hours_lost"])
    assert costliest["cause"] == "seqlen_imbalance" and not costliest["suspects"], found
    assert all(not i["suspects"] for i in found), found


@pytest.mark.parametrize("run", ["fault", "fault-from-start"])
def test_the_slow_gpu_leads_under_nccl(run, capsys):
    found = incidents(run, capsys)
    costliest = max(found, key=lambda i: i["impact"]["gpu_hours_lost"])
    assert costliest["suspects"][0]["device"] == "gpu:node2/0", found


def test_a_gpu_ramping_and_an_earlier_straggler_are_two_incidents_each_on_its_own_stretch(capsys):
    found = incidents("ramp", capsys)
    lead = {i["suspects"][0]["device"]: i["iterations"] for i in found if i["suspects"]}
    assert set(lead) == {"gpu:node3/0", "gpu:node2/0"}, found
    # rank 3's stretch ends before the ramp pays, which is rank 2's to the end
    assert max(lead["gpu:node3/0"]) < 60 <= min(lead["gpu:node2/0"]) and max(lead["gpu:node2/0"]) == 148


def test_a_moderate_step_names_its_gpu_where_the_job_paid_for_it(capsys):
    found = incidents("moderate", capsys)
    assert [i["suspects"][0]["device"] for i in found] == ["gpu:node2/0"], found
    assert min(found[0]["iterations"]) >= 50


def test_a_jax_jobs_slow_gpu_is_named_alone_from_its_step(capsys):
    assert main(["localize", "--records", str(RUNS.parent / "h200_jax" / "fault"), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    [incident] = found
    assert [s["device"] for s in incident["suspects"]] == ["gpu:node2/0"] and incident["cause"] == "compute"
    assert 45 <= min(incident["iterations"]) <= 50 and max(incident["iterations"]) == 149
