"""How far jobs got, from ClickHouse ``iterations``: what resolves their alerts, and which jobs are
still running (what the streaming localizer's what-if rounds measure)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from sleuth.storage.schema import check_database_name

if TYPE_CHECKING:
    from clickhouse_driver import Client

__all__ = ["active_jobs", "completed_iterations", "newest_iterations"]


def completed_iterations(client: Client, database: str, since: Mapping[str, int]) -> dict[str, int]:
    """job -> the last iteration that every rank of the job (its registered world) has finished, for
    each job of ``since`` that finished iteration ``since[job]`` at least; the others are left out.

    Only the iterations from ``since[job]`` on are read, a range of each rank's rows in the table's
    sort key: the caller asks for the least iteration that would change its mind (an alert resolves
    that many iterations past its last irregular one), and a job that ran for days has billions of
    rows before it. A rank with no row from there on has not got there, so neither has the job.
    """
    db = check_database_name(database)
    completed: dict[str, int] = {}
    for job, first in sorted(since.items()):
        rows = client.execute(
            f"SELECT min(last), count(), any(world) FROM (SELECT job, rank, max(iteration) AS last FROM {db}.iterations "
            "WHERE job = %(job)s AND iteration >= %(since)s GROUP BY job, rank) "
            f"ANY INNER JOIN (SELECT job, world FROM {db}.jobs FINAL WHERE job = %(job)s) USING job",
            {"job": job, "since": int(first)},
        )
        if rows and rows[0][1] and int(rows[0][1]) >= int(rows[0][2]):
            completed[job] = int(rows[0][0])
    return completed


def newest_iterations(client: Client, database: str, since: Mapping[str, int]) -> dict[str, int]:
    """job -> the newest iteration rank 0 of the job wrote, for each job of ``since`` with a row from
    iteration ``since[job]`` on; the others are left out.

    What tells a job that stopped reporting from one that goes on: rank 0's rows from ``since`` on
    are a range of the table's sort key, and its ranks end a step together (``active_jobs``).
    """
    if not since:
        return {}
    db = check_database_name(database)
    wanted = " OR ".join(f"(job = %(job{k})s AND iteration >= %(since{k})s)" for k in range(len(since)))
    params: dict[str, object] = {}
    for k, (job, first) in enumerate(sorted(since.items())):
        params[f"job{k}"], params[f"since{k}"] = job, int(first)
    rows = client.execute(f"SELECT job, max(iteration) FROM {db}.iterations WHERE rank = 0 AND ({wanted}) GROUP BY job",
                          params)
    return {str(job): int(newest) for job, newest in rows}


def active_jobs(client: Client, database: str, *, idle_s: float, now_ns: int) -> dict[str, int]:
    """job -> world size, for every registered job with an iteration that ended within ``idle_s`` of
    the newest one written to ``database`` in the last ``idle_s`` (``now_ns`` when that is later).

    Only the ``iterations`` partitions written to in the last ``idle_s`` (on the server's clock) are
    read, so a database of many finished jobs costs what one of a few does. Within them, recency is
    read on the jobs' own clocks, where their records are: a real job's is the wall clock, an
    emulated one's starts at 0. A newest iteration after ``now_ns`` (a host whose clock jumped ahead)
    is not taken as now, so that it cannot make every other job look idle.

    A job's recency is its rank 0's: the table is sorted by (job, rank, iteration), so one rank's rows
    are a range the index finds, where every rank's are the whole partition (a day of a 16,384-rank
    job is hundreds of millions of rows, asked every round). Its ranks end a step together, so rank
    0's newest end is the job's to within a step; and a round measures only a job all of whose
    ranks' records landed (``source.landed_through``), rank 0's among them.
    """
    db = check_database_name(database)
    # A part's modification time is when it was written (or merged from parts written before it).
    days = [day for (day,) in client.execute(
        "SELECT DISTINCT max_date FROM system.parts WHERE database = %(db)s AND table = 'iterations' AND active "
        "AND modification_time >= now() - %(idle_s)s",
        {"db": database, "idle_s": math.ceil(idle_s)},
    )]
    if not days:
        return {}
    rows = client.execute(
        f"SELECT job, world, last_ns FROM (SELECT job, max(t_end_ns) AS last_ns FROM {db}.iterations "
        "WHERE day IN %(days)s AND rank = 0 GROUP BY job) ANY INNER JOIN (SELECT job, world FROM "
        f"{db}.jobs FINAL) USING job",
        {"days": tuple(days)},
    )
    if not rows:
        return {}
    since = min(max(int(last) for _, _, last in rows), now_ns) - idle_s * 1e9
    return {str(job): int(world) for job, world, last in rows if int(last) >= since}
