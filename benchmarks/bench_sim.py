"""Benchmark of sleuth.sim: emulate 100 iterations of 8,192 GPUs; prints one JSON object.

    python benchmarks/bench_sim.py [--world 8192] [--iterations 100] [--labels]

The job: tp8 pp8 dp128 (8,192 GPUs on a 1,024-host rail-optimized fat tree, pods of 32, 16
spines), 8 micro-batches, the default model (16 layers, hidden 4096, sequence 4096), one slow GPU.
Goal: at most 60 s and 8 GiB.

Figures (each phase runs in a fresh child process, so its peak RSS is its own):
* ``plan_s``: building the network units (paths of every ring edge) and the stage programs;
* ``timeline_s``: the causal timing engine over all ranks and iterations;
* ``emit_s``: materializing every record, 1,024 ranks at a time (what a writer or streamer does);
* ``labels_s`` (with ``--labels``): the fault-free counterfactual run and the abnormal flags;
* ``peak_rss_gib``: the child's peak resident memory over all of the above;
* ``baseline_s``: in the same run, the time numpy takes just to fill the 11 record columns of the
  same number of records (a memory-bandwidth floor), and ``ratio`` = total / baseline. The
  machines are shared, so compare ratios between runs, not seconds.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import platform
import resource
import time


def _emulate(world: int, iterations: int, labels: bool, queue: mp.Queue) -> None:
    from sleuth.layout import ParallelLayout
    from sleuth.progress import progress
    from sleuth.sim import Emulation, Scenario, parse_fault
    from sleuth.topology import generate

    pp = 8
    dp = world // (8 * pp)
    chunks = -(-world // 1024)
    # The child draws the bar (stderr is the parent's): planning, the timeline, then 1,024 ranks at a time.
    with progress(f"sim: planning {world} GPUs", total=2 + chunks * (2 if labels else 1)) as steps:
        figures: dict[str, float | int] = {}
        start = time.perf_counter()
        topology = generate(f"fattree:hosts={world // 8},gpus=8,pod=32,spines=16")
        scenario = Scenario(
            topology=topology,
            layout=ParallelLayout(world, 8, pp, dp),
            microbatches=8,
            iterations=iterations,
            faults=(parse_fault("gpu:h0042/3,slow=1.3,start=10"),),
            seed=0,
        )
        emulation = Emulation(scenario)
        figures["plan_s"] = time.perf_counter() - start
        steps.advance(description=f"sim: the timeline of {world} ranks, {iterations} iterations")
        t = time.perf_counter()
        emulation.timeline
        figures["timeline_s"] = time.perf_counter() - t
        steps.advance(description="sim: records, 1,024 ranks at a time")
        t = time.perf_counter()
        records = 0
        for batch in emulation.iter_records(chunk_ranks=1024):
            records += len(batch)
            steps.advance()
        figures["emit_s"] = time.perf_counter() - t
        if labels:
            steps.describe("sim: counterfactual and labels, 1,024 ranks at a time")
            t = time.perf_counter()
            abnormal = 0
            for first in range(0, world, 1024):
                flags, _ = emulation.abnormal(range(first, first + 1024))
                abnormal += int(flags.sum())
                steps.advance()
            figures["labels_s"] = time.perf_counter() - t
            figures["abnormal_operators"] = abnormal
    figures["total_s"] = time.perf_counter() - start
    figures["records"] = records
    figures["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    queue.put(figures)


def _baseline(records: int, queue: mp.Queue) -> None:
    import numpy as np

    start = time.perf_counter()
    chunk = 1024 * 100 * 100  # the emulator's chunk size in records, roughly
    done = 0
    while done < records:
        n = min(chunk, records - done)
        columns = [np.arange(n, dtype=np.int64) for _ in range(11)]
        del columns
        done += n
    queue.put(time.perf_counter() - start)


def _child(target, *args):
    queue: mp.Queue = mp.get_context("spawn").Queue()
    process = mp.get_context("spawn").Process(target=target, args=(*args, queue))
    process.start()
    result = queue.get()
    process.join()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=int, default=8192)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--labels", action="store_true", help="also time the counterfactual and labels")
    args = parser.parse_args()
    figures = _child(_emulate, args.world, args.iterations, args.labels)
    baseline = _child(_baseline, figures["records"])
    out = {
        "benchmark": "sim",
        "job": f"tp8 pp8 dp{args.world // 64}, 8 micro-batches, {args.iterations} iterations",
        "world": args.world,
        "iterations": args.iterations,
        **{k: round(v, 3) if isinstance(v, float) else v for k, v in figures.items()},
        "baseline_s": round(baseline, 3),
        "ratio": round(figures["total_s"] / baseline, 2),
        "goal": {"seconds": 60, "gib": 8},
        "meets_goal": figures["total_s"] <= 60 and figures["peak_rss_gib"] <= 8,
        "python": platform.python_version(),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
