"""``sleuth sim``: the direct form, ``suite NAME``, ``--list-faults``, and errors naming the token."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sleuth.cli import main
from sleuth.recordio import read_parquet


def test_direct_form_writes_the_four_files(tmp_path: Path) -> None:
    code = main(["sim", "--generate", "fattree:hosts=4,gpus=4,pod=2,spines=2", "--tp", "2", "--pp", "2",
                 "--dp", "4", "--microbatches", "2", "--iterations", "4", "--layers", "4",
                 "--fault", "gpu:h0001/2,slow=1.5", "--seed", "3", "--out", str(tmp_path)])
    assert code == 0
    for name in ("records.parquet", "iterations.parquet", "job.json", "truth.json", "labels/abnormal.parquet"):
        assert (tmp_path / name).is_file(), name
    truth = json.loads((tmp_path / "truth.json").read_text())
    assert truth["faults"][0]["device"] == "gpu:h0001/2" and truth["faults"][0]["kind"] == "gpu"
    assert truth["faults"][0]["ranks"] == [6]
    assert truth["scenario"]["seed"] == 3 and len(truth["iterations"]) == 4
    assert truth["abnormal_operators"] > 0
    assert len(read_parquet(tmp_path / "records.parquet")) > 0


def test_list_faults_documents_the_grammar(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "--list-faults"]) == 0
    text = capsys.readouterr().out
    for word in ("gpu:", "host:", "nvswitch:", "nic:", "link:", "leaf:", "spine:", "last_stage", "seqlen",
                 "spike", "fluctuation", "persistent", "--fault"):
        assert word in text


def test_a_bad_fault_fails_naming_the_token(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["sim", "--generate", "fattree:hosts=2,gpus=4", "--tp", "2", "--pp", "1", "--dp", "4",
                 "--fault", "nic:h0000/0,profile=wobble", "--out", str(tmp_path)])
    assert code == 2
    assert "'profile=wobble'" in capsys.readouterr().err
    assert not (tmp_path / "records.parquet").exists()


def test_suite_writes_one_folder_per_scenario(tmp_path: Path) -> None:
    assert main(["sim", "suite", "nonhw", "--out", str(tmp_path), "--iterations", "2", "--seed", "4"]) == 0
    index = json.loads((tmp_path / "suite.json").read_text())
    assert index["suite"] == "nonhw" and index["seed"] == 4
    names = [entry["name"] for entry in index["scenarios"]]
    assert names == ["nonhw-last-stage", "nonhw-seqlen"]
    for name in names:
        assert (tmp_path / name / "truth.json").is_file()


def test_unknown_words_and_suites_fail(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "suit", "scale", "--out", "x"]) == 2
    assert main(["sim", "suite", "bogus", "--out", "x"]) == 2
    err = capsys.readouterr().err
    assert "suite NAME" in err and "'bogus'" in err
