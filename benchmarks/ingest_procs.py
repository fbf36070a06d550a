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

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.unlink(missing_ok=True)


def gateway(env: dict[str, str]) -> tuple[Service, int]:
    service = Service("gateway", {**env, "SLEUTH_GATEWAY_PORT": "0"}, "gateway listening on")
    return service, int(re.search(r"listening on [^:]+:(\d+)", service.first_line).group(1))


def workers(env: dict[str, str], n: int) -> list[Service]:
    return [Service("worker", env, "worker consuming") for _ in range(n)]
