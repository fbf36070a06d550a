"""A real gateway (``sleuth gateway``, its own process, into the local Kafka) serving a 16,384-rank job:
``RegisterJob``, then every rank's stream at once, multiplexed over a few client processes with
asyncio gRPC channels (``sleuth.sim.rank_streams``), each rank retrying a refused stream as the
logger does. Same-run baseline: the same batches, back to back over ONE stream.

Prints JSON: ranks served per second, the time until every rank's batches were confirmed, p50/p99
of the per-stream time (open to summary) and of the time to confirmation, the gateway's peak RSS
and threads, and ``ranks_vs_one_stream`` (batches/s over the rank streams / batches/s over one).

    bash deploy/services.sh up
    .venv/bin/python benchmarks/bench_gateway_ranks.py --world 16384 --stream-s 5
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
import uuid

import grpc
import numpy as np

from sleuth import services
from sleuth.jobspec import JobSpec
from sleuth.layout import ParallelLayout
from sleuth.ports import free_port
from sleuth.progress import progress
from sleuth.proto import codec
from sleuth.proto import commops_pb2 as pb
from sleuth.proto import commops_pb2_grpc as pb_grpc
from sleuth.settings import Settings
from sleuth.sim import rank_streams


def _status(pid: int) -> dict[str, int]:
    fields = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "Threads"):
                fields[key] = int(value.split()[0])
    return fields


class Sampler(threading.Thread):
    """The gateway's RSS and thread count, every 0.2 s, while ``window`` is open."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.stop, self.rss_kb, self.threads = pid, threading.Event(), 0, 0

    def run(self) -> None:
        while not self.stop.wait(0.2):
            try:
                status = _status(self.pid)
            except OSError:
                return
            self.rss_kb, self.threads = max(self.rss_kb, status["VmRSS"]), max(self.threads, status["Threads"])


