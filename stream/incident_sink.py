"""Where the streaming localizer's incidents go: the incidents Kafka topic and ClickHouse.

Order matters for what a crash can cost. The incident is published to Kafka first (JSON, keyed
by job, waiting for the broker's acknowledgement) and written to ClickHouse second; ClickHouse
is what de-duplication reads (``raised``). A crash between the two therefore never loses an
alert: the replayed irregularities find no incident in ClickHouse and raise it again, at worst
twice on Kafka with the same incident id. The other order could lose it.

A message must also fit Kafka: its default limit is 1 MiB (the broker's ``message.max.bytes``
and the producer's ``max_request_size``). A search that walked far can record more steps than
that holds, so an oversized incident goes out without them (``steps_omitted`` says how many) and,
should that still be too large, without its traversal too. ClickHouse keeps every step and
``sleuth incident show`` reads them from there.
"""

from __future__ import annotations

import json
import time
from typing import Any

from sleuth.localizer import Incident
from sleuth.localizer.episodes import Raised
from sleuth.localizer.rules import LOCALIZER_RULES
from sleuth.stream.schema import check_database_name

__all__ = ["MAX_MESSAGE_BYTES", "IncidentSink", "kafka_value"]

#: The largest incident message sent, with room under Kafka's 1 MiB for the record batch around it.
MAX_MESSAGE_BYTES = 900 * 1024


def kafka_value(incident: Incident, *, limit: int = MAX_MESSAGE_BYTES) -> bytes:
    """The incident's JSON for the incidents topic, the search's steps (then its traversal) left out
    when the whole would pass ``limit`` bytes; ``steps_omitted``/``traversal_omitted`` count what was."""
    value = incident.to_json().encode()
    if len(value) <= limit:
        return value
    document = incident.to_dict()
    document["steps"], document["steps_omitted"] = [], len(incident.steps)
    value = json.dumps(document).encode()
    if len(value) <= limit:
        return value
    document["traversal"], document["traversal_omitted"] = [], len(incident.traversal)
    return json.dumps(document).encode()


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
        """Publish, then insert every table's rows; raises whatever Kafka or the driver raises."""
        self.producer.send(self.topic, key=incident.job.encode(), value=kafka_value(incident)).get(timeout=30)
        for table, rows in incident.clickhouse_rows(created_ns=time.time_ns()).items():
            if rows:
                self.client.execute(f"INSERT INTO {self.database}.{table} VALUES", rows)
