"""10,000 records through the real Kafka broker into the real ClickHouse server, and back."""

from __future__ import annotations

import time
import uuid

import numpy as np
import pytest

from sleuth.records import OpKind, RecordBatch
from sleuth.storage import records_table
from sleuth.stream.ingest import kafka_records

from ..conftest import Services

pytestmark = [
    pytest.mark.services,
    # kafka-python 3.x still imports importlib.resources helpers that warn on 3.11
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

N_RECORDS = 10_000
DEADLINE_S = 60.0


def training_records(n: int, *, seed: int) -> RecordBatch:
    """Records shaped like a real job's: 64 ranks, tp/dp collectives and pp send/recv."""
    rng = np.random.default_rng(seed)
    rank = rng.integers(0, 64, n)
    op = rng.choice([OpKind.ALL_REDUCE, OpKind.ALL_GATHER, OpKind.REDUCE_SCATTER, OpKind.SEND, OpKind.RECV], n)
    p2p = np.isin(op, [OpKind.SEND, OpKind.RECV])
    start = 1_763_700_000 * 10**9 + np.sort(rng.integers(0, 10**12, n))
    return RecordBatch.from_columns(
        job=[["job-a", "job-b"][i] for i in rng.integers(0, 2, n)],
        rank=rank,
        comm=[f"{'pp' if p else 'tp'}.{r // 2}" for p, r in zip(p2p, rank)],
        seq=np.arange(n),
        op=op,
        peer=np.where(p2p, (rank + 32) % 64, -1),
        nbytes=rng.integers(1, 1 << 30, n),
        iteration=rng.integers(-1, 1_000, n),
        t_issue_ns=start - rng.integers(0, 10_000, n),
        t_start_ns=start,
        t_end_ns=start + rng.integers(1_000, 10**8, n),
    )


def sorted_by_key(batch: RecordBatch) -> RecordBatch:
    """The batch in the order select_records gives (job, rank, iteration, comm, seq, op, peer)."""
    order = np.lexsort(
        (batch["peer"], batch["op"], batch["seq"], batch.decoded("comm"), batch["iteration"], batch["rank"],
         batch.decoded("job"))
    )
    return batch.take(order)


def test_10k_records_through_kafka_into_clickhouse_and_back(services: Services) -> None:
    from clickhouse_driver import Client
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

    sent = training_records(N_RECORDS, seed=11)
    topic = f"sleuth-records-test-{uuid.uuid4().hex[:10]}"
    database = f"sleuth_test_{uuid.uuid4().hex[:10]}"
    admin = KafkaAdminClient(bootstrap_servers=services.kafka_bootstrap, request_timeout_ms=10_000)
    client = Client(services.clickhouse_host, port=services.clickhouse_port)
    admin.create_topics({topic: {"num_partitions": 4, "replication_factor": 1}}, wait_for_metadata=True)
    client.execute(f"CREATE DATABASE {database}")
    try:
        # Produce: keyed by (job, rank), several messages per key so that order matters.
        messages = kafka_records.to_messages(sent, max_records=50)
        producer = KafkaProducer(bootstrap_servers=services.kafka_bootstrap, acks="all")
        try:
            for key, value in messages:
                producer.send(topic, key=key, value=value)
            producer.flush(timeout=30)
        finally:
            producer.close()

        # Consume every message and decode it.
        consumer = KafkaConsumer(
            topic, bootstrap_servers=services.kafka_bootstrap, group_id=f"{topic}-sink",
            auto_offset_reset="earliest", enable_auto_commit=False,
        )
        received: list[RecordBatch] = []
        per_key: dict[bytes, list[int]] = {}
        try:
            deadline = time.monotonic() + DEADLINE_S
            while sum(map(len, received)) < N_RECORDS and time.monotonic() < deadline:
                for partition_records in consumer.poll(timeout_ms=500).values():
                    for message in partition_records:
                        batch = kafka_records.from_message(message.value)
                        received.append(batch)
                        per_key.setdefault(message.key, []).extend(batch["seq"].tolist())
        finally:
            consumer.close()
        consumed = RecordBatch.concat(received)
        assert len(consumed) == N_RECORDS
        # One rank's records stay in order: within a key, seq (the send order here) only grows.
        assert all(seqs == sorted(seqs) for seqs in per_key.values())

        # Write to ClickHouse in one columnar insert, read back in key order.
        table = f"{database}.records"
        client.execute(records_table.records_table_ddl(table))
        assert records_table.insert_records(client, table, consumed) == N_RECORDS
        stored = records_table.select_records(client, table)
        assert stored.equals(sorted_by_key(sent))
        assert client.execute(f"SELECT count() FROM {table}") == [(N_RECORDS,)]
        jobs = client.execute(f"SELECT job, count() FROM {table} GROUP BY job ORDER BY job")
        assert jobs == [(job, int((sent.decoded("job") == job).sum())) for job in ("job-a", "job-b")]
    finally:
        client.execute(f"DROP DATABASE IF EXISTS {database}")
        client.disconnect()
        admin.delete_topics([topic])
        admin.close()


def test_replayed_records_do_not_double_count(services: Services) -> None:
    from clickhouse_driver import Client

    batch = training_records(500, seed=12)
    database = f"sleuth_test_{uuid.uuid4().hex[:10]}"
    client = Client(services.clickhouse_host, port=services.clickhouse_port)
    client.execute(f"CREATE DATABASE {database}")
    try:
        table = f"{database}.records"
        client.execute(records_table.records_table_ddl(table))
        records_table.insert_records(client, table, batch)
        records_table.insert_records(client, table, batch)  # an at-least-once replay
        assert len(records_table.select_records(client, table)) == 500
        one_job = records_table.select_records(client, table, where="job = %(job)s", params={"job": "job-a"})
        assert one_job.equals(sorted_by_key(batch.take(batch.decoded("job") == "job-a")))
    finally:
        client.execute(f"DROP DATABASE IF EXISTS {database}")
        client.disconnect()
