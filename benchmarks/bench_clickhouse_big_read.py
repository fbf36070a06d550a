"""Benchmark of one large records read from ClickHouse; prints one JSON object.

    .venv/bin/python benchmarks/bench_clickhouse_big_read.py [--ranks 8192] [--ops 150] [--repeat 3]

One iteration of a ``--ranks``-rank job, ``--ops`` records a rank (1,228,800 rows by default, what the
streaming localizer reads of an 8,192-GPU iteration), is written to a database of its own on the
ClickHouse server the settings name and read back whole:

* ``select_records_s``: ``records_table.select_records`` of that iteration (the fastest of ``--repeat``);
* ``plain_execute_s``: the same-run baseline, the driver's plain columnar ``execute`` of the same
  query (a Python list per column, no batch made), and ``ratio`` = select_records_s / plain_execute_s;
* ``same_rows``: whether the read gave the records written.

The database is dropped at the end. Times are wall seconds on a shared 2-core machine: compare ratios.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import time
import uuid

import numpy as np

from sleuth.records import RecordBatch
from sleuth.settings import Settings
from sleuth.storage import records_table, schema
from sleuth.stream import connect


def iteration_records(ranks: int, ops: int) -> RecordBatch:
    """One iteration: each rank's ``ops`` collectives, in the order ``select_records`` reads them."""
    n = ranks * ops
    rank = np.repeat(np.arange(ranks), ops)
    k = np.tile(np.arange(ops), ranks)
    start = 1_763_700_000 * 10**9 + k * 10**6 + rank
    return RecordBatch.from_columns(
        job="job", rank=rank, comm=[f"tp.{i}" for i in (rank // 8).tolist()], seq=k, op=k % 4 + 1,
        peer=np.full(n, -1), nbytes=np.full(n, 1 << 20), iteration=np.full(n, 7), t_issue_ns=start - 10,
        t_start_ns=start, t_end_ns=start + 5000,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, default=8192)
    parser.add_argument("--ops", type=int, default=150)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    database = f"sleuth_bench_{uuid.uuid4().hex[:10]}"
    client = connect.clickhouse_client(dataclasses.replace(Settings.from_env(), clickhouse_database=database))
    try:
        schema.migrate(client, database)
        written = iteration_records(args.ranks, args.ops)
        table = f"{database}.records"
        records_table.insert_records(client, table, written)
        where, params = "job = %(job)s AND iteration = 7", {"job": "job"}
        names = ", ".join(records_table.RECORD_COLUMN_TYPES)
        query = f"SELECT {names} FROM {table} WHERE {where} ORDER BY job, rank, iteration, comm, seq, op, peer"
        ours, plain = [], []
        for _ in range(args.repeat):
            started = time.perf_counter()
            read = records_table.select_records(client, table, where=where, params=params)
            ours.append(time.perf_counter() - started)
            started = time.perf_counter()
            client.execute(query, params, columnar=True)
            plain.append(time.perf_counter() - started)
        print(json.dumps({"benchmark": "clickhouse_big_read", "machine": platform.machine(), "rows": len(read),
                          "select_records_s": round(min(ours), 3), "plain_execute_s": round(min(plain), 3),
                          "ratio": round(min(ours) / min(plain), 3), "same_rows": bool(read.equals(written))}, indent=1))
    finally:
        client.execute(f"DROP DATABASE IF EXISTS {database}")
        client.disconnect()


if __name__ == "__main__":
    main()
