"""The worker (``sleuth worker``): Kafka ``sleuth.records`` -> numpy -> detectors -> ClickHouse.

Delivery: at least once into ClickHouse, exactly once in query results. The loop is

    poll a batch of messages -> decode into one columnar batch per kind -> update per-rank state
    -> run the detectors -> insert into ClickHouse (retrying until it is acknowledged)
    -> commit exactly the offsets just inserted

so a crash anywhere before the commit replays those messages to whichever worker owns the
partition next, and the ReplacingMergeTree tables fold the replay into the rows already there.

Why kafka-python's consumer and not a faust-streaming agent: faust acknowledges an event when the
agent's iteration moves past it and commits acknowledged offsets on its own timer
(``broker_commit_every`` / ``broker_commit_interval``), independently of any external sink. To
commit only after a ClickHouse insert we would have to hold back faust's acks across
``stream.take()`` buffers and disable its commit timer, against the grain of its design and of
the 0.15 code base. The consumer below gives the same partition sharing (consumer groups) with
the commit point under our control; the processing itself is the same batched numpy code either
way.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sleuth.errors import ServiceError
from sleuth.jobspec import JobSpec
from sleuth.records import IterationBatch, RecordBatch
from sleuth.settings import Settings
from sleuth.stream import kafka_records
from sleuth.stream.detect import Detector
from sleuth.stream.rank_state import RankState
from sleuth.stream.sink import ClickHouseSink

_log = logging.getLogger(__name__)


@dataclass
class Decoded:
    records: RecordBatch
    iterations: IterationBatch
    jobs: list[JobSpec]


def decode(messages: Sequence[Any]) -> Decoded:
    """The payloads of Kafka messages, one columnar batch per kind.

    A message that cannot be decoded (the gateway validated it, so this means a foreign producer
    or a bug) is logged and skipped: stopping the partition forever on it would lose everything after.
    """
    records, iterations, jobs = [], [], []
    for message in messages:
        kind = kafka_records.kind_of(message.headers)
        try:
            if kind == kafka_records.RECORDS:
                records.append(kafka_records.from_message(message.value))
            elif kind == kafka_records.ITERATIONS:
                iterations.append(kafka_records.iterations_from_message(message.value))
            elif kind == kafka_records.JOB:
                jobs.append(kafka_records.job_from_message(message.value))
            else:
                _log.warning("skipping message of unknown kind %r at %s:%s", kind, message.partition, message.offset)
        except Exception as error:
            _log.error("skipping undecodable message at %s:%s: %s", message.partition, message.offset, error)
    return Decoded(RecordBatch.concat(records), IterationBatch.concat(iterations), jobs)


class Worker:
    """One consumer in the workers' group; ``run`` until ``stop`` is set."""

    def __init__(self, settings: Settings, *, client: Any, detectors: Sequence[Detector] = (),
                 retry_max_s: float = 5.0) -> None:
        from kafka import KafkaConsumer

        self.settings = settings
        self.sink = ClickHouseSink(client, settings.clickhouse_database)
        self.detectors = list(detectors)
        self.state = RankState()
        self.retry_max_s = retry_max_s
        self.inserted_records = 0
        self.consumer = KafkaConsumer(
            bootstrap_servers=settings.kafka_bootstrap,
            group_id=settings.worker_group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_poll_records=settings.worker_max_records,
            # A ClickHouse outage holds one batch in retry; stay in the group through a long one.
            max_poll_interval_ms=600_000,
            # A killed worker's partitions move to the others after 10 s, not the default 45 s.
            session_timeout_ms=10_000,
            heartbeat_interval_ms=3_000,
            # Notice new or late-listed partitions within 5 s (the default is 5 minutes).
            metadata_max_age_ms=5_000,
            fetch_max_bytes=64 << 20,
            max_partition_fetch_bytes=8 << 20,
        )
        self._wait_for_partitions(settings.records_topic, timeout_s=60.0)
        self.consumer.subscribe([settings.records_topic])

    def _wait_for_partitions(self, topic: str, *, timeout_s: float) -> None:
        # A group member that joins before the broker's metadata lists the topic's partitions can
        # be assigned nothing and then sit idle until a metadata change triggers a rebalance
        # (seen in CI right after the topic was created), so join only once they are visible.
        deadline = time.monotonic() + timeout_s
        while not self.consumer.partitions_for_topic(topic):
            if time.monotonic() > deadline:
                self.consumer.close(autocommit=False)
                raise ServiceError(f"Kafka topic {topic!r} has no partitions after {timeout_s:.0f} s "
                                   f"at {self.settings.kafka_bootstrap}; was it created?")
            time.sleep(0.5)

    def run(self, stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                self.step(stop)
        finally:
            self.consumer.close(autocommit=False)

    def step(self, stop: threading.Event) -> int:
        """One poll -> insert -> commit cycle; the number of records inserted."""
        polled = self.consumer.poll(timeout_ms=200)
        if not polled:
            return 0
        messages = [m for batch in polled.values() for m in batch]
        decoded = decode(messages)
        self.state.update(decoded.records)
        self.state.update_iterations(decoded.iterations)
        abnormal = []
        for detector in self.detectors:
            abnormal += detector.update(decoded.records, decoded.iterations, self.state)
        if not self._retry(stop, "insert", lambda: self.sink.write(
                decoded.records, decoded.iterations, decoded.jobs, abnormal)):
            return 0  # stopping before ClickHouse acknowledged: leave the offsets uncommitted
        self.inserted_records += len(decoded.records)
        self._commit(polled)
        return len(decoded.records)

    def _commit(self, polled: dict) -> None:
        from kafka.errors import CommitFailedError
        from kafka.structs import OffsetAndMetadata

        offsets = {tp: OffsetAndMetadata(batch[-1].offset + 1, "", -1) for tp, batch in polled.items()}
        for attempt in range(5):
            try:
                self.consumer.commit(offsets)
                return
            except CommitFailedError as error:
                # The group moved on (rebalance): the partition's new owner replays from the last
                # commit, and the replay is idempotent in the tables. Nothing else to do.
                _log.warning("commit refused after a rebalance, records will be replayed: %s", error)
                return
            except Exception as error:  # broker restarting: try again shortly
                _log.warning("commit failed (attempt %d): %s", attempt + 1, error)
                time.sleep(min(self.retry_max_s, 0.5 * 2**attempt))
        _log.error("giving up committing %s; those records will be replayed", offsets)

    def _retry(self, stop: threading.Event, what: str, action: Any) -> bool:
        delay = 0.2
        while True:
            try:
                action()
                return True
            except Exception as error:
                _log.warning("%s failed, retrying in %.1fs: %s", what, delay, error)
                try:
                    self.sink.client.disconnect()  # reconnect cleanly on the next attempt
                except Exception:
                    pass
            if stop.wait(delay):
                return False
            delay = min(self.retry_max_s, delay * 2)
