"""The real local Kafka broker and ClickHouse server, through the ``services`` fixture."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import time
import urllib.request
import uuid

import pytest

from sleuth import services as local_services
from sleuth.errors import ConfigError
from tests.conftest import Services

# kafka-python 3.0.x loads its protocol schemas with the legacy importlib.resources API.
pytestmark = [
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]

MESSAGES = 100
DEADLINE_S = 30.0


def _script(services: Services, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(services.repo_root / "deploy" / "services.sh"), *args],
        cwd=services.repo_root,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_addresses_follow_the_environment() -> None:
    env = {"SLEUTH_KAFKA_PORT": "29092", "SLEUTH_CLICKHOUSE_PORT": "29000", "SLEUTH_CLICKHOUSE_HTTP_PORT": "28123"}
    assert local_services.kafka_bootstrap(env) == "127.0.0.1:29092"
    assert local_services.clickhouse_address(env) == ("127.0.0.1", 29000)
    assert local_services.clickhouse_http_port(env) == 28123
    assert local_services.kafka_bootstrap({}) == "127.0.0.1:19092"
    assert local_services.clickhouse_address({}) == ("127.0.0.1", 19000)
    assert local_services.clickhouse_http_port({}) == 18123
    assert local_services.alertmanager_url({"SLEUTH_ALERTMANAGER_PORT": "29193"}) == "http://127.0.0.1:29193"
    assert local_services.alertmanager_url({}) == "http://127.0.0.1:19193"
    with pytest.raises(ConfigError, match="SLEUTH_CLICKHOUSE_HTTP_PORT"):
        local_services.clickhouse_http_port({"SLEUTH_CLICKHOUSE_HTTP_PORT": "http"})


@pytest.mark.services
def test_kafka_produce_and_consume_round_trip(services: Services) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

    topic = f"sleuth-test-{uuid.uuid4().hex[:12]}"
    admin = KafkaAdminClient(bootstrap_servers=services.kafka_bootstrap, request_timeout_ms=10000)
    # kafka-python 3.x: topics as a dict (NewTopic objects are deprecated); wait_for_metadata
    # blocks until every partition has a leader, so the producer never races the creation.
    try:
        admin.create_topics({topic: {"num_partitions": 3, "replication_factor": 1}}, wait_for_metadata=True)
    except BaseException:
        admin.close()
        raise
    try:
        sent = [f"message-{i:03d}".encode() for i in range(MESSAGES)]
        producer = KafkaProducer(bootstrap_servers=services.kafka_bootstrap, acks="all", linger_ms=5)
        try:
            futures = [producer.send(topic, key=str(i % 7).encode(), value=v) for i, v in enumerate(sent)]
            producer.flush(timeout=20)
            metadata = [future.get(timeout=20) for future in futures]
        finally:
            producer.close()
        assert {m.topic for m in metadata} == {topic}

        # A consumer group (not assign()): exercises the group coordinator and the offsets topic,
        # which the broker config gives replication factor 1 and no initial rebalance delay.
        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=services.kafka_bootstrap,
            group_id=f"{topic}-group",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        received: list[tuple[int, int, bytes, bytes]] = []
        try:
            deadline = time.monotonic() + DEADLINE_S
            while len(received) < MESSAGES and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=500).values():
                    received.extend((r.partition, r.offset, r.key, r.value) for r in records)
        finally:
            consumer.close()

        assert len(received) == MESSAGES
        assert sorted(value for _, _, _, value in received) == sent
        # Same key, same partition, and within a key the send order is kept.
        for key in {k for _, _, k, _ in received}:
            of_key = sorted((p, o, v) for p, o, k, v in received if k == key)
            assert len({p for p, _, _ in of_key}) == 1
            assert [v for _, _, v in of_key] == [v for i, v in enumerate(sent) if str(i % 7).encode() == key]
    finally:
        admin.delete_topics([topic])
        admin.close()


@pytest.mark.services
def test_clickhouse_table_round_trip(services: Services) -> None:
    from clickhouse_driver import Client

    # clickhouse-driver 0.2.11 speaks to 18.16 (server revision 54412) as is. Things to know:
    # settings the driver knows but 18.16 does not (e.g. max_partitions_per_insert_block) fail the
    # query with "Code: 115 Unknown setting"; LowCardinality columns need the setting
    # allow_experimental_low_cardinality_type=1; compression=True needs the lz4 package.
    database = f"sleuth_test_{uuid.uuid4().hex[:12]}"
    client = Client(host=services.clickhouse_host, port=services.clickhouse_port)
    start = dt.datetime(2024, 1, 2, 3, 4, 5)
    rows = [
        (
            i,
            f"rank-{i}",
            i * 0.25,
            start + dt.timedelta(seconds=i),
            [i % 8, (i + 1) % 8],
            None if i % 3 == 0 else f"note {i}",
        )
        for i in range(500)
    ]
    try:
        assert client.execute("SELECT 1") == [(1,)]
        client.execute(f"CREATE DATABASE {database}")
        client.execute(
            f"CREATE TABLE {database}.samples ("
            " id UInt64, name String, value Float64, ts DateTime,"
            " ranks Array(UInt16), note Nullable(String)"
            ") ENGINE = MergeTree ORDER BY id"
        )
        client.execute(f"INSERT INTO {database}.samples (id, name, value, ts, ranks, note) VALUES", rows)
        assert client.execute(f"SELECT count() FROM {database}.samples") == [(len(rows),)]
        assert client.execute(f"SELECT id, name, value, ts, ranks, note FROM {database}.samples ORDER BY id") == rows
    finally:
        client.execute(f"DROP DATABASE IF EXISTS {database}")
        client.disconnect()
    assert (database,) not in client.execute("SHOW DATABASES")


@pytest.mark.services
def test_status_and_idempotent_up(services: Services) -> None:
    status = _script(services, "status")
    assert status.returncode == 0, status.stderr
    assert f"kafka running {services.kafka_bootstrap}" in status.stdout
    assert f"clickhouse running {services.clickhouse_host}:{services.clickhouse_port}" in status.stdout
    assert f"alertmanager running {services.alertmanager_url}" in status.stdout

    pid_files = [services.state_dir / name / "pid" for name in local_services.SERVICES]
    pids_before = [path.read_text() for path in pid_files]
    up = _script(services, "up")
    assert up.returncode == 0, up.stderr
    assert up.stdout.splitlines() == [
        f"clickhouse {services.clickhouse_host}:{services.clickhouse_port} (http {services.clickhouse_http_port})",
        f"kafka {services.kafka_bootstrap}",
        f"alertmanager {services.alertmanager_url}",
    ]
    assert [path.read_text() for path in pid_files] == pids_before
    assert local_services.services_running(services.repo_root) == {"clickhouse": True, "kafka": True,
                                                                   "alertmanager": True}


@pytest.mark.services
def test_alertmanager_answers_on_loopback_with_its_private_config(services: Services) -> None:
    with urllib.request.urlopen(f"{services.alertmanager_url}/api/v2/status", timeout=10) as response:
        status = json.load(response)
    assert status["cluster"]["status"] == "disabled"  # no gossip port opened
    assert "sleuth_job" in status["config"]["original"]  # deploy/alertmanager.sh's config, not the package's
    assert (services.state_dir / "alertmanager" / "data").is_dir()
