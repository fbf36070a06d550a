"""``sleuth demo`` on both of its paths: embedded (no services at all) and on the real stack that
``sleuth stack up`` starts. Each must name the slowed rank's GPU and the slow spine as top suspects
and leave an incident JSON and a self-contained HTML report per incident."""

from __future__ import annotations

import io
import json
import time
import uuid
from pathlib import Path

import pytest
from rich.console import Console

from sleuth.cli import main
from sleuth.demo import stack as demo_stack
from sleuth.demo.cases import RealJob
from sleuth.demo.run import run_demo
from sleuth.storage.incidents import list_incidents
from sleuth.stream import connect
from sleuth.stream.services import stack

from ..conftest import Services
from ..stream.harness import private_settings
from ..stream.test_stack import free_port

pytest.importorskip("torch")


def written_tops(folder: Path) -> list[tuple[str, str, str]]:
    """(job prefix: demo-real or demo-spine, incident id, top suspect) of each incident the demo
    wrote into ``folder`` with suspects; each one's HTML report is checked to be there and self-contained."""
    found = []
    for path in folder.glob("*.json"):
        incident = json.loads(path.read_text())
        prefix = "demo-real" if incident["job"].startswith("demo-real") else "demo-spine"
        if incident["suspects"]:
            found.append((prefix, incident["incident"], incident["suspects"][0]["device"]))
        html = path.with_suffix(".html").read_text()
        assert "<script src=" not in html and incident["incident"] in html
    return found


def top_suspects(folder: Path) -> dict[str, str]:
    """job prefix -> top suspect of its incidents in the demo's folder (the first one read)."""
    found: dict[str, str] = {}
    for prefix, _incident, device in written_tops(folder):
        found.setdefault(prefix, device)
    return found


def slowed_gpu(folder: Path) -> str:
    from sleuth.demo.cases import RealJob, gpu_of_rank
    from sleuth.jobspec import JobSpec

    return gpu_of_rank(JobSpec.read(folder), RealJob().rank)


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


@pytest.mark.services
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_demo_on_the_stack_raises_both_incidents_in_clickhouse(services: Services, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SLEUTH_STATE_DIR", str(services.state_dir))
    tag = uuid.uuid4().hex[:8]
    settings = private_settings(
        services, gateway_port=free_port(), irregularities_topic=f"sleuth-irr-{tag}",
        incidents_topic=f"sleuth-inc-{tag}", alerts_topic=f"sleuth-alerts-{tag}",
        localizer_group=f"sleuth-localizer-{tag}", alerter_group=f"sleuth-alerter-{tag}",
    )
    client = connect.clickhouse_client(settings)
    try:
        assert all(stack.up(services.repo_root, settings).values())
        deadline = time.monotonic() + 60
        while not demo_stack.reachable(settings):  # the gateway process needs a moment to listen
            assert time.monotonic() < deadline, "the stack's gateway never answered"
            time.sleep(0.5)
        printed = io.StringIO()
        found = run_demo(tmp_path, mode="stack", settings=settings, console=Console(file=printed, width=120))
        assert found, printed.getvalue()[-4000:]
        assert "stack" in printed.getvalue()
        # One fault, one incident: the slowed rank's GPU is one episode however many times it is analysed
        # (irregular iterations, what-if rounds). The 8 processes on 2 shared cores may make other
        # episodes of their own; the order of files and rows says nothing.
        rows = list_incidents(client, settings.clickhouse_database)
        stored = {r.incident: r.top_suspect for r in rows}
        written = written_tops(tmp_path)
        assert all(stored.get(incident) == device for _prefix, incident, device in written)
        slowed = [r for r in rows if r.job.startswith("demo-real") and r.top_suspect.startswith("gpu:")
                  and r.top_suspect.endswith(f"/{RealJob().rank}")]  # one host: a rank's GPU index is its rank
        assert len(slowed) == 1, rows
        assert ("demo-spine", "spine:s0") in {(prefix, device) for prefix, _incident, device in written}
        assert any(prefix == "demo-real" and device.startswith("gpu:") for prefix, _incident, device in written)
    finally:
        stack.down(services.repo_root, services_too=False)
        client.execute(f"DROP DATABASE IF EXISTS {settings.clickhouse_database}")
        client.disconnect()
