"""``sleuth incidents``, ``sleuth incident show``, ``sleuth ack`` and training on the verdicts, on the real ClickHouse."""

from __future__ import annotations

import json
import time

import pytest
from rich.cells import cell_len

from sleuth.cli import main
from sleuth.oncall.service import build_alerter
from sleuth.storage.tables import incident_rows

from .conftest import FAULTY_GPU

pytestmark = pytest.mark.services


def store_incident(client, database: str, incident) -> None:
    for table, rows in incident_rows(incident, created_ns=time.time_ns()).items():
        client.execute(f"INSERT INTO {database}.{table} VALUES", rows)


@pytest.fixture()
def stored(oncall_settings, emulated_run, monkeypatch):
    settings, client = oncall_settings
    for name, value in settings.to_env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("COLUMNS", "220")  # rich wraps to the terminal width; the tests read whole lines
    incident = emulated_run.incidents[0]
    store_incident(client, settings.clickhouse_database, incident)
    return settings, client, incident


def test_incidents_lists_and_filters(stored, capsys) -> None:
    settings, client, incident = stored
    assert main(["incidents"]) == 0
    out = capsys.readouterr().out
    assert "1 incidents" in out and incident.incident in out and FAULTY_GPU in out and "closed" in out
    assert main(["incidents", "--open"]) == 0
    assert "0 incidents" in capsys.readouterr().out
    build_alerter(settings, client=client).on_incident(incident)  # a firing alert now cites it
    assert main(["incidents", "--open", "--json"]) == 0
    [row] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["incident"] == incident.incident and row["open"] and row["top_suspect"] == FAULTY_GPU
    assert row["slowdown"] == pytest.approx(incident.impact.slowdown)
    assert main(["incidents", "--job", "another-job"]) == 0
    assert "0 incidents" in capsys.readouterr().out


def test_incident_show_prints_suspects_impact_and_traversal(stored, capsys) -> None:
    _settings, _client, incident = stored
    assert main(["incident", "show", incident.incident]) == 0
    out = capsys.readouterr().out
    assert FAULTY_GPU in out and "compute" in out and f"x{incident.impact.slowdown:.3f}" in out
    assert f"{len(incident.traversal)} ranks visited" in out and "root operators" in out
    assert main(["incident", "show", incident.incident, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(incident.to_json())


def test_the_views_fit_an_80_column_terminal(stored, capsys, monkeypatch) -> None:
    _settings, _client, incident = stored
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["incidents"]) == 0
    out = capsys.readouterr().out
    assert max(map(cell_len, out.splitlines())) <= 80
    assert incident.incident in out and FAULTY_GPU in out and "not shown at 80 columns" in out
    assert main(["incidents", "--wide"]) == 0
    assert "created (UTC)" in capsys.readouterr().out
    assert main(["incident", "show", incident.incident]) == 0
    out = capsys.readouterr().out
    assert max(map(cell_len, out.splitlines())) <= 80
    assert out.startswith(f"{incident.incident}  compute  top suspect {FAULTY_GPU}")
    assert main(["incident", "show", incident.incident, "--all"]) == 0
    assert "more root operators" not in capsys.readouterr().out


def test_an_unknown_incident_id_is_a_clear_error(stored, capsys) -> None:
    _settings, _client, incident = stored
    assert main(["incident", "show", "no-such-incident"]) == 2
    err = capsys.readouterr().err
    assert "unknown incident id 'no-such-incident'" in err and incident.incident in err
    assert main(["ack", "no-such-incident", "--confirmed"]) == 2
    assert "unknown incident id" in capsys.readouterr().err


def test_ack_stores_labels_that_training_reads(stored, capsys, tmp_path, emulated_run) -> None:
    settings, client, incident = stored
    assert main(["ack", incident.incident, "--rejected"]) == 0
    assert main(["ack", incident.incident, "--confirmed"]) == 0  # changed mind: the later verdict wins
    capsys.readouterr()
    expected = {(incident.job, rank, root.comm, root.seq, root.ran) for root in incident.roots
                for rank in (root.ranks or (root.rank,))}
    rows = client.execute(f"SELECT job, rank, comm, seq, iteration, abnormal, source FROM {settings.clickhouse_database}.labels FINAL")
    assert {r[:5] for r in rows} == expected
    assert {r[5:] for r in rows} == {(1, f"oncall:confirmed:{incident.incident}")}
    assert main(["incidents", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "confirmed"
    model = tmp_path / "model.zip"
    assert main(["detect", "train", "--records", str(emulated_run.folder), "--labels-from-clickhouse", "--trees", "3",
                 "-o", str(model)]) == 0
    err = capsys.readouterr().err
    relabelled = int(err.split(" records relabelled")[0].rsplit(", ", 1)[1])
    assert f"{len(expected)} on-call labels from ClickHouse" in err and relabelled > 0 and model.is_file()
