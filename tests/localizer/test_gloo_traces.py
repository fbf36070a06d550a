"""``sleuth localize`` on real gloo jobs' records traced on this kind of machine (``gloo_profiler/README.md``,
``gloo_logger/README.md``)."""

from __future__ import annotations

import json
from pathlib import Path

from sleuth.cli import main

RUNS = Path(__file__).parent / "gloo_profiler"
LOGGED = Path(__file__).parent / "gloo_logger"


def test_a_rank_costliest_through_both_levels_of_a_cut_episode_is_its_gpu_not_scattered_pauses(capsys):
    # Three steps of a 4-rank world cannot set a rank apart at 5% (4 x (1/4)^3 = 0.06); the six in a
    # row the cut and the clusters divide can.
    assert main(["localize", "--records", str(RUNS / "sleeper-cut"), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    slowed = [i for i in found if set(range(13, 19)) <= set(i["iterations"])]
    assert len(slowed) == 1, found
    assert slowed[0]["cause"] == "compute" and slowed[0]["suspects"][0]["device"] == "gpu:vm/1", found


def test_a_step_every_rank_took_long_before_a_gpu_s_step_is_not_its_onset(capsys):
    # Steps 13 and 20-28 were searched as one cluster: the GPU's incident began at 13.
    assert main(["localize", "--records", str(LOGGED / "ddp-late"), "--json"]) == 0
    [incident] = json.loads(capsys.readouterr().out)
    assert incident["suspects"][0]["device"] == "gpu:vm/3", incident
    assert incident["iterations"] == list(range(20, 40)) and incident["incident"] == "ddp4-late-20-28", incident


def test_costly_batches_moving_between_a_single_hosts_ranks_are_the_data(capsys):
    # Offline, the whole job's iterations show the costly batches moving; streamed: test_slowdown_watch.py.
    assert main(["localize", "--records", str(LOGGED / "ddp-seqlen-streamed"), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert [i["cause"] for i in found] == ["seqlen_imbalance"] and not found[0]["suspects"], found


def test_rank_0_saving_a_checkpoint_every_10_steps_is_named_with_the_program_s_beat(capsys):
    # Neither the records nor an injected fault can tell a loop's work from a device: the GPU stays
    # named, and the advice says the iterations keep the step count.
    assert main(["localize", "--records", str(LOGGED / "ddp-ckpt"), "--json"]) == 0
    [incident] = json.loads(capsys.readouterr().out)
    assert incident["iterations"] == [10, 20, 30, 40, 50] and incident["suspects"][0]["device"] == "gpu:vm/0", incident
    assert incident["advice"].startswith("Rank 0 was late in iterations 10, 20, 30, 40 and 50, one every 10: "), incident


def test_transfer_blips_clustered_with_a_checkpoint_pause_outside_any_episode_name_no_device(capsys):
    # Two all-reduces ran long on the 2-core machine near rank 0's checkpoint at 200: their cluster's
    # network suspect (the host's NVSwitch) carried under a tenth of what the stragglers cost there.
    assert main(["localize", "--records", str(LOGGED / "ddp-ckpt100"), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert not [i for i in found if i["suspects"]], found


def test_a_gpu_late_where_the_job_paid_for_another_rank_s_checkpoint_is_not_named(capsys):
    # Rank 2 was found late in 42 and 92, which the job did not pay for, and cost 66 a fifth: charged
    # 2% of its cluster's iterations, whose cost was rank 0's checkpoint at 100.
    assert main(["localize", "--records", str(LOGGED / "ddp-ckpt100-2"), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert not [i for i in found if i["suspects"]], found
