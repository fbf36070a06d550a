"""A private stack for fault injection: Kafka, ClickHouse, Alertmanager, gateway, worker, localizer and alerter
on ports and a state folder of its own, so killing its processes never touches anyone else's services.

The services are the ``deploy/`` scripts and the processes are ``sleuth.stream.services.stack``'s, both given this
stack's ports and ``SLEUTH_STATE_DIR`` through the environment; a process is signalled only through the PID
its starter recorded. ``restart`` is what a supervisor (systemd, Kubernetes) does after a crash.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sleuth.ports import free_ports
from sleuth.settings import Settings
from sleuth.stream.services import stack

SERVICES = ("kafka", "clickhouse", "alertmanager")
# One thread at a time has a stack's variables in os.environ: two overlapping would each restore
# what it found, and the later to finish would leave the stack's ports for the whole process.
_ENVIRON = threading.RLock()
PROCESSES = stack.PROCESSES


@dataclasses.dataclass
class PrivateStack:
    repo_root: Path
    state_dir: Path
    settings: Settings
    kafka_controller_port: int

    @classmethod
    def create(cls, repo_root: Path, state_dir: Path, **overrides) -> PrivateStack:
        kafka, controller, ch, ch_http, am, gw = free_ports(6)
        settings = dataclasses.replace(
            Settings(), state_dir=str(state_dir), kafka_port=kafka, clickhouse_port=ch, clickhouse_http_port=ch_http,
            alertmanager_port=am, gateway_port=gw, alertmanagers=f"http://127.0.0.1:{am}", **overrides,
        )
        return cls(repo_root, state_dir, settings, controller)

    def env(self) -> dict[str, str]:
        return self.settings.to_env() | {
            "SLEUTH_KAFKA_CONTROLLER_PORT": str(self.kafka_controller_port), "SLEUTH_PYTHON": sys.executable,
        }

    @contextmanager
    def environment(self) -> Iterator[None]:
        """This stack's variables in ``os.environ`` (``sleuth.services`` and ``stack`` read them there),
        while no other thread has them there."""
        with _ENVIRON:
            saved = {name: os.environ.get(name) for name in self.env()}
            os.environ.update(self.env())
            try:
                yield
            finally:
                for name, value in saved.items():
                    if value is None:
                        os.environ.pop(name, None)
                    else:
                        os.environ[name] = value

    @property
    def gateway(self) -> str:
        return f"127.0.0.1:{self.settings.gateway_port}"

    def up(self) -> None:
        with self.environment():
            stack.up(self.repo_root, self.settings)

    def pid(self, name: str) -> int | None:
        if name in PROCESSES:
            with self.environment():
                return stack.running(self.repo_root)[name]
        folder = self.state_dir.resolve() / name
        text = (folder / "pid").read_text().strip() if (folder / "pid").is_file() else ""
        # Like the deploy scripts: only a live process whose command line names our own state folder.
        return int(text) if text.isdigit() and _ours(int(text), str(folder)) else None

    def signal(self, name: str, signum: signal.Signals) -> bool:
        """Send ``signum`` to the process of ``name`` this stack started; False when none runs."""
        pid = self.pid(name)
        if pid is None:
            return False
        os.kill(pid, signum)
        return True

    def restart(self, name: str) -> None:
        """Start ``name`` again unless it runs (a service: its deploy script's idempotent ``up``)."""
        if name in PROCESSES:
            if self.pid(name) is None:
                with self.environment():
                    stack.start(self.repo_root, self.settings, name)
            return
        self.service(name, "up")

    def service(self, name: str, action: str) -> None:
        """``deploy/<name>.sh <action>`` (up, down) on this stack's ports and state folder."""
        subprocess.run(["bash", str(self.repo_root / "deploy" / f"{name}.sh"), action], env=os.environ | self.env(),
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=300, check=True)

    def down(self) -> None:
        """Stop every process and service of this stack (only this stack's: its own state folder)."""
        for name in SERVICES:  # a paused broker would ignore SIGTERM until the stop timeout
            self.signal(name, signal.SIGCONT)
        with self.environment():
            stack.down(self.repo_root, timeout_s=10)


def _ours(pid: int, marker: str) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z" and marker in cmdline
