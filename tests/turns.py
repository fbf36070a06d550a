"""Turns on the machine for the test workers of one ``pytest -n 2`` run.

A real job whose timings a test asserts on (which rank computed late, whether a data-parallel
replica's batches were uneven) runs alone: beside the other worker's load those timings carry that
load's jitter. Only the job itself takes the machine alone (``alone``), from inside its test's
shared turn: starting services and reading the job's records beside other tests changes nothing
the job recorded. It waits until the other worker's current test ends, and the other worker starts
nothing until the job is done.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


class MachineTurns:
    """A readers-writer lock between processes, on two files of ``folder`` (``flock``: the kernel
    frees a dead worker's locks). The writer goes first: a turn asking to be alone holds the
    turnstile while it waits, so the other worker cannot start test after test ahead of it. No one
    waits for the turnstile while holding the machine, so two workers asking at once never deadlock."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._turnstile: IO[bytes] = open(folder / "turnstile", "ab")
        self._machine: IO[bytes] = open(folder / "machine", "ab")
        self._sharing = False

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Runs beside any other shared turn, never beside an alone one."""
        fcntl.flock(self._turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._machine, fcntl.LOCK_SH)
        finally:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)
        self._sharing = True
        try:
            yield
        finally:
            self._sharing = False
            fcntl.flock(self._machine, fcntl.LOCK_UN)

    @contextmanager
    def alone(self) -> Iterator[None]:
        """Runs with no other turn on the machine; inside a shared turn, gives it up while it waits
        and takes it back after."""
        sharing = self._sharing
        if sharing:
            fcntl.flock(self._machine, fcntl.LOCK_UN)
        fcntl.flock(self._turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._machine, fcntl.LOCK_EX)
            try:
                yield
            finally:
                # Back to the shared turn before the turnstile opens: no alone turn slips in between.
                fcntl.flock(self._machine, fcntl.LOCK_SH if sharing else fcntl.LOCK_UN)
        finally:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)

    def close(self) -> None:
        self._turnstile.close()
        self._machine.close()
