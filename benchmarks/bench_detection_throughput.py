"""Detection alone, as a deployed worker runs it: records/s of ``Worker.detect`` with
``worker_detectors`` (the shipped forest and the iteration monitor) over an emulated job.

The records are ``ingest_job``'s (tp 8, pp 4, data-parallel the rest), cut as the loggers send
them, turned into the gateway's Kafka messages and decoded ``SLEUTH_WORKER_MAX_MESSAGES`` at a
time, as ``bench_ingest.py``'s detection stage does; no services needed. Prints one JSON object:
``detection_rps``, the same run's protobuf encoding of the records (``baseline_encode_rps``) and
their ratio, and what was found (abnormal rows, irregularities), so that a faster run can be seen
to find the same. ``--profile N`` prints the N costliest functions (cProfile) to stderr.

    python benchmarks/bench_detection_throughput.py [--world 512] [--iterations 24] [--repeat 3]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time

import ingest_job
from bench_ingest import worker_batches
from sleuth.proto import codec
from sleuth.settings import Settings
from sleuth.stream.detection.deployed import worker_detectors
from sleuth.stream.worker import Worker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=int, default=512)
    parser.add_argument("--iterations", type=int, default=24)
    parser.add_argument("--ranks-per-batch", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3, help="runs over fresh detectors; the best is reported")
    parser.add_argument("--profile", type=int, default=0, help="print this many cProfile rows to stderr")
    args = parser.parse_args()

    settings = Settings.from_env()
    records, iterations = ingest_job.emulate(args.world, args.iterations)
    batches = ingest_job.batches(records, iterations, ranks_per_batch=args.ranks_per_batch)
    decoded = worker_batches(batches, settings, args.world)
    total = sum(len(d.records) for d in decoded)

    def run() -> tuple[float, int, int]:
        worker = Worker(settings, client=None, detectors=worker_detectors(settings))
        start = time.perf_counter()
        found = [worker.detect(d) for d in decoded]
        seconds = time.perf_counter() - start
        return seconds, sum(len(f.abnormal) for f in found), sum(len(f.irregularities) for f in found)

    runs = [run() for _ in range(args.repeat)]
    seconds, abnormal, irregular = min(runs)
    start = time.perf_counter()
    for b in batches:
        codec.records_to_proto(b.records)
    baseline = total / (time.perf_counter() - start)
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(run)
        pstats.Stats(profile, stream=sys.stderr).sort_stats("tottime").print_stats(args.profile)
    rps = total / seconds
    print(json.dumps({
        "world": args.world, "iterations": args.iterations, "records": total, "worker_batches": len(decoded),
        "detection_rps": round(rps, 1), "us_per_record": round(1e6 / rps, 3),
        "baseline_encode_rps": round(baseline, 1), "ratio_to_baseline": round(rps / baseline, 4),
        "abnormal_rows": abnormal, "irregularities": irregular,
        "all_runs_s": [round(r[0], 3) for r in runs],
    }, indent=2))


if __name__ == "__main__":
    main()
