"""libnccl-profiler-sleuth.so (logger/nccl_profiler/), built with gcc and driven by a C harness
that plays NCCL (``nccl_harness.c``), then ``sleuth import nccl-profiler`` and ``sleuth localize``.

Each simulated rank is its own process with its own plugin instance, as under NCCL. The harness
prints every operation it drove (kind, seq, peer, bytes, GPU start and end); the records the
import produces must say the same, field by field. No GPU and no NCCL are involved: what a real
NCCL job adds (real kernel timers, NCCL's own call order) is not covered here.
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from sleuth.cli import main
from sleuth.errors import RecordError
from sleuth.importers.nccl_profiler import FLAGS, NCCL_RECORD_DTYPE, import_folder, read_dumps
from sleuth.jobspec import JobSpec
from sleuth.logger.core import RECORD_DTYPE
from sleuth.records import OpKind
from sleuth.records_folder import read_records
from sleuth.whatif.attribution import attribute

from tests.logger.nccl_build import build_plugin, compile_c

HERE = Path(__file__).parent
HOST = socket.gethostname()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The plugin (built by its Makefile), the harness, a chained test plugin and one without symbols."""
    out = tmp_path_factory.mktemp("nccl_plugin")
    compiler = build_plugin(out)
    compile_c(compiler, out / "harness", HERE / "nccl_harness.c", "-ldl", "-lpthread")
    compile_c(compiler, out / "libnext.so", HERE / "nccl_next_plugin.c", "-fPIC", "-shared")
    (out / "empty.c").write_text("int not_a_profiler(void) { return 0; }\n")
    subprocess.run([compiler, "-fPIC", "-shared", "-o", str(out / "libempty.so"), str(out / "empty.c")], check=True)
    return out


def drive(built, log_dir, *, version=5, world=3, iters=6, slow_rank=-1, slow_from=0, slow_ns=0, base=None, env=None, rank_env=True):
    """Run one harness process per rank; returns (what each rank drove, each run)."""
    base = base if base is not None else time.time_ns() + 200_000_000
    driven, runs = {}, {}
    for rank in range(world):
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("SLEUTH_", "RANK", "LOCAL_RANK"))}
        if log_dir is not None:
            environ["SLEUTH_LOG_DIR"] = str(log_dir)
        if rank_env:
            environ.update(RANK=str(rank), LOCAL_RANK=str(rank))
        environ.update(env or {})
        if "NEXT_PLUGIN_LOG" in environ:
            environ["NEXT_PLUGIN_LOG"] = environ["NEXT_PLUGIN_LOG"].format(rank=rank)
        args = [str(built / "harness"), str(built / "libnccl-profiler-sleuth.so"), str(version), str(rank), str(world),
                str(iters), str(slow_rank), str(slow_from), str(slow_ns), str(base)]
        run = subprocess.run(args, capture_output=True, text=True, env=environ, timeout=60)
        runs[rank] = run
        driven[rank] = [line.split() for line in run.stdout.splitlines() if line.startswith("op ")]
    return driven, runs


