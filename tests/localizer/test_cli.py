"""``sleuth localize`` on an emulator folder (``sleuth sim --out``)."""

from __future__ import annotations

import json

from sleuth.cli import main


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


def test_a_missing_records_folder_is_a_clear_error(tmp_path, capsys):
    assert main(["localize", "--records", str(tmp_path / "nope")]) == 2
    assert "--records" in capsys.readouterr().err
