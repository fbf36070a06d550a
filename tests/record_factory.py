"""Seeded random record batches for tests: every column spans its type's full range."""

import numpy as np

from sleuth.records import OpKind, RecordBatch


def random_records(n: int, *, seed: int, job: str = "job-1", comms: int = 50) -> RecordBatch:
    rng = np.random.default_rng(seed)
    i64 = np.iinfo(np.int64)
    return RecordBatch.from_columns(
        job=job,
        rank=rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32),
        comm=[f"tp.{c}" for c in rng.integers(0, comms, n)],
        seq=rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True),
        op=rng.integers(1, len(OpKind), n),
        peer=rng.integers(-1, 2**31 - 1, n),
        nbytes=rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True),
        iteration=rng.integers(-1, i64.max, n),
        t_issue_ns=rng.integers(i64.min, i64.max, n, endpoint=True),
        t_start_ns=rng.integers(i64.min, i64.max, n, endpoint=True),
        t_end_ns=rng.integers(i64.min, i64.max, n, endpoint=True),
    )
