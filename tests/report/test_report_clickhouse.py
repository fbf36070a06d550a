"""The report from the real ClickHouse: every figure's SQL, ``sleuth report ID``, ``sleuth serve`` over HTTP."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import replace

import numpy as np
import pytest

from sleuth.cli import main
from sleuth.jobspec import JobSpec
from sleuth.oncall.links import incident_path, incident_url
from sleuth.report import build_report, gather
from sleuth.report.evidence import Role
from sleuth.storage import schema
from sleuth.storage.incidents import incident_by_id, list_incidents
from sleuth.storage.sink import ClickHouseSink
from sleuth.storage.source import ClickHouseSource
from sleuth.storage.tables import incident_rows

from ..conftest import Services
from .conftest import Emulated

pytestmark = pytest.mark.services


def insert_incident(client, database: str, incident, *, created_ns: int) -> None:
    for table, rows in incident_rows(incident, created_ns=created_ns).items():
        client.execute(f"INSERT INTO {database}.{table} VALUES", rows)


@pytest.fixture(scope="module")
def stored(services: Services, emulated: Emulated):
    """A fresh database holding the emulated job's records, spec and incident."""
    from clickhouse_driver import Client

    name = f"sleuth_test_{uuid.uuid4().hex[:10]}"
    client = Client(services.clickhouse_host, port=services.clickhouse_port)
    try:
        schema.migrate(client, name)
        spec = emulated.source.job_spec()
        ClickHouseSink(client, name).write(
            emulated.source.ranks_records(range(spec.world)), emulated.source.iterations(), [spec]
        )
        insert_incident(client, name, emulated.incident, created_ns=time.time_ns())
        yield client, name
    finally:
        client.execute(f"DROP DATABASE IF EXISTS {name}")
        client.disconnect()