@pytest.mark.parametrize("version", [4, 5])
def test_every_record_says_what_the_harness_drove(built, tmp_path, version):
    before = time.time_ns()
    driven, runs = drive(built, tmp_path / "raw", version=version)
    after = time.time_ns()
    assert all(run.returncode == 0 for run in runs.values()), [run.stderr for run in runs.values()]
    result = import_folder(tmp_path / "raw", tmp_path / "out", gpu_clock="wall")
    records = result.records
    assert result.gpu_clock == {0: "wall", 1: "wall", 2: "wall"}
    assert len(records) == sum(len(ops) for ops in driven.values()) == 3 * 6 * 3
    rows = {(r["rank"], r["op"], r["seq"]): r for r in records.rows()}
    for rank, ops in driven.items():
        for _, kind, _, seq, _, peer, _, nbytes, _, start, _, end in ops:
            row = rows[(rank, OpKind.parse(kind), int(seq))]
            assert row["peer"] == int(peer)
            assert row["nbytes"] == int(nbytes)
            assert row["t_start_ns"] == int(start)  # the earliest channel's GPU start
            assert row["t_end_ns"] == int(end)  # the latest channel's GPU stop
            assert before <= row["t_issue_ns"] <= after  # host clock moved onto the wall clock
            assert row["comm"] == ("world" if kind == "all_reduce" else "nccl.5555666677778888")
            assert row["iteration"] == int(seq)  # one all-reduce per step on the world communicator
    spec = result.spec
    assert spec.world == 3 and spec.job == "raw"
    assert {c.comm: c.ranks for c in spec.communicators} == {"world": (0, 1, 2), "nccl.5555666677778888": (0, 1, 2)}
    assert [(p.host, p.gpu) for p in spec.placements] == [(HOST, 0), (HOST, 1), (HOST, 2)]
    assert any("1 operations of a kind sleuth does not know" in note for note in result.notes)
    assert "rank 0: 1 operations were written before all their kernel channels reported" in " ".join(result.notes)
    # the folder is what `sleuth localize` reads: rank files and job.json
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "job.json", "rank-00000-0000.parquet", "rank-00001-0000.parquet", "rank-00002-0000.parquet"]


def test_kernel_events_on_a_proxy_thread_while_the_next_operations_start(built, tmp_path):
    base = time.time_ns() + 200_000_000
    drive(built, tmp_path / "serial", world=2, iters=400, base=base)
    _, runs = drive(built, tmp_path / "threaded", world=2, iters=400, base=base, env={"HARNESS_THREADED": "1"})
    assert all(run.returncode == 0 for run in runs.values())
    serial = import_folder(tmp_path / "serial", tmp_path / "a", gpu_clock="wall").records
    threaded = import_folder(tmp_path / "threaded", tmp_path / "b", gpu_clock="wall").records
    assert len(threaded) == len(serial) == 2 * 400 * 3

    def key(batch):
        return sorted(zip(batch["rank"].tolist(), batch["op"].tolist(), batch["seq"].tolist(), batch["peer"].tolist(),
                          batch["t_start_ns"].tolist(), batch["t_end_ns"].tolist()))
    assert key(threaded) == key(serial)
    assert all(d.counters["late_children"] == 0 for d in read_dumps(tmp_path / "threaded"))


def test_an_operation_without_kernel_events_is_written_at_finalize_with_its_enqueue_times(built, tmp_path):
    drive(built, tmp_path, world=2, iters=2)
    dump = read_dumps(tmp_path)[0]
    late = dump.records[dump.records["op"] == OpKind.UNKNOWN]
    assert len(late) == 1 and late["seq"][0] == 2
    assert late["flags"][0] == FLAGS["enqueue"] | FLAGS["forced"]
    assert late["t_issue_ns"][0] <= late["t_end_ns"][0]
    counted = dump.records[dump.records["op"] != OpKind.UNKNOWN]
    assert (counted["flags"] == FLAGS["gpu_start"] | FLAGS["gpu_end"]).all()
    assert dump.counters["forced"] == 1 and dump.counters["late_children"] == 0


def test_the_record_is_the_loggers_record_with_the_flags_byte_named():
    for name in RECORD_DTYPE.names:
        assert NCCL_RECORD_DTYPE.fields[name] == RECORD_DTYPE.fields[name]
    assert NCCL_RECORD_DTYPE.itemsize == RECORD_DTYPE.itemsize == 64


