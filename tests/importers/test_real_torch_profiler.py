"""A real 4-rank gloo job profiled by torch.profiler (``tests.importers.profjob``), imported with
``sleuth import torch-profiler``: the records are the operators the job ran, matched across
ranks, in the steps the profiler marked, at the wall-clock times they ran; localize names the
rank that slept."""

from __future__ import annotations

import gzip
import json
import socket
import sys
import time
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from sleuth.cli import main
from sleuth.jobspec import JobSpec
from sleuth.ports import free_port
from sleuth.records import OpKind, RecordBatch
from sleuth.records_folder import read_records

pytest.importorskip("torch")

from tests.importers import profjob  # noqa: E402
from tests.importers.realjobs import run_job  # noqa: E402


@dataclass(frozen=True)
class Run:
    traces: Path
    out: Path
    started_ns: int
    ended_ns: int


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, machine_alone: Callable[[], AbstractContextManager[None]]) -> Run:
    base = tmp_path_factory.mktemp("torch-profiler")
    with machine_alone():  # the tests read the job's timings
        started = time.time_ns()
        run_job([sys.executable, "-m", "tests.importers.profjob", str(base / "traces"), str(free_port())])
        ended = time.time_ns()
    assert main(["import", "torch-profiler", str(base / "traces"), "--out", str(base / "records"), "--job", "gloo4",
                 "--workers", "1"]) == 0
    return Run(base / "traces", base / "records", started, ended)


def _records(run: Run) -> RecordBatch:
    return read_records(run.out)[0]


def test_the_files_are_torch_s_as_documented(run: Run) -> None:
    files = sorted(p.name for p in run.traces.iterdir())
    assert [f.split(".")[0] for f in files] == [f"rank{r}" for r in range(profjob.WORLD)]
    assert [f.endswith(".pt.trace.json.gz") for f in files] == [False, True, False, True]
    assert all(f.endswith(".pt.trace.json") for f in files[::2])
    trace = json.loads(gzip.decompress((run.traces / files[1]).read_bytes()))
    info = trace["distributedInfo"]
    assert (info["backend"], info["rank"], info["world_size"]) == ("gloo", 1, profjob.WORLD)
    assert [(g["pg_name"], g["ranks"]) for g in info["pg_config"]] == [("0", list(range(profjob.WORLD)))]
    names = Counter(e["name"] for e in trace["traceEvents"])
    # gloo writes no record_param_comms: its operators are the runloop's gloo: events
    assert names["record_param_comms"] == 0 and names["gloo:all_reduce"] == profjob.ACTIVE
    assert names["c10d::allreduce_"] == profjob.ACTIVE and names["gloo:recv"] == profjob.ACTIVE


def test_every_operator_the_job_ran_comes_back(run: Run) -> None:
    records = _records(run)
    kinds = Counter((int(r), OpKind(int(k)).label) for r, k in zip(records["rank"], records["op"]))
    assert kinds == {(rank, kind): profjob.ACTIVE for rank in range(profjob.WORLD)
                     for kind in ("all_reduce", "all_gather", "broadcast", "send", "recv")}
    rows = list(records.rows())
    assert {r["nbytes"] for r in rows if r["op"] != OpKind.SEND and r["op"] != OpKind.RECV} == {profjob.NUMEL * 4}
    assert {r["nbytes"] for r in rows if r["op"] in (OpKind.SEND, OpKind.RECV)} == {16 * 4}
    world = profjob.WORLD
    assert {(r["rank"], r["op"], r["peer"]) for r in rows if r["op"] in (OpKind.SEND, OpKind.RECV)} == {
        (rank, kind, (rank + step) % world) for rank in range(world) for kind, step in ((OpKind.SEND, 1), (OpKind.RECV, -1))}


def test_collectives_match_across_ranks_step_by_step(run: Run) -> None:
    rows = list(_records(run).rows())
    by_key: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["op"] not in (OpKind.SEND, OpKind.RECV):
            by_key.setdefault((r["comm"], r["seq"]), []).append(r)
    assert sorted(k[1] for k in by_key) == list(range(3 * profjob.ACTIVE))
    for members in by_key.values():
        assert sorted(r["rank"] for r in members) == list(range(profjob.WORLD))
        assert len({(r["op"], r["iteration"], r["nbytes"]) for r in members}) == 1
    # send k from a to b is receive k on b from a, in step WAIT + WARMUP + k
    sends = sorted((r["rank"], r["peer"], r["iteration"], r["seq"]) for r in rows if r["op"] == OpKind.SEND)
    recvs = sorted((r["peer"], r["rank"], r["iteration"], r["seq"]) for r in rows if r["op"] == OpKind.RECV)
    assert sends == recvs == sorted((rank, (rank + 1) % profjob.WORLD, profjob.WAIT + profjob.WARMUP + k, k)
                                    for rank in range(profjob.WORLD) for k in range(profjob.ACTIVE))


