"""``sleuth import nccl-inspector``: logs written as the Inspector writes them, read back exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sleuth.cli import main
from sleuth.jobspec import JobSpec
from sleuth.records import RecordBatch
from sleuth.records_folder import read_records
from tests.importers.conftest import SLOW_GPU, Emulated
from tests.importers.writers import EPOCH_US, comm_hash, rank_ops, world_op, write_inspector


def _us(t_ns: int) -> int:
    """What the Inspector keeps of a time (gettimeofday µs), back in ns."""
    return (EPOCH_US + t_ns // 1000) * 1000


def expected_rows(emulated: Emulated, job: str, *, world: bool = True) -> list[tuple]:
    rows = []
    for rank in range(emulated.spec.world):
        ops = rank_ops(emulated.records, rank)
        if world:
            ops.append({**world_op(emulated.records, rank), "iteration": 40})
        for op in ops:
            rows.append((job, op["rank"], op["comm"], op["seq"], op["op"], op["peer"], op["nbytes"], op["iteration"],
                         _us(op["t_issue_ns"]), _us(op["t_start_ns"]), _us(op["t_end_ns"])))
    return sorted(rows)


def actual_rows(records: RecordBatch) -> list[tuple]:
    names = [f.name for f in RecordBatch.FIELDS]
    return sorted(tuple(row[n] for n in names) for row in records.rows())


@pytest.fixture(scope="module")
def imported(emulated: Emulated, tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("inspector")
    write_inspector(base / "nccl-inspector-4242", emulated.records, emulated.spec)
    out = base / "records"
    assert main(["import", "nccl-inspector", str(base / "nccl-inspector-4242"), "--out", str(out), "--job", "llm"]) == 0
    return out


def test_every_record_comes_back(imported: Path, emulated: Emulated) -> None:
    records, _ = read_records(imported)
    assert actual_rows(records) == expected_rows(emulated, "llm")


def test_the_job_spec_has_the_hosts_gpus_and_named_communicators(imported: Path, emulated: Emulated) -> None:
    spec = JobSpec.read(imported)
    assert spec.world == 8 and spec.placements == emulated.spec.placements
    truth = {(c.comm, c.kind, c.ranks) for c in emulated.spec.communicators} | {("world", "world", tuple(range(8)))}
    assert {(c.comm, c.kind, c.ranks) for c in spec.communicators} == truth
    assert (spec.layout.tp, spec.layout.pp, spec.layout.dp) == (2, 2, 2)


def test_localize_on_the_import_names_the_slow_gpu(imported: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["localize", "--records", str(imported), "--json"]) == 0
    # The emulated model's last stage also runs the loss: the split's own incident may stand beside.
    [incident] = [i for i in json.loads(capsys.readouterr().out) if i["cause"] != "stage_imbalance"]
    assert incident["suspects"][0]["device"] == SLOW_GPU
    assert incident["cause"] == "compute" and incident["iterations"][0] == 20


def test_v4_4_dump_markers_and_unnamed_communicators(emulated: Emulated, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    write_inspector(tmp_path / "logs", emulated.records, emulated.spec, style="v4.4", names=False)
    assert main(["import", "nccl-inspector", str(tmp_path / "logs"), "--out", str(tmp_path / "out"), "--job", "llm"]) == 0
    records, _ = read_records(tmp_path / "out")
    # Without names, tp, dp and pp come from the groups' shapes; the embedding groups have the
    # pipeline groups' members, so each pair shares a name, told apart by the comm hash.
    rename = {}
    for comm in JobSpec.read(tmp_path / "out").communicators:
        rename[comm.comm] = comm.comm.split("~")[0]
    got = sorted((r[0], r[1], rename[r[2]], *r[3:]) for r in actual_rows(records))
    want = sorted((r[0], r[1], r[2].replace("embd", "pp"), *r[3:]) for r in expected_rows(emulated, "llm"))
    assert got == want
    assert "~0x" in " ".join(rename)  # the qualified ones


def test_v4_1_channel_events(emulated: Emulated, tmp_path: Path) -> None:
    write_inspector(tmp_path / "logs", emulated.records, emulated.spec, style="v4.1")
    assert main(["import", "nccl-inspector", str(tmp_path / "logs"), "--out", str(tmp_path / "out"), "--job", "llm"]) == 0
    records, _ = read_records(tmp_path / "out")
    assert actual_rows(records) == expected_rows(emulated, "llm")


def test_without_a_world_communicator_ranks_follow_host_and_pid(emulated: Emulated, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    write_inspector(tmp_path / "logs", emulated.records, emulated.spec, world=False)
    assert main(["import", "nccl-inspector", str(tmp_path / "logs"), "--out", str(tmp_path / "out"), "--job", "llm"]) == 0
    assert "no communicator spans every process" in capsys.readouterr().err
    records, _ = read_records(tmp_path / "out")
    assert actual_rows(records) == expected_rows(emulated, "llm", world=False)


# -- bad files ---------------------------------------------------------------------------------


@pytest.fixture()
def one_log(emulated: Emulated, tmp_path: Path) -> Path:
    files = write_inspector(tmp_path / "logs", emulated.records, emulated.spec)
    for rank, path in files.items():
        if rank:
            path.unlink()
    return files[0]


def _edit(path: Path, line: int, change) -> None:
    lines = path.read_text().splitlines()
    lines[line - 1] = change(lines[line - 1])
    path.write_text("\n".join(lines) + "\n")


def _field(path: Path, key: str, value, *, delete: bool = False):
    def change(text: str) -> str:
        record = json.loads(text)
        perf = record["coll_perf"]
        target, _, leaf = key.rpartition(".")
        holder = perf if not target else perf[target]
        if delete:
            del holder[leaf]
        else:
            holder[leaf] = value
        return json.dumps(record)
    return change


CASES = {
    "not JSON": (3, lambda text: text[:40], ":3: not JSON"),
    "not verbose": (2, "delete:event_trace_ts", ":2: coll_perf.event_trace_ts: missing: the Inspector ran without "
                                                "NCCL_INSPECTOR_DUMP_VERBOSE=1"),
    "sn a string": (4, ("coll_sn", "7"), ":4: coll_perf.coll_sn: expected a non-negative integer, got '7'"),
    "unknown op": (5, ("coll", "AllShuffle"), ":5: coll_perf.coll: unknown operator 'AllShuffle'"),
    "kernel times": (6, ("event_trace_ts.kernel_events", [{"channel_id": 0, "kernel_start_ts": 9}]),
                     ":6: coll_perf.event_trace_ts.kernel_events[0].kernel_stop_ts: missing"),
    "header rank": (1, lambda text: text.replace('"rank": 0,', '"rank": 9,', 1), ":1: header.rank: 9 is not a rank"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_bad_log_is_refused_naming_file_line_and_field(one_log: Path, tmp_path: Path, case: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    line, change, message = CASES[case]
    if isinstance(change, str):
        change = _field(one_log, change.split(":")[1], None, delete=True)
    elif isinstance(change, tuple):
        change = _field(one_log, *change)
    _edit(one_log, line, change)
    out = tmp_path / "out"
    assert main(["import", "nccl-inspector", str(one_log.parent), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{one_log}{message}" in err, err
    assert not out.exists()  # nothing half-written


def test_a_record_before_any_header_and_a_repeated_record_are_refused(one_log: Path, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    lines = one_log.read_text().splitlines()
    bare = json.loads(lines[0])
    one_log.write_text(json.dumps({"coll_perf": bare["coll_perf"]}) + "\n")
    assert main(["import", "nccl-inspector", str(one_log.parent), "--out", str(tmp_path / "a")]) == 2
    assert f"{one_log}:1: a coll_perf record with no header before it" in capsys.readouterr().err
    one_log.write_text(lines[0] + "\n" + lines[1] + "\n" + lines[0] + "\n")
    assert main(["import", "nccl-inspector", str(one_log.parent), "--out", str(tmp_path / "b")]) == 2
    assert "appears twice (also line 1)" in capsys.readouterr().err


def test_an_existing_out_folder_is_left_alone(imported: Path, emulated: Emulated, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    write_inspector(tmp_path / "logs", emulated.records, emulated.spec)
    before = sorted(p.name for p in imported.iterdir())
    assert main(["import", "nccl-inspector", str(tmp_path / "logs"), "--out", str(imported)]) == 2
    assert "exists and is not an empty folder" in capsys.readouterr().err
    assert sorted(p.name for p in imported.iterdir()) == before


def test_records_the_inspector_dropped_are_reported(emulated: Emulated, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    files = write_inspector(tmp_path / "logs", emulated.records, emulated.spec, style="v4.4")
    lines = files[2].read_text().splitlines()
    marker = next(i for i, line in enumerate(lines) if "dump_stats" in line)
    record = json.loads(lines[marker])
    record["dump_stats"].update(coll_dropped_total=17, coll_dropped_since_last_dump=17)
    lines[marker] = json.dumps(record)
    files[2].write_text("\n".join(lines) + "\n")
    assert main(["import", "nccl-inspector", str(tmp_path / "logs"), "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert "rank 2: the Inspector dropped 17 collective records" in err and "NCCL_INSPECTOR_DUMP_COLL_RING_SIZE" in err


def test_a_p2p_peer_outside_its_communicator_is_refused(one_log: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    lines = one_log.read_text().splitlines()
    number = next(i for i, line in enumerate(lines, start=1) if "p2p_perf" in line)
    record = json.loads(lines[number - 1])
    record["p2p_perf"]["p2p_peer"] = 2
    lines[number - 1] = json.dumps(record)
    one_log.write_text("\n".join(lines) + "\n")
    assert main(["import", "nccl-inspector", str(one_log.parent), "--out", str(tmp_path / "out")]) == 2
    assert f"{one_log}:{number}: p2p_perf.p2p_peer: 2 is not a rank of communicator" in capsys.readouterr().err


def test_a_communicator_missing_a_member_s_file_is_left_out_with_a_note(emulated: Emulated, tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    files = write_inspector(tmp_path / "logs", emulated.records, emulated.spec)
    # rank 7's process wrote nothing on its tensor-parallel group tp.3 (ranks 6, 7)
    tp3 = next(c for c in emulated.spec.communicators if c.comm == "tp.3")
    lines = [line for line in files[7].read_text().splitlines() if comm_hash("tp.3") not in line]
    files[7].write_text("\n".join(lines) + "\n")
    assert main(["import", "nccl-inspector", str(tmp_path / "logs"), "--out", str(tmp_path / "out")]) == 0
    assert f"communicator {comm_hash('tp.3')}: no file for its ranks [1]" in capsys.readouterr().err
    records, _ = read_records(tmp_path / "out")
    assert "tp.3" not in set(records.decoded("comm")) and tp3.ranks == (6, 7)
    assert int((records["rank"] == 6).sum()) == int((emulated.records["rank"] == 6).sum()) + 1 - int(
        ((emulated.records["rank"] == 6) & emulated.records.isin("comm", ["tp.3"])).sum())
