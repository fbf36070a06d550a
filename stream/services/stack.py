"""The whole stack on this machine: Kafka, ClickHouse, Alertmanager, a gateway, a worker, a streaming
localizer and an alerter.

Kafka, ClickHouse and Alertmanager are the foundation's ``deploy/`` scripts (``sleuth.services``); the others
are ``sleuth gateway`` / ``worker`` / ``localizer`` / ``alerter`` processes started detached, with their PIDs under ``<state dir>/stack``. Like the deploy scripts,
``down`` only signals a PID it recorded and only while that process's command line is still ours.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from sleuth import services
from sleuth.settings import Settings
from sleuth.storage import schema
from sleuth.stream import connect

PROCESSES = ("gateway", "worker", "localizer", "alerter")


def _folder(repo_root: Path) -> Path:
    folder = services.state_dir(repo_root) / "stack"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _ours(pid: int, name: str) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"sleuth" in cmdline and name.encode() in cmdline


def running(repo_root: Path) -> dict[str, int | None]:
    """PID of each stack process that runs now (None when stopped)."""
    found: dict[str, int | None] = {}
    for name in PROCESSES:
        pidfile = _folder(repo_root) / f"{name}.pid"
        pid = int(pidfile.read_text()) if pidfile.is_file() and pidfile.read_text().strip().isdigit() else None
        found[name] = pid if pid is not None and _ours(pid, name) else None
    return found


def up(repo_root: Path, settings: Settings) -> dict[str, int | None]:
    """Start whatever is not running; idempotent."""
    services.ensure_services(repo_root)
    client = connect.clickhouse_client(settings)
    try:
        schema.migrate(client, settings.clickhouse_database)
    finally:
        client.disconnect()
    connect.ensure_gateway_topics(settings)
    for name, pid in running(repo_root).items():
        if pid is None:
            start(repo_root, settings, name)
    time.sleep(1.0)
    return running(repo_root)


def start(repo_root: Path, settings: Settings, name: str) -> int:
    """Start one stack process detached (what ``up`` does for each, and a supervisor for one that died); its PID."""
    if name not in PROCESSES:
        raise ValueError(f"unknown stack process {name!r}; known: {list(PROCESSES)}")
    folder = _folder(repo_root)
    with open(folder / f"{name}.log", "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "sleuth", name], cwd=repo_root, env=dict(os.environ) | settings.to_env(),
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
        )
    (folder / f"{name}.pid").write_text(str(process.pid))
    return process.pid


def down(repo_root: Path, *, timeout_s: float = 30.0, services_too: bool = True) -> None:
    """Stop the stack's processes (SIGTERM, SIGKILL after ``timeout_s``), then the ``deploy/`` services."""
    for name, pid in running(repo_root).items():
        if pid is None:
            continue
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while _ours(pid, name) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _ours(pid, name):
            os.kill(pid, signal.SIGKILL)
        (_folder(repo_root) / f"{name}.pid").unlink(missing_ok=True)
    if services_too:
        services.stop_services(repo_root)


def status(repo_root: Path) -> dict[str, bool]:
    state = services.services_running(repo_root)
    state.update({name: pid is not None for name, pid in running(repo_root).items()})
    return state
