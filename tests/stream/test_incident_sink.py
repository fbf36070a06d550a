"""Incidents too large for one Kafka message: published without their steps (ClickHouse keeps them),
unit-tested on the message and end to end on the real broker and server."""

from __future__ import annotations

import dataclasses
import json

import pytest

from sleuth.localizer import Incident, IncidentCause, RootOperator, Suspect
from sleuth.localizer.impact import Impact
from sleuth.localizer.search import Action, Cause, Step
from sleuth.storage import schema
from sleuth.storage.incidents import ClickHouseIncidentStore, incident_by_id
from sleuth.stream import connect
from sleuth.stream.services.incident_sink import MAX_MESSAGE_BYTES, IncidentSink, kafka_value
from sleuth.topology import DeviceKind

from ..conftest import Services
from .harness import consume, private_settings


def incident(*, steps: int, world: int = 4096) -> Incident:
    """A spine incident whose search took ``steps`` steps over every rank (about 90 bytes of JSON a step)."""
    return Incident(
        job="job-big", incident="job-big-15-40", t_from_ns=1, t_to_ns=2, iterations=tuple(range(15, 41)),
        cause=IncidentCause.NETWORK, suspects=(Suspect("spine:s0", DeviceKind.SPINE, 0.8), Suspect("leaf:l3", DeviceKind.LEAF, 0.1)),
        roots=(RootOperator(15, Cause.NETWORK, 7, "dp3", 12, "allreduce", (7, 15, 23), 0.9, 15),),
        traversal=tuple(range(world)),
        steps=tuple(Step(k % world, f"dp{k % 64}", k % 97, "allreduce", 15 + k % 26, Action.BFS) for k in range(steps)),
        ranks_fetched=world, world=world, impact=Impact(1.4, 1.0e9, 1.4e9, 12.5, 26), advice="check the spine",
        seconds=2.5,
    )


def test_an_incident_that_fits_is_sent_whole() -> None:
    small = incident(steps=100)
    assert kafka_value(small) == small.to_json().encode()


def test_an_oversized_incident_is_sent_without_its_steps_and_says_how_many() -> None:
    big = incident(steps=50_000)
    assert len(big.to_json()) > MAX_MESSAGE_BYTES
    value = kafka_value(big)
    assert len(value) <= MAX_MESSAGE_BYTES
    document = json.loads(value)
    assert document["steps"] == [] and document["steps_omitted"] == 50_000
    assert Incident.from_json(value) == dataclasses.replace(big, steps=())


def test_the_traversal_goes_too_when_the_steps_alone_do_not_make_it_fit() -> None:
    big = incident(steps=1_000, world=16_384)
    value = kafka_value(big, limit=50_000)
    assert len(value) <= 50_000
    document = json.loads(value)
    assert document["steps_omitted"] == 1_000 and document["traversal_omitted"] == 16_384
    assert Incident.from_json(value).suspects == big.suspects


@pytest.mark.services
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_an_oversized_incident_reaches_kafka_and_clickhouse_keeps_every_step(services: Services) -> None:
    settings = private_settings(services)
    settings = dataclasses.replace(settings, incidents_topic=f"{settings.records_topic}-incidents")
    client = connect.clickhouse_client(settings)
    producer = connect.kafka_producer(settings)
    db = settings.clickhouse_database
    big = incident(steps=200_000)  # about 18 MB of JSON: the broker would refuse it whole
    try:
        schema.migrate(client, db)
        connect.ensure_topics(settings, {settings.incidents_topic: 1})
        IncidentSink(ClickHouseIncidentStore(client, db), bus=producer, topic=settings.incidents_topic).write(big)
        [message] = consume(settings, settings.incidents_topic, messages=1, timeout_s=30)
        sent = json.loads(message.value)
        assert sent["suspects"][0]["device"] == "spine:s0" and sent["steps_omitted"] == 200_000
        assert client.execute(f"SELECT count() FROM {db}.traversals FINAL")[0][0] == 200_000
        assert incident_by_id(client, db, big.incident) == big
    finally:
        producer.close()
        client.execute(f"DROP DATABASE IF EXISTS {db}")
        client.disconnect()
