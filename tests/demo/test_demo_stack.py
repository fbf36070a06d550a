"""``sleuth demo`` on the real stack that ``sleuth stack up`` starts: it must name the slowed
rank's GPU and the slow spine as top suspects, store one incident for the one fault in ClickHouse,
and leave an incident JSON and a self-contained HTML report per incident."""

from __future__ import annotations

import io
import time
import uuid

import pytest
from rich.console import Console

from sleuth.demo import stack as demo_stack
from sleuth.demo.cases import RealJob
from sleuth.demo.run import run_demo
from sleuth.storage.incidents import list_incidents
from sleuth.stream import connect
from sleuth.stream.services import stack

from ..conftest import Services
from ..stream.harness import private_settings
from sleuth.ports import free_port
from .written import written_tops

pytest.importorskip("torch")


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
