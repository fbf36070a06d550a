"""Publishing irregularities to Kafka (``Settings.irregularities_topic``) as JSON, keyed by job.

The localizer consumes the topic; one message per irregular iteration (``Irregularity.to_dict``).
Delivery is at least once: a worker that replays a batch after a crash republishes its
irregularities, so consumers de-duplicate on (job, iteration).
"""

from __future__ import annotations

import json

from sleuth.irregularity import Irregularity
from sleuth.settings import Settings
from sleuth.stores import Bus
from sleuth.stream import connect

__all__ = ["IrregularityPublisher", "decode", "encode", "job_key"]


class IrregularityPublisher:
    """A callable for ``Worker(publish=...)``; sends and waits for the broker's acknowledgement."""

    def __init__(self, settings: Settings, *, producer: Bus | None = None) -> None:
        self.topic = settings.irregularities_topic
        self._producer = producer or connect.kafka_producer(settings)

    def __call__(self, irregularities: list[Irregularity]) -> None:
        futures = [self._producer.send(self.topic, key=job_key(i.job), value=encode(i)) for i in irregularities]
        for future in futures:
            future.get(timeout=30)

    def close(self) -> None:
        self._producer.close(timeout=10)


def job_key(job: str) -> bytes:
    """The Kafka key of ``job``'s irregularities: what places them, and so which localizer owns the job."""
    return job.encode()


def encode(irregularity: Irregularity) -> bytes:
    return json.dumps(irregularity.to_dict(), separators=(",", ":")).encode()


def decode(payload: bytes) -> dict:
    """A message's payload as the dict ``Irregularity.to_dict`` gave."""
    return json.loads(payload)
