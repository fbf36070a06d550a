"""``sleuth localize`` on a real DDP job's records from a loaded machine (``loaded_ddp/README.md``):
its jitter, which strikes one process and then another, is never blamed on a device."""

from __future__ import annotations

import json
from pathlib import Path

from sleuth.cli import main

RUNS = Path(__file__).parent / "loaded_ddp"


def test_three_paying_steps_of_jitter_two_on_one_rank_blame_no_device_beside_the_slowed_gpu(capsys):
    # Two of three in four ranks is as often as chance makes some rank the costliest.
    assert main(["localize", "--records", str(RUNS / "spike"), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert {i["suspects"][0]["device"] for i in found if i["suspects"]} == {"gpu:vm/2"}, found
    jitter = [i for i in found if not set(i["iterations"]) & set(range(15, 25))]
    assert jitter and all(i["cause"] == "scattered_pauses" for i in jitter), found
