"""``sleuth db migrate|status``: the ClickHouse schema (see ``sleuth.storage.schema``)."""

from __future__ import annotations

import argparse

from sleuth.settings import Settings


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("db", help="ClickHouse schema: apply or list migrations")
    commands = parser.add_subparsers(dest="db_command", metavar="ACTION")
    commands.required = True
    migrate = commands.add_parser("migrate", help="apply pending migrations (idempotent)")
    status = commands.add_parser("status", help="list applied and pending migrations")
    for sub in (migrate, status):
        sub.add_argument("--database", help="database name (default: SLEUTH_CLICKHOUSE_DB)")
    migrate.set_defaults(handler=_migrate)
    status.set_defaults(handler=_status)


def _migrate(args: argparse.Namespace) -> int:
    from sleuth.storage import schema
    from sleuth.stream import connect

    settings = Settings.from_env()
    database = args.database or settings.clickhouse_database
    client = connect.clickhouse_client(settings)
    try:
        applied = schema.migrate(client, database)
    finally:
        client.disconnect()
    print(f"{database}: applied {applied}" if applied else f"{database}: up to date")
    return 0


def _status(args: argparse.Namespace) -> int:
    from sleuth.storage import schema
    from sleuth.stream import connect

    settings = Settings.from_env()
    database = args.database or settings.clickhouse_database
    client = connect.clickhouse_client(settings)
    try:
        done = set(schema.applied_versions(client, database))
    finally:
        client.disconnect()
    for migration in schema.MIGRATIONS:
        state = "applied" if migration.version in done else "pending"
        print(f"{migration.version:4d} {state:8s} {migration.description}")
    return 0
