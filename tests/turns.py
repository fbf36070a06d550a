"""Turns on the machine for the test workers of one ``pytest -n 2`` run.

A test marked ``alone`` reads what a real job's timings show (which rank computed late, whether a
data-parallel replica's batches were uneven). Beside the other worker's load those timings carry
that load's jitter, so the test takes the machine alone: it waits until the other worker's current
test ends, and the other worker starts nothing until it is done. Every other test shares the
machine with any other test that is not alone.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


class MachineTurns:
    """A readers-writer lock between processes, on two files of ``folder`` (``flock``: the kernel
    frees a dead worker's locks). The writer goes first: a test asking to be alone holds the
    turnstile while it waits, so the other worker cannot start test after test ahead of it."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._turnstile: IO[bytes] = open(folder / "turnstile", "ab")
        self._machine: IO[bytes] = open(folder / "machine", "ab")

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Runs beside any other shared test, never beside an alone one."""
        fcntl.flock(self._turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._machine, fcntl.LOCK_SH)
        finally:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(self._machine, fcntl.LOCK_UN)

    @contextmanager
    def alone(self) -> Iterator[None]:
        """Runs with no other test on the machine."""
        fcntl.flock(self._turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._machine, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self._machine, fcntl.LOCK_UN)
        finally:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)

    def close(self) -> None:
        self._turnstile.close()
        self._machine.close()
