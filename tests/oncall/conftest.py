"""Shared pieces of the on-call tests: an emulated faulty job with its incident, a private
ClickHouse database, and a real HTTP webhook receiver on 127.0.0.1."""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from sleuth.cli import main
from sleuth.jobspec import JobSpec
from sleuth.records_folder import read_records
from sleuth.sources import MemorySource
from sleuth.storage import schema
from sleuth.stream import connect
from sleuth.topology import generate

from ..stream.harness import private_settings

FABRIC = "fattree:hosts=4,gpus=4,pod=2,spines=2"
FAULTY_GPU = "gpu:h0002/1"


@dataclass(frozen=True)
class EmulatedRun:
    folder: Path
    spec: JobSpec
    incidents: list  # [sleuth.localizer.Incident]


@pytest.fixture(scope="session")
def emulated_run(tmp_path_factory) -> EmulatedRun:
    """16 GPUs (tp4 pp2 dp2), one GPU 1.5x slower from iteration 15, localized by the real localizer."""
    from sleuth.localizer import localize
    from sleuth.stream.detection import irregular_iterations

    folder = tmp_path_factory.mktemp("oncall") / "run"
    assert main(["sim", "--generate", FABRIC, "--tp", "4", "--pp", "2", "--dp", "2", "--iterations", "40",
                 "--microbatches", "2", "--fault", f"{FAULTY_GPU},slow=1.5,start=15", "--seed", "4",
                 "--out", str(folder)]) == 0
    records, iterations = read_records(folder)
    spec = JobSpec.read(folder)
    incidents = localize(MemorySource(spec, records, iterations), irregular_iterations=irregular_iterations(iterations),
                         topology=generate(FABRIC))
    assert incidents and incidents[0].suspects[0].device == FAULTY_GPU  # the premise of the tests
    return EmulatedRun(folder, spec, incidents)


@pytest.fixture()
def oncall_settings(services):
    """Private topics, consumer groups and database on the shared services; the database migrated, dropped after."""
    tag = uuid.uuid4().hex[:8]
    settings = private_settings(services, incidents_topic=f"sleuth-incidents-{tag}", alerts_topic=f"sleuth-alerts-{tag}",
                                irregularities_topic=f"sleuth-irregularities-{tag}", alerter_group=f"sleuth-alerter-{tag}",
                                alert_backoff_s=0.05, alert_resolve_iterations=5)
    client = connect.clickhouse_client(settings)
    schema.migrate(client, settings.clickhouse_database)
    try:
        yield settings, client
    finally:
        client.execute(f"DROP DATABASE IF EXISTS {settings.clickhouse_database}")
        client.disconnect()


@dataclass
class Receiver:
    """A webhook receiver: answers ``fail_status`` to the first ``fail_first`` POSTs, 200 after; keeps every body."""

    url: str
    fail_first: int = 0
    fail_status: int = 500
    attempts: int = 0
    bodies: list = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wait_for(self, count: int, timeout_s: float = 60.0) -> list:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.bodies) >= count:
                    return list(self.bodies)
            time.sleep(0.1)
        with self.lock:
            return list(self.bodies)


@pytest.fixture()
def receiver():
    state: dict = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            me = state["receiver"]
            with me.lock:
                me.attempts += 1
                failing = me.attempts <= me.fail_first
                if not failing:
                    me.bodies.append(json.loads(body))
            self.send_response(me.fail_status if failing else 200)
            self.end_headers()

        def log_message(self, *args) -> None:  # keep the test output clean
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state["receiver"] = Receiver(url=f"http://127.0.0.1:{server.server_port}/alerts")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state["receiver"]
    finally:
        server.shutdown()
        server.server_close()
