"""``sleuth detect train | eval | info`` on folders written by ``sleuth sim`` (as the README shows)."""

from __future__ import annotations

import json

from sleuth.cli import main

SIM = ["sim", "--generate", "fattree:hosts=4,gpus=4,pod=2,spines=2", "--tp", "4", "--pp", "2", "--dp", "2",
       "--layers", "4", "--hidden", "1024", "--seq-len", "1024", "--microbatches", "4", "--iterations", "30"]


def test_train_eval_info(tmp_path, capsys) -> None:
    train, test, model = tmp_path / "train", tmp_path / "test", tmp_path / "model.zip"
    assert main(SIM + ["--fault", "gpu:h0001/2,slow=1.5,start=10", "--seed", "1", "--out", str(train)]) == 0
    assert main(SIM + ["--fault", "gpu:h0003/1,slow=1.5,start=10", "--seed", "2", "--out", str(test)]) == 0
    capsys.readouterr()
    assert main(["detect", "train", "--records", str(train), "--truth", str(train / "labels" / "abnormal.parquet"),
                 "-o", str(model), "--trees", "10"]) == 0
    trained = json.loads(capsys.readouterr().out)
    assert trained["abnormal_rows"] > 1000 and model.stat().st_size == trained["bytes"]
    assert main(["detect", "eval", "--records", str(test), "--model", str(model)]) == 0
    report = json.loads(capsys.readouterr().out)
    # One 30-iteration training run of 16 GPUs is little to learn from.
    assert report["f1"] > 0.5
    assert 10 in report["irregular_iterations"]
    assert main(["detect", "info", str(model)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["training"]["records"] == [str(train)] and "scikit-learn" in info["versions"]


def test_missing_labels_are_named(tmp_path, capsys) -> None:
    assert main(["detect", "train", "--records", str(tmp_path), "-o", str(tmp_path / "m.zip")]) == 2
    assert "--records" in capsys.readouterr().err
