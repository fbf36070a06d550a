"""The worker (``sleuth worker``): a faust-streaming agent on ``sleuth.records`` -> numpy -> detectors -> ClickHouse.

Delivery: at least once into ClickHouse, exactly once in query results. The agent takes the
Kafka messages in batches (``Stream.take_events``) and for each batch does

    decode into one columnar batch per kind -> update per-rank state -> run the detectors
    -> insert into ClickHouse (retrying until it is acknowledged)
    -> publish the irregular iterations found (retrying until Kafka acknowledged them)
    -> acknowledge the events

where a batch's insert and publish run while the next batch is decoded and detected
(``acknowledged_when_finished``): ClickHouse's work on one batch and the worker's on the next
share the cores instead of taking turns. Faust commits only acknowledged offsets (on its commit
timer, at a rebalance and at stop).
A batch abandoned before ClickHouse and Kafka acknowledged it is never acknowledged
(``at_least_once``, which the alerter shares). A crash anywhere before the acknowledgement replays
those messages to whichever worker owns the partition next, and the ReplacingMergeTree tables fold
the replay into the rows already there.

Detection never costs records: a detector that raises is logged and counted
(``sleuth_detection_failures_total``) and the batch is inserted all the same, with what the other
detectors found.

Several workers with the same ``SLEUTH_WORKER_GROUP`` share the topic's partitions (one Kafka
consumer group, faust's assignor).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from sleuth import metrics
from sleuth.jobspec import JobSpec
from sleuth.records import IterationBatch, RecordBatch
from sleuth.settings import Settings
from sleuth.storage.sink import ClickHouseSink
from sleuth.stream.ingest import kafka_records
from sleuth.stream.services.at_least_once import acknowledged_when_finished, until_done
from sleuth.stream.detection.detect import Detector
from sleuth.stream.detection.rules import DETECTION_RULES
from sleuth.stream.services.faust_app import create_app, run_in_own_loop, serve_until
from sleuth.stream.idle_jobs import IdleJobs
from sleuth.stream.detection.rank_state import RankState
from sleuth.stream.ingest.validate import batch_jobs
from sleuth.validation import positive_int

if TYPE_CHECKING:
    from clickhouse_driver import Client

    from sleuth.irregularity import Irregularity

_log = logging.getLogger(__name__)


@dataclass
class Decoded:
    records: RecordBatch
    iterations: IterationBatch
    jobs: list[JobSpec]
    drops: list[kafka_records.Drop]


@dataclass
class Detected:
    abnormal: list[tuple]  # ``abnormal_ops`` rows
    irregularities: list[Irregularity]


def decode(messages: Sequence[Any]) -> Decoded:
    """The payloads of Kafka messages, one columnar batch per kind.

    A message that cannot be decoded (the gateway validated it, so this means a foreign producer
    or a bug) is logged and skipped: stopping the partition forever on it would lose everything after.
    """
    records, iterations, jobs, drops = [], [], [], []
    for message in messages:
        kind = kafka_records.kind_of(message.headers)
        try:
            if kind == kafka_records.RECORDS:
                records.append(kafka_records.from_message(message.value))
            elif kind == kafka_records.ITERATIONS:
                iterations.append(kafka_records.iterations_from_message(message.value))
            elif kind == kafka_records.JOB:
                jobs.append(kafka_records.job_from_message(message.value))
            elif kind == kafka_records.DROPS:
                drops.append(kafka_records.drop_from_message(message.value))
            else:
                _log.warning("skipping message of unknown kind %r at %s:%s", kind, message.partition, message.offset)
        except Exception as error:
            _log.error("skipping undecodable message at %s:%s: %s", message.partition, message.offset, error)
    return Decoded(RecordBatch.concat(records), IterationBatch.concat(iterations), jobs, drops)


def iteration_slices(decoded: Decoded, *, max_records: int) -> list[Decoded]:
    """``decoded`` cut between iterations into slices of at most ``max_records`` records (an iteration
    holding more, alone), in iteration order, each with its iterations' rows: what a worker that
    kept up would have judged at a time. An iteration's records stay together, as its operators'
    ordinals, groups and context are read within a slice. The jobs and drops go with the first."""
    records, iterations = decoded.records, decoded.iterations
    if len(records) <= max_records:
        return [decoded]
    order = np.argsort(records["iteration"], kind="stable")  # arrival order within an iteration
    steps, first, counts = np.unique(records["iteration"][order], return_index=True, return_counts=True)
    cuts, held = [], 0
    for k, count in enumerate(counts.tolist()):
        if held and held + count > max_records:
            cuts.append(k)
            held = 0
        held += count
    bounds = [0, *cuts, len(steps)]
    # An iteration row joins the slice of its iteration, else the first slice after it (the last).
    last_step = steps[np.array(bounds[1:]) - 1]
    row_slice = np.minimum(np.searchsorted(last_step, iterations["iteration"]), len(bounds) - 2)
    out = []
    for k in range(len(bounds) - 1):
        start = first[bounds[k]]
        stop = first[bounds[k + 1]] if bounds[k + 1] < len(steps) else len(order)
        out.append(Decoded(records.take(order[start:stop]), iterations.take(np.flatnonzero(row_slice == k)),
                           decoded.jobs if k == 0 else [], decoded.drops if k == 0 else []))
    return out


class Worker:
    """One member of the workers' faust app; ``run`` until ``stop`` is set.

    ``publish``: sends irregular iterations to Kafka and returns once they are acknowledged
    (``IrregularityPublisher``); without it they are not sent anywhere.
    """

    def __init__(self, settings: Settings, *, client: Client, detectors: Sequence[Detector] = (),
                 publish: Callable[[list[Irregularity]], None] | None = None, retry_max_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic, slice_records: int = DETECTION_RULES.slice_records) -> None:
        self.settings = settings
        self.slice_records = positive_int("slice_records", slice_records)
        self.clock = clock
        self.idle = IdleJobs(idle_s=settings.job_idle_s)
        self.sink = ClickHouseSink(client, settings.clickhouse_database)
        self.detectors = list(detectors)
        self.publish = publish
        self.state = RankState()
        self.retry_max_s = retry_max_s
        self.inserted_records = 0
        self.batches = 0
        self.batches_retried = 0  # batches whose first insert failed
        self.detection_failures = 0  # detector runs that raised (their batch was inserted all the same)
        self._app: Any = None

    def assignment(self) -> frozenset[int]:
        """The records topic's partitions this worker holds now (empty before it joined)."""
        app = self._app
        if app is None:
            return frozenset()
        return frozenset(tp.partition for tp in app.consumer.assignment() if tp.topic == self.settings.records_topic)

    def run(self, stop: threading.Event) -> None:
        """Consume in this thread (its own event loop) until ``stop`` is set."""
        run_in_own_loop(lambda: self._serve(stop))

    async def _serve(self, stop: threading.Event) -> None:
        def started(app: Any) -> None:
            self._app = app  # only now: ``app.consumer`` is created lazily, in this thread

        await serve_until(stop, lambda loop, datadir: self._build_app(loop, datadir, stop), name="worker",
                          on_started=started)

    def _build_app(self, loop: asyncio.AbstractEventLoop, datadir: str, stop: threading.Event) -> Any:
        settings = self.settings
        app = create_app(settings, settings.worker_group, loop=loop, datadir=datadir)
        topic = app.topic(settings.records_topic, key_serializer="raw", value_serializer="raw")

        ingest = acknowledged_when_finished(self._prepare_off_loop, lambda events, prepared: self._finish(
            events, prepared, stop), max_events=settings.worker_max_records, within_s=0.2)
        app.agent(topic, name=f"{settings.worker_group}.ingest")(ingest)
        return app

    def prepare(self, messages: Sequence[Any]) -> tuple[Decoded, Detected]:
        """Decode a batch of messages for one insert, and detect on it a slice of whole iterations at
        a time (``iteration_slices``, ``DetectionRules.slice_records``)."""
        decoded = decode(messages)
        return decoded, self.judge(decoded)

    def judge(self, decoded: Decoded) -> Detected:
        """Detect on a decoded batch a slice of whole iterations at a time (``prepare`` without the decoding)."""
        self._forget_idle(decoded)
        detected = Detected([], [])
        for part in iteration_slices(decoded, max_records=self.slice_records):
            found = self.detect(part)
            detected.abnormal += found.abnormal
            detected.irregularities += found.irregularities
        return detected

    def detect(self, decoded: Decoded) -> Detected:
        """Fold a decoded batch into the per-rank state and run every detector on it."""
        self.state.update(decoded.records)
        self.state.update_iterations(decoded.iterations)
        detected = Detected([], [])
        with metrics.DETECTION_SECONDS.time():
            for detector in self.detectors:
                try:
                    detected.abnormal += detector.update(decoded.records, decoded.iterations, self.state)
                except Exception:
                    self.detection_failures += 1
                    metrics.DETECTION_FAILURES.inc()
                    _log.exception("detector %s failed on a batch of %d records; inserting the batch without its rows",
                                   type(detector).__name__, len(decoded.records))
                # What it found before it failed, too.
                detected.irregularities += detector.take_irregularities()
        return detected

    def _forget_idle(self, decoded: Decoded) -> None:
        """Note the jobs of this batch; drop the state of the jobs no batch named for ``SLEUTH_JOB_IDLE_S``."""
        now = self.clock()
        self.idle.seen(batch_jobs(decoded.records) + batch_jobs(decoded.iterations), now)
        gone = set(self.idle.expired(now))
        if not gone:
            return
        self.state.forget(gone)
        for detector in self.detectors:
            detector.forget(gone)
        _log.info("dropped the state of %d jobs idle for over %.0f s: %s", len(gone), self.idle.idle_s,
                  ", ".join(sorted(gone)))

    def _record_lag(self, events: Sequence[Any]) -> None:
        """Consumer lag of the partitions of a processed batch that this worker still holds: messages
        behind the newest one."""
        if self._app is None:
            return
        consumer = self._app.consumer
        last: dict[Any, int] = {}
        for event in events:
            tp = event.message.tp
            last[tp] = max(last.get(tp, -1), event.message.offset)
        # A rebalance (another worker joining) can take a partition while its batch is in flight;
        # its lag is then the new owner's to report, and asking for it raised and stopped this agent.
        held = consumer.assignment()
        for tp, offset in last.items():
            highwater = consumer.highwater(tp) if tp in held else None
            if highwater is not None:  # unknown until the first fetch response of the partition
                metrics.CONSUMER_LAG.labels(topic=tp.topic, partition=str(tp.partition)).set(max(highwater - offset - 1, 0))

    async def _prepare_off_loop(self, events: Sequence[Any]) -> tuple[Decoded, Detected]:
        """Decode and detect one batch in a thread: CPU work the event loop must not wait on, as it
        keeps heartbeating the group meanwhile (aiokafka heartbeats from the loop)."""
        return await asyncio.get_running_loop().run_in_executor(None, self.prepare,
                                                                [event.message for event in events])

    async def _finish(self, events: Sequence[Any], prepared: tuple[Decoded, Detected], stop: threading.Event) -> bool:
        """Insert and publish one prepared batch (blocking I/O, in a thread); False when stopping before
        all was acknowledged."""
        loop = asyncio.get_running_loop()
        decoded, detected = prepared

        def insert() -> Awaitable[None]:
            return loop.run_in_executor(None, self.sink.write, decoded.records, decoded.iterations, decoded.jobs,
                                        detected.abnormal, [d.as_row() for d in decoded.drops])

        def reconnect() -> None:
            try:
                self.sink.client.disconnect()  # reconnect cleanly on the next attempt
            except Exception:
                pass

        if not await until_done(insert, stop, what="insert", retry_max_s=self.retry_max_s, on_failure=reconnect,
                                first_failure=self._retried):
            return False
        publish = self.publish
        if publish is not None and detected.irregularities:
            def send() -> Awaitable[None]:
                return loop.run_in_executor(None, publish, detected.irregularities)

            # After the insert: the localizer fetches the records an irregularity names.
            if not await until_done(send, stop, what="publishing irregularities", retry_max_s=self.retry_max_s):
                return False
        self.inserted_records += len(decoded.records)
        self.batches += 1
        metrics.WORKER_RECORDS.inc(len(decoded.records))
        self._record_lag(events)
        return True

    def _retried(self) -> None:
        self.batches_retried += 1
