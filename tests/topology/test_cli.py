"""``sleuth topology`` through the real entry point, ``sleuth.cli.main``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

import sleuth.cli

from .conftest import TWO_LEAVES


@pytest.fixture
def main() -> Callable[[list[str]], int]:
    return sleuth.cli.main


def test_show_json_generated(main, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topology", "show", "--generate", "fattree:hosts=16,gpus=8,pod=4,spines=4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["counts"] == {"gpu": 128, "nvswitch": 16, "nic": 128, "host": 16, "leaf": 32, "spine": 4, "link": 256}
    scopes = [(p["from"], p["to"], p["scope"]) for p in out["sample_paths"]]
    assert scopes == [
        ("gpu:h0000/0", "gpu:h0000/1", "same_host"),
        ("gpu:h0000/0", "gpu:h0001/0", "same_leaf"),
        ("gpu:h0000/0", "gpu:h0015/7", "cross_spine"),
    ]
    across = out["sample_paths"][2]["devices"]
    spines = [d for d in across if d["kind"] == "spine"]
    assert [d["device"] for d in spines] == ["spine:s0", "spine:s1", "spine:s2", "spine:s3"]
    assert all(d["weight"] == 0.25 and d["nics_below"] == 128 for d in spines)
    leaf = next(d for d in across if d["device"] == "leaf:p0r0")
    assert leaf == {"device": "leaf:p0r0", "kind": "leaf", "weight": 1.0, "nics_below": 4}


def test_show_json_file_and_requested_path(main, capsys, tmp_path: Path) -> None:
    file = tmp_path / "two.yaml"
    file.write_text(TWO_LEAVES)
    assert main(["topology", "show", str(file), "--json", "--path", "gpu:h1/0", "gpu:h2/1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["source"] == str(file)
    requested = out["sample_paths"][-1]
    assert (requested["from"], requested["to"]) == ("gpu:h1/0", "gpu:h2/1")
    assert [d["device"] for d in requested["devices"]][:4] == ["gpu:h1/0", "nic:h1/0", "link:leaf:l0~nic:h1/0", "leaf:l0"]
    assert {d["device"]: d["nics_below"] for d in requested["devices"]}["spine:s0"] == 8


def test_show_table(main, capsys) -> None:
    assert main(["topology", "show", "--generate", "spineleaf:hosts=4,gpus=2,per_leaf=2,spines=2"]) == 0
    out = capsys.readouterr().out
    assert "spine" in out and "C(d)" in out and "across spines" in out


def test_dump_then_show(main, capsys, tmp_path: Path) -> None:
    file = tmp_path / "fabric.yaml"
    assert main(["topology", "dump", "--generate", "fattree:hosts=4,gpus=2,pod=2,spines=2", "-o", str(file)]) == 0
    assert main(["topology", "show", str(file), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["counts"]["leaf"] == 4


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["topology", "show"], "exactly one"),
        (["topology", "show", "x.yaml", "--generate", "fattree:hosts=2"], "exactly one"),
        (["topology", "show", "--generate", "fattree:hosts=2,podz=1"], "'podz'"),
        (["topology", "show", "/nonexistent/t.yaml"], "/nonexistent/t.yaml"),
    ],
)
def test_errors_are_one_line(main, capsys, argv: list[str], fragment: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("sleuth topology: error:") and fragment in err


def test_bad_file_reports_the_line(main, capsys, tmp_path: Path) -> None:
    file = tmp_path / "bad.yaml"
    file.write_text("hosts:\n  - {name: h0, gpus: 1, leaf: l0}\nleaves: [l0]\nlinks:\n  - [nic:h0/0, leaf:l9]\n")
    assert main(["topology", "show", str(file)]) == 2
    err = capsys.readouterr().err
    assert "line 5" in err and "leaf:l9" in err