def test_iterations_are_the_profiler_steps(run: Run) -> None:
    records = _records(run)
    first = profjob.WAIT + profjob.WARMUP
    per = Counter((int(r), int(i)) for r, i in zip(records["rank"], records["iteration"]))
    assert per == {(rank, step): 5 for rank in range(profjob.WORLD) for step in range(first, profjob.STEPS)}


def test_times_are_the_wall_clock_and_the_waits_are_seen(run: Run) -> None:
    rows = list(_records(run).rows())
    for r in rows:
        assert run.started_ns < r["t_issue_ns"] <= r["t_start_ns"] < r["t_end_ns"] < run.ended_ns
        assert r["t_end_ns"] - r["t_start_ns"] < 2e9
    slow = profjob.SLOW_S * 1e9

    def waits(rank: int, slow_steps: bool) -> np.ndarray:
        return np.array([r["t_end_ns"] - r["t_start_ns"] for r in rows if r["rank"] == rank
                         and r["op"] == OpKind.ALL_GATHER and (r["iteration"] in profjob.SLOW_STEPS) == slow_steps])

    # The others' all_gather waits for the rank that sleeps after its all_reduce: most of the sleep
    # beyond its usual length, which is the 4 MB exchange itself (tens of ms, 4 ranks on 2 cores).
    for rank in set(range(profjob.WORLD)) - {profjob.SLOW_RANK}:
        assert waits(rank, True).min() - np.median(waits(rank, False)) > 0.5 * slow, (waits(rank, True), waits(rank, False))
        # the sleeper arrives last and waits for nobody
        assert np.median(waits(rank, True)) - np.median(waits(profjob.SLOW_RANK, True)) > 0.5 * slow


def test_the_spec_has_the_trace_s_host_and_group(run: Run) -> None:
    spec = JobSpec.read(run.out)
    host = json.loads(next(run.traces.glob("rank0.*.json")).read_text())["host_name"]
    assert host == socket.gethostname()
    assert [(p.rank, p.host, p.gpu) for p in spec.placements] == [(r, host, r) for r in range(profjob.WORLD)]
    assert [(c.comm, c.kind, c.ranks) for c in spec.communicators] == [("world", "world", tuple(range(profjob.WORLD)))]


def test_localize_names_the_sleeping_rank(run: Run, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["localize", "--records", str(run.out), "--json"]) == 0
    captured = capsys.readouterr()
    incidents = json.loads(captured.out)
    assert "missing from their groups" not in captured.err  # a whole trace's groups are whole
    # the loaded machine's jitter may open an incident of its own before (scattered pauses)
    slowed = [i for i in incidents if set(profjob.SLOW_STEPS) <= set(i["iterations"])]
    assert len(slowed) == 1, incidents
    # compute; "mixed" where the machine's jitter also slowed transfers in those steps
    assert slowed[0]["cause"] in ("compute", "mixed"), slowed
    assert slowed[0]["suspects"][0]["device"] == f"gpu:{socket.gethostname()}/{profjob.SLOW_RANK}"


def test_a_trace_of_the_tutorial_s_three_early_steps_names_the_rank_slow_in_each(
        tmp_path: Path, machine_alone: Callable[[], AbstractContextManager[None]],
        capsys: pytest.CaptureFixture[str]) -> None:
    # schedule(wait=1, warmup=1, active=3) keeps steps 2-4, all inside the default warm-up of 5.
    with machine_alone():
        run_job([sys.executable, "-m", "tests.importers.profjob", str(tmp_path / "traces"), str(free_port()), "short"])
    assert main(["import", "torch-profiler", str(tmp_path / "traces"), "--out", str(tmp_path / "records"),
                 "--job", "short", "--workers", "1"]) == 0
    assert sorted(set(read_records(tmp_path / "records")[0]["iteration"].tolist())) == [2, 3, 4]
    capsys.readouterr()
    assert main(["localize", "--records", str(tmp_path / "records"), "--json"]) == 0
    captured = capsys.readouterr()
    assert "read from iteration 2" in captured.err
    [incident] = json.loads(captured.out)
    assert incident["iterations"] == [2, 3, 4] and incident["cause"] in ("compute", "mixed"), incident
    assert incident["suspects"][0]["device"] == f"gpu:{socket.gethostname()}/{profjob.SLOW_RANK}"
