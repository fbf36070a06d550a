"""The alerter's state in ClickHouse (table ``alerts``, schema migrations 7, 9, 10 and 14), so it survives a restart.

Every change of an alert inserts a new row version; the ReplacingMergeTree keeps the latest per
(job, device, starts_ns), and reads use ``FINAL`` so they are exact before the background merge.
``announced`` says whether the receivers were told of that version: a change is saved unannounced,
announced, then saved again announced, so a crash in between leaves it to be announced after the restart.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from sleuth.oncall.alerts import Alert, AlertStatus
from sleuth.storage.schema import check_database_name
from sleuth.storage.tables import ALERT_COLUMNS, ALERT_FIELDS, alert_from_row, alert_row, insert

if TYPE_CHECKING:
    from clickhouse_driver import Client

__all__ = ["ClickHouseAlertStore"]


class ClickHouseAlertStore:
    """An ``AlertStore`` (``sleuth.stores``) on the ``alerts`` table of ``database``."""

    def __init__(self, client: Client, database: str) -> None:
        self.client = client
        self.table = f"{check_database_name(database)}.alerts"

    def save(self, alerts: list[Alert], *, announced: bool = True) -> None:
        """A new row version of each alert; ``announced``: the receivers were told of this version."""
        if not alerts:
            return
        # Strictly increasing versions even within one nanosecond tick: the newest row must win.
        now = time.time_ns()
        rows = [alert_row(a, announced=announced, updated_ns=now + k) for k, a in enumerate(alerts)]
        self.client.execute(insert(self.table, ALERT_COLUMNS), rows)

    def load(self, *, status: AlertStatus | None = None, job: str | None = None,
             announced: bool | None = None) -> list[Alert]:
        """The latest version of each alert, of ``status``, ``job`` and announcement state where given."""
        where: list[str] = []
        params: dict[str, object] = {}
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
            f"SELECT {', '.join(ALERT_FIELDS)} FROM {self.table} FINAL {clause} ORDER BY job, device, starts_ns", params
        )
        return [alert_from_row(row) for row in rows]
