"""``sleuth serve``: the incident list and each incident's report over HTTP (stdlib server).

Routes: ``/`` the list (from ClickHouse ``incidents``), ``/incidents/<id>`` the report, rendered
when asked (so it always shows what ClickHouse holds now), ``/healthz`` plain ``ok``. An unknown
incident is a 404 page naming the id asked for, an ambiguous one a 400; any other failure a 500
that says only "internal error" and a reference, never a dropped connection. Error pages never
carry an exception's text (it may name hosts, paths, tables): the log has it, under the same
reference. One ClickHouse connection per request: the driver's client is not thread-safe and the
server answers requests in threads.

With a token (``SLEUTH_SERVE_TOKEN``), every request, ``/healthz`` included, needs the header
``Authorization: Bearer <token>``; without it, or with another token, the answer is a 401 that
says nothing more.
"""

from __future__ import annotations

import html
import logging
import secrets
import urllib.parse
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sleuth.errors import AuthError, ConfigError, NotFound

from sleuth.oncall.links import incident_id
from sleuth.report.pages import Fabric, clickhouse_report, index_html
from sleuth.storage.incidents import list_incidents
from sleuth.stream.ingest import auth

__all__ = ["make_server"]

log = logging.getLogger(__name__)

def make_server(
    host: str, port: int, *, connect: Callable[[], Any], database: str, fabric: Fabric, token: str = ""
) -> ThreadingHTTPServer:
    """A server bound to ``host:port`` (port 0: any free one; read ``server.server_address``);
    ``token``: the bearer token every request must present (empty: none)."""
    if token:
        auth.check_token(token, name="SLEUTH_SERVE_TOKEN")

    class Handler(BaseHTTPRequestHandler):
        server_version = "sleuth"

        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            path = urllib.parse.urlsplit(self.path).path
            if token and not self._authorized():
                return
            if path == "/healthz":
                self._send(HTTPStatus.OK, "ok\n", "text/plain")
                return
            incident = incident_id(path)
            if path != "/" and incident is None:
                self._send(HTTPStatus.NOT_FOUND, _error_page(f"no page {path}"))
                return
            client = None
            try:
                client = connect()
                if incident is None:
                    body = index_html(list_incidents(client, database, limit=500), database=database)
                else:
                    body = clickhouse_report(client, database, incident, fabric=fabric)
                self._send(HTTPStatus.OK, body)
            except NotFound as error:
                log.info("serving %s: %s", path, error)
                self._send(HTTPStatus.NOT_FOUND, _error_page(f"unknown incident id {incident!r}"))
            except ConfigError as error:  # e.g. an id that several jobs use
                log.info("serving %s: %s", path, error)
                self._send(HTTPStatus.BAD_REQUEST, _error_page(f"incident id {incident!r} is ambiguous "
                                                               "(the server's log names the jobs that use it)"))
            except Exception:  # a page, not a dropped connection; the log keeps the trace
                reference = secrets.token_hex(4)
                log.exception("serving %s failed (reference %s)", path, reference)
                self._send(HTTPStatus.INTERNAL_SERVER_ERROR,
                           _error_page(f"internal error (reference {reference}; the server's log has the details)"))
            finally:
                if client is not None:
                    client.disconnect()

        def _authorized(self) -> bool:
            """Whether the request presents the token; if not, a bare 401 is sent."""
            try:
                if auth.same_token(auth.presented_token(self.headers.items()), token):
                    return True
                reason = "authorization: unknown token"
            except AuthError as error:
                reason = str(error)
            log.warning("refused %s %s from %s: %s", self.command, self.path, self.address_string(), reason)
            self._send(HTTPStatus.UNAUTHORIZED, _error_page("unauthorized"),
                       headers=(("WWW-Authenticate", 'Bearer realm="sleuth"'),))
            return False

        def _send(self, status: HTTPStatus, body: str, kind: str = "text/html",
                  headers: tuple[tuple[str, str], ...] = ()) -> None:
            data = body.encode("utf-8")
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
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
