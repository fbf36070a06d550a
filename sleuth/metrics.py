"""The Prometheus metrics of every sleuth service, defined once, and the endpoint that serves them.

Each service process (gateway, worker, localizer, alerter) serves ``/metrics`` on its own port
setting (``SLEUTH_GATEWAY_METRICS_PORT``, ``SLEUTH_WORKER_METRICS_PORT``,
``SLEUTH_LOCALIZER_METRICS_PORT``, ``SLEUTH_ALERTER_METRICS_PORT``; 0 leaves it off). A metric a process never touches is exported at zero.
"""

from __future__ import annotations

import platform

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, Info, start_http_server

from sleuth import __version__

__all__ = [
    "ALERTMANAGER_FAILURES", "ALERTS_SENT", "BENIGN_PAUSES", "BUILD_INFO", "CONSUMER_LAG", "DETECTION_FAILURES",
    "DETECTION_SECONDS", "LOCALIZATION_SECONDS", "LOGGER_DROPPED", "OPEN_INCIDENTS", "RECORDS_IN", "RECORDS_REJECTED", "WEBHOOK_FAILURES", "WORKER_RECORDS", "serve",
]

# Latencies from milliseconds (one batch's detection) to minutes (a localization at 16k GPUs).
_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

RECORDS_IN = Counter("sleuth_gateway_records", "records the gateway accepted and put on Kafka, by kind (records, iterations)",
                     ["kind"])
RECORDS_REJECTED = Counter("sleuth_gateway_rejected_batches", "batches the gateway rejected, by reason", ["reason"])
WORKER_RECORDS = Counter("sleuth_worker_records", "CommOps records a worker inserted into ClickHouse")
CONSUMER_LAG = Gauge("sleuth_consumer_lag", "messages of a partition not yet consumed (end offset - position)",
                     ["topic", "partition"])
DETECTION_SECONDS = Histogram("sleuth_detection_seconds", "time to run the detectors on one slice of a consumed batch (whole iterations)",
                              buckets=_SECONDS)
DETECTION_FAILURES = Counter("sleuth_detection_failures",
                             "detector runs that raised on a consumed batch (the batch was inserted all the same)")
LOCALIZATION_SECONDS = Histogram("sleuth_localization_seconds", "from an irregularity's arrival at the streaming localizer to its incident written",
                                 buckets=_SECONDS)
BENIGN_PAUSES = Counter("sleuth_benign_pauses",
                        "irregular iterations' incidents the streaming localizer judged benign pauses: logged, not paged")
# Labelled training_job, not job: Prometheus's own `job` label names the scraped service.
LOGGER_DROPPED = Counter("sleuth_logger_dropped_records",
                         "records a job's loggers lost before sending (ring full, spill lost), as their next batch reports",
                         ["training_job"])
OPEN_INCIDENTS = Gauge("sleuth_open_incidents", "incidents that a firing alert cites (the alerter's view; sleuth incidents --open)")
ALERTS_SENT = Counter("sleuth_alerts_sent", "alert notifications sent, by status (firing, resolved)", ["status"])
WEBHOOK_FAILURES = Counter("sleuth_alert_webhook_failures", "webhook POSTs that failed after every retry")
ALERTMANAGER_FAILURES = Counter("sleuth_alertmanager_push_failures",
                                "POSTs to an Alertmanager's /api/v2/alerts that failed after every retry")

#: ``sleuth_build_info{version, python} 1``: which sleuth each process runs (a rollout shows as two versions).
BUILD_INFO = Info("sleuth_build", "the sleuth version and Python version of this process")
BUILD_INFO.info({"version": __version__, "python": platform.python_version()})


def serve(port: int, *, host: str = "127.0.0.1", registry: CollectorRegistry = REGISTRY) -> int | None:
    """Serve ``/metrics`` on ``host:port`` in a daemon thread; 0 serves nothing. The port, or None."""
    if port == 0:
        return None
    server, _thread = start_http_server(port, addr=host, registry=registry)
    return server.server_port
