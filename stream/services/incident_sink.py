"""Where the streaming localizer's incidents go: the incidents Kafka topic and ClickHouse.

Order matters for what a crash can cost. The incident is published to Kafka first (JSON, keyed
by job, waiting for the broker's acknowledgement) and written to ClickHouse second
(``sleuth.storage.incidents``); ClickHouse is what de-duplication reads (``raised``). A crash
between the two therefore never loses an alert: the replayed irregularities find no incident in
ClickHouse and raise it again, at worst twice on Kafka with the same incident id. The other order
could lose it.

A message must also fit Kafka: its default limit is 1 MiB (the broker's ``message.max.bytes``
and the producer's ``max_request_size``). A search that walked far can record more steps than
that holds, so an oversized incident goes out without them (``steps_omitted`` says how many) and,
should that still be too large, without its traversal too. ClickHouse keeps every step and
``sleuth incident show`` reads them from there.
"""

from __future__ import annotations

import json

from sleuth.localizer import Incident
from sleuth.localizer.episodes import Raised
from sleuth.stores import Bus, IncidentStore

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
    """An ``IncidentStore`` that publishes each incident on the bus before ``store`` keeps it."""

    def __init__(self, store: IncidentStore, *, bus: Bus, topic: str) -> None:
        self.store = store
        self.bus = bus
        self.topic = topic

    def raised(self, job: str) -> list[Raised]:
        """The incidents the store holds for ``job``, with their top suspects."""
        return self.store.raised(job)

    def incident(self, job: str, incident: str) -> Incident:
        """The whole incident as last written."""
        return self.store.incident(job, incident)

    def write(self, incident: Incident) -> None:
        """Publish, then store; raises whatever Kafka or the store raises."""
        self.bus.send(self.topic, key=incident.job.encode(), value=kafka_value(incident)).get(timeout=30)
        self.store.write(incident)
