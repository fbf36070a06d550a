"""``sleuth import nccl-profiler DIR --follow``: the plugin's files streamed while the job writes them.

The unit tests grow a folder in the plugin's format step by step (as ``_write_dump`` in
test_nccl_profiler.py writes it whole) and hand what the follower sends to a list; the last test
runs the plugin under the C harness and the follower's command against a real gateway and Kafka.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from sleuth.cli import main
from sleuth.importers.nccl_follow import Follower
from sleuth.importers.nccl_profiler import FLAGS, NCCL_RECORD_DTYPE, import_folder
from sleuth.records import IterationBatch, OpKind, RecordBatch
from sleuth.records_folder import iterations_from_records
from sleuth.stream.ingest import kafka_records

from tests.logger.test_nccl_profiler import built  # noqa: F401  # the plugin and harness, built by that module's fixture
from tests.stream.harness import consume, private_settings, running_gateway

STEP = [(OpKind.ALL_REDUCE, 4 << 20), (OpKind.ALL_REDUCE, 4 << 20), (OpKind.ALL_GATHER, 1 << 20)]


class ListSink:
    """What a sink is handed, kept (the Sink protocol of sleuth.logger.sinks)."""

    def __init__(self) -> None:
        self.batches: list[tuple[RecordBatch, int]] = []
        self.steps: list[IterationBatch] = []
        self.specs: list = []

    def records(self, batch, *, dropped):
        self.batches.append((batch, dropped))

    def iterations(self, batch):
        self.steps.append(batch)

    def spec(self, spec):
        self.specs.append(spec)

    def close(self, timeout):
        pass

    def all_records(self) -> RecordBatch:
        return RecordBatch.concat([b for b, _ in self.batches if len(b)])


class Process:
    """One process's plugin files, appended to as its job goes on (host times only)."""

    def __init__(self, folder: Path, rank: int, world: int = 2, *, dropped: int = 0) -> None:
        self.stem, self.rank, self.world, self.i, self.seq = folder / f"nccl-h-{100 + rank}", rank, world, 0, -1
        self.stem.with_suffix(".bin").touch()
        self.sidecar(dropped)

    def sidecar(self, dropped: int) -> None:
        self.stem.with_suffix(".json").write_text(json.dumps({
            "format": "sleuth-nccl-profiler", "version": 1, "record_size": 64, "pid": 100 + self.rank, "host": "h",
            "job": "j", "global_rank": self.rank, "gpu": self.rank, "clock": {"monotonic_ns": 0, "realtime_ns": 5_000_000_000},
            "dropped": dropped,
            "comms": [{"index": 0, "hash": "00000000000000aa", "name": "", "nranks": self.world, "rank": self.rank, "nnodes": 1, "api": 5}],
        }))

    def run(self, ops: list[tuple]) -> None:
        records = np.zeros(len(ops), dtype=NCCL_RECORD_DTYPE)
        for row, (kind, nbytes) in enumerate(ops):
            self.seq += 1
            t = 1000 * self.i + 7 * self.rank
            records[row] = (t, t + 10, t + 500, self.seq, nbytes, -1, 0, -1, int(kind), FLAGS["host_child"])
            self.i += 1
        with self.stem.with_suffix(".bin").open("ab") as f:
            f.write(records.tobytes())


def _job(tmp_path: Path, world: int = 2) -> tuple[Path, ListSink, Follower, list[Process]]:
    """A folder two processes write into as their job goes on, and a follower sending to a list."""
    folder = tmp_path / "raw"
    folder.mkdir()
    sink = ListSink()
    return folder, sink, Follower(folder, sink), [Process(folder, rank, world) for rank in range(world)]


def _by_operator(batch: RecordBatch) -> dict[tuple, tuple]:
    return {(r["rank"], r["comm"], r["seq"]): (r["op"], r["iteration"], r["t_issue_ns"], r["t_start_ns"], r["t_end_ns"], r["nbytes"])
            for r in batch.rows()}


