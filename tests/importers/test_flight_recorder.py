"""``sleuth import flight-recorder``: dumps written as torch writes them, read back exactly."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from sleuth.cli import main
from sleuth.errors import ImportFileError
from sleuth.importers.safe_pickle import load_plain
from sleuth.jobspec import JobSpec
from sleuth.records import OpKind
from sleuth.records_folder import read_records
from tests.importers.conftest import SLOW_GPU, Emulated
from tests.importers.test_nccl_inspector import actual_rows
from tests.importers.writers import (
    EPOCH_NS, _discovered, expected_float32_ns, rank_ops, with_world_all_reduces, world_op, wrap_flight_recorder,
    write_flight_recorder,
)

POLL_NS = 100_000


def expected_rows(emulated: Emulated, job: str, *, timing: bool = True) -> list[tuple]:
    """Every record as the dumps can tell it; with timing, the start and end are left to
    ``placement_errors`` (they are estimated), and the duration is the CUDA events' float32."""
    rows = []
    for rank in range(emulated.spec.world):
        for op in rank_ops(emulated.records, rank) + [{**world_op(emulated.records, rank), "iteration": 40}]:
            row = (job, op["rank"], op["comm"], op["seq"], op["op"], op["peer"], op["nbytes"], op["iteration"],
                   EPOCH_NS + op["t_issue_ns"])
            if timing:
                row += (expected_float32_ns(op["t_end_ns"] - op["t_start_ns"]),)
            else:  # no start event without timing: the issue time, and the watchdog's discovery of the end
                row += (EPOCH_NS + op["t_issue_ns"], EPOCH_NS + _discovered(op["t_end_ns"], POLL_NS, rank))
            rows.append(row)
    return sorted(rows)


def timed_rows(records, *, timing: bool = True) -> list[tuple]:
    rows = [row[:9] + ((row[10] - row[9],) if timing else row[9:]) for row in actual_rows(records)]
    return sorted(rows)


def placement_errors(records, emulated: Emulated) -> np.ndarray:
    """|imported start - true start| per record whose truth the emulator knows (ns)."""
    truth = {(r["rank"], r["comm"], r["op"], r["peer"], r["seq"]): r["t_start_ns"] for r in emulated.records.rows()}
    return np.array([abs(r["t_start_ns"] - EPOCH_NS - truth[key]) for r in records.rows()
                     if (key := (r["rank"], r["comm"], r["op"], r["peer"], r["seq"])) in truth])


