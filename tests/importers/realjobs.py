"""Running the importers' real torch jobs."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_job(command: Sequence[str], *, env: dict[str, str] | None = None, timeout: float = 120) -> None:
    """Run a real job (a torch launcher and its workers) in its own session with the repository
    importable, so that a hung job's workers are stopped with it; fail with its stderr's tail."""
    env = {**os.environ, **(env or {}), "PYTHONPATH": str(ROOT)}
    with subprocess.Popen(list(command), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as proc:
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    assert proc.returncode == 0, err[-3000:]
