"""The alerter against the real ClickHouse, Kafka and an HTTP receiver on 127.0.0.1."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import time
import uuid

import pytest

from sleuth.oncall.alerts import AlertStatus, rfc3339
from sleuth.oncall.service import AlerterService, build_alerter
from sleuth.records import IterationBatch, RecordBatch
from sleuth.storage.alerts import ClickHouseAlertStore
from sleuth.storage.sink import ClickHouseSink
from sleuth.stream import connect

from ..stream.harness import consume
from .conftest import FAULTY_GPU
from .test_alertmanager import iso_ns, shown

pytestmark = pytest.mark.services


def insert_iterations(client, database: str, job: str, world: int, iterations: range) -> None:
    rows = [(job, rank, it, it * 1_000_000, it * 1_000_000 + 900_000) for it in iterations for rank in range(world)]
    client.execute(f"INSERT INTO {database}.iterations (job, rank, iteration, t_start_ns, t_end_ns) VALUES", rows)


def register(client, database: str, job: str, spec) -> None:
    """``job`` registered with ``spec``'s ranks (the ranks whose progress resolves its alerts), by the
    workers' sink as the records path registers it."""
    ClickHouseSink(client, database).write(RecordBatch.empty(), IterationBatch.empty(),
                                           [dataclasses.replace(spec, job=job)])


def later(incident, shift: int):
    """The same fault seen again: a new incident ``shift`` iterations later."""
    iterations = tuple(i + shift for i in incident.iterations)
    return dataclasses.replace(incident, incident=f"{incident.job}-{iterations[0]}-{iterations[-1]}",
                               iterations=iterations)


def test_an_incident_fires_a_webhook_retried_after_a_failure(oncall_settings, receiver, emulated_run) -> None:
    settings, client = oncall_settings
    receiver.fail_first = 1
    alerter = build_alerter(dataclasses.replace(settings, alert_webhooks=receiver.url), client=client)
    incident = emulated_run.incidents[0]
    changed = alerter.on_incident(incident)
    assert [a.device for a in changed] == [s.device for s in incident.suspects]
    [body] = receiver.wait_for(1)
    assert receiver.attempts == 2  # the 500 was retried
    assert body["version"] == "4" and body["status"] == "firing" and body["groupLabels"] == {"sleuth_job": incident.job}
    first = body["alerts"][0]
    assert first["labels"]["device"] == FAULTY_GPU and first["labels"]["alertname"] == "SleuthSlowDevice"
    assert first["labels"]["severity"] == "warning"  # x1.2 slowdown, a few GPU-seconds lost
    assert first["annotations"]["incident"] == incident.incident
    assert first["endsAt"] == "0001-01-01T00:00:00Z" and first["startsAt"].endswith("Z")
    assert "job" not in first["labels"] and first["labels"]["sleuth_job"] == incident.job
    assert first["generatorURL"] == f"{settings.serve_base_url}/incidents/{incident.incident}"


def test_one_open_alert_per_job_and_device_updated_by_new_evidence(oncall_settings, receiver, emulated_run) -> None:
    settings, client = oncall_settings
    alerter = build_alerter(dataclasses.replace(settings, alert_webhooks=receiver.url), client=client)
    incident = emulated_run.incidents[0]
    alerter.on_incident(incident)
    assert alerter.on_incident(incident) == []  # a replay: no change, no notification
    again = later(incident, 30)
    alerter.on_incident(again)
    bodies = receiver.wait_for(2)
    time.sleep(0.5)
    assert len(receiver.bodies) == 2
    gpu = [a for b in bodies for a in b["alerts"] if a["labels"]["device"] == FAULTY_GPU]
    assert len({a["fingerprint"] for a in gpu}) == 1  # the same alert, updated
    assert gpu[-1]["annotations"]["incidents"] == f"{incident.incident},{again.incident}"
    stored = ClickHouseAlertStore(client, settings.clickhouse_database).load(job=incident.job)
    [row] = [a for a in stored if a.device == FAULTY_GPU]
    assert row.status is AlertStatus.FIRING and row.incidents == (incident.incident, again.incident)
    assert (row.first_irregular, row.last_irregular) == (incident.iterations[0], again.iterations[-1])


