"""The local Kafka broker, ClickHouse server and Alertmanager that ``deploy/`` runs, seen from Python.

``deploy/services.sh up|down|status`` starts a single-node KRaft Kafka broker, a private
ClickHouse server and a private Alertmanager, all on 127.0.0.1 only, with their state under ``SLEUTH_STATE_DIR`` (default
``.sleuth`` in the repository). This module reads the same environment variables and defaults as
those scripts, and runs them for tests and tools; it never starts or signals a process itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from sleuth.errors import ConfigError, ServiceError
from sleuth.settings import Settings

LOCAL_HOST = "127.0.0.1"
"""The deploy scripts bind this address only."""

SERVICES = ("clickhouse", "kafka", "alertmanager")
"""Service names, each with its own ``deploy/<name>.sh``, in start order."""

_STATUS_RUNNING, _STATUS_STOPPED = 0, 3
# Long enough for a first start that fetches the Kafka jars and then waits up to 90 s per service.
_SCRIPT_TIMEOUT_S = 600.0
_STDERR_TAIL_CHARS = 4000


def kafka_bootstrap(environ: Mapping[str, str] | None = None) -> str:
    """``host:port`` of the local broker (``SLEUTH_KAFKA_PORT``, default 19092)."""
    return f"{LOCAL_HOST}:{Settings.from_env(environ).kafka_port}"


def clickhouse_address(environ: Mapping[str, str] | None = None) -> tuple[str, int]:
    """(host, native TCP port) of the local ClickHouse (``SLEUTH_CLICKHOUSE_PORT``, default 19000)."""
    return LOCAL_HOST, Settings.from_env(environ).clickhouse_port


def clickhouse_http_port(environ: Mapping[str, str] | None = None) -> int:
    """HTTP port of the local ClickHouse (``SLEUTH_CLICKHOUSE_HTTP_PORT``, default 18123)."""
    return Settings.from_env(environ).clickhouse_http_port


def alertmanager_url(environ: Mapping[str, str] | None = None) -> str:
    """Base URL of the local Alertmanager (``SLEUTH_ALERTMANAGER_PORT``, default 19193)."""
    return f"http://{LOCAL_HOST}:{Settings.from_env(environ).alertmanager_port}"


def state_dir(repo_root: Path, environ: Mapping[str, str] | None = None) -> Path:
    """Where the scripts keep pid files, logs and data; a relative setting is under ``repo_root``."""
    path = Path(Settings.from_env(environ).state_dir)
    return path if path.is_absolute() else repo_root / path


def ensure_services(repo_root: Path) -> None:
    """Start Kafka, ClickHouse and Alertmanager unless they already run (``deploy/services.sh up``)."""
    _run(repo_root, "services.sh", "up")


def stop_services(repo_root: Path, names: Iterable[str] = SERVICES) -> None:
    """Stop the named services, only the processes the scripts started (``deploy/<name>.sh down``)."""
    wanted = set(names)
    _check_names(wanted)
    for name in reversed(SERVICES):  # the reverse of start order
        if name in wanted:
            _run(repo_root, f"{name}.sh", "down")


def services_running(repo_root: Path, names: Iterable[str] = SERVICES) -> dict[str, bool]:
    """Whether each named service runs now (``deploy/<name>.sh status``)."""
    wanted = list(names)
    _check_names(wanted)
    return {
        name: _run(repo_root, f"{name}.sh", "status", ok=(_STATUS_RUNNING, _STATUS_STOPPED)) == _STATUS_RUNNING
        for name in wanted
    }


def _check_names(names: Iterable[str]) -> None:
    unknown = sorted(set(names) - set(SERVICES))
    if unknown:
        raise ConfigError(f"unknown service(s) {unknown}; known: {list(SERVICES)}")


def _run(repo_root: Path, script: str, action: str, ok: tuple[int, ...] = (0,)) -> int:
    """Run ``bash deploy/<script> <action>`` in ``repo_root``; its exit code, or ServiceError."""
    path = repo_root / "deploy" / script
    if not path.is_file():
        raise ServiceError(f"{path} not found; is {repo_root} the sleuth repository?")
    env = dict(os.environ)
    # The Kafka readiness probe uses kafka-python; prefer the interpreter that runs us.
    env.setdefault("SLEUTH_PYTHON", sys.executable)
    command = f"deploy/{script} {action}"
    try:
        done = subprocess.run(
            ["bash", str(path), action],
            cwd=repo_root,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=_SCRIPT_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise ServiceError(f"{command} did not finish within {_SCRIPT_TIMEOUT_S:.0f}s") from error
    except OSError as error:
        raise ServiceError(f"{command} could not run: {error}") from error
    if done.returncode not in ok:
        stderr = done.stderr.strip()
        if len(stderr) > _STDERR_TAIL_CHARS:
            stderr = "..." + stderr[-_STDERR_TAIL_CHARS:]
        raise ServiceError(f"{command} failed with exit code {done.returncode}:\n{stderr}")
    return done.returncode
