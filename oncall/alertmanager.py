"""Alerts pushed to Alertmanager through its API v2: ``POST <url>/api/v2/alerts``.

The body is a JSON array of postable alerts (prometheus/alertmanager ``api/v2/openapi.yaml``,
``postableAlert``): labels, annotations, startsAt, endsAt, generatorURL. Alertmanager knows an
alert by its label set alone, and is pushed to the way Prometheus pushes:

* a firing alert is pushed with ``endsAt`` = now + 4 x ``resend_s`` and pushed again every
  ``resend_s`` while it fires (``refresh``): Alertmanager holds it firing as long as the fault
  lasts, and ends it by itself once the alerter is gone for good;
* a resolved alert is pushed with the same labels and ``endsAt`` = when it resolved;
* an update that changes a label (the severity rises, the cause changes) is a new alert to
  Alertmanager: the label set pushed before is resolved in the same push.

A push that fails after the sender's retries is not queued: the next refresh pushes a firing alert
again, and an alert whose resolution was lost ends at the ``endsAt`` of its last push. After a
restart the label sets pushed before are unknown; one that an update replaced then ends the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from sleuth.oncall.alerts import Alert, AlertStatus, rfc3339
from sleuth.validation import positive_number

__all__ = ["ALERTS_PATH", "AlertmanagerPusher", "alerts_api", "postable_alert"]

ALERTS_PATH = "/api/v2/alerts"
# How many resend intervals a push keeps an alert firing (Prometheus: 4 x max(resend delay, evaluation interval)).
_VALID_RESENDS = 4


class Sender(Protocol):
    def send(self, payload: Any) -> list[str]: ...


def alerts_api(base_url: str) -> str:
    """The alerts endpoint of the Alertmanager at ``base_url`` (``http://host:9093``, route prefix included)."""
    return base_url.rstrip("/") + ALERTS_PATH


def postable_alert(alert: Alert, *, ends_ns: int, generator_url: str) -> dict[str, Any]:
    """One element of the ``POST /api/v2/alerts`` body."""
    return {"labels": alert.labels(), "annotations": alert.annotations(), "startsAt": rfc3339(alert.starts_ns),
            "endsAt": rfc3339(ends_ns), "generatorURL": generator_url}


class AlertmanagerPusher:
    """Pushes alert changes (``push``) and keeps firing alerts alive (``refresh``); both return the URLs that failed.

    ``sender``: posts a JSON body to the Alertmanagers (``WebhookSender`` over ``alerts_api`` URLs);
    ``incident_url``: incident id -> the ``generatorURL`` (its page in ``sleuth serve``).
    """

    def __init__(self, sender: Sender, *, resend_s: float, incident_url: Callable[[str], str],
                 clock: Callable[[], int] = time.time_ns) -> None:
        self.sender = sender
        self.resend_ns = int(positive_number("resend_s", resend_s, error=ValueError) * 1e9)
        self.incident_url = incident_url
        self.clock = clock
        self._pushed: dict[str, tuple[dict[str, str], int]] = {}  # firing alert's fingerprint -> (labels, pushed at)

    def push(self, alerts: Iterable[Alert]) -> list[str]:
        now = self.clock()
        body = []
        for alert in alerts:
            labels = alert.labels()
            before = self._pushed.pop(alert.fingerprint, None)
            if before is not None and before[0] != labels:
                body.append({"labels": before[0], "startsAt": rfc3339(alert.starts_ns), "endsAt": rfc3339(now)})
            if alert.status is AlertStatus.FIRING:
                ends_ns = now + _VALID_RESENDS * self.resend_ns
                self._pushed[alert.fingerprint] = (labels, now)
            else:
                ends_ns = alert.ends_ns or now
            body.append(postable_alert(alert, ends_ns=ends_ns, generator_url=self.incident_url(alert.incident)))
        return self.sender.send(body) if body else []

    def refresh(self, firing: Iterable[Alert]) -> list[str]:
        """Push again the firing alerts this pusher has not pushed for ``resend_s`` (or never: after a restart)."""
        now = self.clock()
        due = [alert for alert in firing if alert.status is AlertStatus.FIRING
               and now - self._pushed.get(alert.fingerprint, ({}, now - self.resend_ns))[1] >= self.resend_ns]
        return self.push(due)
