"""Benchmark of the two questions services ask of a job's progress again and again; prints one JSON object.

    .venv/bin/python benchmarks/bench_progress.py [--ranks 8192] [--iterations 2000] [--repeat 5]

Needs a ClickHouse server as the settings name it (e.g. ``deploy/clickhouse.sh up``). One job of
``--ranks`` ranks and ``--iterations`` steps of 2 s ending now is written to the ``iterations``
table of a database of its own (by ClickHouse itself, ``numbers()``), and registered; the
database is dropped at the end. Per repeat, each question and its same-run baseline:

* ``active_jobs``: which jobs ran within the idle time, the streaming localizer's question every
  round (``storage.progress.active_jobs``: rank 0's newest end per job); baseline: the same over
  every rank's rows (what a round asked before). Both must find the job active.
* ``completed``: the last iteration every rank finished, the alerter's question every tick while a
  job has an open alert (``storage.progress.completed_iterations`` from 10 iterations before the
  last); baseline: every rank's newest iteration over all its rows (what a tick asked before).
  Both must give the last iteration.

``ratio`` = the question / its baseline (medians).

Times are wall seconds on a shared 2-core machine: compare within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, default=8192)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from sleuth.settings import Settings
    from sleuth.storage import schema
    from sleuth.storage.progress import active_jobs, completed_iterations
    from sleuth.stream import connect

    settings = Settings.from_env()
    client = connect.clickhouse_client(settings)
    database = f"bench_progress_{os.getpid()}"
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
        every_rank = f"SELECT job, max(t_end_ns) FROM {database}.iterations WHERE day IN %(days)s GROUP BY job"
        every_row = (f"SELECT job, min(last) FROM (SELECT job, rank, max(iteration) AS last FROM {database}.iterations "
                     "WHERE job IN %(jobs)s GROUP BY job, rank) GROUP BY job")
        days = tuple(day for (day,) in client.execute(f"SELECT DISTINCT day FROM {database}.iterations"))
        times: dict[str, list[float]] = {name: [] for name in ("active_jobs", "every_rank", "completed", "every_row")}
        for _ in range(args.repeat):
            answers = {
                "active_jobs": _timed(times["active_jobs"], lambda: active_jobs(client, database, idle_s=3600.0, now_ns=now)),
                "every_rank": _timed(times["every_rank"], lambda: client.execute(every_rank, {"days": days})),
                "completed": _timed(times["completed"],
                                    lambda: completed_iterations(client, database, {"big": iterations - 10})),
                "every_row": _timed(times["every_row"], lambda: client.execute(every_row, {"jobs": ("big",)})),
            }
            expected = {"active_jobs": {"big": ranks}, "every_rank": [("big", now - 10**8)],
                        "completed": {"big": iterations - 1}, "every_row": [("big", iterations - 1)]}
            if answers != expected:
                raise SystemExit(f"the questions did not find the job as written: {answers}")
    finally:
        client.execute(f"DROP DATABASE IF EXISTS {database}")
        client.disconnect()
    median = {name: statistics.median(seconds) for name, seconds in times.items()}
    print(json.dumps({
        "benchmark": "progress", "machine": platform.machine(), "ranks": ranks, "iterations": iterations,
        "rows": ranks * iterations,
        **{f"{name}_s": {"median": round(median[name], 4), "max": round(max(seconds), 4)} for name, seconds in times.items()},
        "active_jobs_ratio": round(median["active_jobs"] / median["every_rank"], 4),
        "completed_ratio": round(median["completed"] / median["every_row"], 4),
    }, indent=2))


def _timed(seconds: list[float], ask: Callable[[], T]) -> T:
    began = time.perf_counter()
    answer = ask()
    seconds.append(time.perf_counter() - began)
    return answer


if __name__ == "__main__":
    main()
