"""The workers' ClickHouse side: one large columnar insert per table per batch.

Inserts are idempotent in query results (every table is a ReplacingMergeTree on its natural key,
see ``schema``), which is what lets the worker retry an insert whose acknowledgement it never got
and lets Kafka replay what was inserted but not yet committed.
"""

from __future__ import annotations

import json
import time
from typing import Any

from sleuth.jobspec import JobSpec
from sleuth.records import IterationBatch, RecordBatch
from sleuth.stream import clickhouse_records

_ITERATION_COLUMNS = ("job", "rank", "iteration", "t_start_ns", "t_end_ns")
ABNORMAL_COLUMNS = ("job", "rank", "comm", "seq", "iteration", "op", "peer", "t_start_ns", "duration_ns", "score",
                    "detected_ns")


class ClickHouseSink:
    def __init__(self, client: Any, database: str) -> None:
        self.client = client
        self.database = database

    def write(self, records: RecordBatch, iterations: IterationBatch, jobs: list[JobSpec],
              abnormal: list[tuple] = (), drops: list[tuple] = ()) -> None:
        """Insert everything; raises whatever the driver raises (the caller retries).

        ``drops``: (job, rank, before_ns, dropped) rows of ``logger_drops`` (``kafka_records.Drop``)."""
        db = self.database
        if drops:
            now = time.time_ns()
            self.client.execute(f"INSERT INTO {db}.logger_drops (job, rank, before_ns, dropped, reported_ns) VALUES",
                                [(*row, now) for row in drops])
        if jobs:
            now = time.time_ns()
            rows = [(s.job, s.world, json.dumps(s.to_dict(), separators=(",", ":")), now) for s in jobs]
            self.client.execute(f"INSERT INTO {db}.jobs (job, world, spec, registered_ns) VALUES", rows)
        if len(iterations):
            columns = [iterations.decoded("job").tolist()] + [iterations[n].tolist() for n in _ITERATION_COLUMNS[1:]]
            self.client.execute(
                f"INSERT INTO {db}.iterations ({', '.join(_ITERATION_COLUMNS)}) VALUES", columns, columnar=True
            )
        if abnormal:
            self.client.execute(f"INSERT INTO {db}.abnormal_ops ({', '.join(ABNORMAL_COLUMNS)}) VALUES", list(abnormal))
        # Records last: they are the bulk, and the smaller tables are then never behind them.
        clickhouse_records.insert_records(self.client, f"{db}.records", records)
