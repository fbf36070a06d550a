"""Every table's row: its column order and the mapping between rows and sleuth's types.

The tables themselves are created by ``schema``'s migrations; records, whose layout the DDL is
generated from, are in ``records``. A row here lists its values in the order of the columns named
beside it, which is the order every ``INSERT`` and ``SELECT`` of that table uses.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from sleuth.oncall.alerts import Alert, AlertStatus, Severity

if TYPE_CHECKING:
    from sleuth.jobspec import JobSpec
    from sleuth.localizer.incident import Incident

__all__ = ["ABNORMAL_COLUMNS", "ALERT_COLUMNS", "ALERT_FIELDS", "DROP_COLUMNS", "ITERATION_COLUMNS", "JOB_COLUMNS",
           "LABEL_COLUMNS", "PAUSE_COLUMNS", "alert_from_row", "alert_row", "incident_rows", "insert", "job_row",
           "pause_row"]

ITERATION_COLUMNS = ("job", "rank", "iteration", "t_start_ns", "t_end_ns")
JOB_COLUMNS = ("job", "world", "spec", "registered_ns")
ABNORMAL_COLUMNS = ("job", "rank", "comm", "seq", "iteration", "op", "peer", "t_start_ns", "duration_ns", "score",
                    "detected_ns")
DROP_COLUMNS = ("job", "rank", "before_ns", "dropped", "reported_ns")
LABEL_COLUMNS = ("job", "rank", "comm", "seq", "iteration", "abnormal", "source", "labeled_ns")
ALERT_COLUMNS = ("job", "device", "starts_ns", "status", "severity", "cause", "kind", "score", "incident", "incidents",
                 "slowdown", "gpu_hours_lost", "first_irregular", "last_irregular", "ends_ns", "advice", "resolution",
                 "announced", "updated_ns")
PAUSE_COLUMNS = ("job", "incident", "iterations", "tops", "document", "recorded_ns")
#: The alert columns an ``Alert`` is made of.
ALERT_FIELDS = ALERT_COLUMNS[:-2]


def insert(table: str, columns: tuple[str, ...]) -> str:
    """``INSERT INTO table (columns) VALUES``: the driver appends the rows."""
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES"


def job_row(spec: JobSpec, *, registered_ns: int) -> tuple:
    """A ``jobs`` row: the spec as compact JSON (``JobSpec.from_json`` reads it back)."""
    return spec.job, spec.world, json.dumps(spec.to_dict(), separators=(",", ":")), registered_ns


def incident_rows(incident: Incident, *, created_ns: int) -> dict[str, list[tuple]]:
    """An incident's rows per table, in each table's column order (inserted without a column list):
    one ``incidents`` row, one ``incident_details`` row (fetch counts, impact, advice and the whole
    JSON document), one ``suspects`` row per suspect and one ``traversals`` row per search step."""
    roots = json.dumps([r.to_dict() for r in incident.roots])
    return {
        "incidents": [
            (
                incident.job, incident.incident, incident.t_from_ns, incident.t_to_ns, list(incident.iterations),
                incident.cause.value, roots, list(incident.traversal), incident.impact.slowdown, created_ns,
            )
        ],
        "incident_details": [
            (
                incident.job, incident.incident, incident.ranks_fetched, incident.world, incident.impact.slowdown,
                incident.impact.gpu_hours_lost, incident.advice, incident.to_json(), created_ns,
            )
        ],
        "suspects": [
            (incident.job, incident.incident, s.device, s.kind.value, s.score, position, created_ns)
            for position, s in enumerate(incident.suspects)
        ],
        "traversals": [
            (incident.job, incident.incident, k, s.rank, s.comm, s.seq, s.iteration, s.action.value, created_ns)
            for k, s in enumerate(incident.steps)
        ],
    }


def pause_row(pause: Incident, *, tops: int, recorded_ns: int) -> tuple:
    """A ``pauses`` row (``PAUSE_COLUMNS``): the pause's iterations, its first ``tops`` suspects' devices
    and the whole JSON document."""
    return (pause.job, pause.incident, list(pause.iterations), [s.device for s in pause.suspects[:tops]],
            pause.to_json(), recorded_ns)


def alert_row(a: Alert, *, announced: bool, updated_ns: int) -> tuple:
    """An ``alerts`` row (``ALERT_COLUMNS``) of one version of an alert."""
    return (a.job, a.device, a.starts_ns, a.status.value, a.severity.value, a.cause, a.kind, a.score, a.incident,
            list(a.incidents), a.slowdown, a.gpu_hours_lost, a.first_irregular, a.last_irregular, a.ends_ns, a.advice,
            a.resolution, int(announced), updated_ns)


def alert_from_row(row: tuple) -> Alert:
    """The ``Alert`` of a row of ``ALERT_FIELDS``."""
    (job, device, starts_ns, status, severity, cause, kind, score, incident, incidents, slowdown, lost, first, last,
     ends_ns, advice, resolution) = row
    return Alert(job=job, device=device, starts_ns=starts_ns, status=AlertStatus(status), severity=Severity(severity),
                 cause=cause, kind=kind, score=score, incident=incident, incidents=tuple(incidents), slowdown=slowdown,
                 gpu_hours_lost=lost, first_irregular=first, last_irregular=last, ends_ns=ends_ns,
                 advice=advice, resolution=resolution)
