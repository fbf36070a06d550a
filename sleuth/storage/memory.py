"""In-memory twins of the store contracts (``sleuth.stores``), for unit tests and embedded runs.

Each keeps what ClickHouse would return after its merge: the latest version of a row per natural
key (what ``FINAL`` reads), so a replay replaces instead of counting twice, as in the tables.
The records source's twin is ``sleuth.sources.MemorySource``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sleuth.jobspec import JobSpec
from sleuth.localizer.episodes import Raised
from sleuth.localizer.incident import Incident
from sleuth.localizer.rules import LOCALIZER_RULES
from sleuth.oncall.alerts import Alert, AlertStatus
from sleuth.records import IterationBatch, RecordBatch

__all__ = ["MemoryAlertStore", "MemoryBus", "MemoryIncidentStore", "MemoryLabelStore", "MemoryPauseStore",
           "MemoryRecordSink", "Message"]


class MemoryRecordSink:
    """A ``RecordSink`` that keeps every write's parts, in order (jobs: the latest spec per job)."""

    def __init__(self) -> None:
        self.records: list[RecordBatch] = []
        self.iterations: list[IterationBatch] = []
        self.jobs: dict[str, JobSpec] = {}
        self.abnormal: list[tuple] = []
        self.drops: list[tuple] = []

    def write(self, records: RecordBatch, iterations: IterationBatch, jobs: list[JobSpec],
              abnormal: Sequence[tuple] = (), drops: Sequence[tuple] = ()) -> None:
        if len(records):
            self.records.append(records)
        if len(iterations):
            self.iterations.append(iterations)
        self.jobs.update((spec.job, spec) for spec in jobs)
        self.abnormal += abnormal
        self.drops += drops


class MemoryIncidentStore:
    """An ``IncidentStore``: the latest version of each (job, incident)."""

    def __init__(self) -> None:
        self.incidents: dict[tuple[str, str], Incident] = {}

    def raised(self, job: str) -> list[Raised]:
        return [Raised(i.incident, min(i.iterations), max(i.iterations), i.cause.value,
                       tuple(s.device for s in i.suspects[:LOCALIZER_RULES.tied_suspects]))
                for (j, _), i in self.incidents.items() if j == job and i.iterations]

    def incident(self, job: str, incident: str) -> Incident:
        try:
            return self.incidents[(job, incident)]
        except KeyError:
            raise LookupError(f"incident {incident!r} of job {job!r} is not in the store") from None

    def write(self, incident: Incident) -> None:
        self.incidents[(incident.job, incident.incident)] = incident


class MemoryPauseStore:
    """A ``PauseStore``: the latest version of each (job, incident)."""

    def __init__(self) -> None:
        self.pauses: dict[tuple[str, str], Incident] = {}

    def paused(self, job: str) -> list[Raised]:
        return [Raised(p.incident, min(p.iterations), max(p.iterations), "",
                       tuple(s.device for s in p.suspects[:LOCALIZER_RULES.tied_suspects]))
                for (j, _), p in self.pauses.items() if j == job and p.iterations]

    def record(self, pause: Incident) -> None:
        self.pauses[(pause.job, pause.incident)] = pause


class MemoryAlertStore:
    """An ``AlertStore``: the latest version of each alert (job, device, starts_ns) and whether it was announced."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str, int], tuple[Alert, bool]] = {}
        self.saves = 0  # versions written, announced or not

    def save(self, alerts: list[Alert], *, announced: bool = True) -> None:
        for alert in alerts:
            self.rows[(alert.job, alert.device, alert.starts_ns)] = (alert, announced)
            self.saves += 1

    def load(self, *, status: AlertStatus | None = None, job: str | None = None,
             announced: bool | None = None) -> list[Alert]:
        return [alert for _key, (alert, told) in sorted(self.rows.items(), key=lambda item: item[0])
                if (status is None or alert.status is status) and (job is None or alert.job == job)
                and (announced is None or told == announced)]


class MemoryLabelStore:
    """A ``LabelStore``: the latest row per operator (job, rank, iteration, comm, seq), as the table's key."""

    def __init__(self) -> None:
        self.rows: dict[tuple, tuple] = {}

    def write(self, rows: list[tuple]) -> None:
        for row in rows:
            job, rank, comm, seq, iteration = row[:5]
            self.rows[(job, rank, iteration, comm, seq)] = row

    def labels(self, jobs: list[str]) -> list[tuple[str, int, str, int, int, bool]]:
        return [(job, rank, comm, seq, iteration, bool(abnormal))
                for job, rank, comm, seq, iteration, abnormal, *_ in self.rows.values() if job in jobs]

    def verdicts(self) -> dict[str, str]:
        latest: dict[str, int] = {}
        for *_, source, labeled_ns in self.rows.values():
            if source.startswith("oncall:"):
                latest[source] = max(labeled_ns, latest.get(source, labeled_ns))
        found: dict[str, str] = {}
        for source in sorted(latest, key=latest.__getitem__):  # oldest first: the latest verdict wins
            _prefix, verdict, incident = source.split(":", 2)
            found[incident] = verdict
        return found


@dataclass(frozen=True)
class Message:
    topic: str
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True)
class _Delivered:
    """A send the twin acknowledged at once."""

    message: Message

    def get(self, timeout: float | None = None) -> Message:
        return self.message


class MemoryBus:
    """A ``Bus`` that acknowledges every send at once and keeps the messages, in order."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.closed = False

    def send(self, topic: str, value: bytes | None = None, key: bytes | None = None,
             headers: list[tuple[str, bytes]] | None = None) -> _Delivered:
        if self.closed:
            raise RuntimeError("the bus is closed")
        message = Message(topic, key, value, tuple(headers or ()))
        self.messages.append(message)
        return _Delivered(message)

    def on(self, topic: str) -> list[Message]:
        """The messages sent to ``topic``, in order."""
        return [m for m in self.messages if m.topic == topic]

    def flush(self, timeout: float | None = None) -> None:
        pass

    def close(self, timeout: float | None = None) -> None:
        self.closed = True
