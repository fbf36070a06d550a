"""``sleuth localize`` on an emulator folder (``sleuth sim --out``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from sleuth.cli import main
from sleuth.jobspec import JobSpec
from sleuth.recordio import read_parquet, write_parquet
from sleuth.records import RecordBatch


def test_localize_on_an_emulated_folder_names_the_slow_gpu(tmp_path, capsys):
    out = tmp_path / "run"
    assert main([
        "sim", "--generate", "fattree:hosts=8,gpus=8,pod=4,spines=2", "--tp", "4", "--pp", "2", "--dp", "8",
        "--iterations", "30", "--microbatches", "4", "--fault", "gpu:h0003/2,slow=1.5,start=15", "--seed", "2",
        "--out", str(out), "--no-labels",
    ]) == 0
    fabric = tmp_path / "fabric.yaml"
    assert main(["topology", "dump", "--generate", "fattree:hosts=8,gpus=8,pod=4,spines=2", "-o", str(fabric)]) == 0
    capsys.readouterr()
    assert main(["localize", "--records", str(out), "--topology", str(fabric), "--json"]) == 0
    [incident] = json.loads(capsys.readouterr().out)
    assert incident["suspects"][0] == {"device": "gpu:h0003/2", "kind": "gpu", "score": incident["suspects"][0]["score"]}
    assert incident["cause"] == "compute" and incident["iterations"][0] == 15
    assert main(["localize", "--records", str(out)]) == 0  # without --topology: one leaf over the hosts
    text = capsys.readouterr().out
    assert "gpu:h0003/2" in text and "ranks fetched" in text


def test_a_ring_s_tied_nics_print_as_four_and_how_many_more_with_every_one_in_the_json(tmp_path, capsys):
    # tp2 pp1: a NIC slow from the first step under one of the two rings ties with the ring's 8 NICs.
    out = tmp_path / "run"
    assert main(["sim", "--generate", "fattree:hosts=4,gpus=8,pod=2,spines=2", "--tp", "2", "--pp", "1", "--dp", "16",
                 "--iterations", "30", "--fault", "nic:h0001/1,slow=4", "--seed", "11", "--out", str(out),
                 "--no-labels"]) == 0
    capsys.readouterr()
    assert main(["localize", "--records", str(out), "--routing", "static"]) == 0
    text = capsys.readouterr().out
    assert re.findall(r"^  \d+\. (nic:\S+)", text, re.MULTILINE) == ["nic:h0000/1", "nic:h0000/7", "nic:h0001/1", "nic:h0001/7"]
    assert "... and 4 more tied with them" in text and "8 devices share the first place" in text
    assert main(["localize", "--records", str(out), "--routing", "static", "--json"]) == 0
    [incident] = json.loads(capsys.readouterr().out)
    assert len(incident["suspects"]) == 8


def test_a_spine_slow_from_the_first_step_is_named_by_the_rings_that_crossed_it(tmp_path, capsys):
    # Most rails' rings hash a hop onto spine s2 and run 4x slow in every step; the others miss it.
    out, fabric = tmp_path / "run", tmp_path / "fabric.yaml"
    assert main(["sim", "--generate", "fattree:hosts=8,gpus=8,pod=2,spines=4", "--tp", "8", "--pp", "1", "--dp", "8",
                 "--iterations", "20", "--fault", "spine:s2,slow=4", "--seed", "5", "--out", str(out),
                 "--no-labels"]) == 0
    assert main(["topology", "dump", "--generate", "fattree:hosts=8,gpus=8,pod=2,spines=4", "-o", str(fabric)]) == 0
    capsys.readouterr()
    assert main(["localize", "--records", str(out), "--topology", str(fabric), "--routing", "static", "--json"]) == 0
    [incident] = json.loads(capsys.readouterr().out)
    assert incident["cause"] == "network" and incident["suspects"][0]["device"] == "spine:s2"
    assert incident["attribution"]["trigger"] == "slowdown"


def test_a_missing_records_folder_is_a_clear_error(tmp_path, capsys):
    assert main(["localize", "--records", str(tmp_path / "nope")]) == 2
    assert "--records" in capsys.readouterr().err


def slow_from_the_start(out: Path) -> RecordBatch:
    """A 32-GPU emulated job whose ``gpu:h0002/1`` computes 1.3x from its first step, written to ``out``."""
    assert main([
        "sim", "--generate", "fattree:hosts=4,gpus=8,pod=2,spines=2", "--tp", "4", "--pp", "2", "--dp", "4",
        "--iterations", "30", "--microbatches", "4", "--fault", "gpu:h0002/1,slow=1.3", "--seed", "4",
        "--out", str(out), "--no-labels",
    ]) == 0
    return read_parquet(out / "records.parquet")


def test_a_folder_that_lost_records_says_how_many_it_filled_in_and_still_names_the_gpu(tmp_path, capsys):
    out = tmp_path / "run"
    records = slow_from_the_start(out)
    kept = records.take(np.random.default_rng(5).random(len(records)) > 0.01)  # 1% lost, the job slow from its start
    write_parquet(kept, out / "records.parquet")
    capsys.readouterr()
    assert main(["localize", "--records", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    [incident] = json.loads(captured.out)
    assert incident["suspects"][0]["device"] == "gpu:h0002/1"
    # Every lost record but those of groups that lost all their members, or a rank its whole iteration.
    said = re.search(r"sleuth: (\d+) records were missing from their groups", captured.err)
    assert said and 0.99 * (len(records) - len(kept)) <= int(said.group(1)) <= len(records) - len(kept)
    assert main(["attribute", "--records", str(out)]) == 0
    assert f"sleuth: {said.group(1)} records were missing" in capsys.readouterr().err


def test_a_slowed_rank_whose_records_carry_no_iteration_is_numbered_from_its_groups_and_named(tmp_path, capsys):
    # A dump too short for two periods of its stream: that rank's records carry iteration -1, and
    # left out, the job opened no incident.
    out = tmp_path / "run"
    records = slow_from_the_start(out)
    slowed = next(p.rank for p in JobSpec.read(out).placements if (p.host, p.gpu) == ("h0002", 1))
    columns = dict(records.columns)
    columns["iteration"] = np.where(records["rank"] == slowed, -1, records["iteration"]).astype(records["iteration"].dtype)
    write_parquet(RecordBatch(columns, records.strings), out / "records.parquet")
    capsys.readouterr()
    assert main(["localize", "--records", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    assert [i["suspects"][0]["device"] for i in json.loads(captured.out)] == ["gpu:h0002/1"]
    said = re.search(r"sleuth: (\d+) records carried no iteration", captured.err)
    assert said and int(said.group(1)) == int((records["rank"] == slowed).sum())
