"""Alerts from incidents: the Alertmanager payload, severity, and bad incident documents (no services)."""

from __future__ import annotations

import dataclasses

import pytest

from sleuth.errors import ConfigError, RecordError
from sleuth.localizer.impact import Impact
from sleuth.localizer.incident import Incident, IncidentCause, Suspect
from sleuth.oncall.alerts import Severity, evidence_from_incident, severity_of
from sleuth.topology import DeviceKind


def incident(**changes) -> Incident:
    base = Incident(
        job="j1", incident="j1-10-12", t_from_ns=1, t_to_ns=2, iterations=(10, 11, 12), cause=IncidentCause.COMPUTE,
        suspects=(Suspect("gpu:h0/1", DeviceKind.GPU, 0.7), Suspect("host:h0", DeviceKind.HOST, 0.3)),
        roots=(), traversal=(), steps=(), ranks_fetched=1, world=8, impact=Impact(1.3, 1e8, 1.3e8, 0.5, 3),
        advice="", seconds=0.1,
    )
    return dataclasses.replace(base, **changes)


def test_each_suspect_is_one_piece_of_evidence() -> None:
    found = evidence_from_incident(incident())
    assert [(e.device, e.kind, e.first_irregular, e.last_irregular) for e in found] == [
        ("gpu:h0/1", "gpu", 10, 12), ("host:h0", "host", 10, 12)]


def test_more_than_two_suspects_the_records_cannot_part_are_one_alert_a_nic_and_its_cable_two() -> None:
    ring = tuple(Suspect(f"nic:h{h}/3", DeviceKind.NIC, 0.05) for h in range(16))
    found = evidence_from_incident(incident(cause=IncidentCause.MIXED, suspects=(
        Suspect("gpu:h0/1", DeviceKind.GPU, 0.7), *ring)))
    assert [(e.device, e.kind, e.score) for e in found] == [("gpu:h0/1", "gpu", 0.7), ("nic:h0/3 and 15 tied", "nic", 0.05)]
    cable = (Suspect("nic:h3/0", DeviceKind.NIC, 0.4), Suspect("link:leaf:l0~nic:h3/0", DeviceKind.LINK, 0.4))
    assert [e.device for e in evidence_from_incident(incident(cause=IncidentCause.NETWORK, suspects=cable))] == [
        "nic:h3/0", "link:leaf:l0~nic:h3/0"]


def test_a_non_hardware_incident_is_one_job_level_alert() -> None:
    [found] = evidence_from_incident(incident(cause=IncidentCause.STAGE_IMBALANCE, suspects=(),
                                              advice="rebalance stages"))
    assert (found.device, found.kind, found.advice) == ("stage_imbalance", "job", "rebalance stages")


@pytest.mark.parametrize(("slowdown", "lost", "expected"), [
    (1.2, 0.0, Severity.WARNING), (1.5, 0.0, Severity.CRITICAL), (1.1, 10.0, Severity.CRITICAL), (1.49, 9.9, Severity.WARNING),
])
def test_severity_from_slowdown_or_gpu_hours(slowdown, lost, expected) -> None:
    assert severity_of(slowdown, lost, critical_slowdown=1.5, critical_gpu_hours=10.0) is expected


def test_a_document_without_impact_is_a_clear_error() -> None:
    broken = incident().to_dict()
    del broken["impact"]
    with pytest.raises(ConfigError, match="impact"):
        Incident.from_dict(broken)  # what the alerter reads an incident message with
    with pytest.raises(RecordError, match="no irregular iterations"):
        evidence_from_incident(incident(iterations=()))
