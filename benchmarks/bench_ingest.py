"""Ingest as deployed, on this machine: loggers over gRPC -> gateway -> Kafka -> workers (with their
detectors) -> ClickHouse.

Needs the local services (``deploy/services.sh up``, ports from the usual SLEUTH_* variables).
The records are an emulated job's (``ingest_job``: tp 8, pp 4, data-parallel the rest; every rank,
consecutive iterations, each block of ``--ranks-per-batch`` ranks one logger batch per iteration).
Prints one JSON object:

* ``stages``: records/s of each stage alone: the gateway's protobuf decode and validation; the
  gateway (``sleuth gateway``, its own process) into Kafka, acknowledged; a worker's Kafka consume
  and decode (its faust app, inserts discarded); the deployed detectors
  (``stream.detection.deployed.worker_detectors``, what ``sleuth worker`` runs) on worker-sized
  batches, decoded (``worker_decode_rps``) and judged (``detection_rps``) as the worker does
  (``Worker.prepare``), each alone, judged over the whole run and over its second half alone
  (``detection_warm_rps``: the vote screen learns from the rows the forest walks, most of them in a
  job's first iterations), and the two together (``decode_detection_rps``, ``_warm_rps``: the second
  half's share of the decoding); the ClickHouse inserts of those batches.
* ``end_to_end``, per ``--workers`` count: ``sleuth gateway`` and N ``sleuth worker`` processes
  sharing ``--partitions`` partitions; records/s from the first send until ClickHouse answers
  every record; then p50/p99 seconds from a batch's send to when a query sees all of it, sent at
  ``--latency-load`` of that rate; then ``--overload-s`` seconds offered at twice that rate: the
  rate the gateway let the clients send and the peak resident memory of the gateway and workers.
  ``cpu_us_per_record``: the CPU µs a record each process of the path used over the timed run (the
  gateway, each worker, the local ClickHouse and Kafka, the benchmark's own senders): where the two
  cores went.
* ``ratios_to_baseline``: each rate over the same run's protobuf encoding of the records.

    python benchmarks/bench_ingest.py [--world 512] [--iterations 96] [--workers 1 2] [--insert-only]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import itertools
import json
import os
import threading
import time
import uuid
from collections.abc import Callable

import numpy as np

import ingest_job
import ingest_procs
from sleuth.progress import progress
from sleuth.proto import codec
from sleuth.proto import commops_pb2 as pb
from sleuth.settings import Settings
from sleuth.storage import schema
from sleuth.storage.sink import ClickHouseSink
from sleuth.stream import connect
from sleuth.stream.ingest import gateway, kafka_records, validate
from sleuth.stream.detection.deployed import worker_detectors
from sleuth.stream.ingest.job_registry import JobRegistry
from sleuth.stream.services.worker import Worker, decode


def rate(n: int, seconds: float) -> float:
    return round(n / seconds, 1) if seconds > 0 else float("inf")


def timed(n: int, work: Callable[[], object]) -> float:
    t = time.perf_counter()
    work()
    return rate(n, time.perf_counter() - t)


@dataclasses.dataclass
class _Message:  # what ``decode`` reads of a Kafka message
    value: bytes
    headers: list
    partition: int = 0
    offset: int = 0


class _Discard:
    """A ClickHouse client that drops every insert: the worker's consume and decode, measured alone."""

    def execute(self, *args: object, **kwargs: object) -> list:
        return []

    def disconnect(self) -> None:
        pass


def worker_batches(batches: list[ingest_job.Batch], settings: Settings, world: int) -> list[list[_Message]]:
    """What a worker takes from Kafka: the gateway's messages, ``worker_max_records`` messages at a time."""
    layout = ingest_job.layout_for(world)
    messages = []
    for b in batches:
        messages += [_Message(v, [(kafka_records.KIND_HEADER, kafka_records.RECORDS)])
                     for _, v in kafka_records.to_messages(b.records, layout_of=lambda _: layout)]
        messages += [_Message(v, [(kafka_records.KIND_HEADER, kafka_records.ITERATIONS)])
                     for _, v in kafka_records.iteration_messages(b.iterations, layout_of=lambda _: layout)]
    size = settings.worker_max_records
    return [messages[i:i + size] for i in range(0, len(messages), size)]


