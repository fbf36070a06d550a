"""The worker with the stream detector on the real Kafka and ClickHouse: abnormal_ops rows and
irregularity messages appear for an emulated job with a slow GPU."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from sleuth.storage import schema
from sleuth.stream import connect
from sleuth.stream.detection import StreamDetector
from sleuth.stream.detection.publish import IrregularityPublisher, decode
from sleuth.stream.services.worker import Worker

from ...conftest import Services
from ..harness import consume, private_settings, stream_emulation, wait_for_count
from .conftest import emulation, small_model

pytestmark = [pytest.mark.services, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def test_worker_writes_abnormal_ops_and_publishes_the_change_point(services: Services) -> None:
    settings = private_settings(services)
    settings = dataclasses.replace(settings, irregularities_topic=f"{settings.records_topic}-irregularities")
    em = emulation("gpu:h0003/1,slow=1.5,start=15")
    client = connect.clickhouse_client(settings)
    schema.migrate(client, settings.clickhouse_database)
    # Topics first: a worker that joins before its topic exists may be assigned nothing for a while.
    connect.ensure_topics(settings, {settings.records_topic: settings.records_partitions,
                                     settings.rejects_topic: 1, settings.irregularities_topic: 1})
    publisher = IrregularityPublisher(settings)
    detector = StreamDetector(small_model())
    stop = threading.Event()
    worker = Worker(settings, client=connect.clickhouse_client(settings), detectors=[detector], publish=publisher)
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    try:
        stream_emulation(settings, client, em, range(40))
        db = settings.clickhouse_database
        flagged = wait_for_count(client, f"{db}.abnormal_ops", 1000, timeout_s=60)
        labels, _ = em.abnormal(range(16))
        # Most of what the worker flagged is truly abnormal (the labels hold 3,293).
        assert 1000 <= flagged <= 2 * int(labels.sum())
        rows = client.execute(f"SELECT min(iteration), count(DISTINCT rank) FROM {db}.abnormal_ops FINAL")
        assert rows[0][1] >= 8
        messages = consume(settings, settings.irregularities_topic, messages=100, timeout_s=20)
        found = [decode(m.value) for m in messages]
        assert any(f["change_point"] and f["iteration"] == 15 and f["kind"] == "persistent" for f in found)
        assert all(m.key == em.scenario.job.encode() for m in messages)
    finally:
        stop.set()
        thread.join(timeout=30)
        publisher.close()
        client.execute(f"DROP DATABASE IF EXISTS {settings.clickhouse_database}")
        client.disconnect()
