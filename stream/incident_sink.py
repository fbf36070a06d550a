"""Where the streaming localizer's incidents go: the incidents Kafka topic and ClickHouse.

Order matters for what a crash can cost. The incident is published to Kafka first (JSON, keyed
by job, waiting for the broker's acknowledgement) and written to ClickHouse second; ClickHouse
is what de-duplication reads (``raised``). A crash between the two therefore never loses an
alert: the replayed irregularities find no incident in ClickHouse and raise it again, at worst
twice on Kafka with the same incident id. The other order could lose it.
"""

from __future__ import annotations

import time
from typing import Any

from sleuth.localizer import Incident
from sleuth.stream.episodes import Raised
from sleuth.stream.schema import check_database_name

__all__ = ["IncidentSink"]


class IncidentSink:
    def __init__(self, client: Any, database: str, *, producer: Any, topic: str) -> None:
        self.client = client
        self.database = check_database_name(database)
        self.producer = producer
        self.topic = topic

    def raised(self, job: str) -> list[Raised]:
        """The incidents ClickHouse holds for ``job``, with their top suspects."""
        db = self.database
        rows = self.client.execute(
            f"SELECT incident, iterations, cause FROM {db}.incidents FINAL WHERE job = %(job)s", {"job": job}
        )
        tops = dict(self.client.execute(
            f"SELECT incident, device FROM {db}.suspects FINAL WHERE job = %(job)s AND position = 0", {"job": job}
        ))
        return [Raised(incident, min(its), max(its), cause, tops.get(incident, ""))
                for incident, its, cause in rows if its]

    def write(self, incident: Incident) -> None:
        """Publish, then insert every table's rows; raises whatever Kafka or the driver raises."""
        self.producer.send(self.topic, key=incident.job.encode(), value=incident.to_json().encode()).get(timeout=30)
        for table, rows in incident.clickhouse_rows(created_ns=time.time_ns()).items():
            if rows:
                self.client.execute(f"INSERT INTO {self.database}.{table} VALUES", rows)
