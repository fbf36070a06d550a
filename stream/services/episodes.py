"""How the streaming localizer turns a stream of irregular iterations into one incident per episode.

Gathering (debounce): the first irregularity of a job starts a wait of ``debounce_s`` seconds,
during which that job's further irregularities join it. A persistent fault makes every
iteration irregular, so waiting for a quiet spell would wait forever; a fixed wait after the
first one gives the localizer several irregular iterations (a suspect needs support from two)
and gives the workers time to land their records. The agent then checks that the records have
landed and, when not yet, puts the gathering back for ``retry_s``.

De-duplication, against the incidents already raised for the job (read from ClickHouse, so it
holds across restarts and replays):

* an irregular iteration inside an incident's iterations was localized already (a replay, or a
  worker republishing after a crash): it is dropped before localizing;
* a new incident that continues a raised one's episode (``sleuth.localizer.episodes``: near, and
  naming the same device first or second) makes that incident *grow*, written again under its own
  id, never raised twice.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

from sleuth.errors import ConfigError
from sleuth.localizer.episodes import Raised

__all__ = ["Gatherer", "Pending", "not_localized"]




@dataclass
class Pending:
    """A job's irregular iterations gathered so far, and the Kafka events to acknowledge once handled."""

    job: str
    arrivals: dict[int, float] = field(default_factory=dict)  # iteration -> when it first arrived (monotonic s)
    tokens: list[Hashable] = field(default_factory=list)
    not_before: float = 0.0
    #: The iteration whose landing settles the incidents found so far, where their evidence reached
    #: past the last gathered iteration (``benign_pauses.settling``); 0 before any search.
    settle_through: int = 0

    @property
    def iterations(self) -> list[int]:
        return sorted(self.arrivals)

    @property
    def first_arrival(self) -> float:
        return min(self.arrivals.values())

    def merge(self, other: Pending) -> None:
        for iteration, arrived in other.arrivals.items():
            self.arrivals[iteration] = min(arrived, self.arrivals.get(iteration, arrived))
        self.tokens.extend(other.tokens)
        self.not_before = min(self.not_before, other.not_before)
        self.settle_through = max(self.settle_through, other.settle_through)


class Gatherer:
    """Irregular iterations per job, due ``debounce_s`` after the first one arrived."""

    def __init__(self, *, debounce_s: float) -> None:
        if not debounce_s >= 0:
            raise ConfigError(f"debounce_s must be >= 0 seconds, got {debounce_s!r}")
        self.debounce_s = debounce_s
        self._pending: dict[str, Pending] = {}

    def add(self, job: str, iteration: int, *, now: float, token: Hashable = None) -> None:
        pending = self._pending.get(job)
        if pending is None:
            pending = self._pending[job] = Pending(job, not_before=now + self.debounce_s)
        pending.arrivals.setdefault(int(iteration), now)
        if token is not None:
            pending.tokens.append(token)

    def due(self, now: float) -> list[str]:
        """Jobs whose gathering is ready to localize, oldest first."""
        ready = [p for p in self._pending.values() if p.not_before <= now]
        return [p.job for p in sorted(ready, key=lambda p: p.not_before)]

    def take(self, job: str) -> Pending:
        return self._pending.pop(job)

    def put_back(self, pending: Pending, *, not_before: float) -> None:
        """Return a gathering that could not be localized yet; what arrived meanwhile joins it."""
        pending.not_before = not_before
        newer = self._pending.pop(pending.job, None)
        if newer is not None:
            pending.merge(newer)
            pending.not_before = not_before
        self._pending[pending.job] = pending

    def stale(self, now: float, *, idle_s: float) -> list[Pending]:
        """Take the gatherings whose first iteration arrived over ``idle_s`` before ``now`` and that
        are still not localized (retried all that time): given up, for the caller to log and acknowledge."""
        old = [job for job, p in self._pending.items() if now - p.first_arrival > idle_s]
        return [self._pending.pop(job) for job in old]

    def __len__(self) -> int:
        return len(self._pending)


def not_localized(iterations: Iterable[int], raised: Iterable[Raised]) -> list[int]:
    """The iterations no raised incident spans already."""
    spans = [(r.first, r.last) for r in raised]
    return [i for i in iterations if not any(first <= i <= last for first, last in spans)]
