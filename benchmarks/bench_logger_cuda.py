"""The logger's CUDA-event path on a real NVIDIA GPU; prints one JSON object.

    python benchmarks/bench_logger_cuda.py [--ops 1000000] [--repeats 5] [--hooks-ops 20000]

Needs torch with CUDA and a GPU (exits with an error naming what is missing otherwise). Three
parts, each with its same-run baseline:

* ``hot_path``: nanoseconds per operator for ``begin_cuda`` + ``end_cuda`` on the current
  stream (two ``cudaEventRecord`` calls from a reused pool), polled every 4,096 operators as
  the drainer would, median over ``repeats`` runs of ``ops``; against the host-clock ``begin`` +
  ``end`` of the same recorder (ratio cuda / host).
* ``never_synchronizes``: a ~0.5 s spin kernel (``torch.cuda._sleep``) is queued, then 10,000
  operators are recorded behind it. The figures: the host time to record them, whether the
  stream was still busy after (it must be: had the recorder synchronized, the kernel would be
  done), operators completed by a poll while the kernel ran (must be 0), and, once it ends,
  the lag of the first record's device start behind its host issue time (about the kernel's
  remaining time: device times are mapped to the host clock).
* ``hooks``: an NCCL process group of one rank, ``all_reduce`` of a 1 MiB tensor through the
  installed hooks against the hooks removed, interleaved blocks of ``hooks-ops``; CUDA time of
  the stream is not waited for inside a block (the hooks' own host cost is the figure).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

POLL_EVERY = 4096


def require_gpu():
    try:
        import torch
    except ImportError:
        sys.exit("bench_logger_cuda: torch is not installed (pip install -e '.[test]' brings it)")
    if not torch.cuda.is_available():
        sys.exit("bench_logger_cuda: torch sees no CUDA GPU on this machine; run it where there is one")
    from sleuth.logger import _commops

    if not _commops.cuda_available():
        sys.exit("bench_logger_cuda: the extension could not dlopen libcudart (libcudart.so*) on this machine")
    return torch, _commops


def hot_path(torch, commops, ops: int) -> dict[str, float]:
    stream = torch.cuda.current_stream().cuda_stream
    recorder = commops.Recorder(1 << 16, 8192)
    out = {}
    for name, run in (
        ("cuda", lambda i: recorder.end_cuda(recorder.begin_cuda(3, i, 1, -1, 4096, 7, stream), stream)),
        ("host", lambda i: recorder.end(recorder.begin(3, i, 1, -1, 4096, 7))),
    ):
        poll, drain = recorder.poll, recorder.drain
        began = time.perf_counter_ns()
        for i in range(ops):
            run(i)
            if not i & (POLL_EVERY - 1):
                poll()
                drain()
        out[name] = (time.perf_counter_ns() - began) / ops
        torch.cuda.synchronize()  # between the timed loops only
        poll()
        drain()
    out["dropped"] = recorder.dropped
    return out


def never_synchronizes(torch, commops) -> dict:
    stream = torch.cuda.current_stream()
    recorder = commops.Recorder(1 << 16, 16384)
    torch.cuda._sleep(1_000_000)
    torch.cuda.synchronize()
    cycles_per_s = 1_000_000 / _time_sleep(torch, 1_000_000)
    torch.cuda._sleep(int(0.5 * cycles_per_s))
    began = time.perf_counter_ns()
    for i in range(10_000):
        recorder.end_cuda(recorder.begin_cuda(3, i, 1, -1, 4096, 7, stream.cuda_stream), stream.cuda_stream)
    issue_s = (time.perf_counter_ns() - began) / 1e9
    busy_after = not stream.query()
    completed_while_busy = recorder.poll()
    torch.cuda.synchronize()
    recorder.poll()
    from sleuth.logger import core

    records = core.records_from_bytes(recorder.drain())
    first = records[0]
    return {
        "kernel_s": 0.5,
        "issue_10k_ops_s": round(issue_s, 6),
        "stream_busy_after_issuing": busy_after,
        "completed_by_a_poll_while_busy": int(completed_while_busy),
        "records": int(len(records)),
        "first_record_device_start_lag_behind_issue_s": round((int(first["t_start_ns"]) - int(first["t_issue_ns"])) / 1e9, 4),
        "dropped": recorder.dropped,
    }


def _time_sleep(torch, cycles: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1000


def hooks(torch, ops: int, blocks: int) -> dict:
    import torch.distributed as dist

    with tempfile.TemporaryDirectory() as folder:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29517", SLEUTH_LOG_DIR=folder,
                          SLEUTH_JOB="bench-cuda", SLEUTH_SPILL_DIR=folder)
        dist.init_process_group("nccl", rank=0, world_size=1)
        import sleuth.logger

        logger = sleuth.logger.install()
        tensor = torch.ones(1 << 18, device="cuda")

        def block() -> float:
            began = time.perf_counter_ns()
            for _ in range(ops):
                dist.all_reduce(tensor)
            elapsed = (time.perf_counter_ns() - began) / ops
            torch.cuda.synchronize()
            return elapsed

        block()
        times: dict[str, list[float]] = {"on": [], "off": []}
        for _ in range(blocks):
            logger.hooks.remove()
            times["off"].append(block())
            logger.hooks.install()
            times["on"].append(block())
        cuda_path = logger.hooks.cuda
        sleuth.logger.uninstall()
        dist.destroy_process_group()
    paired = [on - off for on, off in zip(times["on"], times["off"])]
    return {
        "hooks_cuda_path": cuda_path,
        "baseline_ns_per_all_reduce_without_hooks": round(statistics.median(times["off"])),
        "ns_per_all_reduce_with_hooks": round(statistics.median(times["on"])),
        "hooks_ns_per_op_median_paired": round(statistics.median(paired)),
        "ratio_with_over_without": round(statistics.median(times["on"]) / statistics.median(times["off"]), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--hooks-ops", type=int, default=20_000)
    parser.add_argument("--hooks-blocks", type=int, default=10)
    args = parser.parse_args()
    torch, commops = require_gpu()
    runs = [hot_path(torch, commops, args.ops) for _ in range(args.repeats)]
    cuda_ns = statistics.median(r["cuda"] for r in runs)
    host_ns = statistics.median(r["host"] for r in runs)
    print(json.dumps({
        "benchmark": "logger_cuda_path",
        "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
        "hot_path": {
            "ops_per_run": args.ops, "repeats": args.repeats,
            "cuda_ns_per_op_median": round(cuda_ns, 1), "host_ns_per_op_median": round(host_ns, 1),
            "ratio_cuda_over_host": round(cuda_ns / host_ns, 2),
            "dropped": sum(r["dropped"] for r in runs),
        },
        "never_synchronizes": never_synchronizes(torch, commops),
        "hooks": hooks(torch, args.hooks_ops, args.hooks_blocks),
        "goal_c_ns": 500,
    }, indent=1))


if __name__ == "__main__":
    main()
