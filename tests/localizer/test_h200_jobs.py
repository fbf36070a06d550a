"""``sleuth localize`` on real DDP jobs' records from an H200 under NCCL (``h200_ddp/README.md``):
uneven batches blame no GPU, and a slow GPU leads its incident however its slowdown arrived."""

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
