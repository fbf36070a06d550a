"""Incidents and their job's records, read back from ClickHouse for ``sleuth report`` and ``sleuth serve``.

The tables are those of ``sleuth.stream.schema``: the localizer writes an incident with
``Incident.clickhouse_rows`` (``incidents``, ``incident_details`` with the whole JSON document,
``suspects``, ``traversals``); the workers write ``records``, ``iterations`` and ``jobs``.

:func:`clickhouse_record_source` is the one place the report reads records from ClickHouse: a
minimal ``RecordSource`` over plain SELECTs, to be replaced by the stream's own ClickHouse source.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from sleuth.errors import ConfigError, NotFound
from sleuth.jobspec import JobSpec
from sleuth.localizer.incident import Incident
from sleuth.localizer.search import Action, Step
from sleuth.records import IterationBatch, RecordBatch
from sleuth.sources import RecordSource
from sleuth.stream.clickhouse_records import select_records
from sleuth.stream.schema import check_database_name

__all__ = ["IncidentSummary", "clickhouse_record_source", "incident_by_id", "list_incidents"]


@dataclass(frozen=True)
class IncidentSummary:
    """One line of the incident list."""

    job: str
    incident: str
    cause: str
    t_from_ns: int
    iterations: int
    slowdown: float
    top_suspect: str  # "" when none
    created_ns: int


def incident_by_id(client: Any, database: str, incident_id: str) -> Incident:
    """The incident named ``incident_id``; :class:`NotFound` when no job has one of that id."""
    check_database_name(database)
    rows = client.execute(
        f"SELECT job, document FROM {database}.incident_details FINAL WHERE incident = %(id)s ORDER BY job",
        {"id": incident_id},
    )
    if not rows:
        raise NotFound(f"no incident {incident_id!r} in ClickHouse database {database}")
    if len(rows) > 1:
        jobs = ", ".join(job for job, _ in rows)
        raise ConfigError(f"incident id {incident_id!r} names incidents of several jobs ({jobs})")
    job, document = rows[0]
    incident = Incident.from_json(document, source=f"{database}.incident_details {incident_id!r}")
    if incident.steps:
        return incident
    # Documents written before the JSON carried the steps: the traversals table has them (without op).
    steps = client.execute(
        f"SELECT rank, comm, seq, iteration, action FROM {database}.traversals FINAL "
        "WHERE job = %(job)s AND incident = %(id)s ORDER BY step",
        {"job": job, "id": incident_id},
    )
    return replace(incident, steps=tuple(Step(int(r), c, int(s), "", int(i), Action(a)) for r, c, s, i, a in steps))


def list_incidents(client: Any, database: str, *, limit: int = 500) -> list[IncidentSummary]:
    """The latest ``limit`` incidents, newest first, with their top suspect."""
    check_database_name(database)
    rows = client.execute(
        f"SELECT job, incident, cause, t_from_ns, length(iterations), impact, created_ns "
        f"FROM {database}.incidents FINAL ORDER BY created_ns DESC, job, incident LIMIT {int(limit)}"
    )
    top = {
        (job, incident): device
        for job, incident, device in client.execute(
            f"SELECT job, incident, device FROM {database}.suspects FINAL WHERE position = 0"
        )
    }
    return [
        IncidentSummary(job, incident, cause, int(t_from), int(n), float(impact), top.get((job, incident), ""),
                        int(created))
        for job, incident, cause, t_from, n, impact, created in rows
    ]


def clickhouse_record_source(client: Any, database: str, job: str) -> RecordSource:
    """The records of ``job`` in ClickHouse as a ``RecordSource`` (the report's only read of them)."""
    check_database_name(database)
    return _ClickHouseReads(client, database, job)


class _ClickHouseReads:
    def __init__(self, client: Any, database: str, job: str) -> None:
        self._client = client
        self._db = database
        self._job = job
        self._spec: JobSpec | None = None

    def job_spec(self) -> JobSpec:
        if self._spec is None:
            rows = self._client.execute(
                f"SELECT spec FROM {self._db}.jobs FINAL WHERE job = %(job)s", {"job": self._job}
            )
            if not rows:
                raise NotFound(f"job {self._job!r} has no registered spec in {self._db}.jobs")
            self._spec = JobSpec.from_json(rows[0][0], source=f"{self._db}.jobs {self._job!r}")
        return self._spec

    def iteration_ids(self) -> np.ndarray:
        rows = self._client.execute(
            f"SELECT DISTINCT iteration FROM {self._db}.iterations WHERE job = %(job)s ORDER BY iteration",
            {"job": self._job},
        )
        return np.array([i for (i,) in rows], dtype=np.int64)

    def _where(self, ranks: Iterable[int] | None, iterations: Iterable[int] | None) -> tuple[str, dict] | None:
        clauses, params = ["job = %(job)s"], {"job": self._job}
        for column, values in (("rank", ranks), ("iteration", iterations)):
            if values is None:
                continue
            wanted = tuple(int(v) for v in values)
            if not wanted:
                return None  # nothing asked for: nothing to select
            clauses.append(f"{column} IN %({column}s)s")
            params[f"{column}s"] = wanted
        return " AND ".join(clauses), params

    def ranks_records(self, ranks: Iterable[int], *, iterations: Iterable[int] | None = None) -> RecordBatch:
        where = self._where(ranks, iterations)
        if where is None:
            return RecordBatch.empty()
        return select_records(self._client, f"{self._db}.records", where=where[0], params=where[1])

    def iterations(
        self, *, ranks: Iterable[int] | None = None, iterations: Iterable[int] | None = None
    ) -> IterationBatch:
        where = self._where(ranks, iterations)
        if where is None:
            return IterationBatch.empty()
        columns = self._client.execute(
            f"SELECT rank, iteration, t_start_ns, t_end_ns FROM {self._db}.iterations FINAL "
            f"WHERE {where[0]} ORDER BY rank, iteration",
            where[1], columnar=True,
        )
        if not columns or not len(columns[0]):
            return IterationBatch.empty()
        rank, iteration, start, end = (np.asarray(c, dtype=np.int64) for c in columns)
        return IterationBatch.from_columns(job=self._job, rank=rank, iteration=iteration, t_start_ns=start, t_end_ns=end)
