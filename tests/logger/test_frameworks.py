"""Jobs whose collectives the framework issues (sleuth.sim.frameworkjob: DDP's C++ reducer, FSDP2,
functional collectives and DTensor on a DeviceMesh), logged with only the environment variable.

Each rank also counts its operators independently of the logger: torch's own profiler sees every
c10d operator the process runs as one ``c10d::*`` event.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import Counter, defaultdict
from contextlib import nullcontext

import numpy as np
import pytest

from sleuth.cli import main
from sleuth.jobspec import JobSpec
from sleuth.logger.sinks import ITERATIONS_DIR
from sleuth.recordio import read_parquet
from sleuth.records import IterationBatch, OpKind
from sleuth.topology.ids import gpu_id

from tests.logger.recorded import record_keys

pytest.importorskip("torch")

WORLD = 4
ITERS = 6

#: torch's dispatcher operator → the kind the logger records it as.
C10D_KINDS = {
    "c10d::allreduce_": OpKind.ALL_REDUCE, "c10d::allreduce_coalesced_": OpKind.ALL_REDUCE,
    "c10d::broadcast_": OpKind.BROADCAST, "c10d::allgather_": OpKind.ALL_GATHER,
    "c10d::_allgather_base_": OpKind.ALL_GATHER, "c10d::allgather_into_tensor_coalesced_": OpKind.ALL_GATHER,
    "c10d::reduce_scatter_": OpKind.REDUCE_SCATTER, "c10d::_reduce_scatter_base_": OpKind.REDUCE_SCATTER,
    "c10d::reduce_scatter_tensor_coalesced_": OpKind.REDUCE_SCATTER, "c10d::barrier": OpKind.BARRIER,
    "c10d::send": OpKind.SEND, "c10d::recv_": OpKind.RECV, "c10d::reduce_": OpKind.REDUCE,
    "c10d::alltoall_": OpKind.ALL_TO_ALL, "c10d::alltoall_base_": OpKind.ALL_TO_ALL,
}


def run_job(folder, *args: str, env_extra: dict | None = None, alone=nullcontext) -> None:
    """Run the framework job logged into ``folder/records``; ``alone``: the machine's turn it runs in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
    env.update(SLEUTH_LOG_DIR=str(folder / "records"), SLEUTH_JOB=folder.name, SLEUTH_FLUSH_S="0.2")
    env.update(env_extra or {})
    command = [sys.executable, "-m", "sleuth.sim.frameworkjob", "--world", str(WORLD), "--out", str(folder / "out"), *args]
    with alone():
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="module", params=["ddp", "fsdp", "functional"])
def counted(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(f"{request.param}-job")
    run_job(folder, "--mode", request.param, "--iters", str(ITERS), "--count-ops")
    results = [json.loads((folder / "out" / f"result-{r}.json").read_text()) for r in range(WORLD)]
    return request.param, folder / "records", results


def test_every_operator_the_framework_runs_is_recorded_once(counted):
    mode, folder, results = counted
    records = read_parquet(folder)
    assert records.problems() == []
    for result in results:
        expected = Counter()
        for name, count in result["c10d_ops"].items():
            assert name in C10D_KINDS, f"{mode}: torch ran {name}, which the test cannot map"
            expected[int(C10D_KINDS[name])] += count
        mine = records["rank"] == result["rank"]
        recorded = Counter(records["op"][mine].tolist())
        assert recorded == expected, (mode, result["rank"])
        # The framework's own collectives, not only the script's final barrier.
        assert sum(expected.values()) > ITERS * 2


def test_auto_capture_uses_the_native_hooks_where_they_build(counted):
    from sleuth.logger import _cuda_timing

    mode, _, results = counted
    # CUDA-event timing is the Python hooks' (sleuth.logger.capture_native says why).
    expected = "ProcessGroupHooks" if _cuda_timing() else "NativeProcessGroupHooks"
    assert {result["capture"] for result in results} == {expected}, mode


def test_the_python_process_group_hooks_record_what_the_native_ones_record(counted, tmp_path):
    """The same job under SLEUTH_CAPTURE=process-group: the same records, kinds, sizes, sequence
    numbers and iterations, the operators of DDP's autograd threads included."""
    mode, folder, _ = counted
    run_job(tmp_path, "--mode", mode, "--iters", str(ITERS), env_extra={"SLEUTH_CAPTURE": "process-group"})
    assert record_keys(tmp_path / "records") == record_keys(folder), mode


def test_members_agree_on_every_operator_s_sequence_number_and_kind(counted):
    mode, folder, _ = counted
    records = read_parquet(folder)
    comms = records.decoded("comm")
    seen: dict[str, dict[int, list]] = defaultdict(dict)
    for comm in set(comms.tolist()):
        rows = comms == comm
        for rank in sorted(set(records["rank"][rows].tolist())):
            mine = rows & (records["rank"] == rank)
            order = np.argsort(records["seq"][mine], kind="stable")
            seen[comm][rank] = list(zip(records["seq"][mine][order].tolist(), records["op"][mine][order].tolist()))
    spec = JobSpec.read(folder)
    members = {c.comm: set(c.ranks) for c in spec.communicators}
    for comm, by_rank in seen.items():
        assert set(by_rank) == members[comm], (mode, comm)
        sequences = list(by_rank.values())
        assert all(s == sequences[0] for s in sequences), (mode, comm)
        assert [seq for seq, _ in sequences[0]] == list(range(len(sequences[0])))


def test_iterations_come_from_the_optimizer_step(counted):
    mode, folder, _ = counted
    records = read_parquet(folder)
    # Setup operators belong to iteration 0 with the first step; the last barrier follows the last.
    assert set(records["iteration"].tolist()) == set(range(ITERS + 1)), mode
    steps = read_parquet(folder / ITERATIONS_DIR, IterationBatch)
    for rank in range(WORLD):
        mine = steps.take(steps["rank"] == rank)
        assert mine["iteration"].tolist() == list(range(ITERS)), (mode, rank)


def test_communicators_are_named_and_the_layout_registered(counted):
    mode, folder, _ = counted
    spec = JobSpec.read(folder)
    names = {c.comm: c.kind for c in spec.communicators}
    if mode == "functional":  # DeviceMesh ("dp", "tp"): the mesh's own dimension names
        assert names == {"world": "world", "tp.0": "tp", "tp.1": "tp", "dp.0": "dp", "dp.1": "dp"}
        assert (spec.layout.tp, spec.layout.dp, spec.layout.pp) == (2, 2, 1)
        assert {c.comm: c.ranks for c in spec.communicators}["dp.1"] == (1, 3)
    else:  # DDP and FSDP over the default group: data parallel over the world
        assert names == {"world": "world"}
        assert (spec.layout.tp, spec.layout.dp, spec.layout.pp) == (1, WORLD, 1)


def test_the_period_detector_numbers_iterations_when_no_optimizer_marks_them(tmp_path):
    iters = 60
    run_job(tmp_path, "--mode", "ddp", "--iters", str(iters), "--manual-step")
    records = read_parquet(tmp_path / "records")
    for rank in range(WORLD):
        mine = records["iteration"][records["rank"] == rank]
        assert (mine >= 0).all(), "the period was not found"
        per_iteration = Counter(mine.tolist())
        # One period per iteration: the same number of bucket all-reduces in each whole one.
        middle = [per_iteration[i] for i in range(2, iters - 2)]
        assert len(set(middle)) == 1 and abs(len(per_iteration) - iters) <= 2, per_iteration


SLOW_RANK = 2


#: Each rank computes 40 ms a step, as a small model's step takes on a GPU: with 4 ms, the few
#: milliseconds a process waits for one of this machine's 2 cores are a tenth of its step, and a
#: scheduler's preference for one process over several steps pays the job's slowdown line.
STEP_COMPUTE = ("--base-delay-ms", "40")


@pytest.mark.parametrize("shape, fault, slowed", [
    # 0.8 s of compute per step on rank 2 in iterations 15-24: above the +-50% step-time jitter
    # of 4 processes on a shared 2-core machine (test_real_job.py says more).
    ("spike", ("--slow-factor", "20", "--slow-iters", "15:25"), range(15, 25)),
    # 0.4 s per step from the first step on: no iteration stands out against the others.
    ("from the first step", ("--slow-factor", "10", "--slow-iters", "0:30"), range(30)),
    # growing from 40 ms at step 5 to 0.8 s at step 29.
    ("ramp", ("--slow-factor", "20", "--slow-iters", "5:30", "--ramp"), range(5, 30)),
])
def test_localize_names_the_slowed_ddp_rank_s_gpu(tmp_path, capsys, machine_alone, shape, fault, slowed):
    run_job(tmp_path, "--mode", "ddp", "--iters", "30", *STEP_COMPUTE, "--slow-rank", str(SLOW_RANK), *fault,
            alone=machine_alone)
    folder = tmp_path / "records"
    assert main(["localize", "--records", str(folder), "--json"]) == 0
    incidents = json.loads(capsys.readouterr().out)
    assert incidents, f"no incident for a DDP rank slowed ({shape})"
    placement = JobSpec.read(folder).placements[SLOW_RANK]
    # The incident over most of the slowed steps names the rank's GPU first.
    covering = max(incidents, key=lambda i: len(set(slowed) & set(i["iterations"])))
    assert covering["suspects"] and covering["suspects"][0]["device"] == gpu_id(placement.host, placement.gpu), incidents
    # No incident blames another device. This loaded machine's own jitter, moving between the
    # processes, may raise an incident of its own: one naming no device is not a wrong blame.
    assert {i["suspects"][0]["device"] for i in incidents if i["suspects"]} == {covering["suspects"][0]["device"]}, incidents


def test_uneven_batches_in_a_ddp_job_are_named_sequence_length_imbalance_and_blame_no_gpu(tmp_path, capsys,
                                                                                          machine_alone):
    # Each step one rank computes 100 times the base work (0.4 s), the others 1 to 100 times on a long
    # tail: the costly batch lands on another rank each step.
    run_job(tmp_path, "--mode", "ddp", "--iters", "30", "--seqlen-jitter", "100", "--seed", "1", alone=machine_alone)
    assert main(["localize", "--records", str(tmp_path / "records"), "--json"]) == 0
    incidents = json.loads(capsys.readouterr().out)
    # The incident over most of the job names the data; the loaded machine's own pauses, moving
    # between the processes, may raise one of their own over a few steps. None names a device.
    covering = max(incidents, key=lambda i: len(i["iterations"]))
    assert covering["cause"] == "seqlen_imbalance", incidents
    assert not [i for i in incidents if i["suspects"]], incidents


_PROBE = textwrap.dedent("""
    import json, tempfile
    import torch, torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d
    dist.init_process_group("gloo", rank=0, world_size=1, init_method="file://" + tempfile.mktemp())
    dist.new_group([0])
    import os, sys
    home = os.path.dirname(torch.__file__)
    def replaced(f):  # torch's own functions live in torch's folder; built-ins have no code
        code = getattr(f, "__code__", None)
        return code is not None and not code.co_filename.startswith(home)
    touched = {
        "register": replaced(c10d._register_pg_in_world),
        "all_reduce": replaced(dist.all_reduce),
        "destroy": replaced(dist.destroy_process_group),
        "wait": replaced(dist.Work.wait),
    }
    touched["sleuth"] = "sleuth.logger.capture" in sys.modules
    dist.destroy_process_group()
    print(json.dumps(touched))
""")


@pytest.mark.parametrize("switched_on", [False, True])
def test_with_the_switch_off_torch_is_left_as_it_is(tmp_path, switched_on):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
    if switched_on:
        env.update(SLEUTH_LOG_DIR=str(tmp_path / "records"), SLEUTH_JOB="probe")
    done = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    touched = json.loads(done.stdout.strip().splitlines()[-1])
    if switched_on:  # process-group capture: group registration, the final flush and waits
        assert touched == {"register": True, "all_reduce": False, "destroy": True, "wait": True, "sleuth": True}
    else:
        assert not any(touched.values()), touched
