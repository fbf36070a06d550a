"""Detection alone, as a deployed worker runs it: records/s of ``Worker.prepare`` (decoding, then
``worker_detectors``, the shipped forest and the iteration monitor, a slice of
``DetectionRules.slice_records`` at a time) over an emulated job.

The records are ``ingest_job``'s (tp 8, pp 4, data-parallel the rest), cut as the loggers send
them, turned into the gateway's Kafka messages and taken ``SLEUTH_WORKER_MAX_MESSAGES`` at a
time, as ``bench_ingest.py``'s detection stage does; no services needed. Prints one JSON object:
``detection_rps`` (wall clock) and ``detection_cpu_rps`` (the process's CPU time: on a shared
machine the steadier of the two), each stage's alone (``decode_cpu_rps``; ``judge_cpu_rps``:
``Worker.judge``, the detectors on decoded batches, with its own ratio), the same run's protobuf
encoding of the records (``baseline_encode_rps``, likewise both) and their ratios, the best of
``--repeat`` runs each, and what was found (abnormal rows, irregularities), so that a faster run
can be seen to find the same. ``--profile N`` prints the N costliest functions (cProfile) to stderr.

    python benchmarks/bench_detection_throughput.py [--world 512] [--iterations 24] [--repeat 3] [--slice-records N]
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
from sleuth.progress import progress
from sleuth.proto import codec
from sleuth.settings import Settings
from sleuth.stream.detection.deployed import worker_detectors
from sleuth.stream.detection.rules import DETECTION_RULES
from sleuth.stream.services.worker import Worker, decode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=int, default=512)
    parser.add_argument("--iterations", type=int, default=24)
    parser.add_argument("--ranks-per-batch", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3, help="runs over fresh detectors; the best is reported")
    parser.add_argument("--profile", type=int, default=0, help="print this many cProfile rows to stderr")
    parser.add_argument("--slice-records", type=int, default=DETECTION_RULES.slice_records,
                        help="records judged at a time (whole iterations); a batch's size or more: each batch whole")
    args = parser.parse_args()

    settings = Settings.from_env()
    # The bar is drawn only as it advances, between the timed runs: never while one is timed.
    with progress(f"detection throughput: emulating {args.world} ranks' batches",
                  total=1 + 2 * args.repeat + (1 if args.profile else 0), redraw_on_timer=False) as steps:
        records, iterations = ingest_job.emulate(args.world, args.iterations)
        batches = ingest_job.batches(records, iterations, ranks_per_batch=args.ranks_per_batch)
        taken = worker_batches(batches, settings, args.world)
        total = sum(len(b.records) for b in batches)
        steps.advance(description="detection throughput: timed runs (detection, then the encoding baseline)")

        def run() -> tuple[float, float, float, int, int]:
            """(CPU s of decoding and detection, wall s, CPU s of detection alone, abnormal rows, irregularities):
            every batch decoded first, then each judged as ``Worker.prepare`` does, so each stage is timed alone."""
            worker = Worker(settings, client=None, detectors=worker_detectors(settings), slice_records=args.slice_records)
            start, cpu = time.perf_counter(), time.process_time()
            decoded = [decode(messages) for messages in taken]
            judging = time.process_time()
            found = [worker.judge(d) for d in decoded]
            end = time.process_time()
            return (end - cpu, time.perf_counter() - start, end - judging,
                    sum(len(f.abnormal) for f in found), sum(len(f.irregularities) for f in found))

        def encode() -> tuple[float, float]:
            start, cpu = time.perf_counter(), time.process_time()
            for b in batches:
                codec.records_to_proto(b.records)
            return time.process_time() - cpu, time.perf_counter() - start

        runs = []
        for _ in range(args.repeat):
            runs.append(run())
            steps.advance()
        cpu, seconds, judge_cpu, abnormal, irregular = min(runs)
        encodings = []
        for _ in range(args.repeat):
            encodings.append(encode())
            steps.advance()
        base_cpu, base_seconds = min(encodings)
        if args.profile:
            profile = cProfile.Profile()
            profile.runcall(run)
            steps.advance()
    if args.profile:  # once the bar is gone: the table is printed on the same stderr
        pstats.Stats(profile, stream=sys.stderr).sort_stats("tottime").print_stats(args.profile)
    print(json.dumps({
        "world": args.world, "iterations": args.iterations, "records": total,
        "max_messages": settings.worker_max_records, "worker_batches": len(taken), "slice_records": args.slice_records,
        "detection_rps": round(total / seconds, 1), "detection_cpu_rps": round(total / cpu, 1),
        "cpu_us_per_record": round(1e6 * cpu / total, 3),
        "decode_cpu_rps": round(total / (cpu - judge_cpu), 1), "judge_cpu_rps": round(total / judge_cpu, 1),
        "judge_cpu_ratio_to_baseline": round(base_cpu / judge_cpu, 4),
        "baseline_encode_rps": round(total / base_seconds, 1), "baseline_encode_cpu_rps": round(total / base_cpu, 1),
        "ratio_to_baseline": round(base_seconds / seconds, 4), "cpu_ratio_to_baseline": round(base_cpu / cpu, 4),
        "abnormal_rows": abnormal, "irregularities": irregular,
        "runs_cpu_s": [round(r[0], 3) for r in runs], "runs_wall_s": [round(r[1], 3) for r in runs],
    }, indent=2))


if __name__ == "__main__":
    main()
