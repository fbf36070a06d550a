"""What a worker holds after a stream of short jobs, with idle jobs dropped (``SLEUTH_JOB_IDLE_S``)
and, as the same-run baseline, with an idle time no job reaches (the state before issue 32).

Jobs run one after another on a simulated clock (each ``--iterations`` batches ``--step-s`` apart,
``--ranks`` ranks with a tensor- and a data-parallel communicator each); the worker's per-rank
state and the abnormal-operator detector (its operator windows, iteration monitor, counterfactual
replay) see every batch. Prints JSON: jobs, ranks and operator identities held at the end,
Python-heap bytes held (tracemalloc) and seconds per batch, for both.

    .venv/bin/python benchmarks/bench_idle_jobs.py --jobs 60
"""

from __future__ import annotations

import argparse
import gc
import json
import time
import tracemalloc

import numpy as np

from sleuth.progress import Steps, progress
from sleuth.records import IterationBatch, RecordBatch
from sleuth.settings import Settings
from sleuth.stream.ingest import kafka_records
from sleuth.stream.detection import StreamDetector
from sleuth.stream.detection.model_file import load_default_model
from sleuth.stream.services.worker import Worker


class _Message:
    def __init__(self, value: bytes, kind: bytes) -> None:
        self.value, self.headers, self.partition, self.offset = value, [(kafka_records.KIND_HEADER, kind)], 0, 0


def _batch(job: str, ranks: int, iteration: int, t0: int) -> list[_Message]:
    rank = np.repeat(np.arange(ranks), 2)
    comm = [f"tp.{r // 8}" if k == 0 else f"dp.{r % 8}" for r in range(ranks) for k in range(2)]
    n = len(rank)
    start = t0 + np.arange(n) * 1000
    records = RecordBatch.from_columns(job=job, rank=rank, comm=comm, seq=[iteration] * n, op=[1] * n,
                                       peer=[-1] * n, nbytes=[1 << 20] * n, iteration=[iteration] * n,
                                       t_issue_ns=start, t_start_ns=start, t_end_ns=start + 50_000)
    its = IterationBatch.from_columns(job=job, rank=np.arange(ranks), iteration=[iteration] * ranks,
                                      t_start_ns=[t0] * ranks, t_end_ns=[t0 + 10_000_000] * ranks)
    return ([_Message(v, kafka_records.RECORDS) for _, v in kafka_records.to_messages(records)]
            + [_Message(v, kafka_records.ITERATIONS) for _, v in kafka_records.iteration_messages(its)])


def _heap_bytes() -> int:
    """Python heap traced now, less what the progress bar holds (rich's caches and samples): the worker's alone."""
    bar = (tracemalloc.Filter(False, "*/rich/*"), tracemalloc.Filter(False, "*/sleuth/progress.py"))
    return sum(stat.size for stat in tracemalloc.take_snapshot().filter_traces(bar).statistics("filename"))


def run(idle_s: float, steps: Steps, *, jobs: int, ranks: int, iterations: int, step_s: float) -> dict:
    now = [0.0]
    detector = StreamDetector(load_default_model(), counterfactual=True, clock=lambda: 0)
    worker = Worker(Settings(job_idle_s=idle_s), client=None, detectors=[detector], clock=lambda: now[0])
    gc.collect()
    tracemalloc.start()
    base = _heap_bytes()
    spent, batches = 0.0, 0
    for j in range(jobs):
        for it in range(iterations):
            messages = _batch(f"job-{j}", ranks, it, int(now[0] * 1e9))
            began = time.perf_counter()
            worker.prepare(messages)
            spent += time.perf_counter() - began
            batches += 1
            now[0] += step_s
        steps.advance()  # between jobs: never inside a timed batch
    gc.collect()
    held = _heap_bytes() - base
    tracemalloc.stop()
    return {"idle_s": idle_s, "jobs_held": len(detector.monitor._jobs), "rank_rows": len(worker.state),
            "identities": len(detector.windows), "heap_bytes": held, "s_per_batch": round(spent / batches, 5)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=60)
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--step-s", type=float, default=5.0)
    parser.add_argument("--idle-s", type=float, default=60.0)
    args = parser.parse_args()
    options = dict(jobs=args.jobs, ranks=args.ranks, iterations=args.iterations, step_s=args.step_s)
    with progress("idle jobs: jobs through the worker (baseline, then evicting)", total=2 * args.jobs,
                  redraw_on_timer=False) as steps:
        baseline = run(1e12, steps, **options)
        evicting = run(args.idle_s, steps, **options)
    print(json.dumps({**options, "baseline": baseline, "evicting": evicting,
                      "heap_ratio": round(evicting["heap_bytes"] / max(baseline["heap_bytes"], 1), 4)}, indent=1))


if __name__ == "__main__":
    main()