@pytest.mark.parametrize("version", [4, 5])
def test_chaining_forwards_every_call_the_next_plugin_asked_for(built, tmp_path, version):
    iters = 5
    env = {"SLEUTH_NCCL_PROFILER_NEXT": str(built / "libnext.so"), "NEXT_PLUGIN_LOG": str(tmp_path / "next-{rank}.json")}
    base = time.time_ns() + 200_000_000
    _, runs = drive(built, tmp_path / "chained", version=version, world=2, iters=iters, env=env, base=base)
    assert all(run.returncode == 0 for run in runs.values())
    assert all("mask 95" in run.stdout for run in runs.values())  # ours | Group | ProxyStep (the next's)
    for rank in range(2):
        seen = json.loads((tmp_path / f"next-{rank}.json").read_text())
        groups, colls, steps = 2 * iters + 1, iters + 1, iters * 4 * 2
        assert seen == {
            "init": 2, "group": groups, "coll": colls, "p2p": 0, "kernel_ch": 0, "proxy_op": 0, "proxy_step": steps,
            "other": 0, "stop": groups + colls + steps, "state": steps + 1, "kernel_stop_states": 0, "finalize": 2,
            "bad": 0,  # every handle and parent it got back was its own
        }
    drive(built, tmp_path / "alone", version=version, world=2, iters=iters, base=base)
    with_next = import_folder(tmp_path / "chained", tmp_path / "a", gpu_clock="wall").records
    alone = import_folder(tmp_path / "alone", tmp_path / "b", gpu_clock="wall").records
    assert len(with_next) == len(alone) == 2 * iters * 3
    assert np.array_equal(with_next["t_end_ns"], alone["t_end_ns"])


@pytest.mark.parametrize("next_lib, says", [
    ("libempty.so", "has neither ncclProfiler_v5 nor ncclProfiler_v4"),
    ("missing.so", "cannot load"),
])
def test_a_next_plugin_that_cannot_be_chained_is_named_and_left_out(built, tmp_path, next_lib, says):
    _, runs = drive(built, tmp_path, world=2, iters=2, env={"SLEUTH_NCCL_PROFILER_NEXT": str(built / next_lib)})
    for run in runs.values():
        assert run.returncode == 0
        assert says in run.stderr and "mask 78" in run.stdout  # only our own: Coll|P2p|ProxyOp|KernelCh
    assert len(import_folder(tmp_path, tmp_path / "out").records) == 2 * 2 * 3


def test_without_an_output_folder_or_a_next_plugin_init_fails_so_nccl_drops_the_plugin(built):
    _, runs = drive(built, None, world=1, iters=1)
    assert runs[0].returncode == 4 and "init failed" in runs[0].stderr
    assert "SLEUTH_LOG_DIR is not set" in runs[0].stderr


def test_a_forked_child_does_not_write_its_parents_records_again(built, tmp_path):
    _, runs = drive(built, tmp_path / "forked", world=2, iters=3, env={"HARNESS_FORK": "1"})
    assert all(run.returncode == 0 for run in runs.values()), [run.stderr for run in runs.values()]
    assert len(list((tmp_path / "forked").glob("*.bin"))) == 2  # the children opened nothing
    dumps = read_dumps(tmp_path / "forked")
    assert [len(d.records) for d in dumps] == [3 * 3 + 1, 3 * 3 + 1]  # each record once


def test_records_survive_nccl_unloading_and_reloading_the_plugin(built, tmp_path):
    _, runs = drive(built, tmp_path / "raw", world=2, iters=3, env={"HARNESS_RELOAD": "1"})
    assert all(run.returncode == 0 for run in runs.values()), [run.stderr for run in runs.values()]
    dumps = read_dumps(tmp_path / "raw")
    assert [c.name for c in dumps[0].comms] == ["world", "", "again"]
    assert [len(d.records) for d in dumps] == [3 * 3 + 1 + 1] * 2  # the first comms' records kept
    result = import_folder(tmp_path / "raw", tmp_path / "out")
    late = result.records.take(result.records["comm"] == result.records.strings.index("again"))
    assert late["op"].tolist() == [OpKind.BROADCAST] * 2 and late["nbytes"].tolist() == [32, 32]


class _V4(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("init", ctypes.c_void_p), ("startEvent", ctypes.c_void_p),
                ("stopEvent", ctypes.c_void_p), ("recordEventState", ctypes.c_void_p), ("finalize", ctypes.c_void_p)]


def test_init_refuses_a_rank_outside_the_communicator(built, tmp_path, monkeypatch):
    monkeypatch.setenv("SLEUTH_LOG_DIR", str(tmp_path))
    lib = ctypes.CDLL(str(built / "libnccl-profiler-sleuth.so"))
    table = _V4.in_dll(lib, "ncclProfiler_v4")
    assert table.name == b"sleuth"
    init = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int), ctypes.c_char_p,
                            ctypes.c_uint64, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p)(table.init)
    ctx, mask = ctypes.c_void_p(), ctypes.c_int(0)
    assert init(ctypes.byref(ctx), ctypes.byref(mask), b"w", 1, 1, 4, 5, None) == 4  # ncclInvalidArgument
    assert ctx.value is None and mask.value == 0


