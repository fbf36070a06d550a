"""The benign pauses in ClickHouse: the streaming localizer's ``PauseStore`` (table ``pauses``).

A pause is recorded once judged benign, so that a replay after a restart neither judges nor counts
it again, and a device that paused before pages when it pauses again, whichever localizer sees it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from sleuth.localizer.episodes import Raised
from sleuth.localizer.incident import Incident
from sleuth.localizer.rules import LOCALIZER_RULES
from sleuth.storage.schema import check_database_name
from sleuth.storage.tables import PAUSE_COLUMNS, insert, pause_row

if TYPE_CHECKING:
    from clickhouse_driver import Client

__all__ = ["ClickHousePauseStore"]


class ClickHousePauseStore:
    """A ``PauseStore`` (``sleuth.stores``) on the ``pauses`` table of ``database``."""

    def __init__(self, client: Client, database: str) -> None:
        self.client = client
        self.database = check_database_name(database)

    def paused(self, job: str) -> list[Raised]:
        """The pauses recorded for ``job``, with their first suspects."""
        rows = self.client.execute(
            f"SELECT incident, iterations, tops FROM {self.database}.pauses FINAL WHERE job = %(job)s", {"job": job}
        )
        return [Raised(incident, min(its), max(its), "", tuple(tops)) for incident, its, tops in rows if its]

    def record(self, pause: Incident) -> None:
        """Keep ``pause``, replacing an earlier version of the same (job, incident); raises what the driver raises."""
        row = pause_row(pause, tops=LOCALIZER_RULES.tied_suspects, recorded_ns=time.time_ns())
        self.client.execute(insert(f"{self.database}.pauses", PAUSE_COLUMNS), [row])
