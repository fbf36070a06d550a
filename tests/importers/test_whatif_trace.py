"""``sleuth import whatif-trace``: the What-if paper's trace format, played out by a pipeline
schedule (``tests.importers.whatif_traces``), imported, then localized."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sleuth.cli import main
from sleuth.errors import ConfigError, ImportFileError
from sleuth.importers import read_whatif_trace
from sleuth.records import OpKind

from .whatif_traces import play, write

DP, PP, TP = 4, 4, 4


def _localized(tmp_path, rows, capsys) -> list[dict]:
    trace, meta = write(tmp_path / "trace", rows, dp=DP, pp=PP, tp=TP)
    assert main(["import", "whatif-trace", str(trace), "--meta", str(meta), "--out", str(tmp_path / "records")]) == 0
    capsys.readouterr()
    assert main(["localize", "--records", str(tmp_path / "records"), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_worker_slow_from_the_first_step_is_named_by_its_gpu_with_what_the_job_pays(tmp_path, capsys) -> None:
    rows, lengths = play(dp=DP, pp=PP, slow={(2, 1): 2.0}, first_rank_stride=TP, seed=3)
    _, clean = play(dp=DP, pp=PP, first_rank_stride=TP, seed=3)
    incidents = _localized(tmp_path, rows, capsys)
    assert len(incidents) == 1, incidents
    # Worker (dp 2, stage 1) is global rank (1 * 4 + 2) * 4 = 24: host 3 of 8 GPUs, GPU 0.
    assert incidents[0]["suspects"][0]["device"] == "gpu:h0003/0"
    truth = float(lengths.mean() / clean.mean())
    assert incidents[0]["impact"]["slowdown"] == pytest.approx(truth, rel=0.05)


def test_a_trace_timed_in_seconds_since_1970_reads_as_one_timed_from_zero(tmp_path, capsys) -> None:
    rows, lengths = play(dp=DP, pp=PP, slow={(2, 1): 2.0}, first_rank_stride=TP, seed=3)
    _, clean = play(dp=DP, pp=PP, first_rank_stride=TP, seed=3)
    for row in rows:  # doubles 2.4e-7 s apart there: a start plus a duration misses the next start
        row["start_ts"] += 1.7e9
    incidents = _localized(tmp_path, rows, capsys)
    assert [i["suspects"][0]["device"] for i in incidents] == ["gpu:h0003/0"]
    assert incidents[0]["impact"]["slowdown"] == pytest.approx(float(lengths.mean() / clean.mean()), rel=0.05)


def test_sampled_steps_as_the_paper_s_traces_keep_them_each_read_on_their_own(tmp_path, capsys) -> None:
    kept = [16, 21, 27, 29, 34, 35, 39, 404, 408, 413, 414, 415]  # trace AR's first twelve
    rows, lengths = play(dp=DP, pp=PP, slow={(0, 0): 2.0}, first_rank_stride=TP, seed=3)
    _, clean = play(dp=DP, pp=PP, first_rank_stride=TP, seed=3)
    for row in rows:
        row["step"] = kept[row["step"]]
    incidents = _localized(tmp_path, rows, capsys)
    assert [i["suspects"][0]["device"] for i in incidents] == ["gpu:h0000/0"]
    assert incidents[0]["iterations"] == kept  # none is a warm-up's: the warm-up counts from step 0
    assert incidents[0]["impact"]["slowdown"] == pytest.approx(float(lengths.mean() / clean.mean()), rel=0.05)


def test_uneven_batches_over_replicas_of_one_rank_a_stage_are_sequence_lengths_with_what_they_cost(tmp_path, capsys) -> None:
    data = np.random.default_rng(5).uniform(0.8, 1.8, size=(12, DP))  # per step and data-parallel rank
    rows, lengths = play(dp=DP, pp=PP, data_factor=data, first_rank_stride=TP, seed=1)
    # What-if's ideal: the same work, each step's data spread evenly over the replicas.
    _, even = play(dp=DP, pp=PP, data_factor=np.repeat(data.mean(axis=1, keepdims=True), DP, axis=1),
                   first_rank_stride=TP, seed=1)
    incidents = _localized(tmp_path, rows, capsys)
    assert [i["cause"] for i in incidents] == ["seqlen_imbalance"], incidents
    assert not incidents[0]["suspects"]
    measured = [int(i) for i in incidents[0]["iterations"]]
    assert incidents[0]["impact"]["slowdown"] == pytest.approx(float(lengths[measured].mean() / even[measured].mean()), rel=0.05)


def test_an_uneven_pipeline_split_is_named_as_such_and_blames_no_device(tmp_path, capsys) -> None:
    rows, _ = play(dp=DP, pp=PP, stage_factor={PP - 1: 1.6}, first_rank_stride=TP, seed=4)
    incidents = _localized(tmp_path, rows, capsys)
    assert [i["cause"] for i in incidents] == ["stage_imbalance"], incidents
    assert not incidents[0]["suspects"]


def test_a_clean_trace_raises_no_incident(tmp_path, capsys) -> None:
    rows, _ = play(dp=DP, pp=PP, first_rank_stride=TP, seed=5)
    assert _localized(tmp_path, rows, capsys) == []


def test_the_never_launched_sends_and_receives_are_left_out_and_the_rest_pair(tmp_path) -> None:
    rows, _ = play(dp=2, pp=3, steps=2, microbatches=2)
    trace, meta = write(tmp_path, rows, dp=2, pp=3)
    imported = read_whatif_trace(trace, meta=meta)
    records = imported.records
    sends, recvs = (records["op"] == int(OpKind.SEND)), (records["op"] == int(OpKind.RECV))
    # Per step and replica: 2 micro-batches over 2 stage boundaries, forward and backward.
    assert int(sends.sum()) == int(recvs.sum()) == 2 * 2 * 2 * 2 * 2
    ended = {(int(r), int(p), int(s)): int(e) for r, p, s, e in zip(
        records["rank"][recvs], records["peer"][recvs], records["seq"][recvs], records["t_end_ns"][recvs])}
    for rank, peer, seq, end in zip(records["rank"][sends], records["peer"][sends], records["seq"][sends],
                                    records["t_end_ns"][sends]):
        assert ended[(int(peer), int(rank), int(seq))] == int(end)  # send k ends with receive k
    # A step and replica: the first stage's 2 forward receives and the last stage's 2 forward sends
    # (the pipeline's ends), and the middle stage's receive after its last forward computation.
    assert any("20 pipeline sends and receives that were never launched" in note for note in imported.notes)
    assert imported.spec.job == "T" and imported.spec.layout.pp == 3 and imported.spec.layout.dp == 2


def test_a_trace_without_a_column_is_refused_naming_it(tmp_path) -> None:
    rows, _ = play(dp=2, pp=2, steps=1)
    for row in rows:
        del row["seq_id"]
    trace, _ = write(tmp_path, rows, dp=2, pp=2)
    with pytest.raises(ImportFileError, match=r"no column \['seq_id'\]"):
        read_whatif_trace(trace)


def test_an_unknown_operation_type_is_refused_naming_it(tmp_path) -> None:
    rows, _ = play(dp=2, pp=2, steps=1)
    rows[3]["optype"] = "forward-send-backward-recv"
    trace, _ = write(tmp_path, rows, dp=2, pp=2)
    with pytest.raises(ImportFileError, match="forward-send-backward-recv"):
        read_whatif_trace(trace)


def test_an_interleaved_pipeline_is_refused(tmp_path) -> None:
    rows, _ = play(dp=2, pp=2, steps=1)
    trace, meta = write(tmp_path, rows, dp=2, pp=2)
    meta.write_text(meta.read_text().replace("vpp_size: 1", "vpp_size: 2"))
    with pytest.raises(ImportFileError, match="interleaved pipeline"):
        read_whatif_trace(trace, meta=meta)


def test_a_worker_missing_from_the_grid_is_refused_naming_it(tmp_path) -> None:
    rows, _ = play(dp=2, pp=2, steps=1)
    trace, _ = write(tmp_path, [r for r in rows if (r["dp_rank"], r["stage"]) != (1, 1)], dp=2, pp=2)
    with pytest.raises(ImportFileError, match=r"\(1, 1\)"):
        read_whatif_trace(trace)


def test_bad_times_and_options_are_refused(tmp_path) -> None:
    rows, _ = play(dp=2, pp=2, steps=1)
    rows[5]["duration"] = float("nan")
    trace, meta = write(tmp_path, rows, dp=2, pp=2)
    with pytest.raises(ImportFileError, match="'duration' row 5"):
        read_whatif_trace(trace)
    with pytest.raises(ConfigError, match="--time-unit"):
        read_whatif_trace(trace, time_unit="minutes")
    with pytest.raises(ImportFileError, match="not a Parquet file"):
        read_whatif_trace(meta)


def test_times_in_milliseconds_read_as_such(tmp_path) -> None:
    rows, _ = play(dp=2, pp=2, steps=1)
    seconds = read_whatif_trace(write(tmp_path / "s", rows, dp=2, pp=2)[0]).records
    for row in rows:
        row["start_ts"], row["duration"] = row["start_ts"] * 1e3, row["duration"] * 1e3
    millis = read_whatif_trace(write(tmp_path / "ms", rows, dp=2, pp=2)[0], time_unit="ms").records
    assert np.abs(millis["t_end_ns"].astype(np.int64) - seconds["t_end_ns"].astype(np.int64)).max() <= 1
