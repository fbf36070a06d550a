"""Each test file's seconds in a full run, kept in ``tests/durations.json``: pytest-xdist hands the
longest files out first, so that no minute-long file starts last while the other worker sits idle.

The figures are a hint for the order only: a file missing from them (a new one) counts as 0 s and
goes after the measured ones, and a stale figure costs time, never a result. Refresh them with
``.venv/bin/python -m pytest --record-durations`` (a partial run updates only the files it ran).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

__all__ = ["DURATIONS", "DurationRecorder", "FileDurations"]

DURATIONS = Path(__file__).resolve().parent / "durations.json"


class FileDurations:
    """Seconds per test file (its tests' setup, call and teardown summed), read from and written to ``path``."""

    def __init__(self, path: Path = DURATIONS) -> None:
        self.path = path
        self._seconds: dict[str, float] = json.loads(path.read_text()) if path.exists() else {}
        self._measured: Counter[str] = Counter()

    def of(self, file: str) -> float:
        """The seconds ``file`` took when last recorded; 0 for a file never measured."""
        return self._seconds.get(file, 0.0)

    def add(self, nodeid: str, seconds: float) -> None:
        """One phase of one test of this run."""
        self._measured[nodeid.split("::", 1)[0]] += seconds

    def write(self) -> None:
        """The recorded figures with this run's files replaced by what they took now, and files that
        are gone left out."""
        merged = {**self._seconds, **{file: round(seconds, 1) for file, seconds in self._measured.items()}}
        root = self.path.parent.parent
        merged = {file: seconds for file, seconds in merged.items() if (root / file).exists()}
        self.path.write_text(json.dumps(dict(sorted(merged.items())), indent=1) + "\n")


class DurationRecorder:
    """A pytest plugin on the run's controller (it sees every worker's reports): adds each test
    phase to ``durations`` and writes them when the session ends."""

    def __init__(self, durations: FileDurations) -> None:
        self.durations = durations

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.durations.add(report.nodeid, report.duration)

    def pytest_sessionfinish(self) -> None:
        self.durations.write()
