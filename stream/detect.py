"""Where detection plugs into the workers (the detection issue supplies the detectors).

A detector sees every batch a worker takes from Kafka, after the per-rank state was updated and
before the batch is written, and returns rows for the ``abnormal_ops`` table (possibly none).
"""

from __future__ import annotations

from typing import Protocol

from sleuth.records import IterationBatch, RecordBatch
from sleuth.stream.rank_state import RankState


class Detector(Protocol):
    def update(self, records: RecordBatch, iterations: IterationBatch, state: RankState) -> list[tuple]:
        """Abnormal-operator rows (``abnormal_ops`` column order) found in this batch."""
        ...
