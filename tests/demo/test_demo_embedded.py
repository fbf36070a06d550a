"""``sleuth demo`` embedded (no services at all): it must name the slowed rank's GPU and the slow
spine as top suspects and leave an incident JSON and a self-contained HTML report per incident.
Without a stack, its stack mode says how to start one."""

from __future__ import annotations

import pytest

from sleuth.cli import main

from sleuth.ports import free_port
from .written import slowed_gpu, top_suspects

pytest.importorskip("torch")


def test_embedded_demo_names_the_slowed_gpu_and_the_spine(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # an 80-column terminal: what on-call reads fits it, the rest is folded
    code = main(["demo", "--mode", "embedded", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out[-4000:]
    assert "embedded" in out and out.count(": found as the top suspect") == 2
    assert max(len(line) for line in out.splitlines()) <= 80
    assert top_suspects(tmp_path) == {"demo-real": slowed_gpu(tmp_path / "real-records"), "demo-spine": "spine:s0"}


def test_stack_mode_refuses_to_start_without_a_stack(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("SLEUTH_GATEWAY_PORT", str(free_port()))  # nothing listens there
    assert main(["demo", "--mode", "stack", "--out", str(tmp_path)]) == 2
    assert "sleuth stack up" in capsys.readouterr().err
