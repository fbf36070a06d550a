"""``sleuth localize`` on real gloo jobs' records from a loaded 2-core machine (``loaded_gloo/README.md``):
the machine's jitter, delaying one process's compute or transfers now and another's next, is named as
pauses, blaming no device and no data, and uneven batches are one data incident."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sleuth.cli import main
from sleuth.records_folder import read_records

RUNS = Path(__file__).parent / "loaded_gloo"


def test_jitter_delaying_a_different_all_reduce_each_step_blames_no_switch_and_the_slowed_gpu_leads_its_steps(capsys):
    assert main(["localize", "--records", str(RUNS / "ddp-spike"), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    blamed = {i["suspects"][0]["device"]: i["iterations"] for i in found if i["suspects"]}
    assert list(blamed) == ["gpu:vm/2"], found
    assert set(range(15, 25)) <= set(blamed["gpu:vm/2"]), found
    # What the job paid before the fault is told, as pauses, not dropped.
    assert [i["cause"] for i in found if not i["suspects"]] == ["scattered_pauses"], found


def test_pauses_moving_between_the_replicas_of_a_clean_job_are_pauses_not_uneven_data(capsys):
    # Each replica is one rank (DDP): the costliest moving says nothing of data; that it paid in a
    # small part of its work does.
    assert main(["localize", "--records", str(RUNS / "ddp-clean"), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found and {(i["cause"], bool(i["suspects"])) for i in found} == {("scattered_pauses", False)}, found


@pytest.mark.parametrize("run", ["ddp-seqlen", "train-seqlen", "ddp-seqlen-top-three"])
def test_uneven_batches_are_one_data_incident_even_where_a_stretch_moved_only_twice(run, capsys):
    # Two turns are too few to call the work moving, but a slow device would not be costly over
    # its whole replica (every place, or the whole of a one-rank replica's work), and data is.
    assert main(["localize", "--records", str(RUNS / run), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert [(i["cause"], i["suspects"]) for i in found] == [("seqlen_imbalance", [])], found


def test_a_moderately_slowed_gpu_leads_and_jitter_delaying_a_different_transfer_each_step_names_no_nvswitch(capsys):
    # Every transfer of a one-host job crosses its NVSwitch, so ranks descheduled mid-collective make an
    # irregular iteration's search read a slow switch; a slow switch delays the same transfers every step.
    assert main(["localize", "--records", str(RUNS / "fsdp-moderate"), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    named = [s["device"] for i in found for s in i["suspects"]]
    assert "nvswitch:vm" not in named, found
    assert [i["suspects"][0]["device"] for i in found if i["suspects"]] == ["gpu:vm/2"], found


def test_a_stretch_whose_search_ties_no_device_is_pauses_not_a_network_fault(capsys):
    # Steps 5-14 paid x1.44 with a rank apart but transfers jitter: the what-if search names no
    # device, and an incident blaming the network with none to replace blames hardware for nothing.
    assert main(["localize", "--records", str(RUNS / "train-slow"), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert all(i["suspects"] for i in found if i["cause"] in ("compute", "network", "mixed")), found
    assert [i["suspects"][0]["device"] for i in found if i["suspects"]] == ["gpu:vm/5"], found


def test_the_operators_after_the_last_step_are_no_step_of_the_attribution(capsys):
    # The job's final barrier follows its last optimizer step: the records number it one past the
    # last iteration row, and what it cost is the job's shutdown, not a step's slowdown.
    records, iterations = read_records(RUNS / "ddp-spike")
    last_step = int(iterations["iteration"].max())
    assert int(records["iteration"].max()) == last_step + 1
    assert main(["attribute", "--records", str(RUNS / "ddp-spike"), "--json"]) == 0
    assert max(json.loads(capsys.readouterr().out)["iterations"]) == last_step


def test_a_pipeline_sender_waiting_on_its_slow_receiver_is_waiting_not_computing(capsys):
    # Rank 5 computes 0.8 s more per micro-batch in steps 15-24 (steps of about 0.83 s against
    # 0.02-0.06 s): its stage-0 partners' blocking sends (gloo's send, a waited isend) wait for it.
    # Read as their compute, the wait stood in the ideal too (two replicas: no median puts it back)
    # and the job read about x5 for those steps.
    assert main(["attribute", "--records", str(RUNS / "train-slow"), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    paid = dict(zip(found["iterations"], found["per_iteration"]))
    assert min(paid[i] for i in range(15, 25)) > 15, paid
