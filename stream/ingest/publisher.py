"""The gateway's Kafka side: batches to ``sleuth.records``, rejects to ``sleuth.rejects``.

Delivery: acks=all and an idempotent producer, so a broker restart neither loses nor duplicates
what the producer already holds. kafka-python 3 has no ``buffer_memory`` bound of its own, so
``Publisher`` counts the bytes handed to Kafka but not yet acknowledged and makes callers wait
beyond ``inflight_bytes``: a stream whose hand-off waits (on one of the gateway's threads) stops
reading, and HTTP/2 flow control then holds the logger back instead of the gateway's memory growing.

A message over Kafka's cap (``MAX_REQUEST_BYTES``) is refused as ``BatchRejected`` (INVALID_ARGUMENT,
naming its size and the cap), not as a failed send: sent again it would be refused again, so the
logger must drop and count it rather than retry it forever (a job spec of a huge job, say).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from sleuth.errors import BatchRejected, Overloaded, ServiceError
from sleuth.jobspec import JobSpec
from sleuth.records import IterationBatch, RecordBatch
from sleuth.settings import Settings
from sleuth.stream.ingest import kafka_records

if TYPE_CHECKING:
    from kafka import KafkaProducer

#: Largest part of a rejected payload kept in the dead-letter topic (messages stay under 1 MB).
MAX_REJECT_PAYLOAD = 256 * 1024
#: The producer's ``max_request_size``: the largest message, with Kafka's framing, the producer sends
#: (the broker's default ``message.max.bytes`` is the same 1 MiB, so a larger one would be refused there).
MAX_REQUEST_BYTES = 1 << 20


class InflightBytes:
    """A byte budget: ``acquire`` waits until enough is released (or times out)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._cond = threading.Condition()

    def acquire(self, n: int, *, timeout: float) -> None:
        # One message larger than the whole budget still goes, alone, or it could never be sent.
        n = min(n, self.limit)
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.used + n > self.limit:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Overloaded(
                        f"Kafka has not acknowledged {self.used} bytes for {timeout:.0f}s; retry later"
                    )
                self._cond.wait(left)
            self.used += n

    def release(self, n: int) -> None:
        with self._cond:
            self.used -= min(n, self.limit)
            self._cond.notify_all()


class Publisher:
    """Sends validated batches and rejects to Kafka; returns futures the caller may wait on."""

    def __init__(self, settings: Settings, *, wait_timeout_s: float = 60.0, producer: KafkaProducer | None = None) -> None:
        from kafka import KafkaProducer

        self._bootstrap = (settings.kafka_host, settings.kafka_port)
        self._records_topic = settings.records_topic
        self._rejects_topic = settings.rejects_topic
        self._jobs_topic = settings.jobs_topic
        self._wait_timeout_s = wait_timeout_s
        self._budget = InflightBytes(settings.gateway_inflight_bytes)
        self._producer = producer or KafkaProducer(
            bootstrap_servers=settings.kafka_bootstrap,
            acks="all",
            enable_idempotence=True,
            max_in_flight_requests_per_connection=5,  # the most idempotence keeps in order
            linger_ms=5,
            batch_size=1 << 20,
            # Record columns compress about 3x; lz4 costs ~60 ns a record, the bytes saved more.
            compression_type="lz4",
            max_request_size=MAX_REQUEST_BYTES,
            # Long enough to ride out a broker restart; the budget above bounds what piles up.
            delivery_timeout_ms=180_000,
            max_block_ms=30_000,
        )

    def records(self, batch: RecordBatch, *, layout_of: kafka_records.LayoutOf | None = None) -> list[Any]:
        """``layout_of``: the jobs' layouts, which key each rank by its model replica (``kafka_records``)."""
        return self._send(kafka_records.to_messages(batch, layout_of=layout_of), kafka_records.RECORDS)

    def iterations(self, batch: IterationBatch, *, layout_of: kafka_records.LayoutOf | None = None) -> list[Any]:
        return self._send(kafka_records.iteration_messages(batch, layout_of=layout_of), kafka_records.ITERATIONS)

    def drop(self, drop: kafka_records.Drop) -> list[Any]:
        """Records a logger lost (a batch's ``dropped``), to the workers, who keep them in ``logger_drops``."""
        return self._send([kafka_records.drop_message(drop)], kafka_records.DROPS)

    def job(self, spec: JobSpec, rendezvous: str = "") -> list[Any]:
        """The spec to the workers (records topic) and to the compacted jobs topic the gateway reloads
        (with the rendezvous round it was registered from, which the reload numbers again)."""
        message = kafka_records.job_message(spec, rendezvous)
        return (self._send([message], kafka_records.JOB)
                + self._send([message], kafka_records.JOB, topic=self._jobs_topic))

    def reject(self, *, reason: str, payload: bytes, job: str = "") -> None:
        """Dead-letter a refused batch with its reason; best effort, never blocks the caller long."""
        headers = [("sleuth-reason", reason.encode()[:4096]), ("sleuth-job", job.encode()[:256])]
        try:
            self._producer.send(
                self._rejects_topic, key=job.encode() or None, value=payload[:MAX_REJECT_PAYLOAD], headers=headers
            )
        except Exception:  # the dead letter is diagnostics: losing one must not fail the RPC
            pass

    def wait(self, futures: list[Any]) -> None:
        """Return once Kafka acknowledged every future, or raise ``ServiceError``."""
        deadline = time.monotonic() + self._wait_timeout_s
        for future in futures:
            left = max(0.0, deadline - time.monotonic())
            try:
                future.get(timeout=left)
            except Exception as error:
                raise ServiceError(f"Kafka did not acknowledge a batch: {error}") from None

    @property
    def wait_timeout_s(self) -> float:
        """How long a caller waits for Kafka's acknowledgements (or the in-flight budget) before giving up."""
        return self._wait_timeout_s

    def connected(self) -> bool:
        """Whether the broker accepts connections now (a TCP connect, at most one second)."""
        # kafka-python 3 has no public "connected to the cluster" check (bootstrap_connected()
        # turns false once the bootstrap socket is dropped after the first metadata).
        import socket

        try:
            socket.create_connection(self._bootstrap, timeout=1.0).close()
        except OSError:
            return False
        return True

    def flush(self, timeout: float = 30.0) -> None:
        self._producer.flush(timeout=timeout)

    def close(self, timeout: float = 30.0) -> None:
        self._producer.close(timeout=timeout)

    def _send(self, messages: list[tuple[bytes, bytes]], kind: bytes, *, topic: str | None = None) -> list[Any]:
        headers = [(kafka_records.KIND_HEADER, kind)]
        futures = []
        for key, value in messages:
            size = len(value) + len(key)
            self._budget.acquire(size, timeout=self._wait_timeout_s)
            try:
                future = self._producer.send(topic or self._records_topic, key=key, value=value, headers=headers)
            except Exception as error:
                self._budget.release(size)
                from kafka.errors import MessageSizeTooLargeError

                if isinstance(error, MessageSizeTooLargeError):  # kafka-python's own rule, framing included
                    raise BatchRejected(f"{kind.decode()} message: {size} bytes, over Kafka's cap of {MAX_REQUEST_BYTES} "
                                        f"bytes a message with its framing (max_request_size)") from None
                raise ServiceError(f"Kafka refused a batch: {error}") from None
            future.add_both(lambda _result, size=size: self._budget.release(size))
            futures.append(future)
        return futures
