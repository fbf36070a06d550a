"""Ingest throughput and latency on this machine: loggers over gRPC -> gateway -> Kafka -> worker -> ClickHouse.

Needs the local services (``deploy/services.sh up``, ports from the usual SLEUTH_* variables).
Prints one JSON object: records/s of each stage alone and end to end, p50/p99 seconds from a
batch's send to when a ClickHouse query sees all of it, and the ratio of each rate to a same-run
baseline (encoding the records into protobuf, the cheapest step every record goes through).

    python benchmarks/bench_ingest.py [--records 200000] [--batch 10000]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import threading
import time
import uuid

import numpy as np

from sleuth.proto import codec
from sleuth.proto import commops_pb2 as pb
from sleuth.proto import commops_pb2_grpc as pb_grpc
from sleuth.records import OpKind, RecordBatch
from sleuth.settings import Settings
from sleuth.stream import clickhouse_records, connect, gateway, kafka_records, schema
from sleuth.stream.worker import Worker, decode


def records(n: int, *, iteration: int, seed: int) -> RecordBatch:
    rng = np.random.default_rng(seed)
    rank = rng.integers(0, 512, n)
    start = 1_763_700_000 * 10**9 + np.sort(rng.integers(0, 10**11, n))
    return RecordBatch.from_columns(
        job="bench", rank=rank, comm=[f"tp.{r // 8}" for r in rank], seq=np.arange(n) + iteration * n,
        op=np.full(n, int(OpKind.ALL_REDUCE)), peer=np.full(n, -1), nbytes=rng.integers(1, 1 << 28, n),
        iteration=np.full(n, iteration), t_issue_ns=start, t_start_ns=start, t_end_ns=start + 10**6,
    )


def rate(n: int, seconds: float) -> float:
    return round(n / seconds, 1) if seconds > 0 else float("inf")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=10_000)
    args = parser.parse_args()
    tag = uuid.uuid4().hex[:8]
    settings = dataclasses.replace(
        Settings.from_env(), records_topic=f"bench-records-{tag}", rejects_topic=f"bench-rejects-{tag}",
        jobs_topic=f"bench-jobs-{tag}", worker_group=f"bench-{tag}", clickhouse_database=f"bench_{tag}", gateway_port=0,
    )
    batches = [records(args.batch, iteration=i, seed=i) for i in range(args.records // args.batch)]
    total = sum(map(len, batches))
    out: dict = {"records": total, "batch": args.batch}

    # Baseline: protobuf encoding of every batch.
    t = time.perf_counter()
    wire = [codec.records_to_proto(b) for b in batches]
    out["baseline_encode_rps"] = rate(total, time.perf_counter() - t)

    # Stage: Kafka message split + decode (the worker's CPU part), no I/O.
    messages = [m for b in batches for m in kafka_records.to_messages(b)]
    t = time.perf_counter()
    _ = [kafka_records.from_message(v) for _, v in messages]
    out["stage_kafka_decode_rps"] = rate(total, time.perf_counter() - t)

    client = connect.clickhouse_client(settings)
    schema.migrate(client, settings.clickhouse_database)
    try:
        # Stage: ClickHouse columnar inserts alone (into a scratch table).
        scratch = f"{settings.clickhouse_database}.scratch"
        client.execute(clickhouse_records.records_table_ddl(scratch))
        t = time.perf_counter()
        for b in batches:
            clickhouse_records.insert_records(client, scratch, b)
        out["stage_clickhouse_insert_rps"] = rate(total, time.perf_counter() - t)

        # Stage: gateway alone (gRPC in, Kafka acks=all out), no worker running.
        connect.ensure_gateway_topics(settings)
        server, port, collector = gateway.create(settings)
        server.start()
        import grpc

        stub = pb_grpc.CollectorStub(grpc.insecure_channel(f"127.0.0.1:{port}",
                                                           options=[("grpc.max_send_message_length", 1 << 30)]))
        from sleuth.jobspec import JobSpec
        from sleuth.layout import ParallelLayout

        stub.RegisterJob(codec.jobspec_to_proto(JobSpec.from_layout("bench", ParallelLayout(512, 8, 1, 64))))
        t = time.perf_counter()
        stub.Stream(pb.StreamMessage(records=w) for w in wire)
        out["stage_gateway_to_kafka_rps"] = rate(total, time.perf_counter() - t)

        # Stage: worker alone, draining what the gateway just wrote (from its first insert on, so
        # that joining the consumer group is not counted).
        stop = threading.Event()
        worker = Worker(settings, client=connect.clickhouse_client(settings))
        thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
        thread.start()
        deadline = time.perf_counter() + 300
        while worker.batches == 0 and time.perf_counter() < deadline:
            time.sleep(0.005)
        t, first = time.perf_counter(), worker.inserted_records
        while worker.inserted_records < total and time.perf_counter() < deadline:
            time.sleep(0.005)
        out["stage_worker_kafka_to_clickhouse_rps"] = rate(worker.inserted_records - first, time.perf_counter() - t)

        # End to end, worker running: resend as a fresh iteration range; latency per batch.
        offset = len(batches)
        fresh = [records(args.batch, iteration=offset + i, seed=i) for i in range(len(batches))]
        sent_at: dict[int, float] = {}
        seen_at: dict[int, float] = {}
        table = f"{settings.clickhouse_database}.records"
        watcher_client = connect.clickhouse_client(settings)

        def watch() -> None:
            while len(seen_at) < len(fresh) and not stop.is_set():
                rows = watcher_client.execute(
                    f"SELECT iteration, count() FROM {table} WHERE iteration >= %(lo)s GROUP BY iteration",
                    {"lo": offset})
                now = time.perf_counter()
                for iteration, count in rows:
                    if count >= args.batch and iteration not in seen_at:
                        seen_at[iteration] = now
                time.sleep(0.05)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        t = time.perf_counter()
        for b in fresh:
            sent_at[int(b["iteration"][0])] = time.perf_counter()
            stub.Stream(iter([pb.StreamMessage(records=codec.records_to_proto(b))]))
        watcher.join(timeout=300)
        elapsed = max(seen_at.values()) - t if seen_at else float("nan")
        out["end_to_end_rps"] = rate(sum(map(len, fresh)), elapsed)
        latencies = np.array([seen_at[i] - sent_at[i] for i in seen_at])
        out["latency_p50_s"] = round(float(np.percentile(latencies, 50)), 3)
        out["latency_p99_s"] = round(float(np.percentile(latencies, 99)), 3)
        stop.set()
        thread.join(timeout=30)
        server.stop(grace=5).wait()
        collector.publisher.close()
        watcher_client.disconnect()
    finally:
        client.execute(f"DROP DATABASE IF EXISTS {settings.clickhouse_database}")
        client.disconnect()
    base = out["baseline_encode_rps"]
    out["ratios_to_baseline"] = {k: round(v / base, 4) for k, v in out.items()
                                 if k.endswith("_rps") and k != "baseline_encode_rps"}
    out["moonshot_rps"] = 1_000_000
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
