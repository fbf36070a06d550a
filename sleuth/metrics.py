"""The Prometheus metrics of every sleuth service, defined once, and the endpoint that serves them.

Each service process (gateway, worker, localizer, alerter) serves ``/metrics`` on its own port
setting (``SLEUTH_GATEWAY_METRICS_PORT``, ``SLEUTH_WORKER_METRICS_PORT``,
``SLEUTH_LOCALIZER_METRICS_PORT``, ``SLEUTH_ALERTER_METRICS_PORT``; 0 leaves it off). A metric a process never touches is exported at zero.
"""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, start_http_server

__all__ = [
    "ALERTMANAGER_FAILURES", "ALERTS_SENT", "CONSUMER_LAG", "DETECTION_SECONDS", "LOCALIZATION_SECONDS", "RECORDS_IN", "RECORDS_REJECTED",
    "WEBHOOK_FAILURES", "WORKER_RECORDS", "serve",
]

# Latencies from milliseconds (one batch's detection) to minutes (a localization at 16k GPUs).
_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

RECORDS_IN = Counter("sleuth_gateway_records", "records the gateway accepted and put on Kafka, by kind (records, iterations)",
                     ["kind"])
RECORDS_REJECTED = Counter("sleuth_gateway_rejected_batches", "batches the gateway rejected, by reason", ["reason"])
WORKER_RECORDS = Counter("sleuth_worker_records", "CommOps records a worker inserted into ClickHouse")
CONSUMER_LAG = Gauge("sleuth_consumer_lag", "messages of a partition not yet consumed (end offset - position)",
                     ["topic", "partition"])
DETECTION_SECONDS = Histogram("sleuth_detection_seconds", "time to run the detectors on one consumed batch",
                              buckets=_SECONDS)
LOCALIZATION_SECONDS = Histogram("sleuth_localization_seconds", "from an irregularity's arrival at the streaming localizer to its incident written",
                                 buckets=_SECONDS)
ALERTS_SENT = Counter("sleuth_alerts_sent", "alert notifications sent, by status (firing, resolved)", ["status"])
WEBHOOK_FAILURES = Counter("sleuth_alert_webhook_failures", "webhook POSTs that failed after every retry")
ALERTMANAGER_FAILURES = Counter("sleuth_alertmanager_push_failures",
                                "POSTs to an Alertmanager's /api/v2/alerts that failed after every retry")


def serve(port: int, *, host: str = "127.0.0.1", registry: CollectorRegistry = REGISTRY) -> int | None:
    """Serve ``/metrics`` on ``host:port`` in a daemon thread; 0 serves nothing. The port, or None."""
    if port == 0:
        return None
    server, _thread = start_http_server(port, addr=host, registry=registry)
    return server.server_port
