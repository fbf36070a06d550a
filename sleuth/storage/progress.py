"""How far jobs got, from ClickHouse ``iterations``: what resolves their alerts."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from sleuth.storage.schema import check_database_name

if TYPE_CHECKING:
    from clickhouse_driver import Client

__all__ = ["completed_iterations"]


def completed_iterations(client: Client, database: str, jobs: Iterable[str]) -> dict[str, int]:
    """job -> the last iteration that every rank of the job has finished (jobs with no iterations are left out)."""
    jobs = sorted(set(jobs))
    if not jobs:
        return {}
    rows = client.execute(
        f"SELECT job, min(last) FROM (SELECT job, rank, max(iteration) AS last FROM {check_database_name(database)}.iterations "
        "WHERE job IN %(jobs)s GROUP BY job, rank) GROUP BY job",
        {"jobs": tuple(jobs)},
    )
    return {job: int(last) for job, last in rows}