@pytest.fixture(scope="module")
def imported(emulated: Emulated, tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("flight")
    write_flight_recorder(base / "dumps", emulated.records, emulated.spec, poll_ns=POLL_NS)
    out = base / "records"
    assert main(["import", "flight-recorder", str(base / "dumps"), "--out", str(out), "--job", "llm",
                 "--gpus-per-host", "4"]) == 0
    return out


def test_every_record_comes_back(imported: Path, emulated: Emulated) -> None:
    records, _ = read_records(imported)
    assert timed_rows(records) == expected_rows(emulated, "llm")
    # Placed within the watchdog's polling period of the truth (the emulated kernels start 5 µs
    # after their issue, which the estimate cannot see).
    errors = placement_errors(records, emulated)
    assert len(errors) == len(emulated.records) and errors.max() <= POLL_NS and np.median(errors) <= 5_000


def test_the_job_spec_names_communicators_from_group_desc(imported: Path, emulated: Emulated) -> None:
    spec = JobSpec.read(imported)
    assert spec.placements == emulated.spec.placements  # --gpus-per-host 4 is the emulated placement
    truth = {(c.comm, c.kind, c.ranks) for c in emulated.spec.communicators} | {("world", "world", tuple(range(8)))}
    assert {(c.comm, c.kind, c.ranks) for c in spec.communicators} == truth


def test_localize_on_the_import_names_the_slow_gpu(imported: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["localize", "--records", str(imported), "--json"]) == 0
    # The emulated model's last stage also runs the loss: the split's own incident may stand beside.
    [incident] = [i for i in json.loads(capsys.readouterr().out) if i["cause"] != "stage_imbalance"]
    assert incident["suspects"][0]["device"] == SLOW_GPU
    assert incident["iterations"][0] == 20


def test_a_world_all_reduce_every_fifth_step_shifts_no_iteration(emulated: Emulated, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A loss or timer all-reduce every few steps is an operator outside the step's pattern: it
    stays in its step, and the steps after it keep their numbers."""
    records = emulated.records
    write_flight_recorder(tmp_path / "dumps", with_world_all_reduces(records, emulated.spec, 5), emulated.spec,
                          poll_ns=POLL_NS)
    assert main(["import", "flight-recorder", str(tmp_path / "dumps"), "--out", str(tmp_path / "out"),
                 "--gpus-per-host", "4"]) == 0
    imported, _ = read_records(tmp_path / "out")
    step_of = {(r["rank"], r["comm"], r["op"], r["peer"], r["seq"]): r["iteration"] for r in records.rows()}
    assert sorted(step_of.values()) == sorted(r["iteration"] for r in imported.rows()
                                              if (r["rank"], r["comm"], r["op"], r["peer"], r["seq"]) in step_of
                                              and r["comm"] != "world")
    # each after its step's last operator: counted with the next step's start (and the final one)
    assert {r["iteration"] for r in imported.rows() if r["comm"] == "world"} <= set(range(5, 41, 5))
    capsys.readouterr()
    assert main(["localize", "--records", str(tmp_path / "out"), "--json"]) == 0
    [incident] = [i for i in json.loads(capsys.readouterr().out) if i["cause"] != "stage_imbalance"]
    assert incident["suspects"][0]["device"] == SLOW_GPU and incident["iterations"][0] == 20


def test_wrapped_buffers_pair_each_send_with_its_receive_and_agree_on_each_step(
        emulated: Emulated, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each rank kept only its last 2,000 entries, from a different operator on each, and ranks 4-7
    ran 1,020 entries more before (a warm-up of their own): counted from the job's start, their
    steps would be 13 steps and 58 entries (of 74 a step) off their peers'. A transfer's two sides
    end together, and a group's members are in one step."""
    files = write_flight_recorder(tmp_path / "dumps", emulated.records, emulated.spec, poll_ns=POLL_NS)
    wrap_flight_recorder(files, 2_000, {rank: 1_020 for rank in range(4, 8)})
    assert main(["import", "flight-recorder", str(tmp_path / "dumps"), "--out", str(tmp_path / "out"),
                 "--gpus-per-host", "4"]) == 0
    err = capsys.readouterr().err
    assert "4 ranks' steps were counted from a different operator" in err and "lack their start" in err
    imported, _ = read_records(tmp_path / "out")
    truth = {(r["rank"], r["op"], r["peer"], EPOCH_NS + r["t_issue_ns"]): (r["seq"], r["iteration"])
             for r in emulated.records.rows()}
    known = [(r, truth[(r["rank"], r["op"], r["peer"], r["t_issue_ns"])]) for r in imported.rows() if r["comm"] != "world"]
    assert len(known) > 10_000 and all(r["iteration"] == step for r, (_, step) in known)  # rank 0's count is right
    p2p = {(r["comm"], r["rank"], r["op"], r["peer"], r["seq"]): seq for r, (seq, _) in known if r["peer"] >= 0}
    sends = [(key, seq) for key, seq in p2p.items() if key[2] == OpKind.SEND]
    received = [p2p.get((comm, peer, int(OpKind.RECV), rank, seq)) for (comm, rank, _, peer, seq), _ in sends]
    assert len(sends) > 100 and sum(r is None for r in received) <= 8  # a receive before the receiver's buffer
    assert all(r == seq for r, (_, seq) in zip(received, sends) if r is not None)
    assert main(["localize", "--records", str(tmp_path / "out"), "--json"]) == 0
    out, err = capsys.readouterr()
    assert "what-if attribution skipped" not in err
    [incident] = [i for i in json.loads(out) if i["cause"] != "stage_imbalance"]
    assert incident["suspects"][0]["device"] == SLOW_GPU and incident["iterations"][0] == 20


def test_json_dumps_without_timing_start_at_the_issue_and_end_at_the_discovery(
        emulated: Emulated, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_flight_recorder(tmp_path / "dumps", emulated.records, emulated.spec, poll_ns=POLL_NS, timing=False,
                          as_json=True)
    assert main(["import", "flight-recorder", str(tmp_path / "dumps"), "--out", str(tmp_path / "out"), "--job", "llm",
                 "--gpus-per-host", "4"]) == 0
    assert "TORCH_NCCL_ENABLE_TIMING=1 was not set" in capsys.readouterr().err
    records, _ = read_records(tmp_path / "out")
    assert timed_rows(records, timing=False) == expected_rows(emulated, "llm", timing=False)


def test_with_torch_s_100_ms_watchdog_the_slow_gpu_is_still_named(emulated: Emulated, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # Discovery times up to 100 ms late on 239 ms iterations of 0.1 ms operators: only the
    # durations and issue times place operators well enough.
    write_flight_recorder(tmp_path / "dumps", emulated.records, emulated.spec, poll_ns=100_000_000)
    assert main(["import", "flight-recorder", str(tmp_path / "dumps"), "--out", str(tmp_path / "out"),
                 "--gpus-per-host", "4"]) == 0
    records, _ = read_records(tmp_path / "out")
    assert np.median(placement_errors(records, emulated)) <= 5_000
    capsys.readouterr()
    assert main(["localize", "--records", str(tmp_path / "out"), "--json"]) == 0
    # The emulated model's last stage also runs the loss: the split's own incident may stand beside.
    [incident] = [i for i in json.loads(capsys.readouterr().out) if i["cause"] != "stage_imbalance"]
    assert incident["suspects"][0]["device"] == SLOW_GPU


def test_the_discovered_start_narrows_where_a_timed_operator_is_placed(emulated: Emulated, tmp_path: Path) -> None:
    # The watchdog notices the start event within a period of it too: with the completion's
    # window alone, 1% of the operators were placed 0.29 ms or more off at a 1 ms period.
    write_flight_recorder(tmp_path / "dumps", emulated.records, emulated.spec, poll_ns=1_000_000)
    assert main(["import", "flight-recorder", str(tmp_path / "dumps"), "--out", str(tmp_path / "out"),
                 "--gpus-per-host", "4", "--watchdog-poll-ms", "1"]) == 0
    records, _ = read_records(tmp_path / "out")
    assert np.percentile(placement_errors(records, emulated), 99) <= 200_000


def test_a_host_running_ahead_of_its_gpu_still_names_the_slow_gpu(emulated: Emulated, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # Issued 20 ms before they run, operators lie anywhere in their 1 ms discovery windows: placed
    # each on its own, the members of a collective ended apart and a host was named.
    write_flight_recorder(tmp_path / "dumps", emulated.records, emulated.spec, poll_ns=1_000_000,
                          host_ahead_ns=20_000_000)
    assert main(["import", "flight-recorder", str(tmp_path / "dumps"), "--out", str(tmp_path / "out"),
                 "--gpus-per-host", "4", "--watchdog-poll-ms", "1"]) == 0
    records, _ = read_records(tmp_path / "out")
    ends: dict[tuple, set[int]] = {}
    for r in records.rows():
        if r["op"] == OpKind.ALL_REDUCE:
            ends.setdefault((r["comm"], r["seq"]), set()).add(r["t_end_ns"])
    assert sum(len(e) == 1 for e in ends.values()) >= 0.99 * len(ends)  # the members end together
    # ... and each rank's collectives of one communicator, one NCCL stream, never overlap.
    collective = records.take(np.flatnonzero(records["peer"] < 0))
    stream = collective.take(np.lexsort((collective["seq"], collective["comm"], collective["rank"])))
    rank, comm = stream["rank"], stream["comm"]
    same = (rank[1:] == rank[:-1]) & (comm[1:] == comm[:-1])
    assert not (same & (stream["t_start_ns"][1:] < stream["t_end_ns"][:-1])).any()
    capsys.readouterr()
    assert main(["localize", "--records", str(tmp_path / "out"), "--json"]) == 0
    assert [i["suspects"][0]["device"] for i in json.loads(capsys.readouterr().out) if i["suspects"]][:1] == [SLOW_GPU]


def test_without_timing_a_cost_under_torch_s_100_ms_watchdog_is_not_reported(
        emulated: Emulated, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The slow GPU costs about 70 ms an iteration; each end is known only to within the watchdog's
    # 100 ms, so the lag alone could make it, and a device named from it may be any (it was a neighbour).
    write_flight_recorder(tmp_path / "dumps", emulated.records, emulated.spec, poll_ns=100_000_000, timing=False)
    assert main(["import", "flight-recorder", str(tmp_path / "dumps"), "--out", str(tmp_path / "out"),
                 "--gpus-per-host", "4"]) == 0
    assert JobSpec.read(tmp_path / "out").time_resolution_ns == 100_000_000
    capsys.readouterr()
    assert main(["localize", "--records", str(tmp_path / "out"), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == []
    assert "less than the records' times resolve (100 ms" in err and "TORCH_NCCL_ENABLE_TIMING=1" in err
    # A watchdog polling every 5 ms resolves the fault: its GPU is named.
    write_flight_recorder(tmp_path / "dumps5", emulated.records, emulated.spec, poll_ns=5_000_000, timing=False)
    assert main(["import", "flight-recorder", str(tmp_path / "dumps5"), "--out", str(tmp_path / "out5"),
                 "--gpus-per-host", "4", "--watchdog-poll-ms", "5"]) == 0
    capsys.readouterr()
    assert main(["localize", "--records", str(tmp_path / "out5"), "--json"]) == 0
    assert [i["suspects"][0]["device"] for i in json.loads(capsys.readouterr().out) if i["suspects"]][:1] == [SLOW_GPU]


# -- pickles run no code -----------------------------------------------------------------------


def test_a_pickle_that_names_code_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    evil = b"cos\nsystem\n(V" + f"touch {marker}".encode() + b"\ntR."
    with pytest.raises(ImportFileError, match=r"dump: the pickle names os.system; only builtin"):
        load_plain(evil, "dump")
    assert not marker.exists()
    # builtins are code too: a pickle may name none of them either
    with pytest.raises(ImportFileError, match="builtins.eval"):
        load_plain(b"cbuiltins\neval\n(V1+1\ntR.", "dump")


def test_torch_typed_lists_load_as_plain_lists() -> None:
    # What torch's pickler writes for a List[int]: GLOBAL build_intlist, a list, TUPLE1, REDUCE.
    data = b"\x80\x02ctorch.jit._pickle\nbuild_intlist\n]q\x00(K\x01K\x02e\x85R."
    assert load_plain(data, "dump") == [1, 2]
    assert load_plain(pickle.dumps({"a": (1, "x"), "b": [None, 2.5, True]}, protocol=2), "d") == {
        "a": (1, "x"), "b": [None, 2.5, True]}


def test_a_truncated_pickle_is_a_clear_error() -> None:
    with pytest.raises(ImportFileError, match="dump: not a readable pickle"):
        load_plain(pickle.dumps({"entries": [1, 2, 3]})[:-5], "dump")


# -- bad dumps ---------------------------------------------------------------------------------


def _rewrite(path: Path, change) -> None:
    dump = pickle.loads(path.read_bytes())  # our own test file: safe to load
    change(dump)
    path.write_bytes(pickle.dumps(dump, protocol=2))


def _send_of(dump: dict) -> dict:
    return next(e for e in dump["entries"] if e["profiling_name"].startswith("nccl:send"))


CASES = {
    "time missing": (lambda d: d["entries"][3].pop("time_created_ns"), "entries[3].time_created_ns: missing"),
    "unknown dtype": (lambda d: d["entries"][2].update(input_dtypes=["Float7"]),
                      "entries[2].input_dtypes: unknown dtype 'Float7'"),
    "sizes": (lambda d: d["entries"][1].update(input_sizes=[["12"]]), "entries[1].input_sizes: expected lists"),
    "wrong rank": (lambda d: _send_of(d).update(profiling_name="nccl:send 1->0"),
                   "profiling_name: group rank 1 of "),
    "unknown group": (lambda d: d["entries"][0].update(process_group=("77", "x")),
                      "entries[0].process_group: group '77' is not in pg_config"),
    "bad ranks": (lambda d: d["pg_config"]["1"].update(ranks="[0, zero]"), "pg_config['1'].ranks: not a list of ranks"),
    "not a dump": (lambda d: d.pop("pg_config"), "field 'pg_config' is missing"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_bad_dump_is_refused_naming_file_entry_and_field(emulated: Emulated, tmp_path: Path, case: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    files = write_flight_recorder(tmp_path / "dumps", emulated.records, emulated.spec)
    change, message = CASES[case]
    _rewrite(files[0], change)
    out = tmp_path / "out"
    assert main(["import", "flight-recorder", str(tmp_path / "dumps"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert str(files[0]) in err and message in err, err
    assert not out.exists()


def test_a_missing_rank_is_named(emulated: Emulated, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = write_flight_recorder(tmp_path / "dumps", emulated.records, emulated.spec)
    files[3].unlink()
    assert main(["import", "flight-recorder", str(tmp_path / "dumps"), "--out", str(tmp_path / "out")]) == 2
    assert "ranks [3] have no file" in capsys.readouterr().err


def test_a_coalesced_collective_group_takes_its_end_entry_s_times(tmp_path: Path) -> None:
    # torch >= 2.7 under a coalescing manager: one entry per collective (never timed), then an
    # "nccl:coalesced" entry with the same collective_seq_id that carries the group's times.
    t0 = 1_700_000_000_000_000_000

    def entry(record_id, seq, name, sizes, created, *, done=None, duration=None):
        return {"record_id": record_id, "pg_id": 0, "process_group": ("0", "default_pg"), "collective_seq_id": seq,
                "p2p_seq_id": 0, "op_id": record_id, "profiling_name": name, "time_created_ns": created,
                "input_sizes": sizes, "input_dtypes": ["Float"] * len(sizes), "output_sizes": sizes,
                "output_dtypes": ["Float"] * len(sizes), "state": "completed" if done else "scheduled",
                "time_discovered_started_ns": done and done - 1000, "time_discovered_completed_ns": done,
                "retired": True, "timeout_ms": 600000, "is_p2p": False,
                **({"duration_ms": duration} if duration is not None else {})}

    for rank in (0, 1):
        dump = {"version": "2.7", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
                "pg_status": {}, "entries": [
                    entry(0, 1, "nccl:all_reduce", [[1024]], t0, done=t0 + 100_000, duration=0.05),
                    entry(1, 2, "nccl:all_reduce", [[2048]], t0 + 200),
                    entry(2, 2, "nccl:all_reduce", [[4096]], t0 + 300),
                    entry(3, 2, "nccl:coalesced", [], t0 + 400, done=t0 + 600_000, duration=0.1),
                ]}
        (tmp_path / "dumps").mkdir(exist_ok=True)
        (tmp_path / "dumps" / f"nccl_trace_rank_{rank}").write_bytes(pickle.dumps(dump, protocol=2))
    assert main(["import", "flight-recorder", str(tmp_path / "dumps"), "--out", str(tmp_path / "out")]) == 0
    records, _ = read_records(tmp_path / "out")
    rows = [(r["rank"], r["comm"], r["seq"], r["nbytes"], r["t_issue_ns"] - t0, r["t_start_ns"] - t0, r["t_end_ns"] - t0)
            for r in records.rows()]
    # The first runs at its issue (its 50 µs end well inside the discovery window); the group's two
    # all-reduces run together, after it on the group's stream, for the group's 100 µs.
    assert sorted(rows) == sorted(
        (rank, "world", seq, nbytes, issue, start, end)
        for rank in (0, 1)
        for seq, nbytes, issue, start, end in ((0, 4096, 0, 0, 50_000), (1, 8192, 200, 50_000, 150_000),
                                               (2, 16384, 300, 50_000, 150_000))
    )