def test_a_slow_ranks_gpu_is_the_top_suspect(built, tmp_path, capsys):
    _, runs = drive(built, tmp_path / "raw", world=4, iters=120, slow_rank=2, slow_from=60, slow_ns=3_000_000,
                    env={"SLEUTH_JOB": "slowjob"})
    assert all(run.returncode == 0 for run in runs.values())
    assert main(["import", "nccl-profiler", str(tmp_path / "raw"), "--out", str(tmp_path / "out")]) == 0
    assert "job slowjob: 1440 records of 4 ranks" in capsys.readouterr().out
    assert main(["localize", "--records", str(tmp_path / "out"), "--json"]) == 0
    incidents = json.loads(capsys.readouterr().out)
    assert incidents, "no incident found"
    first = incidents[0]
    assert min(first["iterations"]) >= 60
    assert first["suspects"][0]["device"] == f"gpu:{HOST}/2"


def test_a_gpu_clock_off_the_wall_clock_is_aligned_after_the_host_issue(built, tmp_path):
    drive(built, tmp_path / "raw", world=2, iters=4, base=10_000_000)  # a GPU clock near zero
    result = import_folder(tmp_path / "raw", tmp_path / "out")
    assert result.gpu_clock == {0: "align", 1: "align"}
    records = result.records
    assert (records["t_start_ns"] >= records["t_issue_ns"]).all()
    assert (records["t_start_ns"] - records["t_issue_ns"]).min() == 0  # the least shift, not more
    raw = import_folder(tmp_path / "raw", tmp_path / "wall", gpu_clock="wall").records
    assert np.array_equal(records["t_end_ns"] - records["t_start_ns"], raw["t_end_ns"] - raw["t_start_ns"])


def test_ranks_come_from_the_spanning_communicator_when_no_process_names_its_own(built, tmp_path):
    drive(built, tmp_path / "raw", world=3, iters=3, rank_env=False)
    result = import_folder(tmp_path / "raw", tmp_path / "out")
    assert sorted(set(result.records["rank"].tolist())) == [0, 1, 2]
    assert [p.gpu for p in result.spec.placements] == [0, 1, 2]  # position among the host's ranks
    # One communicator over the world, as a DDP job's: data parallel over the world, as a logged job's.
    assert (result.spec.layout.dp, result.spec.layout.tp, result.spec.layout.pp) == (3, 1, 1)


def test_a_forced_period_groups_steps(built, tmp_path):
    drive(built, tmp_path / "raw", world=2, iters=6)
    result = import_folder(tmp_path / "raw", tmp_path / "out", period=2)
    assert result.period == 2 and int(result.records["iteration"].max()) == 2


def test_bad_files_are_named_with_what_is_wrong(built, tmp_path):
    drive(built, tmp_path / "raw", world=2, iters=2)
    sidecars = sorted((tmp_path / "raw").glob("nccl-*.json"))
    binary = sidecars[0].with_suffix(".bin")
    good_bin, good_json = binary.read_bytes(), sidecars[0].read_text()

    sidecars[0].write_text(good_json.replace('"comms"', '"communicators"'))
    with pytest.raises(RecordError, match=rf"{sidecars[0].name}: field 'comms' is missing"):
        read_dumps(tmp_path / "raw")
    sidecars[0].write_text("{\n  nope")
    with pytest.raises(RecordError, match=rf"{sidecars[0].name}: not JSON \(line 2"):
        read_dumps(tmp_path / "raw")
    sidecars[0].write_text(good_json.replace('"version": 1', '"version": 9'))
    with pytest.raises(RecordError, match="field 'version' is 9; this sleuth reads version 1"):
        read_dumps(tmp_path / "raw")
    sidecars[0].write_text(good_json)

    sidecars[1].unlink()  # one rank's sidecar lost: its records cannot be placed
    with pytest.raises(RecordError, match="records without their sidecar"):
        read_dumps(tmp_path / "raw")
    sidecars[1].with_suffix(".bin").unlink()
    with pytest.raises(RecordError, match=r"global ranks \[1\] are not 0\.\.0|no process files for its ranks"):
        import_folder(tmp_path / "raw", tmp_path / "out")


