"""The workers' ClickHouse side (a ``RecordSink``): one large columnar insert per table per batch.

Inserts are idempotent in query results (every table is a ReplacingMergeTree on its natural key,
see ``schema``), which is what lets the worker retry an insert whose acknowledgement it never got
and lets Kafka replay what was inserted but not yet committed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from sleuth.jobspec import JobSpec
from sleuth.records import IterationBatch, RecordBatch
from sleuth.storage import records_table
from sleuth.storage.tables import ABNORMAL_COLUMNS, DROP_COLUMNS, ITERATION_COLUMNS, JOB_COLUMNS, insert, job_row

if TYPE_CHECKING:
    from clickhouse_driver import Client

__all__ = ["ClickHouseSink"]


class ClickHouseSink:
    def __init__(self, client: Client, database: str) -> None:
        self.client = client
        self.database = database

    def write(self, records: RecordBatch, iterations: IterationBatch, jobs: list[JobSpec],
              abnormal: Sequence[tuple] = (), drops: Sequence[tuple] = ()) -> None:
        """Insert everything; raises whatever the driver raises (the caller retries).

        ``drops``: (job, rank, before_ns, dropped) rows of ``logger_drops`` (``kafka_records.Drop``)."""
        db = self.database
        if drops:
            now = time.time_ns()
            self.client.execute(insert(f"{db}.logger_drops", DROP_COLUMNS), [(*row, now) for row in drops])
        if jobs:
            now = time.time_ns()
            self.client.execute(insert(f"{db}.jobs", JOB_COLUMNS), [job_row(s, registered_ns=now) for s in jobs])
        records_table.insert_batch(self.client, insert(f"{db}.iterations", ITERATION_COLUMNS), iterations,
                                   ITERATION_COLUMNS)
        if abnormal:
            self.client.execute(insert(f"{db}.abnormal_ops", ABNORMAL_COLUMNS), list(abnormal))
        # Records last: they are the bulk, and the smaller tables are then never behind them.
        records_table.insert_records(self.client, f"{db}.records", records)
