"""What the on-call commands read from ClickHouse: incidents, their details, alerts and verdicts.

Each table is read with ``FINAL`` (exact before the background merge) and joined here in Python:
the result sets are small, and the SQL stays within what ClickHouse 18.16 runs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from sleuth.errors import ConfigError, NotFound
from sleuth.localizer.incident import Incident
from sleuth.localizer.search import Action, Step
from sleuth.stream.schema import check_database_name

__all__ = ["IncidentRow", "incident_by_id", "list_incidents", "verdicts"]


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


def list_incidents(client: Any, database: str, *, job: str | None = None, only_open: bool = False,
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
    judged = verdicts(client, db)
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


def incident_by_id(client: Any, database: str, incident_id: str) -> Incident:
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


def verdicts(client: Any, database: str) -> dict[str, str]:
    """incident -> the latest on-call verdict (``sleuth ack``), from the labels' source."""
    rows = client.execute(
        f"SELECT source, max(labeled_ns) AS t FROM {check_database_name(database)}.labels FINAL "
        "WHERE startsWith(source, 'oncall:') GROUP BY source ORDER BY t"
    )
    found: dict[str, str] = {}
    for source, _t in rows:  # oldest first: the latest verdict wins
        _prefix, verdict, incident = source.split(":", 2)
        found[incident] = verdict
    return found
