"""``sleuth localize`` on real gloo jobs' records traced on this kind of machine (``gloo_profiler/README.md``)."""

from __future__ import annotations

import json
from pathlib import Path

from sleuth.cli import main

RUNS = Path(__file__).parent / "gloo_profiler"


def test_a_rank_costliest_through_both_levels_of_a_cut_episode_is_its_gpu_not_scattered_pauses(capsys):
    # Three steps of a 4-rank world cannot set a rank apart at 5% (4 x (1/4)^3 = 0.06); the six in a
    # row the cut and the clusters divide can.
    assert main(["localize", "--records", str(RUNS / "sleeper-cut"), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    slowed = [i for i in found if set(range(13, 19)) <= set(i["iterations"])]
    assert len(slowed) == 1, found
    assert slowed[0]["cause"] == "compute" and slowed[0]["suspects"][0]["device"] == "gpu:vm/1", found