def test_an_incident_that_grew_extends_its_alert_quietly(oncall_settings, receiver, emulated_run) -> None:
    settings, client = oncall_settings
    alerter = build_alerter(dataclasses.replace(settings, alert_webhooks=receiver.url), client=client)
    incident = emulated_run.incidents[0]
    alerter.on_incident(incident)
    receiver.wait_for(1)
    last = incident.iterations[-1]
    grew = dataclasses.replace(incident, iterations=incident.iterations + (last + 1, last + 2))  # same id, longer
    changed = alerter.on_incident(grew)
    assert {a.device for a in changed} == {s.device for s in incident.suspects}
    assert all(a.last_irregular == last + 2 and a.incidents == (incident.incident,) for a in changed)
    assert alerter.on_incident(grew) == []  # the grown incident replayed: nothing new
    time.sleep(0.5)
    assert len(receiver.bodies) == 1  # the span is not news to a receiver
    stored = ClickHouseAlertStore(client, settings.clickhouse_database).load(job=incident.job)
    assert {a.last_irregular for a in stored if a.status is AlertStatus.FIRING} == {last + 2}


def test_resolves_after_n_regular_iterations_and_survives_a_restart(oncall_settings, receiver, emulated_run) -> None:
    settings, client = oncall_settings
    db, world = settings.clickhouse_database, emulated_run.spec.world
    settings = dataclasses.replace(settings, alert_webhooks=receiver.url, alert_resolve_iterations=5)
    incident = dataclasses.replace(emulated_run.incidents[0], advice="drain the host and run GPU diagnostics")
    last = incident.iterations[-1]
    build_alerter(settings, client=client).on_incident(incident)
    restarted = build_alerter(settings, client=client)  # a new process: state from ClickHouse
    assert {a.device for a in restarted.open.values()} == {s.device for s in incident.suspects}
    assert {a.advice for a in restarted.open.values()} == {incident.advice}
    register(client, db, incident.job, emulated_run.spec)
    insert_iterations(client, db, incident.job, world, range(0, last + 5))
    insert_iterations(client, db, incident.job, world - 1, range(last + 5, last + 6))  # one rank lags behind
    service = AlerterService(settings, alerter=restarted, client=client)
    service.check_resolutions()
    assert restarted.open  # 4 iterations completed by every rank past the last irregular one: not yet
    restarted.on_irregular(incident.job, last + 2)  # the workers saw another irregular iteration
    insert_iterations(client, db, incident.job, world, range(last + 5, last + 7))
    service.check_resolutions()
    assert restarted.open  # 4 past the new last irregular one
    insert_iterations(client, db, incident.job, world, range(last + 7, last + 8))
    service.check_resolutions()
    assert not restarted.open
    bodies = receiver.wait_for(2)
    assert bodies[-1]["status"] == "resolved"
    assert all(a["annotations"]["advice"] == incident.advice for a in bodies[-1]["alerts"])  # kept across the restart
    assert all(a["status"] == "resolved" and a["endsAt"] != "0001-01-01T00:00:00Z" for a in bodies[-1]["alerts"])
    assert all(a.status is AlertStatus.RESOLVED for a in ClickHouseAlertStore(client, db).load(job=incident.job))
    # After resolution, new evidence opens a new alert (a new fingerprint).
    restarted.on_incident(later(incident, 40))
    bodies = receiver.wait_for(3)
    assert bodies[-1]["status"] == "firing"
    assert bodies[-1]["alerts"][0]["fingerprint"] != bodies[0]["alerts"][0]["fingerprint"]


def test_a_job_that_stopped_reporting_while_slow_has_its_alerts_resolved_once_idle(oncall_settings, receiver,
                                                                                   emulated_run) -> None:
    settings, client = oncall_settings
    db, world = settings.clickhouse_database, emulated_run.spec.world
    settings = dataclasses.replace(settings, alert_webhooks=receiver.url, alert_resolve_iterations=5, job_idle_s=1.0)
    incident = emulated_run.incidents[0]
    last = incident.iterations[-1]
    alerter = build_alerter(settings, client=client)
    alerter.on_incident(incident)
    register(client, db, incident.job, emulated_run.spec)
    insert_iterations(client, db, incident.job, world, range(0, last + 3))  # the job ends 2 iterations later
    service = AlerterService(settings, alerter=alerter, client=client)
    service.check_resolutions()
    seen_ns = alerter.progress[incident.job][1]
    assert alerter.progress[incident.job][0] == last + 2 and alerter.open
    time.sleep(1.1)
    service.check_resolutions()
    assert not alerter.open
    body = receiver.wait_for(2)[-1]
    assert body["status"] == "resolved" and {a["endsAt"] for a in body["alerts"]} == {rfc3339(seen_ns)}
    assert {a["annotations"]["resolution"] for a in body["alerts"]} == {
        f"the job stopped reporting: iteration {last + 2}, then nothing for 1 s"}
    stored = ClickHouseAlertStore(client, db).load(job=incident.job)
    assert {(a.status, a.ends_ns, a.resolution) for a in stored} == {
        (AlertStatus.RESOLVED, seen_ns, f"the job stopped reporting: iteration {last + 2}, then nothing for 1 s")}