@pytest.fixture()
def clickhouse_env(services: Services, stored, monkeypatch) -> dict[str, str]:
    _, name = stored
    env = {
        "SLEUTH_CLICKHOUSE_HOST": services.clickhouse_host,
        "SLEUTH_CLICKHOUSE_PORT": str(services.clickhouse_port),
        "SLEUTH_CLICKHOUSE_DB": name,
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


def test_each_figures_sql_returns_what_the_figure_shows(stored, emulated: Emulated) -> None:
    client, name = stored
    incident = emulated.incident
    source = ClickHouseSource(client, name, incident.job)
    data = gather(incident, source, emulated.topology, database=name)
    # The ClickHouse reads give the figures the same data as the Parquet files.
    offline = gather(incident, emulated.source, emulated.topology, database=name)
    assert np.array_equal(data.iterations.iterations, offline.iterations.iterations)
    assert np.allclose(data.iterations.times_ms, offline.iterations.times_ms)
    assert data.timeline.ranks == offline.timeline.ranks

    def bars(timeline):
        return sorted(zip(timeline.rank.tolist(), timeline.start_ns.tolist(), timeline.end_ns.tolist(),
                          timeline.role.tolist(), timeline.label))

    assert bars(data.timeline) == bars(offline.timeline)
    assert data.queries == offline.queries

    [iterations_sql] = data.queries["iterations"]
    rows = client.execute(iterations_sql)
    assert [r[0] for r in rows] == data.iterations.iterations.tolist()
    assert np.allclose([r[1] for r in rows], data.iterations.times_ms)
    assert [bool(r[2]) for r in rows] == data.iterations.irregular.tolist()

    timeline_sql, roots_sql = data.queries["timeline"]
    rows = client.execute(timeline_sql)
    assert sorted((r[0], r[5], r[6]) for r in rows) == sorted(b[:3] for b in bars(data.timeline))
    assert sorted(f"{r[1]}#{r[2]} {r[3]}" for r in rows) == sorted(data.timeline.label)
    roots = [r for r in rows if (r[1], r[2]) in {(x.comm, x.seq) for x in incident.roots}]
    assert len(roots) == int((data.timeline.role == int(Role.ROOT)).sum()) > 0
    [(root_ops,)] = client.execute(roots_sql)
    assert json.loads(root_ops) == [r.to_dict() for r in incident.roots]

    [traversal_sql] = data.queries["traversal"]
    assert client.execute(traversal_sql) == [
        (k, s.action.value, s.rank, s.comm, s.seq, s.iteration) for k, s in enumerate(incident.steps)
    ]

    suspects_sql, spec_sql = data.queries["topology"]
    assert data.queries["scores"] == (suspects_sql,)
    assert client.execute(suspects_sql) == [
        (k, s.device, s.kind, pytest.approx(s.score)) for k, s in enumerate(incident.suspects)
    ]
    [(spec,)] = client.execute(spec_sql)
    assert JobSpec.from_json(spec) == emulated.source.job_spec()

    [impact_sql] = data.queries["impact"]
    [(slowdown, hours, baseline_ms, actual_ms, fetched, world)] = client.execute(impact_sql)
    impact = incident.impact
    assert (slowdown, hours) == (pytest.approx(impact.slowdown), pytest.approx(impact.gpu_hours_lost))
    assert baseline_ms == pytest.approx(impact.baseline_ns / 1e6, abs=1e-6)
    assert actual_ms == pytest.approx(impact.actual_ns / 1e6, abs=1e-6)
    assert (fetched, world) == (incident.ranks_fetched, incident.world)


def _without_generated(html: str) -> str:
    return re.sub(r"report generated [^<]* by sleuth", "", html)


def test_sleuth_report_by_id_reads_incident_and_records_from_clickhouse(stored, emulated: Emulated, clickhouse_env,
                                                                          tmp_path, capsys) -> None:
    client, name = stored
    out = tmp_path / "report.html"
    assert main(["report", emulated.incident.incident, "--topology", str(emulated.fabric), "-o", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    offline = build_report(emulated.incident, emulated.source, emulated.topology, database=name,
                           topology_note=emulated.fabric.name)
    # The same page as from the Parquet folder, byte for byte but for the time it was generated.
    assert _without_generated(out.read_text(encoding="utf-8")) == _without_generated(offline)

    assert main(["report", "no-such-incident", "-o", str(tmp_path / "x.html")]) == 2
    assert f"unknown incident id 'no-such-incident' in database {name}" in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()


def test_an_incident_document_without_steps_takes_them_from_traversals(stored, emulated: Emulated) -> None:
    client, name = stored
    older = replace(emulated.incident, incident="written-before-steps")
    insert_incident(client, name, older, created_ns=time.time_ns())
    document = older.to_dict()
    del document["steps"]
    # A later created_ns replaces the row (ReplacingMergeTree, read with FINAL).
    rows = incident_rows(older, created_ns=time.time_ns() + 1)["incident_details"]
    client.execute(f"INSERT INTO {name}.incident_details VALUES", [(*rows[0][:7], json.dumps(document), rows[0][8])])
    read = incident_by_id(client, name, "written-before-steps")
    assert [replace(s, op="") for s in older.steps] == list(read.steps)
    assert {s.incident for s in list_incidents(client, name)} == {emulated.incident.incident, "written-before-steps"}


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.status, response.read().decode("utf-8")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8")


def _unstamped(page: str) -> str:
    """A report page less its "generated <time> UTC" stamp (to the second: two renderings may straddle one)."""
    stamp = re.compile(r"generated \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")
    assert len(stamp.findall(page)) == 1
    return stamp.sub("generated", page)


def test_sleuth_serve_lists_incidents_and_serves_their_reports(stored, emulated: Emulated, clickhouse_env) -> None:
    command = [sys.executable, "-m", "sleuth", "serve", "--port", "0", "--topology", str(emulated.fabric)]
    server = subprocess.Popen(command, env={**os.environ, **clickhouse_env}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert match, (line, server.wait(timeout=30), server.stderr.read())
        base = match.group(0).rstrip("/")
        assert _get(base + "/healthz") == (200, "ok\n")

        status, index = _get(base + "/")
        assert status == 200 and 'id="incidents"' in index
        href = incident_path(emulated.incident.incident)
        assert f'href="{href}"' in index and emulated.incident.suspects[0].device in index

        status, page = _get(base + href)
        assert status == 200
        # An alert's generatorURL serves the same page, rendered again: only the time it was generated moves.
        again_status, again = _get(incident_url(base, emulated.incident.incident))
        assert again_status == status and _unstamped(again) == _unstamped(page)
        assert all(f'id="{fig}"' in page for fig in ("fig-iterations", "fig-timeline", "fig-topology"))
        assert emulated.incident.suspects[0].device in page

        status, missing = _get(base + "/incidents/no-such-incident")
        assert status == 404 and "unknown incident id &#x27;no-such-incident&#x27;" in missing
        assert _get(base + "/elsewhere")[0] == 404
    finally:
        server.terminate()
        server.wait(timeout=30)
