"""The series a person watches that the services set: open incidents (alerter) and records the loggers
lost (gateway), read back from the registry as Prometheus would scrape them."""

from __future__ import annotations

import asyncio
import dataclasses

from prometheus_client import REGISTRY

from sleuth import metrics
from sleuth.oncall.alerter import Alerter
from sleuth.oncall.alerts import AlertStatus
from sleuth.jobspec import JobSpec
from sleuth.layout import ParallelLayout
from sleuth.proto import codec
from sleuth.proto import commops_pb2 as pb
from sleuth.records import RecordBatch
from sleuth.stream.ingest.gateway import Collector
from sleuth.stream.ingest.validate import Limits

from .oncall.test_render import spine_incident


class MemoryStore:
    """The alerter's store, in memory: what ClickHouse's alerts table holds."""

    def __init__(self) -> None:
        self.saved = []  # (alert, announced)

    def save(self, alerts, *, announced=True) -> None:
        self.saved.extend((a, announced) for a in alerts)

    def load(self, *, status=None, job=None, announced=None):
        latest = {a.key: (a, told) for a, told in self.saved}
        return [a for a, told in latest.values()
                if (status is None or a.status is status) and (announced is None or told is announced)]


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_open_incidents_follow_the_firing_alerts() -> None:
    store = MemoryStore()
    alerter = Alerter(store, notify=lambda alerts: None, resolve_after=3, stopped_after_s=3600.0, critical_slowdown=2.0,
                      critical_gpu_hours=10.0)
    assert value("sleuth_open_incidents") == 0
    first = spine_incident(operators=2)
    alerter.on_incident(first)  # two suspects: two alerts citing one incident
    assert len(alerter.open) == 2 and value("sleuth_open_incidents") == 1
    alerter.on_incident(dataclasses.replace(first, incident="demo-spine-40-45", iterations=(40, 41)))
    assert value("sleuth_open_incidents") == 2
    restarted = Alerter(store, notify=lambda alerts: None, resolve_after=3, stopped_after_s=3600.0,
                        critical_slowdown=2.0, critical_gpu_hours=10.0)
    assert len(restarted.open) == 2 and value("sleuth_open_incidents") == 2  # reloaded, counted again
    resolved = restarted.resolve({"demo-spine": 50})
    assert {a.status for a in resolved} == {AlertStatus.RESOLVED} and value("sleuth_open_incidents") == 0


class Publisher:
    """Kafka's place in the gateway: takes the batches, returns no pending futures."""

    wait_timeout_s = 1.0

    def __init__(self) -> None:
        self.batches = []
        self.drops = []

    def records(self, batch, *, layout_of=None):
        self.batches.append(batch)
        return []

    def drop(self, drop):
        self.drops.append(drop)
        return []

    def iterations(self, batch, *, layout_of=None):
        return self.records(batch)

    def wait(self, futures) -> None:
        pass

    def reject(self, *, reason, payload, job="") -> None:
        raise AssertionError(f"rejected: {reason}")


class Context:
    """The part of ``grpc.aio.ServicerContext`` a stream uses."""

    def invocation_metadata(self):
        return ()

    async def abort(self, code, details: str) -> None:
        raise AssertionError(f"aborted: {code} {details}")

    def set_trailing_metadata(self, metadata) -> None:
        pass


async def _requests(messages):
    for message in messages:
        yield message


def test_records_a_logger_lost_are_counted_by_training_job() -> None:
    spec = JobSpec.from_layout("llama", ParallelLayout(8, 8, 1, 1))
    batch = RecordBatch.from_columns(job="llama", rank=[0, 1], comm=spec.communicators[0].comm, seq=[3, 3], op=[1, 1],
                                     peer=[-1, -1], nbytes=[8, 8], iteration=[1, 1], t_issue_ns=[1, 1],
                                     t_start_ns=[2, 2], t_end_ns=[3, 3])
    publisher = Publisher()
    gateway = Collector(publisher, tokens=None, limits=Limits(), registered=[spec])
    before = value("sleuth_logger_dropped_records_total", training_job="llama")
    messages = [pb.StreamMessage(records=codec.records_to_proto(batch, dropped=n)) for n in (17, 0, 3)]
    summary = asyncio.run(gateway.Stream(_requests(m.SerializeToString() for m in messages), Context()))
    assert summary.accepted == 3 and len(publisher.batches) == 3
    # ... and go on to the workers (logger_drops), reported by the batch's earliest record.
    assert [d.as_row() for d in publisher.drops] == [("llama", 0, 2, 17), ("llama", 0, 2, 3)]
    assert value("sleuth_logger_dropped_records_total", training_job="llama") == before + 20
    assert metrics.LOGGER_DROPPED._labelnames == ("training_job",)  # never `job`: Prometheus's own label
