"""The jobs the gateway accepts records for, and their reload from Kafka when a gateway starts.

``RegisterJob`` writes each spec to the compacted ``sleuth.jobs`` topic keyed by job name (see
``Publisher.job``), so the topic holds the latest spec of every job ever registered. A gateway
that restarts, or a second gateway beside the first, reads it back before serving: a logger that
registered once keeps streaming without registering again.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import NamedTuple

from sleuth.errors import ServiceError
from sleuth.jobspec import JobSpec
from sleuth.layout import ParallelLayout
from sleuth.logger.identity import round_id, split_round
from sleuth.settings import Settings
from sleuth.stream.ingest import kafka_records
from sleuth.stream.idle_jobs import IdleJobs

_log = logging.getLogger(__name__)

#: The rendezvous rounds of this many jobs are remembered after their specs are dropped idle (a
#: few hundred bytes each), so that a round heard from again after an idle hour keeps its id.
ROUNDS_KEPT = 100_000


class Registration(NamedTuple):
    """A registered spec and the launcher's rendezvous round it was registered from ("" for none)."""

    spec: JobSpec
    rendezvous: str = ""


class JobRegistry:
    """Jobs registered through ``RegisterJob``, by name, and the rendezvous rounds of each.

    A launcher that restarts its workers when a node joins keeps the job's id, and the new round
    numbers its iterations from 0 again: the registry numbers the rounds of each job in the order
    their specs arrive, and the N-th after the first is the job ``<job>.m<N>`` (``round_id``),
    both in the spec (``named``) and in every batch that names the round (``in_round``).

    A job no batch named for ``idle_s`` (``SLEUTH_JOB_IDLE_S``, on ``clock``) is dropped: its spec
    is the largest thing the gateway holds per job. Its loggers' next batches are then refused as
    unregistered, and the logger that holds the spec registers it again (``logger.sender``).
    """

    def __init__(self, specs: Iterable[JobSpec | Registration] = (), *, idle_s: float = Settings().job_idle_s,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._jobs: dict[str, JobSpec] = {}
        # Per job (an attempt's id as its loggers send it): each round's rendezvous → its index.
        self._rounds: OrderedDict[str, dict[str, int]] = OrderedDict()
        for entry in specs:
            spec, rendezvous = entry if isinstance(entry, Registration) else (entry, "")
            self._jobs[spec.job] = spec
            if rendezvous:
                job, index = split_round(spec.job)
                self._rounds.setdefault(job, {})[rendezvous] = index
        self._lock = threading.Lock()
        self._clock = clock
        self._idle = IdleJobs(idle_s=idle_s)
        self._idle.seen(self._jobs, clock())

    def named(self, spec: JobSpec, rendezvous: str) -> JobSpec:
        """``spec`` under the id of its rendezvous round, numbering the round if it is new to its job
        (a spec from no round keeps its id)."""
        if not rendezvous:
            return spec
        with self._lock:
            rounds = self._rounds.get(spec.job)
            if rounds is None:
                rounds = self._rounds[spec.job] = {}
                while len(self._rounds) > ROUNDS_KEPT:
                    self._rounds.popitem(last=False)
            self._rounds.move_to_end(spec.job)
            index = rounds.setdefault(rendezvous, max(rounds.values(), default=-1) + 1)
        return spec if index == 0 else dataclasses.replace(spec, job=round_id(spec.job, index))

    def in_round(self, job: str, rendezvous: str) -> str | None:
        """The id of ``job``'s round ``rendezvous`` (``job`` itself for none), or None when no spec
        of that round was registered yet."""
        if not rendezvous:
            return job
        with self._lock:
            index = self._rounds.get(job, {}).get(rendezvous)
        return None if index is None else round_id(job, index)

    def add(self, spec: JobSpec) -> None:
        """Register ``spec`` (``named`` already, when it came from a rendezvous round)."""
        with self._lock:
            self._jobs[spec.job] = spec
            self._idle.seen([spec.job], self._clock())

    def seen(self, jobs: Iterable[str]) -> list[str]:
        """Note that batches of ``jobs`` arrived now; drops the jobs idle too long (and returns them)."""
        with self._lock:
            now = self._clock()
            self._idle.seen((job for job in jobs if job in self._jobs), now)
            gone = self._idle.expired(now)
            for job in gone:
                del self._jobs[job]
        if gone:
            _log.info("dropped %d jobs idle for over %.0f s: %s", len(gone), self._idle.idle_s, ", ".join(gone))
        return gone

    def spec(self, job: str) -> JobSpec | None:
        """The job's spec, or None if it is not registered."""
        return self._jobs.get(job)

    def layout_of(self, job: str) -> ParallelLayout | None:
        """The job's layout, or None if it is not registered or was registered without one."""
        spec = self.spec(job)
        return spec.layout if spec is not None else None

    def __contains__(self, job: object) -> bool:
        return job in self._jobs

    def __len__(self) -> int:
        return len(self._jobs)


def load_registered(settings: Settings, *, timeout_s: float = 60.0) -> list[Registration]:
    """Every job spec in ``settings.jobs_topic``, latest per job, read to the topic's current end."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, group_id=None, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(settings.jobs_topic, p)
                      for p in sorted(consumer.partitions_for_topic(settings.jobs_topic))]
        if not partitions:
            raise ServiceError(f"Kafka topic {settings.jobs_topic!r} (SLEUTH_JOBS_TOPIC) does not exist "
                               f"at {settings.kafka_bootstrap}")
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        end = consumer.end_offsets(partitions)
        specs: dict[str, Registration] = {}
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < end[tp] for tp in partitions):
            if time.monotonic() > deadline:
                raise ServiceError(
                    f"reading the registered jobs from {settings.jobs_topic!r} took over {timeout_s:.0f} s")
            for messages in consumer.poll(timeout_ms=500).values():
                for message in messages:
                    try:
                        spec, rendezvous = kafka_records.registration_from_message(message.value)
                    except Exception as error:  # one bad spec must not keep the gateway down
                        _log.error("skipping an undecodable job spec at %s:%s: %s",
                                   message.partition, message.offset, error)
                        continue
                    specs[spec.job] = Registration(spec, rendezvous)
        return list(specs.values())
    finally:
        consumer.close()
