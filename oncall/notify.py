"""Announcing alert changes: the log, Kafka ``SLEUTH_ALERTS_TOPIC`` and the webhooks, one payload per job."""

from __future__ import annotations

import json
import logging
from itertools import groupby
from typing import Any

from sleuth import metrics
from sleuth.oncall.alerts import Alert, webhook_payload
from sleuth.oncall.webhook import WebhookSender

_log = logging.getLogger("sleuth.alerts")

__all__ = ["Notifier"]


class Notifier:
    """A callable for ``Alerter(notify=...)``; ``producer`` is a kafka-python producer (None: no Kafka)."""

    def __init__(self, *, topic: str, producer: Any = None, webhooks: WebhookSender | None = None) -> None:
        self.topic = topic
        self.producer = producer
        self.webhooks = webhooks

    def __call__(self, alerts: list[Alert]) -> None:
        for job, group in groupby(sorted(alerts, key=lambda a: a.key), key=lambda a: a.job):
            group = list(group)
            payload = webhook_payload(group)
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