def test_a_process_killed_before_finalize_leaves_its_records_up_to_its_last_flush(built, tmp_path):
    # NCCL never finalized the communicators; the records come from the flushes SLEUTH_FLUSH_S set.
    driven, _ = drive(built, tmp_path / "whole", world=2, iters=4)
    drive(built, tmp_path / "killed", world=2, iters=4, env={"HARNESS_KILLED": "1", "SLEUTH_FLUSH_S": "0.000001"})
    drive(built, tmp_path / "held", world=2, iters=4, env={"HARNESS_KILLED": "1", "SLEUTH_FLUSH_S": "3600"})
    whole, killed, held = ({d.global_rank: d.records for d in read_dumps(tmp_path / run)} for run in ("whole", "killed", "held"))
    what = ["seq", "nbytes", "peer", "comm", "op"]  # the times are each run's own
    for rank in (0, 1):
        # Every record the plugin had written, bar those finalize completes (no kernel events yet).
        assert 0 < len(killed[rank]) < len(whole[rank])
        assert killed[rank][what].tolist() == whole[rank][: len(killed[rank])][what].tolist()
        assert len(held[rank]) == 0  # within one interval and under the buffer's size: nothing flushed yet


def test_a_process_hung_in_a_collective_writes_its_records_while_it_hangs(built, tmp_path):
    # Under the buffer's size and no record after the last: only the flusher thread writes them.
    # A killed process's records are the least a hung one holds (its last flush may lose the race to
    # the kill); the whole run's, less what finalize completes, the most.
    drive(built, tmp_path / "whole", world=2, iters=4)
    drive(built, tmp_path / "killed", world=2, iters=4, env={"HARNESS_KILLED": "1", "SLEUTH_FLUSH_S": "0.000001"})
    whole, killed = ({d.global_rank: d.records for d in read_dumps(tmp_path / run)} for run in ("whole", "killed"))
    hung = []
    try:
        for rank in (0, 1):
            environ = {k: v for k, v in os.environ.items() if not k.startswith(("SLEUTH_", "RANK", "LOCAL_RANK"))}
            environ.update(SLEUTH_LOG_DIR=str(tmp_path / "hung"), RANK=str(rank), LOCAL_RANK=str(rank),
                           SLEUTH_FLUSH_S="0.2", HARNESS_HUNG="1")
            hung.append(subprocess.Popen(
                [str(built / "harness"), str(built / "libnccl-profiler-sleuth.so"), "5", str(rank), "2", "4", "-1", "0",
                 "0", str(time.time_ns())], env=environ, stdout=subprocess.PIPE, text=True))
            assert "hung\n" in iter(hung[-1].stdout.readline, ""), "the harness ended"  # every record emitted, none finalized
        deadline = time.monotonic() + 10  # two intervals, and a loaded machine's scheduling
        while True:
            written = {d.global_rank: d.records for d in read_dumps(tmp_path / "hung")}
            if all(len(written.get(rank, ())) >= len(killed[rank]) for rank in (0, 1)) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        time.sleep(0.5)  # two more intervals: a record the killed run's last flush lost is written too
        written = {d.global_rank: d.records for d in read_dumps(tmp_path / "hung")}
    finally:
        for process in hung:
            process.kill()
            process.wait()
    what = ["seq", "nbytes", "peer", "comm", "op"]
    for rank in (0, 1):
        assert 0 < len(killed[rank]) <= len(written[rank]) < len(whole[rank])
        assert written[rank][what].tolist() == whole[rank][: len(written[rank])][what].tolist()


