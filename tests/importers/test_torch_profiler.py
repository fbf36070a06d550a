"""``sleuth import torch-profiler`` on small traces written in Kineto's format (libkineto's
``output_json.cpp``: NCCL kernels carrying their ``record_param_comms`` op's collective args),
and its errors on bad files."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from sleuth.cli import main
from sleuth.errors import ConfigError, ImportFileError
from sleuth.importers import read_torch_profiler
from sleuth.jobspec import JobSpec
from sleuth.records import OpKind, RecordBatch
from sleuth.records_folder import read_records
from tests.importers.conftest import SLOW_GPU, Emulated
from tests.importers.writers import EPOCH_NS, rank_ops, write_torch_profiler

BASE_NS = 1_790_857_026_000_000_000  # baseTimeNanoseconds: CLOCK_REALTIME floored to a quarter year
STEP_US = 1_000.0


def _x(name: str, cat: str, ts: float, dur: float, pid: int | str = 7, tid: int | str = 7, **args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _comm_args(rank: int, name: str, nelems: int, seq: int, **more) -> dict:
    return {"Collective name": name, "In msg nelems": nelems, "Out msg nelems": nelems * (2 if name == "allgather" else 1),
            "Group size": 2, "dtype": "BFloat16", "Process Group Name": "0", "Process Group Description": "default_pg",
            "Process Group Ranks": "[0, 1]", "Rank": rank, "Seq": seq, **more}


def nccl_trace(rank: int, *, steps: int = 3, host: str = "node-a", late_us: float = 0.0, with_args: bool = True) -> dict:
    """A rank of an NCCL job: per step an all_reduce (Seq 2k+1) and an all_gather (Seq 2k+2) of
    1024 bf16, then rank 0 sends 256 bf16 to rank 1. Each operator is a record_param_comms CPU
    op, its cudaLaunchKernel, and the kernel on GPU ``rank`` that starts 10 µs after the launch
    and lasts 50 µs (+ ``late_us`` on rank 0's all_reduce, waiting for a late rank 1)."""
    events: list[dict] = [{"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "ts": 0.0, "args": {"name": "python"}}]
    ext = 100
    for step in range(steps):
        t0 = 5_000.0 + step * STEP_US
        events.append(_x(f"ProfilerStep#{step + 4}", "user_annotation", t0, STEP_US - 1))
        plan = [("allreduce", 1024, 2 * step + 1, {}), ("allgather", 1024, 2 * step + 2, {})]
        plan.append(("send", 256, step + 1, {"Rank": 1, "Dst Rank": 1}) if rank == 0
                    else ("recv", 256, step + 1, {"Rank": 0, "Src Rank": 0}))
        for k, (name, nelems, seq, more) in enumerate(plan):
            issue = t0 + 100 + 200 * k + (50 if rank == 1 and k == 0 else 0)
            ext += 1
            corr = 1000 + ext
            args = _comm_args(rank, name, nelems, seq, **more)
            events.append(_x("record_param_comms", "cpu_op", issue, 8.0, **{"External id": ext, **args}))
            events.append(_x("cudaLaunchKernel", "cuda_runtime", issue + 2, 4.0, correlation=corr, **{"External id": ext}))
            kernel_args = {"External id": ext, "correlation": corr, "device": rank, "stream": 20}
            if with_args:
                kernel_args.update(args)
            dur = 50.0 + (late_us if rank == 0 and k == 0 else 0.0)
            events.append(_x(f"ncclDevKernel_{name}_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "kernel",
                             issue + 10, dur, pid=rank, tid=20, **kernel_args))
    return {"schemaVersion": 1, "deviceProperties": [], "host_name": host,
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2, "pg_count": 1, "pg_config": [
                {"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": 2, "ranks": [0, 1]}]},
            "displayTimeUnit": "ms", "baseTimeNanoseconds": BASE_NS, "traceEvents": events}


def write(folder: Path, name: str, trace: dict, *, gz: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    data = json.dumps(trace, indent=1).encode()
    path = folder / name
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def nccl_job(folder: Path, **options) -> Path:
    write(folder, "node-a_11.1.pt.trace.json", nccl_trace(0, **options))
    write(folder, "node-a_12.1.pt.trace.json.gz", nccl_trace(1, **options), gz=True)
    return folder


def us(t_us: float) -> int:
    return BASE_NS + round(t_us * 1000)


def test_nccl_kernels_give_device_times_and_their_cpu_ops_the_issue(tmp_path: Path) -> None:
    imported = read_torch_profiler(nccl_job(tmp_path / "traces", late_us=70.0), job="j")
    rows = sorted(imported.records.rows(), key=lambda r: (r["rank"], r["t_issue_ns"]))
    assert len(rows) == 2 * 3 * 3
    first = rows[0]  # rank 0's first all_reduce
    assert (first["op"], first["comm"], first["seq"], first["iteration"], first["nbytes"]) == (
        OpKind.ALL_REDUCE, "world", 0, 4, 1024 * 2)
    assert (first["t_issue_ns"], first["t_start_ns"], first["t_end_ns"]) == (us(5_100), us(5_110), us(5_110 + 120))
    gather = rows[1]
    assert (gather["op"], gather["seq"], gather["nbytes"]) == (OpKind.ALL_GATHER, 1, 1024 * 2)
    send = rows[2]
    assert (send["op"], send["peer"], send["seq"], send["nbytes"]) == (OpKind.SEND, 1, 0, 512)
    recvs = [r for r in rows if r["op"] == OpKind.RECV]
    assert [(r["rank"], r["peer"], r["seq"], r["iteration"]) for r in recvs] == [(1, 0, k, 4 + k) for k in range(3)]
    # Seq matches the collectives across ranks: both ranks' k-th all_reduce is seq 2k
    for rank in (0, 1):
        assert [r["seq"] for r in rows if r["rank"] == rank and r["op"] == OpKind.ALL_REDUCE] == [0, 2, 4]
    assert imported.spec.placements[1].host == "node-a" and [p.gpu for p in imported.spec.placements] == [0, 1]


def test_kernels_without_args_take_their_record_param_comms_args(tmp_path: Path) -> None:
    bare = read_torch_profiler(nccl_job(tmp_path / "bare", with_args=False), job="j").records
    full = read_torch_profiler(nccl_job(tmp_path / "full"), job="j").records
    assert list(bare.rows()) == list(full.rows())


def test_the_cli_writes_a_folder_localize_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nccl_job(tmp_path / "traces")
    assert main(["import", "torch-profiler", str(tmp_path / "traces"), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "18 records (6 all_gather, 6 all_reduce, 3 recv, 3 send) of 2 ranks on 1 hosts" in out
    records, _ = read_records(tmp_path / "out")
    assert len(records) == 18 and JobSpec.read(tmp_path / "out").world == 2


def test_without_host_name_ranks_are_placed_by_gpus_per_host(tmp_path: Path) -> None:
    for rank in (0, 1):
        trace = nccl_trace(rank)
        del trace["host_name"]
        write(tmp_path, f"r{rank}.json", trace)
    imported = read_torch_profiler(tmp_path, job="j", gpus_per_host=1)
    # the hosts assumed, the GPU indices the kernels' devices
    assert [(p.host, p.gpu) for p in imported.spec.placements] == [("h0000", 0), ("h0001", 1)]
    assert any("assumed 1 ranks per host" in note for note in imported.notes)


def test_a_record_param_comms_without_its_kernel_is_left_out_and_counted(tmp_path: Path) -> None:
    traces = [nccl_trace(rank) for rank in (0, 1)]
    for trace in traces:  # the profile has no GPU activity: the NCCL operators have no device time
        trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("cat") != "kernel"]
        write(tmp_path, f"r{trace['distributedInfo']['rank']}.json", trace)
    with pytest.raises(ImportFileError, match=r"no communication operator.*18 record_param_comms ops with no NCCL kernel"):
        read_torch_profiler(tmp_path, job="j")


def test_a_trace_without_collectives_is_refused_clearly(tmp_path: Path) -> None:
    for rank in (0, 1):
        trace = nccl_trace(rank)
        trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("cat") in (None, "user_annotation")]
        write(tmp_path, f"r{rank}.json", trace)
    with pytest.raises(ImportFileError, match=r"hold no communication operator .*no record_param_comms, NCCL kernel"):
        read_torch_profiler(tmp_path, job="j")


def test_a_garbled_file_is_named(tmp_path: Path) -> None:
    nccl_job(tmp_path)
    bad = tmp_path / "node-a_12.1.pt.trace.json.gz"
    bad.write_bytes(bad.read_bytes()[:200])  # a truncated gzip
    with pytest.raises(ImportFileError, match=rf"{bad}: cannot be read"):
        read_torch_profiler(tmp_path, job="j")
    bad.write_text('{"traceEvents": [')
    with pytest.raises(ImportFileError, match=rf"{bad}: not JSON"):
        read_torch_profiler(tmp_path, job="j")
    bad.write_text('{"schemaVersion": 1}')
    with pytest.raises(ImportFileError, match=rf"{bad}: no traceEvents list"):
        read_torch_profiler(tmp_path, job="j")


def test_bad_fields_are_named(tmp_path: Path) -> None:
    trace = nccl_trace(1)
    kernel = next(e for e in trace["traceEvents"] if e.get("cat") == "kernel")
    kernel["args"]["dtype"] = "Float13"
    write(tmp_path, "r0.json", nccl_trace(0))
    path = write(tmp_path, "r1.json", trace)
    with pytest.raises(ImportFileError, match=rf"{path}: traceEvents\[\d+\] \(ncclDevKernel_allreduce.*dtype.*'Float13'"):
        read_torch_profiler(tmp_path, job="j")
    kernel["args"]["dtype"] = "BFloat16"
    kernel["dur"] = -3
    write(tmp_path, "r1.json", trace)
    with pytest.raises(ImportFileError, match=r"expected numbers ts and dur >= 0, got ts=\S+ dur=-3"):
        read_torch_profiler(tmp_path, job="j")
    del trace["distributedInfo"]
    write(tmp_path, "r1.json", trace)
    with pytest.raises(ImportFileError, match=rf"{path}: no distributedInfo"):
        read_torch_profiler(tmp_path, job="j")


def test_a_missing_rank_is_named(tmp_path: Path) -> None:
    write(tmp_path, "r0.json", nccl_trace(0))
    with pytest.raises(ImportFileError, match=r"ranks \[1\] have no trace in .*\(world of 2\)"):
        read_torch_profiler(tmp_path, job="j")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="empty: no PyTorch profiler trace"):
        read_torch_profiler(tmp_path / "empty", job="j")


def test_a_gloo_trace_of_several_groups_is_refused(tmp_path: Path) -> None:
    for rank in (0, 1):
        trace = nccl_trace(rank)
        trace["distributedInfo"]["pg_config"].append(
            {"pg_name": "1", "pg_desc": "TP", "backend_config": "cpu:gloo", "pg_size": 2, "ranks": [0, 1]})
        trace["traceEvents"].append(_x("gloo:all_reduce", "user_annotation", 9_000.0, 5.0, tid=9,
                                       **{"Input Dims": [[4]], "Input type": ["float"]}))
        write(tmp_path, f"r{rank}.json", trace)
    with pytest.raises(ImportFileError, match=r"gloo operators name no process group.*lists 2 groups \(0, 1\)"):
        read_torch_profiler(tmp_path, job="j")


def test_collectives_sharing_a_seq_stay_apart(tmp_path: Path) -> None:
    for rank in (0, 1):  # a coalesced group: step 1's all_gather under the all_reduce's Seq
        trace = nccl_trace(rank)
        for event in trace["traceEvents"]:
            if event.get("args", {}).get("Seq") == 4:
                event["args"]["Seq"] = 3
        write(tmp_path, f"r{rank}.json", trace)
    rows = list(read_torch_profiler(tmp_path, job="j").records.rows())
    collectives = sorted((r["rank"], r["seq"], r["op"]) for r in rows if r["peer"] < 0)
    assert collectives == sorted((rank, seq, OpKind.ALL_REDUCE if seq % 2 == 0 else OpKind.ALL_GATHER)
                                 for rank in (0, 1) for seq in range(6))


def test_a_rank_s_windows_are_merged(tmp_path: Path) -> None:
    whole = read_torch_profiler(nccl_job(tmp_path / "whole"), job="j").records
    trace = nccl_trace(0)  # rank 0 in two windows: step 4, then steps 5 and 6
    head = [e for e in trace["traceEvents"] if e.get("ts", 0) < 5_000 + STEP_US]
    write(tmp_path / "split", "a.pt.trace.json", {**trace, "traceEvents": head})
    write(tmp_path / "split", "b.pt.trace.json", {**trace, "traceEvents": [e for e in trace["traceEvents"] if e not in head]})
    write(tmp_path / "split", "c.pt.trace.json", nccl_trace(1))
    imported = read_torch_profiler(tmp_path / "split", job="j")
    assert list(imported.records.rows()) == list(whole.rows())
    assert "rank 0: 2 trace files merged (a.pt.trace.json, b.pt.trace.json)" in imported.notes


def test_an_emulated_nccl_job_s_traces_come_back_exactly_and_localize_names_its_slow_gpu(
        emulated: Emulated, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_torch_profiler(tmp_path / "traces", emulated.records, emulated.spec)
    assert main(["import", "torch-profiler", str(tmp_path / "traces"), "--out", str(tmp_path / "records"),
                 "--job", "llm", "--workers", "1"]) == 0
    records, _ = read_records(tmp_path / "records")
    names = [f.name for f in RecordBatch.FIELDS]
    wall = {"t_issue_ns", "t_start_ns", "t_end_ns"}
    expected = sorted(tuple(EPOCH_NS + op[n] if n in wall else "llm" if n == "job" else op[n] for n in names)
                      for rank in range(emulated.spec.world) for op in rank_ops(emulated.records, rank))
    assert sorted(tuple(row[n] for n in names) for row in records.rows()) == expected
    spec = JobSpec.read(tmp_path / "records")
    assert spec.placements == emulated.spec.placements
    assert {(c.comm, c.ranks) for c in spec.communicators} == {(c.comm, c.ranks) for c in emulated.spec.communicators}
    capsys.readouterr()
    assert main(["localize", "--records", str(tmp_path / "records"), "--json"]) == 0
    [incident] = [i for i in json.loads(capsys.readouterr().out) if i["cause"] != "stage_imbalance"]
    assert incident["suspects"][0]["device"] == SLOW_GPU and incident["iterations"][0] == 20
