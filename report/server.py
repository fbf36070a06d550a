"""``sleuth serve``: the incident list and each incident's report over HTTP (stdlib server).

Routes: ``/`` the list (from ClickHouse ``incidents``), ``/incidents/<id>`` the report, rendered
when asked (so it always shows what ClickHouse holds now), ``/healthz`` plain ``ok``. An unknown
incident is a 404 page naming it, an ambiguous one a 400; any other failure a 500 naming the error (and logged), never a
dropped connection. One ClickHouse connection per request: the driver's client is not thread-safe
and the server answers requests in threads.
"""

from __future__ import annotations

import html
import logging
import urllib.parse
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sleuth.errors import ConfigError, NotFound

from sleuth.oncall.links import incident_id
from sleuth.oncall.queries import list_incidents
from sleuth.report.pages import Fabric, clickhouse_report, index_html

__all__ = ["make_server"]

log = logging.getLogger(__name__)

def make_server(
    host: str, port: int, *, connect: Callable[[], Any], database: str, fabric: Fabric
) -> ThreadingHTTPServer:
    """A server bound to ``host:port`` (port 0: any free one; read ``server.server_address``)."""

    class Handler(BaseHTTPRequestHandler):
        server_version = "sleuth"

        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            path = urllib.parse.urlsplit(self.path).path
            if path == "/healthz":
                self._send(HTTPStatus.OK, "ok\n", "text/plain")
                return
            incident = incident_id(path)
            if path != "/" and incident is None:
                self._send(HTTPStatus.NOT_FOUND, _error_page(f"no page {path}"))
                return
            client = connect()
            try:
                if incident is None:
                    body = index_html(list_incidents(client, database, limit=500), database=database)
                else:
                    body = clickhouse_report(client, database, incident, fabric=fabric)
                self._send(HTTPStatus.OK, body)
            except NotFound as error:
                self._send(HTTPStatus.NOT_FOUND, _error_page(str(error)))
            except ConfigError as error:  # e.g. an id that several jobs use
                self._send(HTTPStatus.BAD_REQUEST, _error_page(str(error)))
            except Exception as error:  # a page, not a dropped connection; the log keeps the trace
                log.exception("serving %s", path)
                self._send(HTTPStatus.INTERNAL_SERVER_ERROR, _error_page(f"{type(error).__name__}: {error}"))
            finally:
                client.disconnect()

        def _send(self, status: HTTPStatus, body: str, kind: str = "text/html") -> None:
            data = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", f"{kind}; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
            log.info("%s %s", self.address_string(), format % args)

    return ThreadingHTTPServer((host, port), Handler)


def _error_page(message: str) -> str:
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>sleuth</title></head><body>'
        f'<h1>sleuth</h1><p id="error">{html.escape(message)}</p><p><a href="/">all incidents</a></p></body></html>'
    )
