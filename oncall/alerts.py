"""Alerts: one per job x suspect device, built from incidents, in the Alertmanager webhook format.

An incident names ranked suspects; each suspect becomes (or updates) the alert of its
(job, device), and each set of more than two the records cannot tell apart (a ring's NICs) one
alert, its device ``"<first> and <n> tied"``. An incident with a non-hardware cause (stage or
sequence-length imbalance) names no device to blame: it becomes one job-level alert keyed by the
cause. Receivers that take Alertmanager's webhook (PagerDuty, Opsgenie, Slack bridges,
alertmanager-webhook-logger ...) take the payload of ``webhook_payload`` unchanged: https://prometheus.io/docs/alerting/latest/configuration/#webhook_config
(Alertmanager itself takes the same labels and annotations through its API: ``sleuth.oncall.alertmanager``.)

The job is the label ``sleuth_job``: Prometheus gives every scraped series a ``job`` label (the
scrape job), and an alert of ours must not be grouped, inhibited or silenced as one of those.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sleuth.errors import RecordError
from sleuth.localizer.incident import Incident, IncidentCause, Suspect
from sleuth.localizer.scoring import tied_runs

__all__ = ["Alert", "AlertStatus", "Evidence", "Severity", "evidence_from_incident", "rfc3339", "severity_of",
           "webhook_payload"]

ALERTNAME = "SleuthSlowDevice"
ALERTNAME_NON_HARDWARE = "SleuthJobImbalance"
_ZERO_TIME = "0001-01-01T00:00:00Z"  # Alertmanager's endsAt of an alert that still fires
# The causes that blame devices (the localizer's own rule), as an alert's ``cause`` label names them.
_HARDWARE_CAUSES = frozenset(cause.value for cause in IncidentCause if cause.hardware)


class AlertStatus(enum.Enum):
    FIRING = "firing"
    RESOLVED = "resolved"


class Severity(enum.Enum):
    WARNING = "warning"
    CRITICAL = "critical"


def severity_of(slowdown: float, gpu_hours_lost: float, *, critical_slowdown: float, critical_gpu_hours: float) -> Severity:
    """Critical when the job runs ``critical_slowdown`` times slower or has lost ``critical_gpu_hours``."""
    if slowdown >= critical_slowdown or gpu_hours_lost >= critical_gpu_hours:
        return Severity.CRITICAL
    return Severity.WARNING


@dataclass(frozen=True)
class Evidence:
    """What one incident says about one (job, device)."""

    job: str
    device: str
    kind: str
    score: float
    cause: str
    incident: str
    first_irregular: int
    last_irregular: int
    slowdown: float
    gpu_hours_lost: float
    advice: str


def evidence_from_incident(incident: Incident) -> list[Evidence]:
    """One ``Evidence`` per suspect of an incident, one for each set of more than two suspects the
    records cannot tell apart (``scoring.tied_runs``: a ring's NICs), or one job-level for
    non-hardware causes."""
    if not incident.iterations:
        raise RecordError(f"incident {incident.incident} of job {incident.job} lists no irregular iterations")
    suspects = _one_per_tied_set(incident.suspects)
    if not incident.cause.hardware or not suspects:
        suspects = [(incident.cause.value, "job", 1.0)]
    first, last = min(incident.iterations), max(incident.iterations)
    impact = incident.impact
    return [
        Evidence(incident.job, device, kind, score, incident.cause.value, incident.incident, first, last,
                 impact.slowdown, impact.gpu_hours_lost, incident.advice)
        for device, kind, score in suspects
    ]


def _one_per_tied_set(suspects: tuple[Suspect, ...]) -> list[tuple[str, str, float]]:
    """(device, kind, score) per alert: a tied set is one, named by its first device and how many
    tie with it (the incident's advice lists them), so that a ring of 256 NICs pages once."""
    runs = {run[0]: run for run in tied_runs([(s.device, s.score) for s in suspects])}
    inside = {device for run in runs.values() for device in run}
    return [(f"{s.device} and {len(runs[s.device]) - 1} tied" if s.device in runs else s.device, s.kind.value, s.score)
            for s in suspects if s.device in runs or s.device not in inside]


@dataclass(frozen=True)
class Alert:
    """The state of one alert; a change makes a new ``Alert`` (and a new row version in ClickHouse)."""

    job: str
    device: str
    starts_ns: int
    status: AlertStatus
    severity: Severity
    cause: str
    kind: str
    score: float
    incident: str  # the latest incident that named the device
    incidents: tuple[str, ...]
    slowdown: float
    gpu_hours_lost: float
    first_irregular: int
    last_irregular: int
    ends_ns: int = 0
    advice: str = ""
    resolution: str = ""  # why a resolved alert resolved, in words; empty while it fires

    @property
    def key(self) -> tuple[str, str]:
        return self.job, self.device

    @property
    def alertname(self) -> str:
        return ALERTNAME if self.cause in _HARDWARE_CAUSES else ALERTNAME_NON_HARDWARE

    @property
    def fingerprint(self) -> str:
        # Stable for the alert's whole life (labels that change, like severity, are left out).
        identity = f"{self.alertname}\0{self.job}\0{self.device}\0{self.starts_ns}"
        return hashlib.sha256(identity.encode()).hexdigest()[:16]

    def replace(self, **changes: Any) -> Alert:
        return dataclasses.replace(self, **changes)

    def labels(self) -> dict[str, str]:
        return {"alertname": self.alertname, "sleuth_job": self.job, "device": self.device, "kind": self.kind,
                "cause": self.cause, "severity": self.severity.value}

    def annotations(self) -> dict[str, str]:
        where = f"{self.device} ({self.kind})" if self.alertname == ALERTNAME else f"the job ({self.cause})"
        text = {
            "summary": f"job {self.job} runs x{self.slowdown:.2f} slower; suspect {where}",
            "description": (
                f"{len(self.incidents)} incident(s), latest {self.incident}: irregular iterations "
                f"{self.first_irregular}-{self.last_irregular}, {self.gpu_hours_lost:.3f} GPU-hours lost, "
                f"suspect score {self.score:.3f}. Inspect: sleuth incident show {self.incident}"
            ),
            "incident": self.incident,
            "incidents": ",".join(self.incidents),
            "slowdown": f"{self.slowdown:.4f}",
            "gpu_hours_lost": f"{self.gpu_hours_lost:.6f}",
            "score": f"{self.score:.6f}",
        }
        if self.advice:
            text["advice"] = self.advice
        if self.resolution:
            text["resolution"] = self.resolution
        return text

    def to_webhook_alert(self, *, generator_url: str = "") -> dict[str, Any]:
        return {
            "status": self.status.value,
            "labels": self.labels(),
            "annotations": self.annotations(),
            "startsAt": rfc3339(self.starts_ns),
            "endsAt": rfc3339(self.ends_ns) if self.status is AlertStatus.RESOLVED else _ZERO_TIME,
            "generatorURL": generator_url,
            "fingerprint": self.fingerprint,
        }


def webhook_payload(alerts: list[Alert], *, receiver: str = "sleuth", external_url: str = "",
                    incident_url: Callable[[str], str] | None = None) -> dict[str, Any]:
    """The Alertmanager webhook body (version 4) for alerts of one job.

    ``incident_url``: incident id -> the link of each alert's ``generatorURL`` (None: no link).
    """
    if not alerts:
        raise ValueError("a webhook payload needs at least one alert")
    jobs = {a.job for a in alerts}
    if len(jobs) != 1:
        raise ValueError(f"a webhook payload groups the alerts of one job, got {sorted(jobs)}")
    (job,) = jobs
    firing = any(a.status is AlertStatus.FIRING for a in alerts)
    common_labels = dict(set.intersection(*(set(a.labels().items()) for a in alerts)))
    common_annotations = dict(set.intersection(*(set(a.annotations().items()) for a in alerts)))
    return {
        "version": "4",
        "groupKey": f'{{}}:{{sleuth_job="{job}"}}',
        "truncatedAlerts": 0,
        "status": AlertStatus.FIRING.value if firing else AlertStatus.RESOLVED.value,
        "receiver": receiver,
        "groupLabels": {"sleuth_job": job},
        "commonLabels": common_labels,
        "commonAnnotations": common_annotations,
        "externalURL": external_url,
        "alerts": [a.to_webhook_alert(generator_url=incident_url(a.incident) if incident_url else "")
                   for a in alerts],
    }


def rfc3339(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
