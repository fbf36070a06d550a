"""``sleuth db migrate`` against the real ClickHouse server."""

from __future__ import annotations

import uuid

import pytest

from sleuth.cli import main
from sleuth.stream import clickhouse_records, schema

from ..conftest import Services
from .test_records_pipeline import sorted_by_key, training_records

pytestmark = pytest.mark.services


@pytest.fixture()
def database(services: Services):
    from clickhouse_driver import Client

    name = f"sleuth_test_{uuid.uuid4().hex[:10]}"
    client = Client(services.clickhouse_host, port=services.clickhouse_port)
    try:
        yield client, name
    finally:
        client.execute(f"DROP DATABASE IF EXISTS {name}")
        client.disconnect()


def test_migrate_creates_every_table_once_and_is_idempotent(database) -> None:
    client, name = database
    assert schema.migrate(client, name) == [m.version for m in schema.MIGRATIONS]
    assert schema.migrate(client, name) == []  # second run: nothing to do
    tables = {t for (t,) in client.execute(f"SHOW TABLES FROM {name}")}
    assert tables == set(schema.TABLES) | {schema.MIGRATIONS_TABLE}
    assert schema.applied_versions(client, name) == [m.version for m in schema.MIGRATIONS]
    # The records table is the one the records module reads and writes, partitioned by day.
    batch = training_records(300, seed=5)
    clickhouse_records.insert_records(client, f"{name}.records", batch)
    clickhouse_records.insert_records(client, f"{name}.records", batch)  # replay
    assert clickhouse_records.select_records(client, f"{name}.records").equals(sorted_by_key(batch))
    partitions = client.execute(
        "SELECT DISTINCT partition FROM system.parts WHERE database = %(db)s AND table = 'records'",
        {"db": name},
    )
    assert len(partitions) >= 1


def test_migrate_resumes_after_a_partial_run(database) -> None:
    client, name = database
    first = tuple(m for m in schema.MIGRATIONS if m.version <= 2)
    assert schema.migrate(client, name, migrations=first) == [1, 2]
    # A later release brings the rest; a table created by hand before (half-applied) is no error.
    client.execute(f"CREATE TABLE {name}.jobs (job String, world UInt32, spec String, registered_ns Int64) "
                   "ENGINE = ReplacingMergeTree(registered_ns) ORDER BY job")
    assert schema.migrate(client, name) == [m.version for m in schema.MIGRATIONS if m.version > 2]


def test_bad_database_name_is_refused_before_any_sql(database) -> None:
    client, _ = database
    with pytest.raises(ValueError, match="database name"):
        schema.migrate(client, "x; DROP TABLE y")


def test_cli_migrate_then_status(database, monkeypatch, capsys) -> None:
    _, name = database
    monkeypatch.setenv("SLEUTH_CLICKHOUSE_DB", name)
    assert main(["db", "migrate"]) == 0
    assert f"applied {[m.version for m in schema.MIGRATIONS]}" in capsys.readouterr().out
    assert main(["db", "migrate"]) == 0
    assert "up to date" in capsys.readouterr().out
    assert main(["db", "status"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(schema.MIGRATIONS) and all("applied" in line for line in lines)
