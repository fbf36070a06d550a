"""``sleuth report`` and ``sleuth serve``: the HTML incident report, written to a file or served.

``sleuth report ID -o FILE``: the incident and its job's records from ClickHouse.
``sleuth report --incident FILE --records DIR -o FILE [ID]``: no ClickHouse; the incident JSON
(``sleuth localize --json`` writes a list: ID picks one when it holds several) and the Parquet
records folder it was found in (logger or emulator).
``--perfetto TRACE`` (with or instead of ``-o``): the incident's operator timeline as Chrome trace
JSON, for https://ui.perfetto.dev (``sleuth.report.perfetto``).
``sleuth serve``: the incident list and the reports over HTTP, from ClickHouse.

Without ``--topology`` the fabric is one leaf over the job spec's hosts (as ``sleuth localize``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sleuth.errors import ConfigError
from sleuth.settings import Settings


def register(subparsers: argparse._SubParsersAction) -> None:
    report = subparsers.add_parser("report", help="write an incident's self-contained HTML report")
    report.add_argument("id", nargs="?", metavar="ID", help="incident id (from ClickHouse, or to pick one of --incident's)")
    report.add_argument("-o", "--output", metavar="FILE", help="HTML file to write")
    report.add_argument("--perfetto", metavar="TRACE", help="also (or only) write the incident's operator timeline "
                                                             "as Chrome trace JSON, for ui.perfetto.dev")
    report.add_argument("--incident", metavar="JSON", help="incident JSON file instead of ClickHouse (needs --records)")
    report.add_argument("--records", metavar="DIR", help="records folder (logger or emulator) of the --incident's job")
    report.add_argument("--job", metavar="JOB_JSON", help="job spec for --records (default: job.json in the folder)")
    _common(report)
    report.set_defaults(handler=_report)

    serve = subparsers.add_parser("serve", help="serve the incident list and reports over HTTP, from ClickHouse")
    serve.add_argument("--host", help="address to listen on (default: SLEUTH_SERVE_HOST)")
    serve.add_argument("--port", type=int, help="port (default: SLEUTH_SERVE_PORT; 0: any free port)")
    _common(serve)
    serve.set_defaults(handler=_serve)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topology", metavar="FILE", help="topology YAML (default: one leaf over the job's hosts)")
    parser.add_argument("--database", help="ClickHouse database (default: SLEUTH_CLICKHOUSE_DB)")


def _report(args: argparse.Namespace) -> int:
    from sleuth.report.pages import fabric_from

    if args.output is None and args.perfetto is None:
        raise ConfigError("say what to write: -o FILE (the HTML report), --perfetto TRACE (the timeline), or both")
    settings = Settings.from_env()
    database = args.database or settings.clickhouse_database
    fabric = fabric_from(args.topology)
    if args.incident is not None or args.records is not None:
        from sleuth.report.pages import folder_source

        if args.incident is None or args.records is None:
            raise ConfigError("--incident and --records go together (the incident JSON and its records folder)")
        incident = _read_incident(Path(args.incident), args.id)
        records = Path(args.records)
        if not records.exists():
            raise ConfigError(f"--records {records}: no such file or folder")
        _write(args, incident, folder_source(records, job=Path(args.job) if args.job else None), fabric, database)
        return 0
    if args.id is None:
        raise ConfigError("name an incident ID (read from ClickHouse), or give --incident and --records")
    from sleuth.storage.incidents import incident_by_id
    from sleuth.storage.source import ClickHouseSource
    from sleuth.stream import connect

    client = connect.clickhouse_client(settings)
    try:
        incident = incident_by_id(client, database, args.id)
        _write(args, incident, ClickHouseSource(client, database, incident.job), fabric, database)
    finally:
        client.disconnect()
    return 0


def _write(args: argparse.Namespace, incident, source, fabric, database: str) -> None:
    """The HTML report (-o) and the Perfetto trace (--perfetto) of ``incident`` from ``source``."""
    if args.output is not None:
        from sleuth.report import build_report, write_report

        topology, note = fabric(source.job_spec())
        html = build_report(incident, source, topology, database=database, topology_note=note)
        path = write_report(html, args.output)
        print(f"wrote {path} ({len(html.encode()) / 1024:.0f} KiB)")
    if args.perfetto is not None:
        from sleuth.report.perfetto import perfetto_trace, write_trace

        trace = perfetto_trace(incident, source)
        path = write_trace(trace, args.perfetto)
        operators = sum(e["ph"] == "X" for e in trace["traceEvents"])
        print(f"wrote {path} ({operators} operators of {len(trace['otherData']['ranks'])} ranks in iterations "
              f"{', '.join(map(str, trace['otherData']['iterations']))}; open it at https://ui.perfetto.dev)")


def _read_incident(path: Path, wanted: str | None):
    from sleuth.localizer.incident import Incident

    if not path.is_file():
        raise ConfigError(f"--incident {path}: no such file")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"--incident {path}: not JSON ({error})") from None
    documents = document if isinstance(document, list) else [document]
    ids = [d.get("incident") if isinstance(d, dict) else None for d in documents]
    if wanted is not None:
        if wanted not in ids:
            raise ConfigError(f"--incident {path}: no incident {wanted!r} (it holds {', '.join(map(str, ids)) or 'none'})")
        return Incident.from_dict(documents[ids.index(wanted)], source=str(path))
    if len(documents) != 1:
        raise ConfigError(f"--incident {path} holds {len(documents)} incidents ({', '.join(map(str, ids))}): name one as ID")
    return Incident.from_dict(documents[0], source=str(path))


def _serve(args: argparse.Namespace) -> int:
    from sleuth.report.pages import fabric_from
    from sleuth.report.server import make_server
    from sleuth.stream import connect

    settings = Settings.from_env()
    database = args.database or settings.clickhouse_database
    host = args.host or settings.serve_host
    port = settings.serve_port if args.port is None else args.port
    if not 0 <= port <= 65535:
        raise ConfigError(f"--port {port} is not a TCP port (0-65535)")
    server = make_server(host, port, connect=lambda: connect.clickhouse_client(settings), database=database,
                         fabric=fabric_from(args.topology), token=settings.serve_token)
    bound_host, bound_port = server.server_address[:2]
    print(f"serving incident reports of ClickHouse database {database} on http://{bound_host}:{bound_port}/",  # type: ignore[str-bytes-safe]  # a TCP server address is a str host
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    sys.stdout.flush()
    return 0
