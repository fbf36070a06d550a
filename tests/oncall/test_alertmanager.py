"""Alerts in Alertmanager's API v2: the push rules (a recording sender), then a real Alertmanager on
127.0.0.1 (``deploy/alertmanager.sh``, started by the ``services`` fixture) showing and resolving them."""

from __future__ import annotations

import dataclasses
import json
import time
import urllib.parse
import urllib.request
import uuid
from datetime import datetime, timezone

import pytest

from sleuth.oncall.alertmanager import AlertmanagerPusher, alerts_api
from sleuth.oncall.alerts import Alert, AlertStatus, Severity
from sleuth.oncall.links import incident_url
from sleuth.oncall.service import build_alerter
from sleuth.oncall.webhook import WebhookSender

SERVE = "http://sleuth.example:18080"
S = 1_000_000_000


class Recorder:
    """A sender that keeps every body it is given and reports every URL as delivered."""

    def __init__(self) -> None:
        self.bodies: list = []

    def send(self, payload) -> list[str]:
        self.bodies.append(payload)
        return []


class Clock:
    def __init__(self, now_ns: int) -> None:
        self.now_ns = now_ns

    def __call__(self) -> int:
        return self.now_ns


def alert(job: str, **changes) -> Alert:
    base = Alert(job=job, device="gpu:h1/3", starts_ns=1_700_000_000 * S, status=AlertStatus.FIRING,
                 severity=Severity.WARNING, cause="compute", kind="gpu", score=0.8, incident=f"{job}-10-12",
                 incidents=(f"{job}-10-12",), slowdown=1.3, gpu_hours_lost=0.5, first_irregular=10, last_irregular=12)
    return dataclasses.replace(base, **changes)


def pusher(sender, clock: Clock, resend_s: float = 60.0) -> AlertmanagerPusher:
    return AlertmanagerPusher(sender, resend_s=resend_s, incident_url=lambda i: incident_url(SERVE, i), clock=clock)


def iso_ns(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1e9)


def test_a_firing_alert_is_held_for_four_resends_and_links_its_incident() -> None:
    sender, clock = Recorder(), Clock(1_700_000_100 * S)
    pusher(sender, clock).push([alert("j1")])
    [[posted]] = sender.bodies
    assert set(posted) == {"labels", "annotations", "startsAt", "endsAt", "generatorURL"}
    assert posted["labels"] == {"alertname": "SleuthSlowDevice", "sleuth_job": "j1", "device": "gpu:h1/3",
                                "kind": "gpu", "cause": "compute", "severity": "warning"}
    assert posted["generatorURL"] == f"{SERVE}/incidents/j1-10-12"
    assert iso_ns(posted["startsAt"]) == 1_700_000_000 * S
    assert iso_ns(posted["endsAt"]) == clock.now_ns + 4 * 60 * S


def test_refresh_pushes_a_firing_alert_again_only_when_due() -> None:
    sender, clock = Recorder(), Clock(1_700_000_100 * S)
    am = pusher(sender, clock)
    firing = alert("j1")
    am.refresh([firing])  # never pushed by this process (a restart): due now
    clock.now_ns += 59 * S
    am.refresh([firing])
    assert len(sender.bodies) == 1
    clock.now_ns += 1 * S
    am.refresh([firing, alert("j2", status=AlertStatus.RESOLVED, ends_ns=clock.now_ns)])  # resolved: never refreshed
    assert len(sender.bodies) == 2 and [a["labels"]["sleuth_job"] for a in sender.bodies[1]] == ["j1"]
    assert iso_ns(sender.bodies[1][0]["endsAt"]) == clock.now_ns + 240 * S


def test_resolving_pushes_the_same_labels_ending_at_the_resolution() -> None:
    sender, clock = Recorder(), Clock(1_700_000_100 * S)
    am = pusher(sender, clock)
    firing = alert("j1")
    am.push([firing])
    clock.now_ns += 30 * S
    am.push([firing.replace(status=AlertStatus.RESOLVED, ends_ns=clock.now_ns - S)])
    assert len(sender.bodies[1]) == 1
    assert sender.bodies[1][0]["labels"] == sender.bodies[0][0]["labels"]
    assert iso_ns(sender.bodies[1][0]["endsAt"]) == clock.now_ns - S
    clock.now_ns += 600 * S
    am.refresh([firing])  # a firing copy handed in after resolution is a new push, not a memory of the old one
    assert len(sender.bodies) == 3


def test_a_label_change_resolves_the_label_set_pushed_before() -> None:
    sender, clock = Recorder(), Clock(1_700_000_100 * S)
    am = pusher(sender, clock)
    firing = alert("j1")
    am.push([firing])
    clock.now_ns += 5 * S
    am.push([firing.replace(severity=Severity.CRITICAL, incident="j1-20-22")])
    old, new = sender.bodies[1]
    assert old["labels"]["severity"] == "warning" and iso_ns(old["endsAt"]) == clock.now_ns
    assert new["labels"]["severity"] == "critical" and new["generatorURL"].endswith("/incidents/j1-20-22")
    clock.now_ns += 5 * S
    am.push([firing.replace(severity=Severity.CRITICAL, score=0.9)])  # labels as before: nothing to resolve
    assert len(sender.bodies[2]) == 1