def test_a_records_file_ending_in_part_of_a_record_keeps_the_whole_ones_and_says_so(built, tmp_path):
    drive(built, tmp_path / "raw", world=2, iters=2)
    binary = sorted((tmp_path / "raw").glob("nccl-*.bin"))[0]
    whole = binary.read_bytes()
    binary.write_bytes(whole + b"\0" * 10)  # a process killed while writing
    [dump] = [d for d in read_dumps(tmp_path / "raw") if d.path.with_suffix(".bin") == binary]
    assert dump.torn_bytes == 10 and dump.records.tobytes() == whole
    result = import_folder(tmp_path / "raw", tmp_path / "out")
    assert any(f"{binary.name} ends in 10 bytes of a 64-byte record" in note for note in result.notes), result.notes


def _write_dump(folder: Path, rank: int, ops: list[tuple], comms: list[dict] | None = None) -> None:
    """One process's files in the plugin's format, host times only: by default one 2-rank
    communicator; ``ops`` may name a communicator of ``comms`` as their third item (index)."""
    records = np.zeros(len(ops), dtype=NCCL_RECORD_DTYPE)
    seqs: dict[int, int] = {}
    for i, (kind, nbytes, *comm) in enumerate(ops):
        index = comm[0] if comm else 0
        seq = seqs[index] = seqs.get(index, -1) + 1
        records[i] = (1000 * i, 1000 * i + 10, 1000 * i + 500, seq, nbytes, -1, index, -1, int(kind), FLAGS["host_child"])
    stem = folder / f"nccl-h-{100 + rank}"
    stem.with_suffix(".bin").write_bytes(records.tobytes())
    stem.with_suffix(".json").write_text(json.dumps({
        "format": "sleuth-nccl-profiler", "version": 1, "record_size": 64, "pid": 100 + rank, "host": "h", "job": "j",
        "global_rank": rank, "gpu": rank, "clock": {"monotonic_ns": 0, "realtime_ns": 5_000_000_000},
        "comms": comms or [{"index": 0, "hash": "00000000000000aa", "name": "", "nranks": 2, "rank": rank, "nnodes": 1, "api": 5}],
    }))


def test_steps_are_the_repeating_pattern_after_a_warm_up(tmp_path):
    step = [(OpKind.ALL_REDUCE, 4 << 20), (OpKind.ALL_REDUCE, 4 << 20), (OpKind.ALL_GATHER, 1 << 20)]
    (tmp_path / "raw").mkdir()
    for rank in range(2):
        _write_dump(tmp_path / "raw", rank, [(OpKind.BROADCAST, 8)] + step * 5)
    result = import_folder(tmp_path / "raw", tmp_path / "out")
    assert result.period == 3
    ranks0 = result.records.take(result.records["rank"] == 0)
    assert ranks0["iteration"].tolist() == [-1] + [i for i in range(5) for _ in range(3)]
    assert ranks0["t_start_ns"].tolist()[:2] == [5_000_000_010, 5_000_001_010]  # host times onto the wall clock
    assert result.gpu_clock == {0: "host", 1: "host"}


def test_without_a_repeating_pattern_iterations_are_unknown_and_said_so(tmp_path):
    (tmp_path / "raw").mkdir()
    for rank in range(2):
        _write_dump(tmp_path / "raw", rank, [(OpKind.ALL_REDUCE, 8 << i) for i in range(9)])
    result = import_folder(tmp_path / "raw", tmp_path / "out")
    assert result.period is None and (result.records["iteration"] == -1).all()
    assert any("repeat no pattern three times" in note for note in result.notes)


def test_steps_survive_a_warm_up_that_differs_and_a_closing_barrier(tmp_path):
    """DDP under real NCCL (H200, 4 ranks): its first step's buckets differ from the rest (it rebuilds
    them), and the job ends with a barrier; the steps between are still found, the ends are -1."""
    step = [(OpKind.ALL_REDUCE, 21056), (OpKind.ALL_REDUCE, 53504), (OpKind.ALL_REDUCE, 33280)]
    first = [(OpKind.BROADCAST, 288), (OpKind.ALL_REDUCE, 157632), (OpKind.ALL_REDUCE, 52)]
    (tmp_path / "raw").mkdir()
    for rank in range(2):
        _write_dump(tmp_path / "raw", rank, first + step * 6 + [(OpKind.ALL_REDUCE, 8)])
    result = import_folder(tmp_path / "raw", tmp_path / "out")
    assert result.period == 3
    ranks0 = result.records.take(result.records["rank"] == 0)
    assert ranks0["iteration"].tolist() == [-1] * 3 + [i for i in range(6) for _ in range(3)] + [-1]


