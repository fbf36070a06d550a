"""Where drained records go: the ``Sink`` contract and the Parquet folder sink.

``SLEUTH_LOG_DIR=DIR`` gives each rank its own Parquet files in DIR (``rank-00003-0000.parquet``,
records), DIR/iterations (iteration records) and rank 0 writes ``DIR/job.json``: exactly what
``sleuth.recordio.read_parquet(DIR)`` and ``JobSpec.read(DIR)`` need. The gRPC sink is
``sleuth.logger.sender.GrpcSink``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from sleuth.jobspec import JobSpec
from sleuth.recordio import write_parquet
from sleuth.records import IterationBatch, RecordBatch

#: Sub-folder of a records folder that holds the iteration records.
ITERATIONS_DIR = "iterations"


class Sink(Protocol):
    """What the logger's drainer hands its batches to. Called from the drainer thread only."""

    def records(self, batch: RecordBatch, *, dropped: int) -> None:
        """Records to deliver; ``dropped`` records were lost just before them (0: none)."""

    def iterations(self, batch: IterationBatch) -> None: ...

    def spec(self, spec: JobSpec) -> None:
        """The job spec as known now (rank 0 only); a later call replaces an earlier one."""

    def close(self, timeout: float) -> None:
        """Deliver what is held, waiting at most ``timeout`` seconds."""


class ParquetSink:
    """Per-rank Parquet files: one file per ``chunk_records`` records and one at close."""

    def __init__(self, folder: str | Path, rank: int, *, chunk_records: int = 1 << 20) -> None:
        self.folder = Path(folder)
        self.rank = rank
        self.chunk_records = chunk_records
        self.dropped = 0
        self._records: list[RecordBatch] = []
        self._held = 0
        self._iterations: list[IterationBatch] = []
        self._part = 0
        self.folder.mkdir(parents=True, exist_ok=True)

    def records(self, batch: RecordBatch, *, dropped: int) -> None:
        # A file has no gap records: the count of lost records goes to the log at close.
        self.dropped += dropped
        if len(batch):
            self._records.append(batch)
            self._held += len(batch)
        if self._held >= self.chunk_records:
            self._write()

    def iterations(self, batch: IterationBatch) -> None:
        if len(batch):
            self._iterations.append(batch)

    def spec(self, spec: JobSpec) -> None:
        spec.write(self.folder)

    def close(self, timeout: float) -> None:
        self._write()

    def _write(self) -> None:
        name = f"rank-{self.rank:05d}-{self._part:04d}.parquet"
        if self._records:
            write_parquet(RecordBatch.concat(self._records).compact(), self.folder / name)
        if self._iterations:
            write_parquet(IterationBatch.concat(self._iterations), self.folder / ITERATIONS_DIR / name)
        if self._records or self._iterations:
            self._part += 1
        self._records, self._iterations, self._held = [], [], 0