def test_bad_arguments_fail_before_work() -> None:
    with pytest.raises(ValueError, match="resend_s"):
        AlertmanagerPusher(Recorder(), resend_s=0, incident_url=str)
    with pytest.raises(ValueError, match="^resend_s must be a positive number, got inf$"):
        AlertmanagerPusher(Recorder(), resend_s=float("inf"), incident_url=str)
    assert alerts_api("http://am:9093/") == "http://am:9093/api/v2/alerts"
    assert alerts_api("http://am:9093/prefix") == "http://am:9093/prefix/api/v2/alerts"


# -- a real Alertmanager -------------------------------------------------------------------------

def shown(base_url: str, job: str) -> list[dict]:
    """The alerts Alertmanager shows for ``sleuth_job=job`` (GET /api/v2/alerts lists no resolved alert)."""
    query = urllib.parse.urlencode({"filter": f'sleuth_job="{job}"'})
    with urllib.request.urlopen(f"{base_url}/api/v2/alerts?{query}", timeout=10) as response:
        return json.load(response)


@pytest.mark.services
def test_an_incident_shows_in_alertmanager_and_resolving_it_resolves_it(oncall_settings, emulated_run,
                                                                        services) -> None:
    settings, client = oncall_settings
    settings = dataclasses.replace(settings, alertmanagers=services.alertmanager_url, alert_resolve_iterations=5,
                                   serve_url="http://sleuth.example:18080")
    tag = uuid.uuid4().hex[:8]
    first, other = (dataclasses.replace(emulated_run.incidents[0], job=f"{name}-{tag}",
                                        incident=f"{name}-{tag}-{emulated_run.incidents[0].iterations[0]}")
                    for name in ("am-a", "am-b"))
    alerter = build_alerter(settings, client=client)
    alerter.on_incident(first)
    alerter.on_incident(other)

    showing = shown(services.alertmanager_url, first.job)
    assert sorted(a["labels"]["device"] for a in showing) == sorted(s.device for s in first.suspects)
    for found in showing:
        assert found["status"]["state"] == "active"
        assert found["labels"]["alertname"] == "SleuthSlowDevice" and "job" not in found["labels"]
        assert found["generatorURL"] == f"http://sleuth.example:18080/incidents/{first.incident}"
        assert found["annotations"]["incident"] == first.incident
        assert iso_ns(found["endsAt"]) > time.time_ns() + 200 * S  # held firing for 4 x 60 s
    assert len(shown(services.alertmanager_url, other.job)) == len(other.suspects)

    resolved = alerter.resolve({first.job: first.iterations[-1] + 5})
    assert {a.status for a in resolved} == {AlertStatus.RESOLVED}
    assert shown(services.alertmanager_url, first.job) == []  # resolved: Alertmanager no longer lists it
    assert len(shown(services.alertmanager_url, other.job)) == len(other.suspects)  # the other job's still fire
    alerter.resolve({other.job: other.iterations[-1] + 5})
    assert shown(services.alertmanager_url, other.job) == []


@pytest.mark.services
def test_a_raised_severity_replaces_the_alert_in_alertmanager(oncall_settings, emulated_run, services) -> None:
    settings, client = oncall_settings
    settings = dataclasses.replace(settings, alertmanagers=services.alertmanager_url, alert_critical_slowdown=1.5)
    tag = uuid.uuid4().hex[:8]
    incident = dataclasses.replace(emulated_run.incidents[0], job=f"am-sev-{tag}", incident=f"am-sev-{tag}-1")
    worse = dataclasses.replace(incident, incident=f"am-sev-{tag}-2",
                                impact=dataclasses.replace(incident.impact, slowdown=2.0))
    alerter = build_alerter(settings, client=client)
    alerter.on_incident(incident)
    assert {a["labels"]["severity"] for a in shown(services.alertmanager_url, incident.job)} == {"warning"}
    alerter.on_incident(worse)
    showing = shown(services.alertmanager_url, incident.job)
    assert {a["labels"]["severity"] for a in showing} == {"critical"}  # the warning label set was resolved
    assert len(showing) == len(incident.suspects)
    alerter.resolve({incident.job: incident.iterations[-1] + settings.alert_resolve_iterations})
    assert shown(services.alertmanager_url, incident.job) == []


@pytest.mark.services
def test_alertmanager_refuses_a_malformed_alert_and_it_is_reported(services) -> None:
    sender = WebhookSender([alerts_api(services.alertmanager_url)], retries=2, backoff_s=0.01)
    assert sender.send([{"labels": {}}]) == [alerts_api(services.alertmanager_url)]  # 400: no label
    job = f"am-ok-{uuid.uuid4().hex[:8]}"
    assert sender.send([{"labels": {"alertname": "SleuthSlowDevice", "sleuth_job": job}}]) == []
    assert [a["labels"]["sleuth_job"] for a in shown(services.alertmanager_url, job)] == [job]
    ended = datetime.now(timezone.utc).isoformat()
    assert sender.send([{"labels": {"alertname": "SleuthSlowDevice", "sleuth_job": job}, "endsAt": ended}]) == []
    assert shown(services.alertmanager_url, job) == []
