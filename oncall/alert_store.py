"""The alerter's state in ClickHouse (table ``alerts``, schema migrations 7 and 9), so it survives a restart.

Every change of an alert inserts a new row version; the ReplacingMergeTree keeps the latest per
(job, device, starts_ns), and reads use ``FINAL`` so they are exact before the background merge.
"""

from __future__ import annotations

import time
from typing import Any

from sleuth.oncall.alerts import Alert, AlertStatus, Severity
from sleuth.stream.schema import check_database_name

__all__ = ["COLUMNS", "AlertStore"]

COLUMNS = ("job", "device", "starts_ns", "status", "severity", "cause", "kind", "score", "incident", "incidents",
           "slowdown", "gpu_hours_lost", "first_irregular", "last_irregular", "ends_ns", "advice", "updated_ns")


class AlertStore:
    def __init__(self, client: Any, database: str) -> None:
        self.client = client
        self.table = f"{check_database_name(database)}.alerts"

    def save(self, alerts: list[Alert]) -> None:
        if not alerts:
            return
        # Strictly increasing versions even within one nanosecond tick: the newest row must win.
        now = time.time_ns()
        rows = [
            (a.job, a.device, a.starts_ns, a.status.value, a.severity.value, a.cause, a.kind, a.score, a.incident,
             list(a.incidents), a.slowdown, a.gpu_hours_lost, a.first_irregular, a.last_irregular, a.ends_ns, a.advice,
             now + k)
            for k, a in enumerate(alerts)
        ]
        self.client.execute(f"INSERT INTO {self.table} ({', '.join(COLUMNS)}) VALUES", rows)

    def load(self, *, status: AlertStatus | None = None, job: str | None = None) -> list[Alert]:
        where, params = [], {}
        if status is not None:
            where.append("status = %(status)s")
            params["status"] = status.value
        if job is not None:
            where.append("job = %(job)s")
            params["job"] = job
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = self.client.execute(
            f"SELECT {', '.join(COLUMNS[:-1])} FROM {self.table} FINAL {clause} ORDER BY job, device, starts_ns", params
        )
        return [_alert(row) for row in rows]


def _alert(row: tuple) -> Alert:
    (job, device, starts_ns, status, severity, cause, kind, score, incident, incidents, slowdown, lost, first, last,
     ends_ns, advice) = row
    return Alert(job=job, device=device, starts_ns=starts_ns, status=AlertStatus(status), severity=Severity(severity),
                 cause=cause, kind=kind, score=score, incident=incident, incidents=tuple(incidents), slowdown=slowdown,
                 gpu_hours_lost=lost, first_irregular=first, last_irregular=last, ends_ns=ends_ns,
                 advice=advice)