def _gateway(settings: Settings, problems: list[str]) -> subprocess.Popen:
    """``sleuth gateway`` with ``settings``; its first lines that say ERROR or WARNING go to ``problems``."""
    env = dict(os.environ) | settings.to_env()
    process = subprocess.Popen([sys.executable, "-m", "sleuth", "gateway"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)

    def drain() -> None:  # a chatty gateway must never block on a full pipe
        for line in process.stdout:
            if ("ERROR" in line or "WARNING" in line) and len(problems) < 5:
                problems.append(line.strip()[:300])

    for line in process.stdout:
        if "gateway listening" in line:
            threading.Thread(target=drain, daemon=True).start()
            return process
    raise RuntimeError(f"the gateway exited ({process.wait()}) before listening")


def _pct(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 3) if values else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=int, default=16384)
    parser.add_argument("--processes", type=int, default=4, help="client processes the ranks are spread over")
    parser.add_argument("--channels", type=int, default=64, help="gRPC channels (connections) per client process")
    parser.add_argument("--batches", type=int, default=1, help="batches each rank sends on its stream")
    parser.add_argument("--records", type=int, default=4, help="records per batch")
    parser.add_argument("--stream-s", type=float, default=5.0, help="how long each stream stays open (the logger's 5 s)")
    parser.add_argument("--give-up-s", type=float, default=600.0, help="a rank not confirmed by then counts as unserved")
    args = parser.parse_args()

    kafka_host, kafka_port = services.kafka_bootstrap().rsplit(":", 1)
    tag = uuid.uuid4().hex[:10]
    settings = dataclasses.replace(
        Settings.from_env(), kafka_host=kafka_host, kafka_port=int(kafka_port), gateway_port=free_port(),
        records_topic=f"bench-ranks-{tag}", rejects_topic=f"bench-ranks-rejects-{tag}", jobs_topic=f"bench-ranks-jobs-{tag}")
    target = f"127.0.0.1:{settings.gateway_port}"
    job = "bench-16k"
    spec = JobSpec.from_layout(job, ParallelLayout(args.world, 8, 8 if args.world % 64 == 0 else 1,
                                                   args.world // (64 if args.world % 64 == 0 else 8)))
    load = rank_streams.Load(target=target, job=job, comm=spec.communicators[0].comm, batches=args.batches,
                             records=args.records, stream_s=args.stream_s, channels=args.channels,
                             give_up_s=args.give_up_s)
    problems: list[str] = []
    # One bar over the phases; the rank streams (the longest) run in the client processes.
    with progress("gateway ranks: starting the gateway", total=4) as steps:
        gateway = _gateway(settings, problems)
        sampler = Sampler(gateway.pid)
        sampler.start()
        steps.advance(description="gateway ranks: RegisterJob")
        try:
            stub = pb_grpc.CollectorStub(grpc.insecure_channel(target, options=[("grpc.max_send_message_length", 64 << 20)]))
            began = time.perf_counter()
            stub.RegisterJob(codec.jobspec_to_proto(spec), timeout=120)
            register_s = time.perf_counter() - began
            steps.advance(description=f"gateway ranks: baseline, {args.world} ranks' batches over one stream")

            # Baseline: every rank's batches back to back over one stream.
            messages = [m for rank in range(args.world) for m in rank_streams.rank_messages(load, rank)]
            send_raw = grpc.insecure_channel(target).stream_unary(
                "/sleuth.v1.Collector/Stream", request_serializer=None, response_deserializer=pb.StreamSummary.FromString)
            began = time.perf_counter()
            assert send_raw(iter(messages), timeout=600).accepted == len(messages)
            one_stream_s = time.perf_counter() - began
            del messages
            steps.advance(description=f"gateway ranks: {args.world} rank streams at once")
            rss_before_kb = _status(gateway.pid)["VmRSS"]
            sampler.rss_kb = sampler.threads = 0

            began = time.perf_counter()
            results, client_rss_kb = rank_streams.run_processes(load, args.world, args.processes)
            wall_s = time.perf_counter() - began
            peak = _status(gateway.pid)
            steps.advance()
        finally:
            sampler.stop.set()
            gateway.terminate()
            gateway.wait(60)
    served = [r for r in results if r.confirmed_after_s is not None]
    confirmed = [r.confirmed_after_s for r in served]
    streams = [r.stream_s for r in served]
    errors = sorted({r.error for r in results if r.error})
    retried = collections.Counter(r.retried for r in results if r.retried)
    all_s = max(confirmed) if len(served) == args.world else None
    rate = len(served) / (all_s if all_s else wall_s)
    print(json.dumps({
        "world": args.world, "processes": args.processes, "channels": args.processes * args.channels,
        "batches_per_rank": args.batches, "records_per_batch": args.records, "stream_s": args.stream_s,
        "gateway_threads_setting": settings.gateway_threads,
        "register_s": round(register_s, 3),
        "ranks_served": len(served), "ranks_per_s": round(rate, 1),
        "all_ranks_confirmed_s": round(all_s, 2) if all_s else None,
        "confirmed_after_s_p50": _pct(confirmed, 50), "confirmed_after_s_p99": _pct(confirmed, 99),
        "stream_s_p50": _pct(streams, 50), "stream_s_p99": _pct(streams, 99),
        "attempts_mean": round(float(np.mean([r.attempts for r in results])), 2), "errors": errors[:5], "retried_last_code": dict(retried.most_common(5)),
        "ranks_failed": len(results) - len(served), "gateway_log_problems": problems,
        "gateway_rss_before_mb": round(rss_before_kb / 1024, 1),
        "gateway_peak_rss_mb_during_ranks": round(max(sampler.rss_kb, peak["VmRSS"]) / 1024, 1),
        "gateway_peak_rss_mb_whole_run": round(peak["VmHWM"] / 1024, 1),
        "client_peak_rss_mb": [round(kb / 1024, 1) for kb in client_rss_kb],
        "gateway_peak_threads": max(sampler.threads, peak["Threads"]),
        "baseline_one_stream_s": round(one_stream_s, 3),
        "baseline_one_stream_batches_per_s": round(args.world * args.batches / one_stream_s, 1),
        "ranks_vs_one_stream": round(len(served) * args.batches / (all_s if all_s else wall_s)
                                     / (args.world * args.batches / one_stream_s), 4),
    }, indent=1))


if __name__ == "__main__":
    main()
