"""A :class:`~sleuth.sources.RecordSource` over ClickHouse: one job's ``records``, ``iterations`` and ``jobs`` rows.

The localizer fetches progressively (``sleuth.localizer.fetch``): each call of ``ranks_records``
is one query for a whole group of ranks and the window's iterations. Rows a replay inserted twice
count once even before ClickHouse merged them (``FINAL``, or for records ``select_records``).

``through`` bounds the source to the iterations up to and including it: the streaming localizer
sets it to the last iteration whose records have landed for every rank (``landed_through``), so
that a window never takes in an iteration half written.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from sleuth.errors import UnknownJob
from sleuth.jobspec import JobSpec
from sleuth.records import IterationBatch, RecordBatch
from sleuth.storage import records_table
from sleuth.storage.schema import check_database_name

if TYPE_CHECKING:
    from clickhouse_driver import Client

__all__ = ["ClickHouseSource", "landed_through", "read_job_spec"]

_ITERATION_COLUMNS = ", ".join(f.name for f in IterationBatch.FIELDS)
#: The parsed specs kept (JobSpec is frozen): one per job a localizer measures, each up to ~10 MB at 16k ranks.
_SPECS_KEPT = 16


class ClickHouseSource:
    """The records of ``job`` in ``database``; fails at construction when the job was never registered."""

    def __init__(self, client: Client, database: str, job: str, *, through: int | None = None) -> None:
        self.client = client
        self.database = check_database_name(database)
        self.job = job
        self.through = through
        self._spec = read_job_spec(client, database, job)

    def job_spec(self) -> JobSpec:
        return self._spec

    def iteration_ids(self) -> np.ndarray:
        where, params = self._where(ranks=None, iterations=None)
        rows = self.client.execute(
            f"SELECT DISTINCT iteration FROM {self.database}.iterations FINAL WHERE {where} ORDER BY iteration", params
        )
        return np.array([it for (it,) in rows], dtype=np.int64)

    def ranks_records(
        self, ranks: Iterable[int] | None, *, iterations: Iterable[int] | None = None,
        comms: Iterable[str] | None = None,
    ) -> RecordBatch:
        where, params = self._where(ranks=ranks, iterations=iterations)
        if where is None:
            return RecordBatch.empty()
        if comms is not None:
            params["comm"] = tuple(sorted({str(c) for c in comms}))
            if not params["comm"]:
                return RecordBatch.empty()
            where += " AND comm IN %(comm)s"
        return records_table.select_records(self.client, f"{self.database}.records", where=where, params=params)

    def iterations(
        self, *, ranks: Iterable[int] | None = None, iterations: Iterable[int] | None = None
    ) -> IterationBatch:
        where, params = self._where(ranks=ranks, iterations=iterations)
        if where is None:
            return IterationBatch.empty()
        return records_table.select_batch(
            self.client, IterationBatch,
            f"SELECT {_ITERATION_COLUMNS} FROM {self.database}.iterations FINAL WHERE {where} ORDER BY rank, iteration",
            params,
        )

    def _where(self, *, ranks: Iterable[int] | None, iterations: Iterable[int] | None) -> tuple[str | None, dict]:
        """The filter for this job, the ranks and the iterations (None: an empty selection, nothing to ask)."""
        clauses = ["job = %(job)s"]
        params: dict[str, object] = {"job": self.job}
        for column, wanted in (("rank", ranks), ("iteration", iterations)):
            if wanted is None:
                continue
            values = tuple(sorted({int(v) for v in wanted}))
            if not values:
                return None, params
            clauses.append(f"{column} IN %({column})s")
            params[column] = values
        if self.through is not None:
            clauses.append("iteration <= %(through)s")
            params["through"] = int(self.through)
        return " AND ".join(clauses), params


def read_job_spec(client: Client, database: str, job: str) -> JobSpec:
    """The latest registered spec of ``job`` (the ``jobs`` table keeps the last registration)."""
    rows = client.execute(f"SELECT spec FROM {check_database_name(database)}.jobs FINAL WHERE job = %(job)s",
                          {"job": job})
    if not rows:
        raise UnknownJob(f"job {job!r} is not registered: no row in ClickHouse table {database}.jobs")
    return _parsed_spec(rows[0][0], f"{database}.jobs[{job}]")


@lru_cache(maxsize=_SPECS_KEPT)
def _parsed_spec(text: str, source: str) -> JobSpec:
    """``JobSpec.from_json``, once per text: a streaming round reads its job's spec anew (it may be
    registered again), and a spec of thousands of ranks takes a fifth of a second to parse."""
    return JobSpec.from_json(text, source=source)


def landed_through(client: Client, database: str, job: str, *, world: int, since: int) -> int | None:
    """The last iteration (>= ``since``) whose records have landed for every one of the ``world`` ranks.

    A rank's records arrive in order (one Kafka partition per (job, rank), batches inserted in
    turn), so once a rank has records of iteration m, all of its earlier iterations are complete;
    m itself may still be arriving. Hence: the smallest over ranks of (latest iteration - 1).
    None while some rank has no records at or after ``since``.
    """
    rows = client.execute(
        f"SELECT rank, max(iteration) FROM {check_database_name(database)}.records "
        "WHERE job = %(job)s AND iteration >= %(since)s GROUP BY rank",
        {"job": job, "since": int(since)},
    )
    if len(rows) < world:
        return None
    return min(latest for _, latest in rows) - 1
