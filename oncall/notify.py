"""Announcing alert changes: the log, Kafka ``SLEUTH_ALERTS_TOPIC`` and the webhooks (one payload per job), Alertmanager."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from itertools import groupby

from sleuth import metrics
from sleuth.oncall.alertmanager import AlertmanagerPusher
from sleuth.oncall.alerts import Alert, webhook_payload
from sleuth.oncall.webhook import WebhookSender
from sleuth.stores import Bus

_log = logging.getLogger("sleuth.alerts")

__all__ = ["Notifier"]


class Notifier:
    """A callable for ``Alerter(notify=...)``, its ``refresh`` for ``Alerter(refresh=...)``.

    ``producer``: the bus, a kafka-python producer (None: no Kafka); ``incident_url``: incident id -> the
    link of an alert's ``generatorURL`` (None: no link).
    """

    def __init__(self, *, topic: str, producer: Bus | None = None, webhooks: WebhookSender | None = None,
                 alertmanager: AlertmanagerPusher | None = None,
                 incident_url: Callable[[str], str] | None = None) -> None:
        self.topic = topic
        self.producer = producer
        self.webhooks = webhooks
        self.alertmanager = alertmanager
        self.incident_url = incident_url

    def __call__(self, alerts: list[Alert]) -> None:
        for job, group in groupby(sorted(alerts, key=lambda a: a.key), key=lambda a: a.job):
            group = list(group)
            payload = webhook_payload(group, incident_url=self.incident_url)
            for alert in group:
                _log.warning("alert %s %s job=%s device=%s severity=%s incident=%s slowdown=%.3f", alert.status.value,
                             alert.alertname, alert.job, alert.device, alert.severity.value, alert.incident,
                             alert.slowdown)
                metrics.ALERTS_SENT.labels(status=alert.status.value).inc()
            if self.producer is not None:
                self.producer.send(self.topic, key=job.encode(), value=json.dumps(payload).encode()).get(timeout=30)
            if self.webhooks is not None:
                failed = self.webhooks.send(payload)
                metrics.WEBHOOK_FAILURES.inc(len(failed))
        if self.alertmanager is not None:
            metrics.ALERTMANAGER_FAILURES.inc(len(self.alertmanager.push(alerts)))

    def refresh(self, firing: list[Alert]) -> None:
        """Keep the firing alerts alive in Alertmanager (it ends an alert it has not heard of for a while)."""
        if self.alertmanager is not None:
            metrics.ALERTMANAGER_FAILURES.inc(len(self.alertmanager.refresh(firing)))