def test_a_crash_between_saving_and_announcing_is_announced_after_the_restart(oncall_settings, receiver,
                                                                              emulated_run) -> None:
    settings, client = oncall_settings
    settings = dataclasses.replace(settings, alert_webhooks=receiver.url)
    incident = emulated_run.incidents[0]
    crashing = build_alerter(settings, client=client)

    def crash(alerts) -> None:
        raise RuntimeError("killed between saving and announcing")

    crashing.notify = crash
    with pytest.raises(RuntimeError):
        crashing.on_incident(incident)
    store = ClickHouseAlertStore(client, settings.clickhouse_database)
    assert {a.device for a in store.load(announced=False)} == {s.device for s in incident.suspects}
    restarted = build_alerter(settings, client=client)  # a new process, the same ClickHouse
    assert restarted.on_incident(incident) == []  # Kafka redelivers the incident: nothing new
    announced = restarted.announce_pending()
    assert {a.device for a in announced} == {s.device for s in incident.suspects}
    [body] = receiver.wait_for(1)
    assert body["status"] == "firing" and {a["labels"]["device"] for a in body["alerts"]} == {
        s.device for s in incident.suspects}
    assert store.load(announced=False) == []
    assert build_alerter(settings, client=client).announce_pending() == []  # announced once
    time.sleep(0.5)
    assert len(receiver.bodies) == 1


def test_the_service_consumes_incidents_from_kafka(oncall_settings, receiver, emulated_run, services) -> None:
    from kafka import KafkaProducer

    settings, client = oncall_settings
    settings = dataclasses.replace(settings, alert_webhooks=receiver.url, alert_resolve_iterations=3,
                                   alertmanagers=services.alertmanager_url, alert_resend_s=1.0)
    connect.ensure_topics(settings, {settings.incidents_topic: 2, settings.irregularities_topic: 2,
                                     settings.alerts_topic: 1})
    producer = KafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all")
    service = AlerterService(settings, alerter=build_alerter(settings, client=client, producer=producer),
                             client=client, check_s=0.5)
    stop = threading.Event()
    thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
    thread.start()
    try:
        job = f"service-{uuid.uuid4().hex[:8]}"  # its own alerts in the shared Alertmanager
        incident = dataclasses.replace(emulated_run.incidents[0], job=job, incident=f"{job}-1")
        producer.send(settings.incidents_topic, key=incident.job.encode(), value=b"not json").get(timeout=30)
        producer.send(settings.incidents_topic, key=incident.job.encode(), value=incident.to_json().encode()).get(timeout=30)
        [body] = receiver.wait_for(1, timeout_s=90)
        assert body["status"] == "firing"
        [message] = consume(settings, settings.alerts_topic, messages=1)
        assert message.key == incident.job.encode() and json.loads(message.value) == body
        pushed = {a["labels"]["device"]: iso_ns(a["endsAt"]) for a in shown(services.alertmanager_url, job)}
        assert sorted(pushed) == sorted(s.device for s in incident.suspects)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(
                iso_ns(a["endsAt"]) > pushed[a["labels"]["device"]] for a in shown(services.alertmanager_url, job)):
            time.sleep(0.2)
        again = shown(services.alertmanager_url, job)  # the timer pushed them again (resend 1 s): later endsAt
        assert len(again) == len(pushed) and all(iso_ns(a["endsAt"]) > pushed[a["labels"]["device"]] for a in again)
        register(client, settings.clickhouse_database, incident.job, emulated_run.spec)
        insert_iterations(client, settings.clickhouse_database, incident.job, emulated_run.spec.world,
                          range(0, incident.iterations[-1] + 4))
        bodies = receiver.wait_for(2, timeout_s=30)
        assert bodies[-1]["status"] == "resolved"
        # The webhooks hear of it first, Alertmanager in the same round right after them.
        deadline = time.monotonic() + 10
        while shown(services.alertmanager_url, job) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert shown(services.alertmanager_url, job) == []
        assert service.incidents_seen == 1  # the broken message was skipped
    finally:
        stop.set()
        thread.join(timeout=60)
        producer.close()