def test_a_growing_folder_is_sent_step_by_step_once_settled_and_ends_as_the_import_would_have_it(tmp_path):
    folder, sink, follower, ranks = _job(tmp_path)
    for p in ranks:
        p.run([(OpKind.BROADCAST, 8)] + STEP * 2)
    assert follower.poll() == 0  # two steps: no pattern yet
    for step in range(2, 9):
        for p in ranks:
            p.run(STEP)
        follower.poll()
        sent = sink.all_records() if sink.batches else None
        if sent is not None:  # only what two later steps have begun after
            assert sent["iteration"].max() <= step - 2
    assert sink.all_records()["iteration"].max() == 6  # steps 0..8 written, 7 and 8 held
    follower.poll(final=True)
    whole = import_folder(folder, tmp_path / "out")
    sent = sink.all_records()
    assert len(sent) == len(whole.records) == 2 * (1 + 9 * 3)  # each record once
    assert _by_operator(sent) == _by_operator(whole.records)
    steps = IterationBatch.concat(sink.steps)
    expected = iterations_from_records(whole.records)
    key = lambda b: sorted(zip(b["rank"].tolist(), b["iteration"].tolist(), b["t_start_ns"].tolist(), b["t_end_ns"].tolist()))
    assert key(steps) == key(expected)
    assert sink.specs[-1] == whole.spec and len(sink.specs) == 1


def test_nothing_is_sent_until_every_rank_of_every_communicator_has_written(tmp_path):
    folder = tmp_path / "raw"
    folder.mkdir()
    sink = ListSink()
    follower = Follower(folder, sink)
    assert follower.poll() == 0 and "no nccl-*.json" in follower.waiting
    first = Process(folder, 0)
    first.run(STEP * 6)
    assert follower.poll() == 0
    assert follower.waiting == "communicator 00000000000000aa: 1 of its 2 ranks' files so far"
    assert not sink.batches and not sink.specs
    Process(folder, 1).run(STEP * 6)
    assert follower.poll() == 2 * 4 * 3 and follower.waiting is None  # steps 0..3 of 0..5


def test_records_the_plugin_lost_ride_the_ranks_next_batch_once(tmp_path):
    folder, sink, follower, ranks = _job(tmp_path)
    for p in ranks:
        p.run(STEP * 4)
    follower.poll()
    ranks[1].sidecar(dropped=5)
    for p in ranks:
        p.run(STEP * 2)
    follower.poll()
    follower.poll(final=True)
    gaps = [(int(b["rank"][0]), dropped) for b, dropped in sink.batches if dropped]
    assert gaps == [(1, 5)]


def test_a_gpu_clock_decided_when_records_went_out_stays_so_their_times_do_not_move(tmp_path):
    folder, sink, follower, ranks = _job(tmp_path)

    def gpu_steps(p: Process, n: int, skew: int) -> None:  # GPU times on the wall clock, `skew` ns off
        records = np.zeros(n, dtype=NCCL_RECORD_DTYPE)
        for row in range(n):
            p.seq += 1
            t = 1000 * p.i
            records[row] = (t, 5_000_000_000 + t + 100 + skew, 5_000_000_000 + t + 400 + skew, p.seq, 64, -1, 0, -1,
                            int(OpKind.ALL_REDUCE), FLAGS["gpu_start"] | FLAGS["gpu_end"])
            p.i += 1
        with p.stem.with_suffix(".bin").open("ab") as f:
            f.write(records.tobytes())

    for p in ranks:
        gpu_steps(p, 6, 0)
    follower.poll()
    early = _by_operator(sink.all_records())
    assert early
    for p in ranks:
        gpu_steps(p, 6, -300)  # a start before its issue: "auto" on the whole would now align every rank
    follower.poll(final=True)
    sent = sink.all_records()
    assert all(_by_operator(sent)[k] == v for k, v in early.items())
    # every rank stays on the wall clock: the later starts are sent as the GPU gave them, not shifted
    assert set((sent["t_start_ns"] - sent["t_issue_ns"]).tolist()) == {100, -200}
    assert import_folder(folder, tmp_path / "out").gpu_clock == {0: "align", 1: "align"}


