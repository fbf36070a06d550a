"""Where the localizer fetches records from: the ``RecordSource`` contract, and an in-memory one.

The localizer visits ranks one group at a time (Holmes Algorithm 1), so a source answers for a
set of ranks and iterations and must not pay for the ranks it is not asked about. Kafka,
ClickHouse and the emulator (``sleuth.sim.EmulatedSource``) implement the same protocol.

Iterations are named by their ``iteration`` field (training step), not by position; asking
for steps a source does not hold returns nothing for them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

import numpy as np

from sleuth.jobspec import JobSpec
from sleuth.records import IterationBatch, RecordBatch

__all__ = ["MemorySource", "RecordSource"]


@runtime_checkable
class RecordSource(Protocol):
    """Read access to one job's records."""

    def job_spec(self) -> JobSpec:
        """The job's layout, placements and communicators."""
        ...

    def iteration_ids(self) -> np.ndarray:
        """The training steps the source holds, ascending (int64)."""
        ...

    def ranks_records(
        self, ranks: Iterable[int] | None, *, iterations: Iterable[int] | None = None,
        comms: Iterable[str] | None = None,
    ) -> RecordBatch:
        """CommOps records of ``ranks`` (every rank when None; all iterations when ``iterations`` is None), only those on
        the communicators ``comms`` when it is given (the localizer judging one operator instance
        reads its group's records of that communicator alone)."""
        ...

    def iterations(
        self, *, ranks: Iterable[int] | None = None, iterations: Iterable[int] | None = None
    ) -> IterationBatch:
        """Iteration records, of every rank when ``ranks`` is None."""
        ...


def _select(values: np.ndarray, wanted: Iterable[int] | None) -> np.ndarray:
    if wanted is None:
        return np.ones(len(values), dtype=bool)
    return np.isin(values, np.fromiter(wanted, dtype=np.int64))


class MemorySource:
    """A :class:`RecordSource` over batches already in memory (files read back, tests)."""

    def __init__(self, spec: JobSpec, records: RecordBatch, iterations: IterationBatch) -> None:
        self._spec = spec
        self._records = records
        self._iterations = iterations

    def job_spec(self) -> JobSpec:
        return self._spec

    def iteration_ids(self) -> np.ndarray:
        return np.unique(self._iterations["iteration"]).astype(np.int64)

    def ranks_records(
        self, ranks: Iterable[int] | None, *, iterations: Iterable[int] | None = None,
        comms: Iterable[str] | None = None,
    ) -> RecordBatch:
        mask = _select(self._records["rank"], ranks) & _select(self._records["iteration"], iterations)
        if comms is not None:
            mask &= self._records.isin("comm", comms)
        return self._records.take(mask)

    def iterations(
        self, *, ranks: Iterable[int] | None = None, iterations: Iterable[int] | None = None
    ) -> IterationBatch:
        batch = self._iterations
        return batch.take(_select(batch["rank"], ranks) & _select(batch["iteration"], iterations))
