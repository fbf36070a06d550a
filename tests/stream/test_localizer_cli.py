"""``sleuth localizer`` refuses a topology setting it cannot use before it touches any service."""

from __future__ import annotations

from sleuth.cli import main


def test_a_missing_topology_file_fails_naming_the_setting(monkeypatch, capsys, tmp_path) -> None:
    monkeypatch.setenv("SLEUTH_LOCALIZER_TOPOLOGY", str(tmp_path / "nope.yaml"))
    assert main(["localizer"]) == 2
    err = capsys.readouterr().err
    assert f"SLEUTH_LOCALIZER_TOPOLOGY='{tmp_path / 'nope.yaml'}': cannot read: No such file or directory" in err


def test_a_bad_topology_file_fails_with_its_line(monkeypatch, capsys, tmp_path) -> None:
    bad = tmp_path / "fabric.yaml"
    bad.write_text("hosts:\n  - name: h0\n    gpus: many\n")
    monkeypatch.setenv("SLEUTH_LOCALIZER_TOPOLOGY", str(bad))
    assert main(["localizer"]) == 2
    err = capsys.readouterr().err
    assert "sleuth localizer: error:" in err and "line 3" in err


def test_a_bad_debounce_fails_naming_the_variable(monkeypatch, capsys) -> None:
    monkeypatch.setenv("SLEUTH_LOCALIZER_DEBOUNCE_S", "-2")
    assert main(["localizer"]) == 2
    assert "SLEUTH_LOCALIZER_DEBOUNCE_S='-2'" in capsys.readouterr().err
