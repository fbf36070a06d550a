"""Operator labels in ClickHouse (table ``labels``): on-call verdicts kept as training labels.

A verdict's rows carry ``source = oncall:<verdict>:<incident>``; the table is a ReplacingMergeTree
on the operator, so a later verdict on the same incident replaces the earlier one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sleuth.storage.schema import check_database_name
from sleuth.storage.tables import LABEL_COLUMNS, insert

if TYPE_CHECKING:
    from clickhouse_driver import Client

__all__ = ["ClickHouseLabelStore"]


class ClickHouseLabelStore:
    """A ``LabelStore`` (``sleuth.stores``) on the ``labels`` table of ``database``."""

    def __init__(self, client: Client, database: str) -> None:
        self.client = client
        self.database = check_database_name(database)

    def write(self, rows: list[tuple]) -> None:
        if rows:
            self.client.execute(insert(f"{self.database}.labels", LABEL_COLUMNS), rows)

    def labels(self, jobs: list[str]) -> list[tuple[str, int, str, int, int, bool]]:
        """(job, rank, comm, seq, iteration, abnormal) of every label of ``jobs``."""
        return [
            (job, rank, comm, seq, iteration, bool(abnormal))
            for job, rank, comm, seq, iteration, abnormal in self.client.execute(
                f"SELECT job, rank, comm, seq, iteration, abnormal FROM {self.database}.labels FINAL "
                "WHERE job IN %(jobs)s", {"jobs": tuple(jobs)})
        ]

    def verdicts(self) -> dict[str, str]:
        """incident -> the latest on-call verdict (``sleuth ack``), from the labels' source."""
        rows = self.client.execute(
            f"SELECT source, max(labeled_ns) AS t FROM {self.database}.labels FINAL "
            "WHERE startsWith(source, 'oncall:') GROUP BY source ORDER BY t"
        )
        found: dict[str, str] = {}
        for source, _t in rows:  # oldest first: the latest verdict wins
            _prefix, verdict, incident = source.split(":", 2)
            found[incident] = verdict
        return found
