"""The alerter's state in ClickHouse (table ``alerts``, schema migrations 7, 9 and 10), so it survives a restart.

Every change of an alert inserts a new row version; the ReplacingMergeTree keeps the latest per
(job, device, starts_ns), and reads use ``FINAL`` so they are exact before the background merge.
``announced`` says whether the receivers were told of that version: a change is saved unannounced,
announced, then saved again announced, so a crash in between leaves it to be announced after the restart.
"""

from __future__ import annotations

import time
from typing import Any

from sleuth.oncall.alerts import Alert, AlertStatus, Severity
from sleuth.stream.schema import check_database_name

__all__ = ["COLUMNS", "AlertStore"]

COLUMNS = ("job", "device", "starts_ns", "status", "severity", "cause", "kind", "score", "incident", "incidents",
           "slowdown", "gpu_hours_lost", "first_irregular", "last_irregular", "ends_ns", "advice", "announced",
           "updated_ns")
# The columns an ``Alert`` is made of.
_FIELDS = COLUMNS[:-2]


class AlertStore:
    def __init__(self, client: Any, database: str) -> None:
        self.client = client
        self.table = f"{check_database_name(database)}.alerts"

    def save(self, alerts: list[Alert], *, announced: bool = True) -> None:
        """A new row version of each alert; ``announced``: the receivers were told of this version."""
        if not alerts:
            return
        # Strictly increasing versions even within one nanosecond tick: the newest row must win.
        now = time.time_ns()
        rows = [
            (a.job, a.device, a.starts_ns, a.status.value, a.severity.value, a.cause, a.kind, a.score, a.incident,
             list(a.incidents), a.slowdown, a.gpu_hours_lost, a.first_irregular, a.last_irregular, a.ends_ns, a.advice,
             int(announced), now + k)
            for k, a in enumerate(alerts)
        ]
        self.client.execute(f"INSERT INTO {self.table} ({', '.join(COLUMNS)}) VALUES", rows)

    def load(self, *, status: AlertStatus | None = None, job: str | None = None,
             announced: bool | None = None) -> list[Alert]:
        """The latest version of each alert, of ``status``, ``job`` and announcement state where given."""
        where, params = [], {}
        if status is not None:
            where.append("status = %(status)s")
            params["status"] = status.value
        if job is not None:
            where.append("job = %(job)s")
            params["job"] = job
        if announced is not None:
            where.append("announced = %(announced)s")
            params["announced"] = int(announced)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = self.client.execute(
            f"SELECT {', '.join(_FIELDS)} FROM {self.table} FINAL {clause} ORDER BY job, device, starts_ns", params
        )
        return [_alert(row) for row in rows]


def _alert(row: tuple) -> Alert:
    (job, device, starts_ns, status, severity, cause, kind, score, incident, incidents, slowdown, lost, first, last,
     ends_ns, advice) = row
    return Alert(job=job, device=device, starts_ns=starts_ns, status=AlertStatus(status), severity=Severity(severity),
                 cause=cause, kind=kind, score=score, incident=incident, incidents=tuple(incidents), slowdown=slowdown,
                 gpu_hours_lost=lost, first_irregular=first, last_irregular=last, ends_ns=ends_ns,
                 advice=advice)
