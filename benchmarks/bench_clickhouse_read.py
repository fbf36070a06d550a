"""Benchmark of the localizer's record reads from ClickHouse; prints one JSON object.

    .venv/bin/python benchmarks/bench_clickhouse_read.py [--seeds 2711] [--iterations 40]

Per held-out seed: the demo's emulated 4,096-GPU job (tp8 pp4 dp128, a spine 3 times slower from
iteration 15) is written to a database of its own on the ClickHouse server the settings name (e.g.
started by ``deploy/clickhouse.sh up``), twice over (an at-least-once replay of every record), and
localized from there as ``sleuth localize`` does. Its reads are recorded, then each is read again:

* ``localize_s``: the whole localization, reads included;
* ``reads``, ``rows``: how many record reads it made and the rows they returned;
* ``read_s``: those reads again as ``select_records`` makes them (no ``FINAL``, a key's repeated
  rows dropped in numpy), and the same-run baseline ``final_read_s``: the same reads with ``FINAL``
  (what ClickHouse offers to read a ReplacingMergeTree exactly), and ``ratio`` = read_s / final_read_s;
* ``read_cpu_s``: this process's CPU over those reads, and the same-run baseline ``default_blocks_read_cpu_s``
  (with ``default_blocks_read_s``): the same reads with the server's default read steps (1 MiB, 65,536
  rows), as ``select_batch`` read before it asked for larger ones; ``blocks_cpu_ratio`` = the first / the second;
* ``same_rows``: whether the two gave the same records, read for read.

The database is dropped at the end. Times are wall seconds on a shared 2-core machine: compare
within one run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from sleuth.demo.cases import SpineJob
from sleuth.localizer import localize
from sleuth.records import IterationBatch, RecordBatch
from sleuth.settings import Settings
from sleuth.sim import Emulation
from sleuth.storage import records_table, schema
from sleuth.storage.sink import ClickHouseSink
from sleuth.storage.source import ClickHouseSource
from sleuth.stream import connect
from sleuth.stream.detection import irregular_iterations


@contextmanager
def recorded_reads() -> Iterator[list[tuple[str, dict]]]:
    """Every record read ``select_records`` makes meanwhile: its filter and parameters."""
    reads: list[tuple[str, dict]] = []
    select = records_table.select_records

    def recording(client, table: str, *, where: str = "", params: dict | None = None) -> RecordBatch:
        reads.append((where, dict(params or {})))
        return select(client, table, where=where, params=params)

    records_table.select_records = recording
    try:
        yield reads
    finally:
        records_table.select_records = select


def final_read(client, table: str, where: str, params: dict) -> RecordBatch:
    """The baseline: one read with ``FINAL``, in ``select_records``' order."""
    names = ", ".join(records_table.RECORD_COLUMN_TYPES)
    query = f"SELECT {names} FROM {table} FINAL WHERE {where} ORDER BY job, rank, iteration, comm, seq, op, peer"
    return records_table.select_batch(client, RecordBatch, query, params)


@contextmanager
def default_read_steps() -> Iterator[None]:
    """``select_batch`` with the server's default read steps (the baseline of ``read_cpu_s``)."""
    ours = records_table._READ
    records_table._READ = records_table._NUMPY
    try:
        yield
    finally:
        records_table._READ = ours


def run(seed: int, iterations: int, settings: Settings) -> dict:
    case = SpineJob(seed=seed, iterations=iterations)
    scenario = dataclasses.replace(case.scenario(), job=f"{case.job}-{seed}")
    emulation = Emulation(scenario)
    database = f"sleuth_bench_{uuid.uuid4().hex[:10]}"
    settings = dataclasses.replace(settings, clickhouse_database=database)
    client = connect.clickhouse_client(settings)
    try:
        schema.migrate(client, database)
        spec = emulation.job_spec()
        sink = ClickHouseSink(client, database)
        sink.write(RecordBatch.empty(), emulation.iterations(), [spec])
        for _replay in range(2):
            for first in range(0, spec.world, 512):
                sink.write(emulation.ranks_records(range(first, min(first + 512, spec.world))), IterationBatch.empty(), [])
        source = ClickHouseSource(client, database, scenario.job)
        with recorded_reads() as reads:
            started = time.perf_counter()
            incidents = localize(source, irregular_iterations=irregular_iterations(source.iterations()),
                                 topology=scenario.topology, routing=case.routing)
            localize_s = time.perf_counter() - started
        table = f"{database}.records"
        read_s = final_s = default_s = read_cpu_s = default_cpu_s = 0.0
        rows = 0
        same = True
        for where, params in reads:
            started, cpu = time.perf_counter(), time.process_time()
            ours = records_table.select_records(client, table, where=where, params=params)
            read_s += time.perf_counter() - started
            read_cpu_s += time.process_time() - cpu
            with default_read_steps():
                started, cpu = time.perf_counter(), time.process_time()
                default = records_table.select_records(client, table, where=where, params=params)
                default_s += time.perf_counter() - started
                default_cpu_s += time.process_time() - cpu
            started = time.perf_counter()
            final = final_read(client, table, where, params)
            final_s += time.perf_counter() - started
            rows += len(ours)
            same &= ours.equals(final) and ours.equals(default)
        return {"world": spec.world, "seed": seed, "iterations": iterations, "incidents": len(incidents),
                "top_suspect": incidents[0].suspects[0].device if incidents and incidents[0].suspects else None,
                "localize_s": round(localize_s, 2), "reads": len(reads), "rows": rows,
                "read_s": round(read_s, 2), "final_read_s": round(final_s, 2),
                "ratio": round(read_s / final_s, 3) if final_s else None, "read_cpu_s": round(read_cpu_s, 2),
                "default_blocks_read_s": round(default_s, 2), "default_blocks_read_cpu_s": round(default_cpu_s, 2),
                "blocks_cpu_ratio": round(read_cpu_s / default_cpu_s, 3) if default_cpu_s else None,
                "same_rows": bool(same)}
    finally:
        client.execute(f"DROP DATABASE IF EXISTS {database}")
        client.disconnect()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[2711])
    parser.add_argument("--iterations", type=int, default=SpineJob.iterations)
    args = parser.parse_args()
    settings = Settings.from_env()
    rows = [run(seed, args.iterations, settings) for seed in args.seeds]
    print(json.dumps({"benchmark": "clickhouse_read", "machine": platform.machine(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
