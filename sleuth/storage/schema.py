"""The ClickHouse schema, as numbered migrations applied by ``sleuth db migrate``.

Each migration is a list of statements run once, in version order; the versions applied so far
are rows of ``<db>.schema_migrations``. Every statement is itself idempotent (``IF NOT EXISTS``),
so a migration interrupted half-way (or two ``migrate`` runs racing at ``stack up``) is simply
run again.

Every table is a ReplacingMergeTree on its natural key: the pipeline delivers at least once, and a
replayed row then replaces its twin instead of counting twice (queries that must be exact before
the background merge read with ``FINAL``). SQL stays within what ClickHouse 18.16 runs: Int64
nanosecond timestamps, no DateTime64, no TTL.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sleuth.errors import ConfigError
from sleuth.storage.records_table import RECORD_COLUMN_TYPES, records_table_ddl

if TYPE_CHECKING:
    from clickhouse_driver import Client

MIGRATIONS_TABLE = "schema_migrations"

_RECORD_COLUMNS = ", ".join(RECORD_COLUMN_TYPES)

# The day a row belongs to, for partitioning; derived from the row itself so that a replayed row
# lands in the same partition as its twin (ReplacingMergeTree only replaces within a partition).
_DAY = "day Date MATERIALIZED toDate(intDiv({column}, 1000000000))"


@dataclass(frozen=True)
class AddColumn:
    """``ALTER TABLE {db}.table ADD COLUMN column definition``, skipped when the column exists:
    ClickHouse 18.16 has no ``ADD COLUMN IF NOT EXISTS``, and a migration must be safe to run again."""

    table: str
    column: str
    definition: str  # type and default, e.g. "String DEFAULT ''"


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    statements: tuple[str | AddColumn, ...]  # SQL with ``{db}`` where the database name goes


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "records: CommOps records", (records_table_ddl("{db}.records"),)),
    Migration(
        2,
        "iterations: per-rank training step times",
        (
            "CREATE TABLE IF NOT EXISTS {db}.iterations (\n"
            "    job String, rank UInt32, iteration Int64, t_start_ns Int64, t_end_ns Int64,\n"
            f"    {_DAY.format(column='t_start_ns')}\n"
            ") ENGINE = ReplacingMergeTree()\nPARTITION BY day\nORDER BY (job, rank, iteration)",
        ),
    ),
    Migration(
        3,
        "jobs: registered job specs (latest registration wins)",
        (
            "CREATE TABLE IF NOT EXISTS {db}.jobs (\n"
            "    job String, world UInt32, spec String, registered_ns Int64\n"
            ") ENGINE = ReplacingMergeTree(registered_ns)\nORDER BY job",
        ),
    ),
    Migration(
        4,
        "detection and localization results: abnormal_ops, incidents, suspects, labels",
        (
            "CREATE TABLE IF NOT EXISTS {db}.abnormal_ops (\n"
            "    job String, rank UInt32, comm String, seq UInt64, iteration Int64, op UInt8,\n"
            "    t_start_ns Int64, duration_ns Int64, score Float64, detected_ns Int64,\n"
            f"    {_DAY.format(column='t_start_ns')}\n"
            ") ENGINE = ReplacingMergeTree(detected_ns)\nPARTITION BY day\n"
            "ORDER BY (job, rank, iteration, comm, seq)",
            "CREATE TABLE IF NOT EXISTS {db}.incidents (\n"
            "    job String, incident String, t_from_ns Int64, t_to_ns Int64,\n"
            "    iterations Array(Int64), cause String, root_ops String, traversal Array(UInt32),\n"
            "    impact Float64, created_ns Int64\n"
            ") ENGINE = ReplacingMergeTree(created_ns)\nORDER BY (job, incident)",
            "CREATE TABLE IF NOT EXISTS {db}.suspects (\n"
            "    job String, incident String, device String, kind String, score Float64,\n"
            "    position UInt16, created_ns Int64\n"
            ") ENGINE = ReplacingMergeTree(created_ns)\nORDER BY (job, incident, device)",
            "CREATE TABLE IF NOT EXISTS {db}.labels (\n"
            "    job String, rank UInt32, comm String, seq UInt64, iteration Int64,\n"
            "    abnormal UInt8, source String, labeled_ns Int64\n"
            ") ENGINE = ReplacingMergeTree(labeled_ns)\nORDER BY (job, rank, iteration, comm, seq)",
        ),
    ),
    Migration(
        5,
        "localization details: incident_details (fetch counts, impact, advice, JSON) and traversals",
        (
            "CREATE TABLE IF NOT EXISTS {db}.incident_details (\n"
            "    job String, incident String, ranks_fetched UInt32, world UInt32, slowdown Float64,\n"
            "    gpu_hours_lost Float64, advice String, document String, created_ns Int64\n"
            ") ENGINE = ReplacingMergeTree(created_ns)\nORDER BY (job, incident)",
            "CREATE TABLE IF NOT EXISTS {db}.traversals (\n"
            "    job String, incident String, step UInt32, rank UInt32, comm String, seq UInt64,\n"
            "    iteration Int64, action String, created_ns Int64\n"
            ") ENGINE = ReplacingMergeTree(created_ns)\nORDER BY (job, incident, step)",
        ),
    ),
    Migration(
        7,
        "alerts: the alerter's state, one row version per change of an alert (job x device)",
        (
            # starts_ns is in the key: after an alert resolves, new evidence opens a new one.
            "CREATE TABLE IF NOT EXISTS {db}.alerts (\n"
            "    job String, device String, starts_ns Int64, status String, severity String,\n"
            "    cause String, kind String, score Float64, incident String, incidents Array(String),\n"
            "    slowdown Float64, gpu_hours_lost Float64, first_irregular Int64, last_irregular Int64,\n"
            "    ends_ns Int64, updated_ns Int64\n"
            ") ENGINE = ReplacingMergeTree(updated_ns)\nORDER BY (job, device, starts_ns)",
        ),
    ),
    Migration(
        8,
        "abnormal_ops keyed like records (… seq, op, peer): a rank's send and recv of one seq no longer fold",
        (
            # ClickHouse 18.16 cannot change a sorting key: move the rows to a table with the new one.
            "RENAME TABLE {db}.abnormal_ops TO {db}.abnormal_ops_v4",
            "CREATE TABLE {db}.abnormal_ops (\n"
            "    job String, rank UInt32, comm String, seq UInt64, iteration Int64, op UInt8, peer Int32,\n"
            "    t_start_ns Int64, duration_ns Int64, score Float64, detected_ns Int64,\n"
            f"    {_DAY.format(column='t_start_ns')}\n"
            ") ENGINE = ReplacingMergeTree(detected_ns)\nPARTITION BY day\n"
            "ORDER BY (job, rank, iteration, comm, seq, op, peer)",
            "INSERT INTO {db}.abnormal_ops (job, rank, comm, seq, iteration, op, peer, t_start_ns, duration_ns, score, "
            "detected_ns) SELECT job, rank, comm, seq, iteration, op, -1, t_start_ns, duration_ns, score, detected_ns "
            "FROM {db}.abnormal_ops_v4",
            "DROP TABLE {db}.abnormal_ops_v4",
        ),
    ),
    Migration(
        9,
        "alerts keep the incident's advice, so notifications after an alerter restart still carry it",
        (AddColumn("alerts", "advice", "String DEFAULT ''"),),
    ),
    Migration(
        10,
        "alerts remember whether their latest change was announced, so a restart announces what a crash did not",
        # Rows from before were written after their announcement: announced.
        (AddColumn("alerts", "announced", "UInt8 DEFAULT 1"),),
    ),
    Migration(
        11,
        "logger_drops: records the loggers lost before sending, per job, rank and the batch that reported them",
        (
            # before_ns: the start of the reporting batch's earliest record, so a resent batch folds.
            "CREATE TABLE IF NOT EXISTS {db}.logger_drops (\n"
            "    job String, rank UInt32, before_ns Int64, dropped UInt64, reported_ns Int64\n"
            ") ENGINE = ReplacingMergeTree(reported_ns)\nORDER BY (job, rank, before_ns)",
        ),
    ),
    Migration(
        12,
        "pauses: the benign pauses the localizer recorded and never paged (job x incident), with their documents",
        (
            "CREATE TABLE IF NOT EXISTS {db}.pauses (\n"
            "    job String, incident String, iterations Array(Int64), tops Array(String), document String,\n"
            "    recorded_ns Int64\n"
            ") ENGINE = ReplacingMergeTree(recorded_ns)\nORDER BY (job, incident)",
        ),
    ),
    Migration(
        13,
        "records keyed by iteration before rank: reading one iteration of every rank is a range, not a scan "
        "of the job's history (copies every record: long on a large database)",
        (
            # As in 8: ClickHouse 18.16 cannot change a sorting key, the rows move to a table with the new one.
            "RENAME TABLE {db}.records TO {db}.records_v12",
            records_table_ddl("{db}.records"),
            f"INSERT INTO {{db}}.records ({_RECORD_COLUMNS}) SELECT {_RECORD_COLUMNS} FROM {{db}}.records_v12",
            "DROP TABLE {db}.records_v12",
        ),
    ),
    Migration(
        14,
        "alerts say why they resolved: regular iterations past the last irregular one, or the job stopped reporting",
        (AddColumn("alerts", "resolution", "String DEFAULT ''"),),
    ),
)

#: Every table the migrations create, for tools and tests.
TABLES = (
    "records", "iterations", "jobs", "abnormal_ops", "incidents", "suspects", "labels", "incident_details", "traversals",
    "alerts", "logger_drops", "pauses",
)

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_database_name(database: str) -> str:
    # The name is spliced into DDL (ClickHouse has no parameters for identifiers).
    if not _NAME.match(database):
        raise ConfigError(f"ClickHouse database name {database!r} must match {_NAME.pattern}")
    return database


def applied_versions(client: Client, database: str) -> list[int]:
    """Versions already applied to ``database`` (empty when it was never migrated)."""
    check_database_name(database)
    exists = client.execute(
        "SELECT count() FROM system.tables WHERE database = %(db)s AND name = %(t)s",
        {"db": database, "t": MIGRATIONS_TABLE},
    )
    if not exists[0][0]:
        return []
    rows = client.execute(f"SELECT DISTINCT version FROM {database}.{MIGRATIONS_TABLE} ORDER BY version")
    return [int(v) for (v,) in rows]


def migrate(client: Client, database: str, *, migrations: tuple[Migration, ...] = MIGRATIONS) -> list[int]:
    """Apply the migrations ``database`` lacks, in order; the versions applied by this call."""
    check_database_name(database)
    client.execute(f"CREATE DATABASE IF NOT EXISTS {database}")
    client.execute(
        f"CREATE TABLE IF NOT EXISTS {database}.{MIGRATIONS_TABLE} "
        "(version UInt32, description String, applied_ns Int64) "
        "ENGINE = ReplacingMergeTree(applied_ns) ORDER BY version"
    )
    done = set(applied_versions(client, database))
    applied = []
    for migration in sorted(migrations, key=lambda m: m.version):
        if migration.version in done:
            continue
        for statement in migration.statements:
            if isinstance(statement, AddColumn):
                _add_column(client, database, statement)
            else:
                client.execute(statement.format(db=database))
        # Recorded only after every statement succeeded: a failure leaves it pending for next time.
        client.execute(
            f"INSERT INTO {database}.{MIGRATIONS_TABLE} (version, description, applied_ns) VALUES",
            [(migration.version, migration.description, time.time_ns())],
        )
        applied.append(migration.version)
    return applied


def _has_column(client: Client, database: str, table: str, column: str) -> bool:
    rows = client.execute(
        "SELECT count() FROM system.columns WHERE database = %(db)s AND table = %(t)s AND name = %(c)s",
        {"db": database, "t": table, "c": column},
    )
    return bool(rows[0][0])


def _add_column(client: Client, database: str, change: AddColumn) -> None:
    if _has_column(client, database, change.table, change.column):
        return
    try:
        client.execute(f"ALTER TABLE {database}.{change.table} ADD COLUMN {change.column} {change.definition}")
    except Exception:
        # Another migrate racing this one (every service migrates at start) may have added it first.
        if not _has_column(client, database, change.table, change.column):
            raise