def test_steps_renumbered_after_records_went_out_are_warned_of_once(tmp_path, caplog):
    folder, sink, follower, ranks = _job(tmp_path)
    for p in ranks:  # six alike all-reduces: a step of one collective, so far
        p.run([(OpKind.ALL_REDUCE, 4 << 20)] * 6)
    follower.poll()
    assert sink.all_records()["iteration"].tolist()[:2] == [0, 1]
    for p in ranks:  # then the job's real step shows: two all-reduces and an all-gather
        p.run(STEP * 6)
    with caplog.at_level("WARNING", logger="sleuth.importers"):
        follower.poll()
        follower.poll()
    warned = [r for r in caplog.records if "numbers them otherwise" in r.getMessage()]
    assert len(warned) == 1 and "--period" in warned[0].getMessage()


def test_follow_without_a_gateway_or_with_out_is_refused_naming_what_is_missing(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("SLEUTH_COLLECTOR", raising=False)
    assert main(["import", "nccl-profiler", str(tmp_path), "--follow"]) == 2
    assert "set SLEUTH_COLLECTOR or pass --collector HOST:PORT" in capsys.readouterr().err
    assert main(["import", "nccl-profiler", str(tmp_path), "--out", str(tmp_path / "out"), "--idle-exit", "3"]) == 2
    assert "--collector and --idle-exit go with --follow" in capsys.readouterr().err


@pytest.mark.services
def test_follow_streams_a_hung_plugin_job_to_the_gateway_and_kafka_holds_each_record_once(built, services, tmp_path):  # noqa: F811
    """The plugin under the C harness, every rank hung in a collective after its last step (its
    flusher writes what it holds), and ``sleuth import nccl-profiler --follow`` against a real gateway."""
    settings = private_settings(services)
    folder = tmp_path / "raw"
    hung = []
    try:
        for rank in range(2):
            environ = {k: v for k, v in os.environ.items() if not k.startswith(("SLEUTH_", "RANK", "LOCAL_RANK"))}
            environ.update(SLEUTH_LOG_DIR=str(folder), RANK=str(rank), LOCAL_RANK=str(rank), SLEUTH_FLUSH_S="0.2",
                           HARNESS_HUNG="1")
            hung.append(subprocess.Popen(
                [str(built / "harness"), str(built / "libnccl-profiler-sleuth.so"), "5", str(rank), "2", "12", "-1", "0",
                 "0", str(time.time_ns())], env=environ, stdout=subprocess.PIPE, text=True))
            assert "hung\n" in iter(hung[-1].stdout.readline, ""), "the harness ended"
        with running_gateway(settings) as (_, target):
            environ = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
            environ["SLEUTH_SPILL_DIR"] = str(tmp_path / "spill")
            run = subprocess.run([sys.executable, "-m", "sleuth", "import", "nccl-profiler", str(folder), "--follow",
                                  "--collector", target, "--idle-exit", "2"],
                                 capture_output=True, text=True, env=environ, timeout=120)
        assert run.returncode == 0, run.stderr
        whole = import_folder(folder, tmp_path / "out")
        assert f"job raw: {len(whole.records)} records sent, " in run.stdout, run.stdout
        messages = consume(settings, settings.records_topic, expect_records=len(whole.records), timeout_s=60)
    finally:
        for process in hung:
            process.kill()
            process.wait()
    batches = [kafka_records.from_message(m.value) for m in messages
               if kafka_records.kind_of(m.headers) == kafka_records.RECORDS]
    got = RecordBatch.concat(batches)
    assert len(got) == len(whole.records)  # nothing twice, nothing lost
    assert _by_operator(got) == _by_operator(whole.records)
