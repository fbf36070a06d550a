"""A webhook receiver on 127.0.0.1 that keeps every Alertmanager-format payload the alerter POSTs to it."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class WebhookReceiver:
    def __init__(self) -> None:
        self.payloads: list[dict[str, Any]] = []
        lock = threading.Lock()
        payloads = self.payloads

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with lock:
                    payloads.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:  # quiet: the checker reads the payloads
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._lock = lock
        self._thread = threading.Thread(target=self._server.serve_forever, name="chaos-webhook", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/"

    def alerts(self) -> list[dict[str, Any]]:
        with self._lock:
            return [alert for payload in self.payloads for alert in payload.get("alerts", [])]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
