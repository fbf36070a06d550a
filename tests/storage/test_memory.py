"""The store contracts' in-memory twins (no services), and the incident sink's order over them."""

from __future__ import annotations

import dataclasses

import pytest

from sleuth.localizer.episodes import Raised
from sleuth.oncall.alerts import Alert, AlertStatus, Severity
from sleuth.oncall.verdicts import CONFIRMED, REJECTED, store_verdict
from sleuth.storage.alerts import ClickHouseAlertStore
from sleuth.storage.incidents import ClickHouseIncidentStore
from sleuth.storage.labels import ClickHouseLabelStore
from sleuth.storage.memory import (MemoryAlertStore, MemoryBus, MemoryIncidentStore, MemoryLabelStore, MemoryPauseStore,
                                   MemoryRecordSink)
from sleuth.storage.pauses import ClickHousePauseStore
from sleuth.storage.sink import ClickHouseSink
from sleuth.stores import AlertStore, Bus, IncidentStore, LabelStore, PauseStore, RecordSink
from sleuth.stream.services.incident_sink import IncidentSink, kafka_value

from ..localizer.test_incident_json import INCIDENT


@pytest.mark.parametrize(("contract", "implementations"), [
    (RecordSink, (MemoryRecordSink, ClickHouseSink)),
    (IncidentStore, (MemoryIncidentStore, ClickHouseIncidentStore, IncidentSink)),
    (AlertStore, (MemoryAlertStore, ClickHouseAlertStore)),
    (LabelStore, (MemoryLabelStore, ClickHouseLabelStore)),
    (PauseStore, (MemoryPauseStore, ClickHousePauseStore)),
])
def test_the_twin_and_the_clickhouse_store_have_the_contracts_methods(contract, implementations) -> None:
    methods = {name for name in vars(contract) if not name.startswith("_")}
    for implementation in implementations:
        assert methods <= set(dir(implementation)), (contract.__name__, implementation.__name__)


def test_the_bus_twin_is_a_bus_and_keeps_what_was_sent_in_order() -> None:
    bus = MemoryBus()
    assert isinstance(bus, Bus)
    bus.send("a", key=b"k", value=b"1").get(timeout=1)
    bus.send("b", value=b"2", headers=[("h", b"x")])
    assert [(m.topic, m.key, m.value) for m in bus.messages] == [("a", b"k", b"1"), ("b", None, b"2")]
    assert bus.on("b")[0].headers == (("h", b"x"),)
    bus.close()
    with pytest.raises(RuntimeError):
        bus.send("a", value=b"3")


def test_the_incident_sink_publishes_then_stores_and_raised_reads_the_store() -> None:
    store, bus = MemoryIncidentStore(), MemoryBus()
    sink = IncidentSink(store, bus=bus, topic="sleuth.incidents")
    sink.write(INCIDENT)
    [message] = bus.on("sleuth.incidents")
    assert message.key == INCIDENT.job.encode() and message.value == kafka_value(INCIDENT)
    assert sink.incident(INCIDENT.job, INCIDENT.incident) == INCIDENT
    assert sink.raised(INCIDENT.job) == [Raised(INCIDENT.incident, 15, 16, "network", ("spine:s1", "link:leaf:l0~spine:s1"))]
    assert sink.raised("another job") == []
    with pytest.raises(LookupError):
        sink.incident(INCIDENT.job, "no such incident")


def test_an_incident_the_bus_refused_is_not_stored() -> None:
    bus = MemoryBus()
    bus.close()
    store = MemoryIncidentStore()
    with pytest.raises(RuntimeError):
        IncidentSink(store, bus=bus, topic="sleuth.incidents").write(INCIDENT)
    assert store.raised(INCIDENT.job) == []


def test_a_later_write_of_an_incident_replaces_it() -> None:
    store = MemoryIncidentStore()
    store.write(INCIDENT)
    grown = dataclasses.replace(INCIDENT, iterations=(15, 16, 17))
    store.write(grown)
    assert [r.last for r in store.raised(INCIDENT.job)] == [17]


def test_alert_twin_keeps_the_latest_version_and_filters_like_the_table() -> None:
    alert = Alert("j1", "gpu:h0/1", 5, AlertStatus.FIRING, Severity.WARNING, "compute", "gpu", 0.7, "i1", ("i1",), 1.2,
                  0.1, 10, 12)
    store = MemoryAlertStore()
    store.save([alert], announced=False)
    store.save([alert.replace(last_irregular=13)])
    assert store.load(job="j1") == [alert.replace(last_irregular=13)]
    assert store.load(announced=False) == [] and store.load(status=AlertStatus.RESOLVED) == []


def test_verdicts_in_the_label_twin_the_latest_wins() -> None:
    labels = MemoryLabelStore()
    assert store_verdict(labels, INCIDENT, CONFIRMED) == 4
    assert labels.verdicts() == {INCIDENT.incident: CONFIRMED}
    assert {row[5] for row in labels.labels([INCIDENT.job])} == {True}
    store_verdict(labels, INCIDENT, REJECTED)
    assert labels.verdicts() == {INCIDENT.incident: REJECTED}
    assert {row[5] for row in labels.labels([INCIDENT.job])} == {False} and labels.labels(["other"]) == []
