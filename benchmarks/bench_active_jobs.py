"""Benchmark of the streaming localizer's question each round: which jobs are active; prints one JSON object.

    .venv/bin/python benchmarks/bench_active_jobs.py [--ranks 8192] [--iterations 2000] [--repeat 5]

Needs a ClickHouse server as the settings name it (e.g. ``deploy/clickhouse.sh up``). One job of
``--ranks`` ranks and ``--iterations`` steps of 2 s ending now is written to the ``iterations``
table of a database of its own (by ClickHouse itself, ``numbers()``), and registered; the
database is dropped at the end. Per repeat, ``storage.progress.active_jobs`` (rank 0's newest end
per job) and the same-run baseline: the same question over every rank's rows (what a round asked
before). ``ratio`` = active_jobs / baseline (medians). Both must find the job active.

Times are wall seconds on a shared 2-core machine: compare within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, default=8192)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from sleuth.settings import Settings
    from sleuth.storage import schema
    from sleuth.storage.progress import active_jobs
    from sleuth.stream import connect

    settings = Settings.from_env()
    client = connect.clickhouse_client(settings)
    database = f"bench_active_jobs_{os.getpid()}"
    schema.migrate(client, database)
    now, step = time.time_ns(), 2 * 10**9
    ranks, iterations = args.ranks, args.iterations
    try:
        client.execute(
            f"INSERT INTO {database}.iterations (job, rank, iteration, t_start_ns, t_end_ns) SELECT 'big', "
            f"number % {ranks}, intDiv(number, {ranks}), {now} - ({iterations} - intDiv(number, {ranks})) * {step}, "
            f"{now} - ({iterations} - intDiv(number, {ranks})) * {step} + {step - 10**8} FROM numbers({ranks * iterations})")
        client.execute(f"INSERT INTO {database}.jobs (job, world, spec, registered_ns) VALUES", [("big", ranks, "{}", now)])
        client.execute(f"OPTIMIZE TABLE {database}.iterations FINAL")
        every_rank = (f"SELECT job, max(t_end_ns) FROM {database}.iterations WHERE day IN %(days)s GROUP BY job")
        days = tuple(day for (day,) in client.execute(f"SELECT DISTINCT day FROM {database}.iterations"))
        asked, baseline = [], []
        for _ in range(args.repeat):
            began = time.perf_counter()
            active = active_jobs(client, database, idle_s=3600.0, now_ns=now)
            asked.append(time.perf_counter() - began)
            began = time.perf_counter()
            everyone = client.execute(every_rank, {"days": days})
            baseline.append(time.perf_counter() - began)
            if active != {"big": ranks} or [job for job, _ in everyone] != ["big"]:
                raise SystemExit(f"the job was not found active: {active}, {everyone}")
    finally:
        client.execute(f"DROP DATABASE IF EXISTS {database}")
        client.disconnect()
    print(json.dumps({
        "benchmark": "active_jobs", "machine": platform.machine(), "ranks": ranks, "iterations": iterations,
        "rows": ranks * iterations,
        "active_jobs_s": {"median": round(statistics.median(asked), 4), "max": round(max(asked), 4)},
        "every_rank_s": {"median": round(statistics.median(baseline), 4), "max": round(max(baseline), 4)},
        "ratio": round(statistics.median(asked) / statistics.median(baseline), 4),
    }, indent=2))


if __name__ == "__main__":
    main()
