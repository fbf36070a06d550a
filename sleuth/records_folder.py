"""Records folders of both producers, read whole: the logger's local mode (``rank-*.parquet`` plus
``iterations/``) and the emulator's output (``records.parquet``, ``iterations.parquet``), or one
records file. ``sleuth localize``, ``sleuth report`` and the demo all read folders through here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sleuth.recordio import FileRead, read_parquet
from sleuth.records import IterationBatch, RecordBatch
from sleuth.whatif.keys import unique_rows

__all__ = ["iterations_from_records", "read_records"]


def read_records(path: Path, *, on_file: FileRead | None = None) -> tuple[RecordBatch, IterationBatch]:
    """Records and iteration records of a logger or emulator folder, or of one records file, each
    record once (``RecordBatch.one_per_identity``); ``on_file`` hears of each file read (the
    records' files, then the iterations')."""
    if path.is_file():
        records: RecordBatch = read_parquet(path, on_file=on_file).one_per_identity()
        return records, iterations_from_records(records)
    if (path / "records.parquet").exists():  # the emulator's folder
        records = read_parquet(path / "records.parquet", on_file=on_file)
        its = path / "iterations.parquet"
    else:  # the logger's local mode
        records = read_parquet(path, on_file=on_file)
        its = path / "iterations"
    iterations = read_parquet(its, IterationBatch, on_file=on_file) if its.exists() else iterations_from_records(records)
    return records.one_per_identity(), iterations


def iterations_from_records(records: RecordBatch) -> IterationBatch:
    """Iteration records derived from CommOps records, per rank and step: the step ends at its last
    operator's end and starts where the rank's previous step ended (its first operator's start
    when the previous step is not in the records).

    The time between a rank's last collective of one step and its first of the next is that
    rank's compute for the next step (optimizer, forward, the backward up to its first bucket):
    a step that began at its own first operator would hide a slow GPU's compute entirely.
    """
    keep = records["iteration"] >= 0
    rank, it = records["rank"][keep].astype(np.int64), records["iteration"][keep]
    pairs, inverse = unique_rows(rank, it)
    start = np.full(len(pairs), np.iinfo(np.int64).max)
    end = np.full(len(pairs), np.iinfo(np.int64).min)
    np.minimum.at(start, inverse, records["t_start_ns"][keep])
    np.maximum.at(end, inverse, records["t_end_ns"][keep])
    # pairs are sorted by (rank, iteration): the row before is the same rank's previous step, if any
    follows = np.r_[False, (pairs[1:, 0] == pairs[:-1, 0]) & (pairs[1:, 1] == pairs[:-1, 1] + 1)]
    previous_end = np.r_[start[:1], end[:-1]]
    start = np.where(follows & (previous_end <= start), previous_end, start)
    job = records.decoded("job")[0] if len(records) else "job"
    return IterationBatch.from_columns(job=job, rank=pairs[:, 0], iteration=pairs[:, 1], t_start_ns=start, t_end_ns=end)
