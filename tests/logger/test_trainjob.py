"""The real job (sleuth.sim.trainjob: 8 gloo ranks, tp2 pp2 dp2) logged with only the
environment variable set, to a records folder and to a collector that is down at first."""

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict

import numpy as np
import pytest

from sleuth.jobspec import JobSpec
from sleuth.layout import ParallelLayout
from sleuth.logger.sinks import ITERATIONS_DIR
from sleuth.ports import free_port
from sleuth.recordio import read_parquet
from sleuth.records import IterationBatch, OpKind

from tests.logger import collector
from tests.logger.recorded import record_keys

pytest.importorskip("torch")  # the `test` extra installs it

ITERS = 10
WORLD = 8
SETUP_OPS = 3  # broadcasts of w1 and w2 within dp and the first barrier: before any step


def run_job(env_extra: dict, out, *, on_line=None, layout: tuple[str, ...] = ()) -> float:
    """Run the job with only environment variables added; ``on_line`` sees its stdout lines;
    ``layout``: options of the job's shape (the default: ``WORLD`` ranks, tp2 pp2 dp2)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
    env.update(env_extra, SLEUTH_FLUSH_S="0.2", SLEUTH_SPILL_DIR=str(out / "spill"), PYTHONUNBUFFERED="1")
    start = time.monotonic()
    command = [sys.executable, "-m", "sleuth.sim.trainjob", "--iters", str(ITERS), "--progress", "--out", str(out / "out"), *layout]
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        errors = []
        reader = threading.Thread(target=lambda: errors.append(proc.stderr.read()))
        reader.start()
        for line in proc.stdout:
            if on_line is not None:
                on_line(line)
        proc.wait(timeout=600)
        reader.join()
    assert proc.returncode == 0, errors[0][-3000:]
    return time.monotonic() - start


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    root = tmp_path_factory.mktemp("job")
    seconds = run_job({"SLEUTH_LOG_DIR": str(root / "records"), "SLEUTH_JOB": "demo-1"}, root)
    return root / "records", seconds


def test_the_records_folder_is_complete_for_the_localizer(logged):
    folder, _ = logged
    records = read_parquet(folder)
    spec = JobSpec.read(folder)
    assert records.problems() == []
    assert set(records.decoded("job")) == {"demo-1"}
    assert spec.job == "demo-1" and spec.world == WORLD
    assert sorted(set(records["rank"].tolist())) == list(range(WORLD))
    comms = {c.comm: c for c in spec.communicators}
    assert set(records.decoded("comm")) <= set(comms)
    # Every group the job made, named by its shape (the job gives no descriptions): 4 tp, 4 dp
    # and 4 pp groups of 2 (pp unused: P2P runs on the world with global peers), and the world.
    assert Counter(c.kind for c in comms.values()) == {"tp": 4, "dp": 4, "pp": 4, "world": 1}
    assert {c.comm: c.ranks for c in comms.values() if c.kind != "world"} == {
        g.comm: g.ranks for g in ParallelLayout(world=WORLD, tp=2, pp=2, dp=2).groups() if g.kind in ("tp", "dp", "pp")
    }
    assert (spec.layout.tp, spec.layout.pp, spec.layout.dp) == (2, 2, 2)


def test_every_op_kind_of_the_job_is_recorded(logged):
    records = read_parquet(logged[0])
    used = {OpKind(op) for op in np.unique(records["op"]).tolist()}
    assert used == {
        OpKind.ALL_REDUCE, OpKind.ALL_GATHER, OpKind.REDUCE_SCATTER, OpKind.ALL_TO_ALL, OpKind.BROADCAST,
        OpKind.REDUCE, OpKind.SEND, OpKind.RECV, OpKind.BARRIER,
    }


def test_collective_sequence_numbers_agree_on_every_member_and_none_is_missing(logged):
    records = read_parquet(logged[0])
    spec = JobSpec.read(logged[0])
    collective = records.take(records["peer"] < 0)
    members: dict[tuple[str, int], dict[int, tuple[int, int]]] = defaultdict(dict)
    for row in collective.rows():
        members[(row["comm"], row["seq"])][row["rank"]] = (row["op"], row["nbytes"])
    assert members
    for (comm, seq), by_rank in members.items():
        assert sorted(by_rank) == sorted(spec.communicator(comm).ranks), (comm, seq)
        assert len(set(by_rank.values())) == 1, (comm, seq, by_rank)  # same op and size everywhere
    per_comm = defaultdict(set)
    for comm, seq in members:
        per_comm[comm].add(seq)
    for comm, seqs in per_comm.items():
        assert seqs == set(range(len(seqs))), comm  # contiguous: nothing lost


def test_every_send_matches_one_recv(logged):
    records = read_parquet(logged[0])
    p2p = records.take(records["peer"] >= 0)
    sends = {(r["comm"], r["rank"], r["peer"], r["seq"]): r["nbytes"] for r in p2p.rows() if r["op"] == OpKind.SEND}
    recvs = {(r["comm"], r["peer"], r["rank"], r["seq"]): r["nbytes"] for r in p2p.rows() if r["op"] == OpKind.RECV}
    assert len(sends) == 2 * 2 * ITERS * 4  # 4 pipeline pairs, 2 micro-batches, forward + backward
    assert sends == recvs


def test_iteration_numbers_follow_the_optimizer_steps(logged):
    records = read_parquet(logged[0])
    iterations = read_parquet(logged[0] / ITERATIONS_DIR, IterationBatch)
    for rank in range(WORLD):
        mine = iterations.take(iterations["rank"] == rank)
        assert mine["iteration"].tolist() == list(range(ITERS))
        assert np.all(mine["t_end_ns"][:-1] == mine["t_start_ns"][1:])
        counts = Counter(records.take(records["rank"] == rank)["iteration"].tolist())
        per_iteration = {counts[i] for i in range(1, ITERS)}
        assert len(per_iteration) == 1, (rank, counts)  # every training iteration alike
        assert counts[0] == per_iteration.pop() + SETUP_OPS
        assert counts[ITERS] == 1  # the closing barrier, after the last step
        assert set(counts) == set(range(ITERS + 1))


def test_records_are_timed_on_the_host_clock(logged):
    records = read_parquet(logged[0])
    assert np.all(records["t_issue_ns"] <= records["t_start_ns"])
    assert np.all(records["t_start_ns"] <= records["t_end_ns"])
    assert abs(int(records["t_end_ns"].max()) - time.time_ns()) < 3600 * 10**9


def test_with_the_gateway_down_for_the_first_half_training_finishes_and_nothing_is_lost(logged, tmp_path):
    port = free_port()
    started = {}
    # Bound, not listening: the logger's connections are refused, and no other test's server takes the port.
    held = socket.socket()
    held.bind(("127.0.0.1", port))

    def on_line(line):
        # The collector comes up once half of the iterations are done.
        if line.startswith(f"iteration {ITERS // 2 - 1} done") and "server" not in started:
            held.close()
            started["server"], started["servicer"], _ = collector.start(port)
            started["at_ns"] = time.time_ns()

    # This run uses the pure-Python recorder, the folder run above the C one.
    env = {
        "SLEUTH_COLLECTOR": f"127.0.0.1:{port}", "SLEUTH_LOG_DIR": str(tmp_path / "records"),
        "SLEUTH_JOB": "demo-2", "SLEUTH_LOGGER_IMPL": "python",
    }
    try:
        run_job(env, tmp_path, on_line=on_line)
        servicer = started["servicer"]
        got = servicer.all_records()
        written = read_parquet(tmp_path / "records")
        assert servicer.dropped == 0
        key = lambda batch: sorted(  # noqa: E731
            zip(batch["rank"].tolist(), batch.decoded("comm").tolist(), batch["seq"].tolist(),
                batch["op"].tolist(), batch["peer"].tolist(), batch["t_end_ns"].tolist())
        )
        assert key(got) == key(written)  # every record, once
        # Half the training ran while it was down: those records were held and replayed.
        assert (got["t_end_ns"] < started["at_ns"]).mean() > 0.4
        assert len(servicer.all_iterations()) == WORLD * ITERS
        assert servicer.specs and servicer.specs[-1] == JobSpec.read(tmp_path / "records")
    finally:
        held.close()
        if "server" in started:
            started["server"].stop(0)


def test_the_function_wrappers_record_what_the_process_group_hooks_record(logged, tmp_path):
    """SLEUTH_CAPTURE=functions (torch without process-group hooks) sees every operator this job's
    script issues itself, exactly as the process-group hooks do, and nothing twice."""
    run_job({"SLEUTH_LOG_DIR": str(tmp_path / "records"), "SLEUTH_JOB": "demo-1", "SLEUTH_CAPTURE": "functions"}, tmp_path)
    assert record_keys(tmp_path / "records") == record_keys(logged[0])


def test_the_python_process_group_hooks_record_what_the_native_ones_record(logged, tmp_path):
    """The job's P2P (send/recv, batch_isend_irecv, isend/irecv: gloo's works without a future),
    async and sync collectives: the same records under both, peers and sequence numbers included."""
    from sleuth.logger import _cuda_timing

    results = [json.loads(path.read_text()) for path in (logged[0].parent / "out").glob("result-*.json")]
    # auto: the native hooks where they build (CUDA-event timing is the Python hooks').
    expected = "ProcessGroupHooks" if _cuda_timing() else "NativeProcessGroupHooks"
    assert len(results) == WORLD and {result["capture"] for result in results} == {expected}
    run_job({"SLEUTH_LOG_DIR": str(tmp_path / "records"), "SLEUTH_JOB": "demo-1", "SLEUTH_CAPTURE": "process-group"}, tmp_path)
    assert record_keys(tmp_path / "records") == record_keys(logged[0])


def test_a_restarted_attempt_under_the_same_job_id_keeps_both_attempts(tmp_path):
    """torchelastic restarts a worker group under the same run id, and its iterations start at 0
    again: each attempt is registered and streamed as a job of its own, and neither loses a step."""
    server, servicer, port = collector.start(0)
    try:
        for restart in (0, 1):  # four ranks (tp2 dp2): what is kept apart is the attempt, whatever its shape
            env = {"SLEUTH_COLLECTOR": f"127.0.0.1:{port}", "TORCHELASTIC_RUN_ID": "elastic-7",
                   "TORCHELASTIC_RESTART_COUNT": str(restart)}
            run_job(env, tmp_path / f"attempt-{restart}", layout=("--pp", "1"))
        assert {spec.job: spec.world for spec in servicer.specs} == {"elastic-7": 4, "elastic-7.r1": 4}
        iterations = servicer.all_iterations()
        for job in ("elastic-7", "elastic-7.r1"):
            mine = iterations.take(iterations.decoded("job") == job)
            assert sorted(Counter(mine["iteration"].tolist()).items()) == [(i, 4) for i in range(ITERS)], job
        records = servicer.all_records()
        assert set(records.decoded("job")) == {"elastic-7", "elastic-7.r1"}
    finally:
        server.stop(0)
