"""``sleuth serve`` without ClickHouse: error pages say nothing of the error, and the token option.

The server runs for real on 127.0.0.1 with a real ClickHouse client pointed at a port nothing
listens on, so every page that needs the database fails inside the driver, as it would with the
database down. The report from a live ClickHouse is in ``test_report_clickhouse``.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import pytest

from sleuth.errors import ConfigError
from sleuth.report.pages import fabric_from
from sleuth.report.server import make_server
from sleuth.settings import Settings
from sleuth.stream import connect

TOKEN = "serve-token-0123456789abcdef"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serving(**options) -> Iterator[str]:
    settings = replace(Settings(), clickhouse_port=_closed_port())
    server = make_server("127.0.0.1", 0, connect=lambda: connect.clickhouse_client(settings),
                         database="sleuth_nowhere", fabric=fabric_from(None), **options)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str, dict[str, str]]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), dict(error.headers)


def test_a_failure_is_a_generic_500_and_the_detail_goes_to_the_log(caplog) -> None:
    with caplog.at_level(logging.ERROR, logger="sleuth.report.server"), serving() as base:
        status, page, _ = get(base + "/")
        assert get(base + "/incidents/sim-1-2")[0] == 500
    assert status == 500
    message = re.search(r'<p id="error">(.*?)</p>', page).group(1)
    match = re.fullmatch(r"internal error \(reference ([0-9a-f]{8}); the server&#x27;s log has the details\)", message)
    assert match, message
    # What the driver said (the error's name, host and port) stays in the log, under that reference.
    logged = [r for r in caplog.records if match.group(1) in r.getMessage()]
    assert len(logged) == 1 and logged[0].exc_info is not None
    detail = str(logged[0].exc_info[1])
    assert detail and detail not in page and type(logged[0].exc_info[1]).__name__ not in page
    assert "127.0.0.1:" not in page and "sleuth_nowhere" not in page


def test_with_a_token_every_request_needs_it(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="sleuth.report.server"), serving(token=TOKEN) as base:
        for path in ("/healthz", "/", "/incidents/sim-1-2", "/elsewhere"):
            for headers in ({}, {"Authorization": "Bearer not-the-token-0000000"}, {"Authorization": TOKEN},
                            {"Authorization": f"Basic {TOKEN}"}):
                status, page, response_headers = get(base + path, headers)
                assert status == 401, (path, headers)
                assert response_headers["WWW-Authenticate"] == 'Bearer realm="sleuth"'
                assert re.search(r'<p id="error">unauthorized</p>', page)
        assert get(base + "/healthz", {"Authorization": f"Bearer {TOKEN}"})[:2] == (200, "ok\n")
        assert get(base + "/healthz", {"authorization": f"bearer {TOKEN}"})[:2] == (200, "ok\n")
        assert get(base + "/elsewhere", {"Authorization": f"Bearer {TOKEN}"})[0] == 404
        assert get(base + "/", {"Authorization": f"Bearer {TOKEN}"})[0] == 500  # through to the (absent) database
    refusals = [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused GET")]
    assert len(refusals) == 16 and any("unknown token" in r for r in refusals)
    assert all(TOKEN not in r for r in refusals)


def test_without_a_token_the_server_stays_open() -> None:
    with serving() as base:
        assert get(base + "/healthz")[:2] == (200, "ok\n")


def test_a_short_token_fails_at_start_naming_the_setting() -> None:
    with pytest.raises(ConfigError, match=r"^SLEUTH_SERVE_TOKEN needs a token string of at least 16 characters$"):
        make_server("127.0.0.1", 0, connect=lambda: None, database="x", fabric=fabric_from(None), token="short")


def test_sleuth_serve_reads_the_token_setting() -> None:
    env = {**os.environ, "SLEUTH_SERVE_TOKEN": TOKEN, "SLEUTH_CLICKHOUSE_PORT": str(_closed_port())}
    server = subprocess.Popen([sys.executable, "-m", "sleuth", "serve", "--port", "0"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert match, (line, server.stderr.read() if server.poll() is not None else "")
        assert get(match.group(0) + "/healthz")[0] == 401
        assert get(match.group(0) + "/healthz", {"Authorization": f"Bearer {TOKEN}"})[:2] == (200, "ok\n")
    finally:
        server.terminate()
        server.wait(timeout=30)
    short = subprocess.run([sys.executable, "-m", "sleuth", "serve", "--port", "0"], capture_output=True, text=True,
                           env={**os.environ, "SLEUTH_SERVE_TOKEN": "short"}, timeout=120)
    assert short.returncode == 2 and "SLEUTH_SERVE_TOKEN needs a token string" in short.stderr
