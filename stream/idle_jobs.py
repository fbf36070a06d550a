"""Which jobs a service has not heard from for ``SLEUTH_JOB_IDLE_S``, so that it can drop their state.

Each service keeps state per job (the gateway its spec, the workers their windows, the localizer
its gatherings and caches); without eviction a long-lived service holds every job it ever saw.
Each service tells ``IdleJobs`` when it sees a job, on the clock it already uses, and drops the
state of the jobs ``expired`` hands back; a job that comes back afterwards starts afresh.
"""

from __future__ import annotations

from collections.abc import Iterable

from sleuth.validation import positive_number

__all__ = ["IdleJobs"]


class IdleJobs:
    """When each job was last seen; the jobs not seen for longer than ``idle_s``.

    ``expired`` looks over every job at most every ``idle_s / 8`` (a job is dropped between
    ``idle_s`` and ``1.125 idle_s`` after it was last seen), so that a service can ask per batch.
    """

    def __init__(self, *, idle_s: float) -> None:
        self.idle_s = positive_number("idle_s", idle_s)
        self._seen: dict[str, float] = {}
        self._next_look = float("-inf")

    def seen(self, jobs: Iterable[str], now: float) -> None:
        for job in jobs:
            self._seen[job] = now

    def expired(self, now: float) -> list[str]:
        """The jobs last seen more than ``idle_s`` before ``now``, forgotten here (oldest first)."""
        if now < self._next_look:
            return []
        self._next_look = now + self.idle_s / 8
        gone = sorted((t, job) for job, t in self._seen.items() if now - t > self.idle_s)
        for _, job in gone:
            del self._seen[job]
        return [job for _, job in gone]

    def __contains__(self, job: object) -> bool:
        return job in self._seen

    def __len__(self) -> int:
        return len(self._seen)
