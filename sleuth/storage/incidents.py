"""The incidents in ClickHouse: the localizer's ``IncidentStore`` and what the on-call commands read.

Tables ``incidents``, ``incident_details`` (the whole JSON document), ``suspects`` and
``traversals`` (rows: ``tables.incident_rows``). Each table is read with ``FINAL`` (exact before the
background merge) and joined here in Python: the result sets are small, and the SQL stays within
what ClickHouse 18.16 runs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from sleuth.errors import ConfigError, NotFound
from sleuth.localizer.episodes import Raised
from sleuth.localizer.incident import Incident
from sleuth.localizer.rules import LOCALIZER_RULES
from sleuth.localizer.search import Action, Step
from sleuth.storage.labels import ClickHouseLabelStore
from sleuth.storage.schema import check_database_name
from sleuth.storage.tables import incident_rows

if TYPE_CHECKING:
    from clickhouse_driver import Client

__all__ = ["ClickHouseIncidentStore", "IncidentRow", "incident_by_id", "incident_keys", "list_incidents"]


class ClickHouseIncidentStore:
    """An ``IncidentStore`` (``sleuth.stores``) on the incident tables of ``database``."""

    def __init__(self, client: Client, database: str) -> None:
        self.client = client
        self.database = check_database_name(database)

    def raised(self, job: str) -> list[Raised]:
        """The incidents ClickHouse holds for ``job``, with their top suspects."""
        db = self.database
        rows = self.client.execute(
            f"SELECT incident, iterations, cause FROM {db}.incidents FINAL WHERE job = %(job)s", {"job": job}
        )
        tops: dict[str, list[tuple[int, str]]] = {}
        for incident, position, device in self.client.execute(
            f"SELECT incident, position, device FROM {db}.suspects FINAL WHERE job = %(job)s AND position < %(tied)s",
            {"job": job, "tied": LOCALIZER_RULES.tied_suspects},
        ):
            tops.setdefault(incident, []).append((position, device))
        return [Raised(incident, min(its), max(its), cause, tuple(d for _, d in sorted(tops.get(incident, []))))
                for incident, its, cause in rows if its]

    def incident(self, job: str, incident: str) -> Incident:
        """The whole incident as last written (its ``incident_details`` document)."""
        rows = self.client.execute(
            f"SELECT document FROM {self.database}.incident_details FINAL WHERE job = %(job)s AND incident = %(incident)s",
            {"job": job, "incident": incident},
        )
        if not rows:
            raise LookupError(f"incident {incident!r} of job {job!r} has no row in {self.database}.incident_details")
        return Incident.from_dict(json.loads(rows[0][0]), source=f"{self.database}.incident_details[{incident}]")

    def write(self, incident: Incident) -> None:
        """Insert every table's rows; raises whatever the driver raises."""
        for table, rows in incident_rows(incident, created_ns=time.time_ns()).items():
            if rows:
                self.client.execute(f"INSERT INTO {self.database}.{table} VALUES", rows)


@dataclass(frozen=True)
class IncidentRow:
    job: str
    incident: str
    t_from_ns: int
    t_to_ns: int
    iterations: tuple[int, ...]
    cause: str
    slowdown: float
    gpu_hours_lost: float
    top_suspect: str
    top_score: float
    open: bool  # a firing alert cites it
    verdict: str  # "confirmed", "rejected" or ""
    created_ns: int


def list_incidents(client: Client, database: str, *, job: str | None = None, only_open: bool = False,
                   limit: int = 50) -> list[IncidentRow]:
    """The newest ``limit`` incidents (of ``job``), newest first."""
    db = check_database_name(database)
    where, params = ("WHERE job = %(job)s", {"job": job}) if job is not None else ("", {})
    rows = client.execute(
        f"SELECT job, incident, t_from_ns, t_to_ns, iterations, cause, created_ns FROM {db}.incidents FINAL {where} "
        "ORDER BY created_ns DESC, incident", params,
    )
    details = {(j, i): (s, g) for j, i, s, g in client.execute(
        f"SELECT job, incident, slowdown, gpu_hours_lost FROM {db}.incident_details FINAL {where}", params)}
    top = {(j, i): (d, s) for j, i, d, s in client.execute(
        f"SELECT job, incident, device, score FROM {db}.suspects FINAL {where} {'AND' if where else 'WHERE'} position = 0",
        params)}
    cited = {i for (ids,) in client.execute(f"SELECT incidents FROM {db}.alerts FINAL WHERE status = 'firing'")
             for i in ids}
    judged = ClickHouseLabelStore(client, db).verdicts()
    found = []
    for j, i, t_from, t_to, iterations, cause, created in rows:
        if only_open and i not in cited:
            continue
        slowdown, lost = details.get((j, i), (float("nan"), float("nan")))
        device, score = top.get((j, i), ("", float("nan")))
        found.append(IncidentRow(j, i, t_from, t_to, tuple(iterations), cause, slowdown, lost, device, score,
                                 i in cited, judged.get(i, ""), created))
        if len(found) == limit:
            break
    return found


def incident_by_id(client: Client, database: str, incident_id: str) -> Incident:
    """The incident named ``incident_id`` as the localizer stored it; :class:`NotFound` (naming the
    newest ids) when no job has one of that id."""
    db = check_database_name(database)
    rows = client.execute(
        f"SELECT job, document FROM {db}.incident_details FINAL WHERE incident = %(id)s ORDER BY job",
        {"id": incident_id},
    )
    if not rows:
        near = [i for (i,) in client.execute(
            f"SELECT incident FROM {db}.incidents FINAL ORDER BY created_ns DESC LIMIT 5")]
        hint = f"; the newest are {', '.join(near)}" if near else "; there are no incidents yet"
        raise NotFound(f"unknown incident id {incident_id!r} in database {db}{hint} (list them: sleuth incidents)")
    if len(rows) > 1:
        jobs = ", ".join(job for job, _ in rows)
        raise ConfigError(f"incident id {incident_id!r} names incidents of several jobs ({jobs})")
    job, document = rows[0]
    incident = Incident.from_json(document, source=f"{db}.incident_details {incident_id!r}")
    if incident.steps:
        return incident
    # Documents written before the JSON carried the steps: the traversals table has them (without op).
    steps = client.execute(
        f"SELECT rank, comm, seq, iteration, action FROM {db}.traversals FINAL "
        "WHERE job = %(job)s AND incident = %(id)s ORDER BY step",
        {"job": job, "id": incident_id},
    )
    return replace(incident, steps=tuple(Step(int(r), c, int(s), "", int(i), Action(a)) for r, c, s, i, a in steps))


def incident_keys(client: Client, database: str, jobs: Sequence[str]) -> set[tuple[str, str]]:
    """(job, incident) of every incident of ``jobs``."""
    rows = client.execute(f"SELECT job, incident FROM {check_database_name(database)}.incidents FINAL "
                          "WHERE job IN %(jobs)s", {"jobs": tuple(jobs)})
    return {(str(job), str(incident)) for job, incident in rows}
