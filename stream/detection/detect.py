"""Where detection plugs into the workers (the detection issue supplies the detectors).

A detector sees every batch a worker takes from Kafka, after the per-rank state was updated and
before the batch is written, and returns rows for the ``abnormal_ops`` table (possibly none); the
worker then takes the irregular iterations it found and publishes them once the batch is written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from sleuth.records import IterationBatch, RecordBatch
from sleuth.stream.detection.rank_state import RankState

if TYPE_CHECKING:
    from sleuth.irregularity import Irregularity


class Detector(Protocol):
    def update(self, records: RecordBatch, iterations: IterationBatch, state: RankState) -> list[tuple]:
        """Abnormal-operator rows (``abnormal_ops`` column order) found in this batch."""
        ...

    def take_irregularities(self) -> list[Irregularity]:
        """The irregular iterations found since the last call (oldest first), also by an ``update`` that raised."""
        ...

    def forget(self, jobs: set[str]) -> None:
        """Drop what is kept of ``jobs``, idle for ``SLEUTH_JOB_IDLE_S``: one that comes back starts afresh."""
        ...
