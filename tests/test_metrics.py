"""The Prometheus endpoints, scraped over HTTP after records went through the gateway and a worker."""

from __future__ import annotations

import dataclasses
import time
import urllib.request

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sleuth import metrics
from sleuth.ports import free_port
from sleuth.records import RecordBatch

from .stream.harness import record_stream, registered_pipeline, stop_process, wait_for_count, worker_process
from .stream.test_records_pipeline import training_records

pytestmark = pytest.mark.services


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    """(sample name, sorted labels) -> value, from ``/metrics`` over HTTP."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_count_what_went_through(services, tmp_path) -> None:
    gateway_port = metrics.serve(free_port())  # what `sleuth gateway` does with SLEUTH_GATEWAY_METRICS_PORT
    before = scrape(gateway_port)
    records_key = ("sleuth_gateway_records_total", (("kind", "records"),))
    rejected_key = ("sleuth_gateway_rejected_batches_total", (("reason", "records.job"),))
    sent = training_records(3_000, seed=31)
    with registered_pipeline(services) as (settings, client, stub):
        worker_port = free_port()
        worker = worker_process(dataclasses.replace(settings, worker_metrics_port=worker_port), tmp_path / "worker.log")
        try:
            stub.Stream(record_stream(sent, per_message=500))
            stranger = RecordBatch.from_columns(
                job="not-registered", rank=[0], comm="tp.0", seq=[0], op=[1], peer=[-1], nbytes=[8], iteration=[0],
                t_issue_ns=[1], t_start_ns=[2], t_end_ns=[3])
            with pytest.raises(grpc.RpcError):
                stub.Stream(record_stream(stranger, per_message=1))
            after = scrape(gateway_port)
            assert after[records_key] - before.get(records_key, 0.0) == len(sent)
            assert after[rejected_key] - before.get(rejected_key, 0.0) == 1
            assert wait_for_count(client, f"{settings.clickhouse_database}.records", len(sent)) == len(sent)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:  # the worker counts a batch right after ClickHouse took it
                worker_metrics = scrape(worker_port)
                if worker_metrics.get(("sleuth_worker_records_total", ()), 0) >= len(sent):
                    break
                time.sleep(0.3)
            assert worker_metrics[("sleuth_worker_records_total", ())] == len(sent)  # a fresh process: from zero
            assert worker_metrics[("sleuth_detection_seconds_count", ())] >= 1
            lags = {labels: v for (name, labels), v in worker_metrics.items() if name == "sleuth_consumer_lag"}
            assert lags and all(dict(labels)["topic"] == settings.records_topic for labels in lags)
            assert all(v == 0 for v in lags.values())  # everything sent was consumed
        finally:
            stop_process(worker)
