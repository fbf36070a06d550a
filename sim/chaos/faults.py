"""Faults at random times against a ``PrivateStack`` and a ``Fleet``: one at a time, each undone the way it would be
in production (a supervisor restarts what was killed, a paused broker is continued, a launcher restarts a job).

Every kind comes once, in a seeded random order, before any comes twice, so a run long enough for one round
injects them all.
"""

from __future__ import annotations

import collections
import logging
import random
import signal
import threading
import time
from collections.abc import Callable

from sleuth.sim.chaos.jobs import Fleet
from sleuth.sim.chaos.stack import PrivateStack

_log = logging.getLogger(__name__)

KINDS = ("broker_kill", "broker_pause", "clickhouse_kill", "gateway_kill", "worker_kill", "job_restart")
#: Seconds between two faults, uniform in (low, high).
GAP_S = (5.0, 20.0)
#: Seconds a killed process stays down (its supervisor's restart delay) or a paused broker stays paused.
DOWN_S = (1.0, 8.0)

# What a SIGKILL hits: the service or stack process of each kind.
_KILLED = {"broker_kill": "kafka", "clickhouse_kill": "clickhouse", "gateway_kill": "gateway", "worker_kill": "worker"}


class FaultInjector:
    """Injects faults from a thread until ``stop``; ``counts`` says how many of each kind were injected.

    ``gap_s``: (low, high) of the uniform wait before each fault; ``down_s``: how long a killed process stays
    down (its supervisor's restart delay) or a paused broker stays paused.
    """

    def __init__(self, stack: PrivateStack, fleet: Fleet, *, seed: int, gap_s: tuple[float, float] = GAP_S,
                 down_s: tuple[float, float] = DOWN_S) -> None:
        self.stack = stack
        self.fleet = fleet
        self.random = random.Random(seed)
        self.gap_s = gap_s
        self.down_s = down_s
        self.counts: collections.Counter[str] = collections.Counter({kind: 0 for kind in KINDS})
        self.log: list[tuple[str, str]] = []  # (kind, detail) in order
        self.errors: list[str] = []
        self.down: set[str] = set()  # held down by a fault now: the supervisor leaves these alone
        self._stop = threading.Event()
        self._round: list[str] = []
        self._thread = threading.Thread(target=self._run, name="chaos-faults", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """No new fault; the one under way is undone first."""
        self._stop.set()
        self._thread.join()

    def _next_kind(self) -> str:
        if not self._round:
            self._round = self.random.sample(KINDS, len(KINDS))
        return self._round.pop()

    def _run(self) -> None:
        while not self._stop.wait(self.random.uniform(*self.gap_s)):
            kind = self._next_kind()
            try:
                detail = self.inject(kind)
            except Exception as error:  # reported, and the run goes on: the checker says what it cost
                _log.exception("fault %s failed", kind)
                self.errors.append(f"{kind}: {error!r}")
                continue
            if detail is not None:
                self.counts[kind] += 1
                self.log.append((kind, detail))

    def inject(self, kind: str) -> str | None:
        """Inject one fault of ``kind`` and undo it; what was hit (None: nothing to hit now)."""
        down = self.random.uniform(*self.down_s)
        if kind == "job_restart":
            slot = self.random.randrange(len(self.fleet.slots))
            return self.fleet.restart(slot)
        if kind == "broker_pause":
            return self._while(lambda: self.stack.signal("kafka", signal.SIGSTOP), down,
                               lambda: self.stack.signal("kafka", signal.SIGCONT), f"kafka paused {down:.1f}s")
        name = _KILLED[kind]
        self.down.add(name)
        try:
            return self._while(lambda: self.stack.signal(name, signal.SIGKILL), down, lambda: self.stack.restart(name),
                               f"{name} killed, back after {down:.1f}s")
        finally:
            self.down.discard(name)

    def _while(self, fault: Callable[[], bool], down_s: float, undo: Callable[[], object], detail: str) -> str | None:
        if not fault():
            return None
        time.sleep(down_s)  # the whole outage even when stopping: undoing early would shorten the fault
        undo()
        return detail
