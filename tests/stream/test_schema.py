"""``sleuth db migrate`` against the real ClickHouse server."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from sleuth.cli import main
from sleuth.records import IterationBatch, RecordBatch
from sleuth.storage import records_table, schema
from sleuth.storage.sink import ClickHouseSink
from sleuth.storage.tables import ITERATION_COLUMNS

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
    records_table.insert_records(client, f"{name}.records", batch)
    records_table.insert_records(client, f"{name}.records", batch)  # replay
    assert records_table.select_records(client, f"{name}.records").equals(sorted_by_key(batch))
    partitions = client.execute(
        "SELECT DISTINCT partition FROM system.parts WHERE database = %(db)s AND table = 'records'",
        {"db": name},
    )
    assert len(partitions) >= 1


def test_records_and_iterations_keep_extreme_values_and_any_strings(database) -> None:
    # Written and read as numpy arrays (use_numpy): each type's ends, UInt64 above 2**63, empty and non-ASCII strings.
    client, name = database
    schema.migrate(client, name)
    u8, i8, i4 = np.iinfo("u8"), np.iinfo("i8"), np.iinfo("i4")
    batch = RecordBatch.from_columns(
        job=["", "jöb-ü中", "", "x"], rank=[0, 2**32 - 1, 5, 6], comm=["x", "", "ö", "x"],
        seq=[u8.max, 2**63, 2**63 + 1, 0], op=[0, 255, 3, 1], peer=[i4.min, i4.max, -1, 0],
        nbytes=[u8.max, 0, 2**63, 1], iteration=[i8.min, i8.max, -1, 0], t_issue_ns=[-5, i8.max, 0, 1],
        t_start_ns=[0, 2**62, 1, 2], t_end_ns=[i8.min, 1, 2, 3],
    )
    assert records_table.insert_records(client, f"{name}.records", batch) == 4
    stored = records_table.select_records(client, f"{name}.records")
    assert stored.equals(sorted_by_key(batch))
    assert [stored[f.name].dtype for f in RecordBatch.FIELDS] == [f.dtype for f in RecordBatch.FIELDS]
    assert list(stored.rows()) == list(sorted_by_key(batch).rows())
    assert len(records_table.select_records(client, f"{name}.records", where="rank = 7")) == 0

    iterations = IterationBatch.from_columns(job=["", "ü中"], rank=[2**32 - 1, 0], iteration=[i8.min, i8.max],
                                             t_start_ns=[i8.max, -1], t_end_ns=[0, i8.min])
    ClickHouseSink(client, name).write(RecordBatch.empty(), iterations, [])
    columns = ", ".join(ITERATION_COLUMNS)
    assert client.execute(f"SELECT {columns} FROM {name}.iterations ORDER BY rank") == [
        ("ü中", 0, i8.max, -1, i8.min), ("", 2**32 - 1, i8.min, i8.max, 0)]


def test_migrate_resumes_after_a_partial_run(database) -> None:
    client, name = database
    first = tuple(m for m in schema.MIGRATIONS if m.version <= 2)
    assert schema.migrate(client, name, migrations=first) == [1, 2]
    # A later release brings the rest; a table created by hand before (half-applied) is no error.
    client.execute(f"CREATE TABLE {name}.jobs (job String, world UInt32, spec String, registered_ns Int64) "
                   "ENGINE = ReplacingMergeTree(registered_ns) ORDER BY job")
    assert schema.migrate(client, name) == [m.version for m in schema.MIGRATIONS if m.version > 2]


def test_migration_8_keys_abnormal_ops_by_op_and_peer_and_keeps_the_rows(database) -> None:
    client, name = database
    schema.migrate(client, name, migrations=tuple(m for m in schema.MIGRATIONS if m.version < 8))
    old = ("j", 3, "pp.1", 5, 7, 7, 100, 50, 0.9, 1)
    client.execute(f"INSERT INTO {name}.abnormal_ops (job, rank, comm, seq, iteration, op, t_start_ns, duration_ns, "
                   "score, detected_ns) VALUES", [old])
    assert schema.migrate(client, name, migrations=tuple(m for m in schema.MIGRATIONS if m.version <= 8)) == [8]
    columns = "job, rank, comm, seq, iteration, op, peer, t_start_ns, duration_ns, score, detected_ns"
    assert client.execute(f"SELECT {columns} FROM {name}.abnormal_ops") == [old[:6] + (-1,) + old[6:]]
    # A rank's send and recv of one (comm, seq), and a send to another peer, stay three rows under FINAL.
    client.execute(f"INSERT INTO {name}.abnormal_ops ({columns}) VALUES",
                   [("j", 3, "pp.1", 6, 7, 7, 4, 0, 1, 0.9, 2), ("j", 3, "pp.1", 6, 7, 8, 4, 0, 1, 0.9, 2),
                    ("j", 3, "pp.1", 6, 7, 7, 5, 0, 1, 0.9, 2)])
    assert client.execute(f"SELECT count() FROM {name}.abnormal_ops FINAL WHERE seq = 6") == [(3,)]
    assert "abnormal_ops_v4" not in {t for (t,) in client.execute(f"SHOW TABLES FROM {name}")}


def test_migration_13_keys_records_by_iteration_before_rank_and_keeps_every_row(database) -> None:
    client, name = database
    schema.migrate(client, name, migrations=tuple(m for m in schema.MIGRATIONS if m.version < 13))
    # A database from before 13 has the rank-first key that migration 1 used to create.
    client.execute(f"DROP TABLE {name}.records")
    client.execute(records_table.records_table_ddl(f"{name}.records").replace(
        ", ".join(records_table.RECORD_KEY), "job, rank, iteration, comm, seq, op, peer"))
    batch = training_records(300, seed=13)
    records_table.insert_records(client, f"{name}.records", batch)
    assert schema.migrate(client, name, migrations=tuple(m for m in schema.MIGRATIONS if m.version <= 13)) == [13]
    [(key,)] = client.execute("SELECT sorting_key FROM system.tables WHERE database = %(db)s AND name = 'records'",
                              {"db": name})
    assert key == ", ".join(records_table.RECORD_KEY)
    assert sorted_by_key(records_table.select_records(client, f"{name}.records")) == sorted_by_key(batch)
    assert "records_v12" not in {t for (t,) in client.execute(f"SHOW TABLES FROM {name}")}


def test_migration_9_adds_the_alerts_advice_column_once_even_if_a_racing_migrate_added_it(database) -> None:
    client, name = database
    schema.migrate(client, name, migrations=tuple(m for m in schema.MIGRATIONS if m.version < 9))
    client.execute(f"INSERT INTO {name}.alerts (job, device, starts_ns, updated_ns) VALUES", [("j", "gpu:h0/1", 5, 6)])
    client.execute(f"ALTER TABLE {name}.alerts ADD COLUMN advice String DEFAULT ''")  # the other migrate won
    assert schema.migrate(client, name, migrations=tuple(m for m in schema.MIGRATIONS if m.version <= 9)) == [9]
    assert client.execute(f"SELECT job, advice FROM {name}.alerts") == [("j", "")]
    columns = [c for (c,) in client.execute(f"SELECT name FROM system.columns WHERE database = '{name}' "
                                            "AND table = 'alerts' AND name = 'advice'")]
    assert columns == ["advice"]


def test_migration_10_takes_the_alerts_from_before_it_as_announced(database) -> None:
    client, name = database
    schema.migrate(client, name, migrations=tuple(m for m in schema.MIGRATIONS if m.version < 10))
    client.execute(f"INSERT INTO {name}.alerts (job, device, starts_ns, updated_ns) VALUES", [("j", "gpu:h0/1", 5, 6)])
    assert 10 in schema.migrate(client, name)
    assert client.execute(f"SELECT job, announced FROM {name}.alerts") == [("j", 1)]


def test_migration_14_gives_the_alerts_from_before_it_no_resolution(database) -> None:
    client, name = database
    schema.migrate(client, name, migrations=tuple(m for m in schema.MIGRATIONS if m.version < 14))
    client.execute(f"INSERT INTO {name}.alerts (job, device, starts_ns, status, updated_ns) VALUES",
                   [("j", "gpu:h0/1", 5, "resolved", 6)])
    assert 14 in schema.migrate(client, name)
    assert client.execute(f"SELECT job, status, resolution FROM {name}.alerts") == [("j", "resolved", "")]


def test_a_failing_added_column_is_reported_and_the_migration_stays_pending(database) -> None:
    client, name = database
    broken = schema.Migration(99, "bad type", (schema.AddColumn("jobs", "x", "NoSuchType"),))
    with pytest.raises(Exception, match="NoSuchType"):
        schema.migrate(client, name, migrations=(*schema.MIGRATIONS, broken))
    assert 99 not in schema.applied_versions(client, name)


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
