"""On-call commands over the incidents in ClickHouse.

* ``sleuth incidents [--job J] [--open] [--limit N] [--wide]`` — the newest incidents as a table (open: a
  firing alert cites it); the columns that do not fit the terminal are named under it, ``--wide`` shows them.
* ``sleuth incident show ID [--all] [--wide]`` — suspects, cause, impact, irregular iterations, root
  operators (the 8 that were roots most often; ``--all``: every one), traversal.
* ``sleuth ack ID --confirmed|--rejected`` — store on-call's verdict as training labels (``sleuth detect train
  --labels-from-clickhouse`` reads them).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sleuth.cli.arguments import positive_int
from sleuth.settings import Settings

if TYPE_CHECKING:
    from clickhouse_driver import Client


def register(subparsers: argparse._SubParsersAction) -> None:
    listing = subparsers.add_parser("incidents", help="list incidents (newest first)", description=__doc__,
                                    formatter_class=argparse.RawDescriptionHelpFormatter)
    listing.add_argument("--job", help="only this job's incidents")
    listing.add_argument("--open", action="store_true", help="only incidents a firing alert cites")
    listing.add_argument("--limit", type=positive_int("--limit"), default=50, help="most rows shown (default 50)")
    listing.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    listing.add_argument("--wide", action="store_true", help="every column, however wide the terminal")
    listing.set_defaults(handler=_list)

    incident = subparsers.add_parser("incident", help="show one incident")
    commands = incident.add_subparsers(dest="incident_command", metavar="COMMAND")
    commands.required = True
    show = commands.add_parser("show", help="suspects, cause, impact, iterations and traversal of an incident")
    show.add_argument("id", help="incident id (see `sleuth incidents`)")
    show.add_argument("--json", action="store_true", help="the stored incident document, as JSON")
    show.add_argument("--all", action="store_true", help="every root operator (default: the 8 that were roots most often)")
    show.add_argument("--wide", action="store_true", help="every column, however wide the terminal")
    show.set_defaults(handler=_show)

    ack = subparsers.add_parser("ack", help="record on-call's verdict on an incident as training labels")
    ack.add_argument("id", help="incident id (see `sleuth incidents`)")
    verdict = ack.add_mutually_exclusive_group(required=True)
    verdict.add_argument("--confirmed", action="store_const", const="confirmed", dest="verdict",
                         help="the suspects were right: label the root operators abnormal")
    verdict.add_argument("--rejected", action="store_const", const="rejected", dest="verdict",
                         help="a false alarm: label the root operators normal")
    ack.set_defaults(handler=_ack)


@contextmanager
def _clickhouse(settings: Settings) -> Iterator[Client]:
    from sleuth.storage import schema
    from sleuth.stream import connect

    client = connect.clickhouse_client(settings)
    try:
        schema.migrate(client, settings.clickhouse_database)  # idempotent; tables exist even before the first incident
        yield client
    finally:
        client.disconnect()


def _list(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from rich.console import Console

    from sleuth.oncall.columns import wide_console
    from sleuth.oncall.render import incidents_table
    from sleuth.storage.incidents import list_incidents

    settings = Settings.from_env()
    console = Console()
    with console.status("reading incidents from ClickHouse"), _clickhouse(settings) as client:
        rows = list_incidents(client, settings.clickhouse_database, job=args.job, only_open=args.open,
                              limit=args.limit)
    if args.json:
        for row in rows:
            print(json.dumps(asdict(row)))
        return 0
    table = incidents_table(rows, width=None if args.wide else console.width)
    (wide_console(table, console) if args.wide else console).print(table)
    return 0


def _show(args: argparse.Namespace) -> int:
    from rich.console import Console

    from sleuth.oncall.columns import wide_console
    from sleuth.oncall.render import incident_detail
    from sleuth.storage.incidents import incident_by_id

    settings = Settings.from_env()
    with _clickhouse(settings) as client:
        incident = incident_by_id(client, settings.clickhouse_database, args.id)
    if args.json:
        json.dump(incident.to_dict(), sys.stdout, indent=1)
        print()
        return 0
    console = Console()
    detail = incident_detail(incident, width=None if args.wide else console.width, roots_shown=None if args.all else 8)
    (wide_console(detail, console) if args.wide else console).print(detail)
    return 0


def _ack(args: argparse.Namespace) -> int:
    from sleuth.oncall.verdicts import store_verdict
    from sleuth.storage.incidents import incident_by_id
    from sleuth.storage.labels import ClickHouseLabelStore

    settings = Settings.from_env()
    with _clickhouse(settings) as client:
        incident = incident_by_id(client, settings.clickhouse_database, args.id)
        count = store_verdict(ClickHouseLabelStore(client, settings.clickhouse_database), incident, args.verdict)
    print(f"{args.id}: {args.verdict}; {count} operator instances labelled "
          f"{'abnormal' if args.verdict == 'confirmed' else 'normal'} in {settings.clickhouse_database}.labels")
    return 0
