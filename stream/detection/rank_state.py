"""Per-(job, rank) state the workers keep across batches, updated a whole batch at a time.

One row per (job, rank) seen, in numpy arrays that grow by doubling; an update is a handful of
vectorized ufunc calls over the batch (``np.unique`` to find the rows, ``ufunc.at`` to fold the
batch in), never a Python loop over records. Detectors read it to know where each rank is.
"""

from __future__ import annotations

import numpy as np

from sleuth.records import IterationBatch, RecordBatch
from sleuth.stream.detection.group_keys import unique_inverse
from sleuth.stream.detection.key_ids import KeyIds


class RankState:
    """Records seen, latest iteration and latest end time of each (job, rank)."""

    def __init__(self) -> None:
        self._jobs: dict[str, int] = {}
        self._rows = KeyIds()  # (job id << 32 | rank) -> row
        self.records = np.zeros(0, np.int64)
        self.iteration = np.zeros(0, np.int64)
        self.t_end_ns = np.zeros(0, np.int64)
        self.iterations_done = np.zeros(0, np.int64)

    def __len__(self) -> int:
        return len(self._rows)

    def row(self, job: str, rank: int) -> int | None:
        job_id = self._jobs.get(job)
        return None if job_id is None else self._rows.get((job_id << 32) | rank)

    def update(self, records: RecordBatch) -> None:
        if not len(records):
            return
        rows = self._rows_of(records)
        np.add.at(self.records, rows, 1)
        np.maximum.at(self.iteration, rows, records["iteration"])
        np.maximum.at(self.t_end_ns, rows, records["t_end_ns"])

    def update_iterations(self, iterations: IterationBatch) -> None:
        if not len(iterations):
            return
        rows = self._rows_of(iterations)
        np.add.at(self.iterations_done, rows, 1)
        np.maximum.at(self.iteration, rows, iterations["iteration"])

    def forget(self, jobs: set[str]) -> None:
        """Drop the rows of ``jobs`` (idle ones); the rows left keep their values, renumbered."""
        gone = {self._jobs.pop(job) for job in jobs if job in self._jobs}
        if not gone:
            return
        renumber = {old: new for new, old in enumerate(sorted(self._jobs.values()))}
        self._jobs = {job: renumber[old] for job, old in self._jobs.items()}
        kept = sorted((row, key) for key, row in self._rows.items() if key >> 32 not in gone)
        keep = np.array([row for row, _ in kept], np.int64)
        self._rows = KeyIds({(renumber[key >> 32] << 32) | (key & 0xFFFFFFFF): new for new, (_, key) in enumerate(kept)})
        for name in ("records", "iteration", "t_end_ns", "iterations_done"):
            setattr(self, name, getattr(self, name)[keep])

    def _rows_of(self, batch: RecordBatch | IterationBatch) -> np.ndarray:
        job_ids = np.array([self._jobs.setdefault(j, len(self._jobs)) for j in batch.strings], np.uint64)
        keys = (job_ids[batch["job"]] << np.uint64(32)) | batch["rank"].astype(np.uint64)
        unique, inverse = unique_inverse(keys)
        rows = self._rows.ids(unique)
        self._grow(len(self._rows))
        return rows[inverse]

    def _grow(self, n: int) -> None:
        if n <= len(self.records):
            return
        size = max(n, 2 * len(self.records), 64)
        for name, fill in (("records", 0), ("iteration", -1), ("t_end_ns", np.iinfo(np.int64).min),
                           ("iterations_done", 0)):
            old = getattr(self, name)
            new = np.full(size, fill, np.int64)
            new[: len(old)] = old
            setattr(self, name, new)
