"""Alerts from incidents: the Alertmanager payload, severity, and bad incident documents (no services)."""

from __future__ import annotations

import pytest

from sleuth.errors import RecordError
from sleuth.oncall.alerts import Severity, evidence_from_incident, severity_of


def document(**changes) -> dict:
    base = {"job": "j1", "incident": "j1-10-12", "cause": "compute", "iterations": [10, 11, 12],
            "impact": {"slowdown": 1.3, "gpu_hours_lost": 0.5}, "advice": "",
            "suspects": [{"device": "gpu:h0/1", "kind": "gpu", "score": 0.7},
                         {"device": "host:h0", "kind": "host", "score": 0.3}]}
    return base | changes


def test_each_suspect_is_one_piece_of_evidence() -> None:
    found = evidence_from_incident(document())
    assert [(e.device, e.kind, e.first_irregular, e.last_irregular) for e in found] == [
        ("gpu:h0/1", "gpu", 10, 12), ("host:h0", "host", 10, 12)]


def test_a_non_hardware_incident_is_one_job_level_alert() -> None:
    [found] = evidence_from_incident(document(cause="stage_imbalance", suspects=[], advice="rebalance stages"))
    assert (found.device, found.kind, found.advice) == ("stage_imbalance", "job", "rebalance stages")


@pytest.mark.parametrize(("slowdown", "lost", "expected"), [
    (1.2, 0.0, Severity.WARNING), (1.5, 0.0, Severity.CRITICAL), (1.1, 10.0, Severity.CRITICAL), (1.49, 9.9, Severity.WARNING),
])
def test_severity_from_slowdown_or_gpu_hours(slowdown, lost, expected) -> None:
    assert severity_of(slowdown, lost, critical_slowdown=1.5, critical_gpu_hours=10.0) is expected


def test_a_document_without_impact_is_a_clear_error() -> None:
    broken = document()
    del broken["impact"]
    with pytest.raises(RecordError, match="impact"):
        evidence_from_incident(broken)
    with pytest.raises(RecordError, match="no irregular iterations"):
        evidence_from_incident(document(iterations=[]))
