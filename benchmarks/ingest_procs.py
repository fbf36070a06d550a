"""The deployed processes ``bench_ingest.py`` measures: ``sleuth gateway`` and ``sleuth worker`` as
subprocesses (their own interpreters, as deployed), their resident memory read from /proc."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path


class Service:
    """``python -m sleuth <command>`` with ``env``; ``ready`` once its log prints ``ready_line``."""

    def __init__(self, command: str, env: dict[str, str], ready_line: str, *, timeout_s: float = 120.0) -> None:
        self.log = Path(tempfile.mkstemp(prefix=f"bench-{command}-", suffix=".log")[1])
        self.process = subprocess.Popen([sys.executable, "-m", "sleuth", command], env={**os.environ, **env},
                                        stdout=self.log.open("w"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while ready_line not in self.log.read_text():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"sleuth {command} did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.1)
        self.first_line = next(line for line in self.log.read_text().splitlines() if ready_line in line)

    def memory_kib(self) -> dict[str, int]:
        """Resident memory now (VmRSS) and at its peak since the process started (VmHWM), KiB."""
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return {key: int(re.search(rf"^{key}:\s+(\d+) kB", status, re.M).group(1)) for key in ("VmRSS", "VmHWM")}

    def cpu_s(self) -> float:
        return cpu_seconds(self.process.pid)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.unlink(missing_ok=True)


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds process ``pid`` (all its threads) has used, from /proc."""
    # The fields after the parenthesised command name: utime and stime are the 12th and 13th.
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def service_pid(name: str) -> int | None:
    """The pid of the local ``name`` service (``deploy/<name>.sh`` writes it), None when it is not ours to read."""
    from sleuth import services

    path = services.state_dir(Path(__file__).resolve().parents[1]) / name / "pid"
    try:
        pid = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if Path(f"/proc/{pid}/stat").exists() else None


def gateway(env: dict[str, str]) -> tuple[Service, int]:
    service = Service("gateway", {**env, "SLEUTH_GATEWAY_PORT": "0"}, "gateway listening on")
    return service, int(re.search(r"listening on [^:]+:(\d+)", service.first_line).group(1))


def workers(env: dict[str, str], n: int) -> list[Service]:
    return [Service("worker", env, "worker consuming") for _ in range(n)]
