"""Where the service keeps what it learns: the store contracts, beside ``RecordSource`` (``sleuth.sources``).

Each contract is small and names what its callers do, not how a database does it. ClickHouse and
Kafka implement them in ``sleuth.storage`` (the tables' schema, rows and queries); the in-memory
twins of ``sleuth.storage.memory`` implement them for unit tests, so a decision (the alerter's, the
localizer agent's) is tested without a server.

* records source: :class:`sleuth.sources.RecordSource` (the localizer's progressive fetch);
* :class:`RecordSink`: the workers' records, iterations, job specs, abnormal operators and drops;
* :class:`IncidentStore`: the localizer's incidents, what was raised and the documents to grow;
* :class:`PauseStore`: the benign pauses the localizer recorded instead of raising;
* :class:`AlertStore`: the alerter's state, one row version per change of an alert;
* :class:`LabelStore`: operator labels (on-call verdicts) and the verdicts they record;
* :class:`Bus`: a Kafka producer of small acknowledged messages (irregularities, incidents, alerts).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from sleuth.jobspec import JobSpec
    from sleuth.localizer.episodes import Raised
    from sleuth.localizer.incident import Incident
    from sleuth.oncall.alerts import Alert, AlertStatus
    from sleuth.records import IterationBatch, RecordBatch

__all__ = ["AlertStore", "Bus", "Delivery", "IncidentStore", "LabelStore", "PauseStore", "RecordSink"]


@runtime_checkable
class RecordSink(Protocol):
    """Where the workers write what a batch of messages carried."""

    def write(self, records: RecordBatch, iterations: IterationBatch, jobs: list[JobSpec],
              abnormal: Sequence[tuple] = (), drops: Sequence[tuple] = ()) -> None:
        """Keep everything; idempotent per row (a replayed batch counts once), raises on failure (the caller retries).

        ``abnormal``: ``abnormal_ops`` rows (``sleuth.storage.tables.ABNORMAL_COLUMNS``);
        ``drops``: (job, rank, before_ns, dropped) of ``logger_drops``."""
        ...


@runtime_checkable
class IncidentStore(Protocol):
    """The incidents the streaming localizer raised, per job."""

    def raised(self, job: str) -> list[Raised]:
        """The incidents held for ``job``, with their top suspects (episodes continue or grow them)."""
        ...

    def incident(self, job: str, incident: str) -> Incident:
        """The whole incident as last written; ``LookupError`` when there is none."""
        ...

    def write(self, incident: Incident) -> None:
        """Keep ``incident``, replacing an earlier version of the same (job, incident)."""
        ...


@runtime_checkable
class PauseStore(Protocol):
    """The benign pauses the streaming localizer recorded and never paged, per job."""

    def paused(self, job: str) -> list[Raised]:
        """The pauses held for ``job``, with their first suspects (the devices that paused)."""
        ...

    def record(self, pause: Incident) -> None:
        """Keep ``pause``, replacing an earlier version of the same (job, incident)."""
        ...


@runtime_checkable
class AlertStore(Protocol):
    """The alerter's state: the latest version of each alert (job, device, starts_ns) survives a restart."""

    def save(self, alerts: list[Alert], *, announced: bool = True) -> None:
        """A new version of each alert; ``announced``: the receivers were told of this version."""
        ...

    def load(self, *, status: AlertStatus | None = None, job: str | None = None,
             announced: bool | None = None) -> list[Alert]:
        """The latest version of each alert, of ``status``, ``job`` and announcement state where given,
        ordered by (job, device, starts_ns)."""
        ...


@runtime_checkable
class LabelStore(Protocol):
    """Operator labels: (job, rank, comm, seq, iteration) -> abnormal, with the source that set them."""

    def write(self, rows: list[tuple]) -> None:
        """``labels`` rows (``sleuth.storage.tables.LABEL_COLUMNS``); a later row of an operator replaces it."""
        ...

    def labels(self, jobs: list[str]) -> list[tuple[str, int, str, int, int, bool]]:
        """(job, rank, comm, seq, iteration, abnormal) of every label of ``jobs``."""
        ...

    def verdicts(self) -> dict[str, str]:
        """incident -> the latest on-call verdict, from the labels' ``oncall:<verdict>:<incident>`` sources."""
        ...


class Delivery(Protocol):
    """A message handed to the bus; ``get`` waits for the acknowledgement (raises when it failed)."""

    def get(self, timeout: float | None = None) -> Any:
        ...


@runtime_checkable
class Bus(Protocol):
    """A producer of keyed messages (kafka-python's ``KafkaProducer`` has this shape)."""

    def send(self, topic: str, value: bytes | None = None, key: bytes | None = None,
             headers: list[tuple[str, bytes]] | None = None) -> Delivery:
        ...

    def flush(self, timeout: float | None = None) -> None:
        ...

    def close(self, timeout: float | None = None) -> None:
        ...