class FailingFirst:
    """An alert store that fails its first ``failures`` saves, as ClickHouse does while it is away."""

    def __init__(self, store, failures: int) -> None:
        self.store = store
        self.failures = failures
        self.failed = 0

    def save(self, alerts, *, announced: bool = True) -> None:
        from clickhouse_driver.errors import NetworkError

        if self.failed < self.failures:
            self.failed += 1
            raise NetworkError("Connection refused (127.0.0.1:19000)")
        self.store.save(alerts, announced=announced)

    def load(self, **which):
        return self.store.load(**which)


@contextlib.contextmanager
def serving(service: AlerterService):
    stop = threading.Event()
    thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=60)


def incidents_producer(settings):
    from kafka import KafkaProducer

    connect.ensure_topics(settings, {settings.incidents_topic: 1, settings.irregularities_topic: 1,
                                     settings.alerts_topic: 1})
    return KafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all")


def send_incidents(producer, settings, *incidents) -> None:
    """On one partition (one key), in order."""
    for incident in incidents:
        producer.send(settings.incidents_topic, key=b"one-partition", value=incident.to_json().encode()).get(30)


def test_an_incident_is_acknowledged_only_once_its_alerts_are_saved_and_alerts_once(oncall_settings, receiver,
                                                                                   emulated_run) -> None:
    settings, client = oncall_settings
    settings = dataclasses.replace(settings, alert_webhooks=receiver.url)
    producer = incidents_producer(settings)
    alerter = build_alerter(settings, client=client)
    store = ClickHouseAlertStore(client, settings.clickhouse_database)
    alerter.store = failing = FailingFirst(store, failures=3)
    service = AlerterService(settings, alerter=alerter, client=client, check_s=0.5, retry_max_s=0.2)
    incident = emulated_run.incidents[0]
    # A second job's incident after it: once that one is alerted, the first was handled.
    after = dataclasses.replace(incident, job="after-the-outage", incident="after-the-outage-1")
    try:
        with serving(service):
            send_incidents(producer, settings, incident, after)
            bodies = receiver.wait_for(2, timeout_s=90)
        assert [body["groupLabels"]["sleuth_job"] for body in bodies] == [incident.job, after.job], bodies
        assert failing.failed == 3 and service.incidents_seen == 2
        assert {a.device for a in store.load(job=incident.job)} == {s.device for s in incident.suspects}
        assert store.load(announced=False) == []
    finally:
        producer.close()


def test_an_incident_not_saved_when_the_alerter_stops_is_alerted_once_by_the_next(oncall_settings, receiver,
                                                                                 emulated_run) -> None:
    settings, client = oncall_settings
    settings = dataclasses.replace(settings, alert_webhooks=receiver.url)
    producer = incidents_producer(settings)
    incident = emulated_run.incidents[0]
    after = dataclasses.replace(incident, job="after-the-restart", incident="after-the-restart-1")
    store = ClickHouseAlertStore(client, settings.clickhouse_database)
    try:
        alerter = build_alerter(settings, client=client)
        alerter.store = failing = FailingFirst(store, failures=10**9)  # ClickHouse away for as long as it runs
        with serving(AlerterService(settings, alerter=alerter, client=client, check_s=0.5, retry_max_s=0.2)):
            send_incidents(producer, settings, incident)
            deadline = time.monotonic() + 90
            while failing.failed < 2 and time.monotonic() < deadline:
                time.sleep(0.1)
        assert failing.failed >= 2 and receiver.bodies == []
        # The next alerter (the same consumer group) is handed the incident again, and the store answers.
        with serving(AlerterService(settings, alerter=build_alerter(settings, client=client), client=client,
                                    check_s=0.5)):
            send_incidents(producer, settings, after)
            bodies = receiver.wait_for(2, timeout_s=90)
        assert [body["groupLabels"]["sleuth_job"] for body in bodies] == [incident.job, after.job], bodies
        assert {a.device for a in store.load(job=incident.job)} == {s.device for s in incident.suspects}
    finally:
        producer.close()