class Clients:
    """``n`` loggers' streams into the gateway at ``port``; each batch's send time, by (iteration, block)."""

    def __init__(self, port: int, n: int) -> None:
        import grpc

        self.channels = [grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.max_send_message_length", 1 << 30)])
                         for _ in range(n)]
        self.sent_at: dict[tuple[int, int], float] = {}
        self.sent_records = 0

    def register(self, spec: object) -> None:
        from sleuth.proto import commops_pb2_grpc as pb_grpc

        pb_grpc.CollectorStub(self.channels[0]).RegisterJob(codec.jobspec_to_proto(spec))

    def send(self, items: list[tuple[tuple[int, int], int, list[bytes]]], *, rps: float | None = None,
             until: float | None = None) -> None:
        """Stream ``items`` ((iteration, block), records, messages), split over the clients, each
        paced to its share of ``rps`` (None: as fast as the gateway takes them); cycling over them
        until ``until`` (a perf_counter time) when given."""
        start = time.perf_counter()
        shares = [items[k::len(self.channels)] for k in range(len(self.channels))]

        def messages(share: list) -> object:
            done = 0
            for key, n, wire in (itertools.cycle(share) if until is not None else share):
                if until is not None and time.perf_counter() >= until:
                    return
                if rps is not None:
                    wait = start + done * len(self.channels) / rps - time.perf_counter()
                    if wait > 0:
                        time.sleep(wait)
                self.sent_at.setdefault(key, time.perf_counter())
                yield from wire
                done += n
                self.sent_records += n

        def stream(channel: object, share: list) -> None:
            call = channel.stream_unary("/sleuth.v1.Collector/Stream", request_serializer=None,
                                        response_deserializer=pb.StreamSummary.FromString)
            call(messages(share))

        threads = [threading.Thread(target=stream, args=(c, s)) for c, s in zip(self.channels, shares)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def close(self) -> None:
        for channel in self.channels:
            channel.close()


class Watcher:
    """Polls ClickHouse for when each (iteration, block) of ``job`` has all its records."""

    def __init__(self, settings: Settings, job: str, expected: dict[tuple[int, int], int], ranks_per_batch: int) -> None:
        self.client = connect.clickhouse_client(settings)
        self.query = (f"SELECT iteration, intDiv(rank, {ranks_per_batch}) AS block, count() "
                      f"FROM {settings.clickhouse_database}.records WHERE job = %(job)s GROUP BY iteration, block")
        self.job, self.expected = job, expected
        self.seen_at: dict[tuple[int, int], float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            now = time.perf_counter()
            for iteration, block, count in self.client.execute(self.query, {"job": self.job}):
                key = (iteration, block)
                if key not in self.seen_at and count >= self.expected.get(key, 1 << 62):
                    self.seen_at[key] = now
            time.sleep(0.1)

    def wait(self, keys: list[tuple[int, int]], timeout: float) -> float:
        """When the last of ``keys`` was seen (NaN when not all were by ``timeout`` seconds)."""
        deadline = time.perf_counter() + timeout
        while not all(k in self.seen_at for k in keys) and time.perf_counter() < deadline:
            time.sleep(0.05)
        return max((self.seen_at[k] for k in keys if k in self.seen_at), default=float("nan")) \
            if all(k in self.seen_at for k in keys) else float("nan")

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        self.client.disconnect()


def service_env(settings: Settings, tag: str, partitions: int) -> dict[str, str]:
    return {"SLEUTH_RECORDS_TOPIC": f"bench-records-{tag}", "SLEUTH_REJECTS_TOPIC": f"bench-rejects-{tag}",
            "SLEUTH_JOBS_TOPIC": f"bench-jobs-{tag}", "SLEUTH_WORKER_GROUP": f"bench-{tag}",
            "SLEUTH_IRREGULARITIES_TOPIC": f"bench-irregularities-{tag}",
            "SLEUTH_CLICKHOUSE_DB": settings.clickhouse_database, "SLEUTH_RECORDS_PARTITIONS": str(partitions)}


def detect_and_insert(settings: Settings, batches: list[ingest_job.Batch], world: int) -> dict:
    """The deployed detectors on worker-sized batches, then the ClickHouse inserts of those batches, each alone."""
    total = sum(len(b.records) for b in batches)
    out: dict = {}
    taken = worker_batches(batches, settings, world)
    worker = Worker(settings, client=None, detectors=worker_detectors(settings))
    half = len(taken) // 2
    began = time.perf_counter()
    decoded = [decode(messages) for messages in taken]
    judging = time.perf_counter()
    found = [worker.judge(d) for d in decoded[:half]]
    warm = time.perf_counter()
    found += [worker.judge(d) for d in decoded[half:]]
    ended = time.perf_counter()
    later = sum(len(d.records) for d in decoded[half:])
    out["worker_decode_rps"] = rate(total, judging - began)
    out["detection_rps"] = rate(total, ended - judging)
    # A long job's sustained rate: the vote screen learns from the rows it walks, most of them early on.
    out["detection_warm_rps"] = rate(later, ended - warm)
    out["decode_detection_rps"] = rate(total, ended - began)
    out["decode_detection_warm_rps"] = rate(later, (judging - began) * later / total + ended - warm)
    client = connect.clickhouse_client(settings)
    sink = ClickHouseSink(client, settings.clickhouse_database)
    out["clickhouse_insert_rps"] = timed(total, lambda: [
        sink.write(d.records, d.iterations, [], f.abnormal) for d, f in zip(decoded, found)])
    client.disconnect()
    return out


def stages(settings: Settings, batches: list[ingest_job.Batch], world: int, tag: str, partitions: int) -> dict:
    total = sum(len(b.records) for b in batches)
    out: dict = {}
    wire = [m for b in batches for m in ingest_job.wire(b, "bench")]
    registry = JobRegistry([ingest_job.spec("bench", world)])
    limits = gateway.limits_from(settings)
    out["gateway_decode_validate_rps"] = timed(total, lambda: [
        validate.check_message(gateway._parse(m), limits=limits, registered=registry) for m in wire])

    out.update(detect_and_insert(settings, batches, world))

    env = service_env(settings, f"{tag}-stages", partitions)
    service, port = ingest_procs.gateway(env)
    clients = Clients(port, 4)
    try:
        clients.register(ingest_job.spec("bench", world))
        items = [((b.iteration, b.block), len(b.records), ingest_job.wire(b, "bench")) for b in batches]
        out["gateway_to_kafka_rps"] = timed(total, lambda: clients.send(items))
    finally:
        clients.close()
        service.stop()

    # The worker's faust app drains what the gateway wrote, inserts discarded, no detectors; timed
    # from when it holds its partitions, so that joining the consumer group is not counted.
    consumer_settings = dataclasses.replace(settings, records_topic=env["SLEUTH_RECORDS_TOPIC"],
                                            worker_group=env["SLEUTH_WORKER_GROUP"])
    consumer = Worker(consumer_settings, client=_Discard())
    stop = threading.Event()
    thread = threading.Thread(target=consumer.run, args=(stop,), daemon=True)
    thread.start()
    deadline = time.perf_counter() + 300
    while not consumer.assignment() and time.perf_counter() < deadline:
        time.sleep(0.005)
    t, first = time.perf_counter(), consumer.inserted_records
    while consumer.inserted_records < total and time.perf_counter() < deadline:
        time.sleep(0.005)
    out["kafka_consume_decode_rps"] = rate(consumer.inserted_records - first, time.perf_counter() - t)
    stop.set()
    thread.join(timeout=30)
    return out


class _CpuClock:
    """CPU seconds each process of the path uses from this clock's making on: where the cores go."""

    def __init__(self, gateway: ingest_procs.Service, workers: list[ingest_procs.Service]) -> None:
        self.reads: dict[str, Callable[[], float]] = {"gateway": gateway.cpu_s}
        self.reads.update({f"worker{k}": w.cpu_s for k, w in enumerate(workers)})
        for name in ("clickhouse", "kafka"):
            pid = ingest_procs.service_pid(name)
            if pid is not None:
                self.reads[name] = functools.partial(ingest_procs.cpu_seconds, pid)
        self.reads["benchmark (senders, watcher)"] = functools.partial(ingest_procs.cpu_seconds, os.getpid())
        self.start = {name: read() for name, read in self.reads.items()}

    def per_record(self, records: int) -> dict[str, float]:
        return {name: round((read() - self.start[name]) / records * 1e6, 3) for name, read in self.reads.items()}


def end_to_end(settings: Settings, batches: list[ingest_job.Batch], world: int, n_workers: int, args: argparse.Namespace,
               tag: str) -> dict:
    job = f"bench-{tag}-w{n_workers}"
    env = service_env(settings, f"{tag}-w{n_workers}", args.partitions)
    items = [((b.iteration, b.block), len(b.records), ingest_job.wire(b, job)) for b in batches]
    iterations = sorted({b.iteration for b in batches})
    warm = [i for i in items if i[0][0] == iterations[0]]
    latency_from = iterations[-args.latency_iterations]
    flat = [i for i in items if iterations[0] < i[0][0] < latency_from]
    paced = [i for i in items if i[0][0] >= latency_from]
    service, port = ingest_procs.gateway(env)
    workers = ingest_procs.workers(env, n_workers)
    watcher = Watcher(settings, job, {i[0]: i[1] for i in items}, args.ranks_per_batch)
    clients = Clients(port, args.clients)
    out: dict = {"workers": n_workers}
    try:
        clients.register(ingest_job.spec(job, world))
        clients.send(warm)  # the group has settled once the first iteration is queryable
        if np.isnan(watcher.wait([i[0] for i in warm], 300)):
            raise RuntimeError("the warm-up iteration never became queryable")
        cpu = _CpuClock(service, workers)
        t = time.perf_counter()
        clients.send(flat)
        out["gateway_accepted_rps"] = rate(sum(i[1] for i in flat), time.perf_counter() - t)
        done = watcher.wait([i[0] for i in flat], 600)
        e2e = rate(sum(i[1] for i in flat), done - t)
        out["rps"] = e2e
        out["cpu_us_per_record"] = cpu.per_record(sum(i[1] for i in flat))

        clients.send(paced, rps=args.latency_load * e2e)
        watcher.wait([i[0] for i in paced], 300)
        latencies = np.array([watcher.seen_at[k] - clients.sent_at[k] for k, _, _ in paced if k in watcher.seen_at])
        out["latency_load_rps"] = round(args.latency_load * e2e, 1)
        out["latency_p50_s"] = round(float(np.percentile(latencies, 50)), 3)
        out["latency_p99_s"] = round(float(np.percentile(latencies, 99)), 3)

        # Twice what the path carries, offered for a while (resending: the tables fold the copies).
        peaks = {"gateway": 0, **{f"worker{k}": 0 for k in range(n_workers)}}
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                for name, proc in zip(peaks, [service, *workers]):
                    peaks[name] = max(peaks[name], proc.memory_kib()["VmRSS"])
                time.sleep(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        before = clients.sent_records
        t = time.perf_counter()
        clients.send(flat, rps=2 * e2e, until=t + args.overload_s)
        elapsed = time.perf_counter() - t
        stop.set()
        sampler.join()
        out["overload"] = {"offered_rps": round(2 * e2e, 1), "seconds": round(elapsed, 1),
                           "accepted_rps": rate(clients.sent_records - before, elapsed),
                           "peak_rss_mib": {k: round(v / 1024, 1) for k, v in peaks.items()},
                           "peak_rss_since_start_mib": {name: round(p.memory_kib()["VmHWM"] / 1024, 1)
                                                        for name, p in zip(peaks, [service, *workers])}}
    finally:
        clients.close()
        watcher.close()
        for proc in [*workers, service]:
            proc.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--world", type=int, default=512, help="ranks of the emulated job (a multiple of 32)")
    parser.add_argument("--iterations", type=int, default=96,
                        help="iterations of the job: the vote screen learns in the first, so a long job runs faster")
    parser.add_argument("--ranks-per-batch", type=int, default=64, help="ranks in one logger batch of an iteration")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker processes, one run per count")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--clients", type=int, default=4, help="concurrent logger streams")
    parser.add_argument("--latency-iterations", type=int, default=4)
    parser.add_argument("--latency-load", type=float, default=0.5, help="share of the measured rate the latency run offers")
    parser.add_argument("--overload-s", type=float, default=20.0)
    parser.add_argument("--no-stages", action="store_true")
    parser.add_argument("--insert-only", action="store_true",
                        help="only detection and the ClickHouse inserts (ClickHouse alone: no gateway, Kafka or workers)")
    args = parser.parse_args()
    tag = uuid.uuid4().hex[:8]
    settings = dataclasses.replace(Settings.from_env(), clickhouse_database=f"bench_{tag}")
    # One bar over the phases: the job, its stages alone, then one end-to-end run per worker count.
    workers = [] if args.insert_only else args.workers
    with progress(f"ingest: emulating {args.world} ranks", total=1 + (0 if args.no_stages else 1) + len(workers)) as steps:
        records, iterations = ingest_job.emulate(args.world, args.iterations)
        batches = ingest_job.batches(records, iterations, ranks_per_batch=args.ranks_per_batch)
        out: dict = {"world": args.world, "iterations": args.iterations, "layout": ingest_job.layout_for(args.world).to_dict(),
                     "records_per_iteration": len(records) // args.iterations, "batches": len(batches)}
        out["baseline_encode_rps"] = timed(len(records), lambda: [codec.records_to_proto(b.records) for b in batches])
        steps.advance()
        client = connect.clickhouse_client(settings)
        schema.migrate(client, settings.clickhouse_database)
        try:
            if not args.no_stages:
                steps.describe("ingest: each stage alone")
                out["stages"] = (detect_and_insert(settings, batches, args.world) if args.insert_only
                                 else stages(settings, batches, args.world, tag, args.partitions))
                steps.advance()
            out["end_to_end"] = []
            for n in workers:
                steps.describe(f"ingest: end to end, {n} worker(s)")
                out["end_to_end"].append(end_to_end(settings, batches, args.world, n, args, tag))
                steps.advance()
        finally:
            client.execute(f"DROP DATABASE IF EXISTS {settings.clickhouse_database}")
            client.disconnect()
    base = out["baseline_encode_rps"]
    rates = {**{f"stage_{k}": v for k, v in out.get("stages", {}).items()},
             **{f"end_to_end_{r['workers']}w_rps": r["rps"] for r in out["end_to_end"]}}
    out["ratios_to_baseline"] = {k: round(v / base, 4) for k, v in rates.items()}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