def test_steps_resume_after_an_interruption_between_stretches(tmp_path):
    step = [(OpKind.ALL_REDUCE, 4 << 20), (OpKind.ALL_GATHER, 1 << 20)]
    evaluation = [(OpKind.BROADCAST, 8), (OpKind.ALL_REDUCE, 16), (OpKind.BROADCAST, 8)]
    (tmp_path / "raw").mkdir()
    for rank in range(2):
        _write_dump(tmp_path / "raw", rank, step * 4 + evaluation + step * 3)
    result = import_folder(tmp_path / "raw", tmp_path / "out")
    ranks0 = result.records.take(result.records["rank"] == 0)
    assert ranks0["iteration"].tolist() == [i for i in range(4) for _ in range(2)] + [-1] * 3 + [i for i in range(4, 7) for _ in range(2)]


def test_steps_come_from_each_ranks_group_when_the_world_only_ran_a_barrier(tmp_path):
    """Functional collectives over a 2 x 2 (dp, tp) mesh under real NCCL (H200): the world group runs
    one barrier; each step all-reduces once over tp and twice, alike, over dp (period 1 there). The
    closing barrier is issued after the last step's first collective, so it falls in that step."""
    (tmp_path / "raw").mkdir()
    for rank in range(4):
        tp, dp = rank // 2, rank % 2
        comms = [{"index": 0, "hash": "00000000000000ff", "name": "", "nranks": 4, "rank": rank, "nnodes": 1, "api": 5},
                 {"index": 1, "hash": f"00000000000000a{tp}", "name": "", "nranks": 2, "rank": rank % 2, "nnodes": 1, "api": 5},
                 {"index": 2, "hash": f"00000000000000b{dp}", "name": "", "nranks": 2, "rank": rank // 2, "nnodes": 1, "api": 5}]
        step = [(OpKind.ALL_REDUCE, 4096, 1), (OpKind.ALL_REDUCE, 8192, 2), (OpKind.ALL_REDUCE, 8192, 2)]
        _write_dump(tmp_path / "raw", rank, step * 5 + [(OpKind.ALL_REDUCE, 4, 0)], comms)
    result = import_folder(tmp_path / "raw", tmp_path / "out")
    for rank in range(4):
        mine = result.records.take(result.records["rank"] == rank)
        assert mine["iteration"].tolist() == [i for i in range(5) for _ in range(3)] + [4]
    assert any("steps from each rank's largest communicator" in note for note in result.notes)


def test_a_rank_slow_before_its_first_collective_is_what_the_job_pays_for(tmp_path):
    """DDP under real NCCL (H200, 4 ranks): a rank's GPU spends longer on its backward before the
    first bucket's all-reduce, which its peers wait for inside that all-reduce. The plugin's files
    carry no step records, so each rank's step must start where its previous one ended: begun at its
    own first collective (as derived before), the slow rank's compute vanished (S 1.02 for steps 1.5x
    longer)."""
    normal_lead, slow_lead, transfer = 100_000, 5_000_000, 200_000
    steps, slow_from, world, ops = 8, 3, 4, 5
    rows: dict[int, list] = {rank: [] for rank in range(world)}
    t = 0
    for step in range(steps):
        leads = [slow_lead if rank == 2 and step >= slow_from else normal_lead for rank in range(world)]
        first_end = t + max(leads) + transfer  # the first all-reduce ends once its last member has started
        for rank in range(world):
            for k in range(ops):
                start = t + leads[rank] if k == 0 else first_end + (k - 1) * transfer
                end = first_end + k * transfer
                rows[rank].append((t + 10_000 * k, start, end, step * ops + k, 4096 << k, -1, 0, -1,
                                   int(OpKind.ALL_REDUCE), FLAGS["host_child"]))
        t = first_end + (ops - 1) * transfer
    (tmp_path / "raw").mkdir()
    for rank in range(world):
        stem = tmp_path / "raw" / f"nccl-h{rank}-{100 + rank}"
        stem.with_suffix(".bin").write_bytes(np.array(rows[rank], dtype=NCCL_RECORD_DTYPE).tobytes())
        stem.with_suffix(".json").write_text(json.dumps({
            "format": "sleuth-nccl-profiler", "version": 1, "record_size": 64, "pid": 100 + rank, "host": f"h{rank}",
            "job": "j", "global_rank": rank, "gpu": 0, "clock": {"monotonic_ns": 0, "realtime_ns": 5_000_000_000},
            "comms": [{"index": 0, "hash": "00000000000000aa", "name": "", "nranks": world, "rank": rank, "nnodes": world, "api": 5}],
        }))
    main(["import", "nccl-profiler", str(tmp_path / "raw"), "--out", str(tmp_path / "out")])
    records, iterations = read_records(tmp_path / "out")
    assert int(records["iteration"].max()) == steps - 1
    found = attribute(records, JobSpec.read(tmp_path / "out" / "job.json"), iterations=iterations)
    expected = (slow_from * (normal_lead + ops * transfer) + (steps - slow_from) * (slow_lead + ops * transfer)) / (
        steps * (normal_lead + ops * transfer))
    assert found.slowdown == pytest.approx(expected, rel=0.05)
    assert found.top_workers(1)[0][0] == 2



@pytest.mark.parametrize("base, clock", [(None, "wall"), (10_000_000, "align")])
def test_an_attached_ring_gets_every_record_and_no_file_is_written(built, tmp_path, base, clock):
    """HARNESS_ATTACH: a stand-in for the logger's ring (a CommopsCApi that prints what it gets)."""
    driven, runs = drive(built, tmp_path / "ring", world=2, iters=4, base=base, env={"HARNESS_ATTACH": "1"})
    assert all(run.returncode == 0 for run in runs.values()), [run.stderr for run in runs.values()]
    assert not (tmp_path / "ring").exists() or not list((tmp_path / "ring").iterdir())  # not a file written
    wall_minus_mono = time.time_ns() - time.monotonic_ns()
    ring_comm = 0x8000_0000
    for rank, run in runs.items():
        comms = [line.split()[1:] for line in run.stdout.splitlines() if line.startswith("comm ")]
        assert comms == [["0", "1111222233334444", "2", str(rank), "world"], ["1", "5555666677778888", "2", str(rank), "-"]]
        ring = [[int(x) for x in line.split()[1:]] for line in run.stdout.splitlines() if line.startswith("ring ")]
        by_key = {(op, seq): rest for _comm, seq, op, *rest in ring if op != OpKind.UNKNOWN}
        assert len(by_key) == len(driven[rank]) == 4 * 3
        first_start = {}
        for _, kind, _, seq, _, peer, _, nbytes, _, start, _, end in driven[rank]:
            comm, _, _, r_peer, r_nbytes, iteration, t_issue, t_start, t_end, flags = next(
                r for r in ring if (r[2], r[1]) == (OpKind.parse(kind), int(seq)))
            assert comm == ring_comm | (0 if kind == "all_reduce" else 1)  # the plugin's table index, marked
            assert (r_peer, r_nbytes, iteration) == (int(peer), int(nbytes), int(seq))  # the harness's i at the issue
            assert flags == FLAGS["gpu_start"] | FLAGS["gpu_end"]
            assert t_end - t_start == int(end) - int(start)  # the GPU duration, kept
            assert t_issue <= t_start  # on the ring's clock, after its issue
            if clock == "wall":
                assert abs(t_start + wall_minus_mono - int(start)) < 50_000_000
            first_start.setdefault(comm, (t_start, t_issue))
        if clock == "align":  # a GPU clock near zero: the first op of each communicator starts at its issue
            assert all(t_start == t_issue for t_start, t_issue in first_start.values())
    drive(built, tmp_path / "files", world=2, iters=4, base=base)  # the same without a ring: files
    assert len(list((tmp_path / "files").glob("nccl-*.bin"))) == 2
