"""The logger's CUDA-event path on a real NVIDIA GPU; prints one JSON object.

    python benchmarks/bench_logger_cuda.py [--ops 1000000] [--repeats 5] [--hooks-ops 20000]

Needs torch with CUDA and a GPU (exits with an error naming what is missing otherwise). Four
parts, each with its same-run baseline:

* ``hot_path``: nanoseconds per operator for ``begin_cuda`` + ``end_cuda`` on the current
  stream (two ``cudaEventRecord`` calls from a reused pool), median over ``repeats`` runs of
  ``ops``; polled every 4,096 operators, with the polls timed apart (in a job the drainer
  thread polls). Baselines: the host-clock ``begin`` + ``end`` of the same recorder (ratio
  cuda / host), and CUDA's own floor, two ``cudaEventRecord`` calls (through ctypes, less
  ctypes' cost; ratio cuda / floor).
* ``never_synchronizes``: a 1 s spin kernel (``torch.cuda._sleep``) is queued, then 256
  operators are recorded behind it. The figures: the host time to record them, whether the
  stream was still busy after (it must be: had the recorder synchronized, the kernel would be
  done), operators completed by a poll while the kernel ran (must be 0), and, once it ends,
  the lag of the first record's device start behind its host issue time (about the kernel's
  remaining time: device times are mapped to the host clock).
* ``launch_queue``: how many calls queue behind a busy stream before one waits, for tiny
  kernel launches and for logged operators. CUDA's launch queue is finite and a full one makes
  any launch wait, logger or not; each logged operator takes two of its entries.
* ``hooks``: an NCCL process group of one rank, ``all_reduce`` of a 1 MiB tensor through the
  installed hooks against the hooks removed, interleaved blocks of ``hooks-ops``; CUDA time of
  the stream is not waited for inside a block (the hooks' own host cost is the figure).
  Then, still through the hooks, 100 synchronous and 100 ``async_op=True`` all-reduces queued
  behind a 0.3 s spin kernel: the stream must still be busy when they have been issued, and
  the records written to ``SLEUTH_LOG_DIR`` must hold every operator (records expected,
  written, dropped), with consecutive sequence numbers, device start times after the kernel
  and non-negative durations.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

from sleuth.progress import progress

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
    """ns per operator of begin + end on the training thread; the polls that free the slots
    (the drainer thread's work in a job) are timed apart and reported per operator too."""
    stream = torch.cuda.current_stream().cuda_stream
    recorder = commops.Recorder(1 << 16, 8192)
    out = {}
    for name, run in (
        ("cuda", lambda i: recorder.end_cuda(recorder.begin_cuda(3, i, 1, -1, 4096, 7, stream), stream)),
        ("host", lambda i: recorder.end(recorder.begin(3, i, 1, -1, 4096, 7))),
    ):
        poll, drain = recorder.poll, recorder.drain
        polling_ns = 0
        began = time.perf_counter_ns()
        for i in range(ops):
            run(i)
            if not i & (POLL_EVERY - 1):
                polled = time.perf_counter_ns()
                poll()
                drain()
                polling_ns += time.perf_counter_ns() - polled
        out[name] = (time.perf_counter_ns() - began - polling_ns) / ops
        out[f"{name}_poll"] = polling_ns / ops
        torch.cuda.synchronize()  # between the timed loops only
        poll()
        drain()
    out["dropped"] = recorder.dropped
    return out


def cuda_floor(torch, calls: int = 200_000) -> dict[str, float]:
    """What CUDA itself charges: cudaEventRecord through ctypes, less ctypes' own cost
    (cudaGetLastError, which does next to nothing). Two of them are the floor of begin + end."""
    import ctypes

    with open("/proc/self/maps") as maps:  # the libcudart torch has already loaded
        path = next((line.split()[-1] for line in maps if "libcudart.so" in line), "libcudart.so")
    cudart = ctypes.CDLL(path)
    event = ctypes.c_void_p()
    assert cudart.cudaEventCreateWithFlags(ctypes.byref(event), 0) == 0
    record = cudart.cudaEventRecord
    record.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    last_error = cudart.cudaGetLastError
    out = {}
    for name, call in (("ctypes_cudaEventRecord_ns", lambda: record(event, stream)),
                       ("ctypes_cudaGetLastError_ns", last_error)):
        began = time.perf_counter_ns()
        for _ in range(calls):
            call()
        out[name] = (time.perf_counter_ns() - began) / calls
        torch.cuda.synchronize()
    out["cudaEventRecord_ns"] = out["ctypes_cudaEventRecord_ns"] - out["ctypes_cudaGetLastError_ns"]
    out["libcudart"] = path
    return out


def never_synchronizes(torch, commops, ops: int = 256, kernel_s: float = 1.0) -> dict:
    """Operators recorded behind a spin kernel: few enough that CUDA's launch queue does not
    fill (``launch_queue``: a full queue makes any launch wait, with or without the logger)."""
    stream = torch.cuda.current_stream()
    recorder = commops.Recorder(1 << 16, 16384)
    recorder.end_cuda(recorder.begin_cuda(3, 0, 1, -1, 4096, 7, stream.cuda_stream), stream.cuda_stream)
    cycles = int(kernel_s * _cycles_per_s(torch))  # synchronizes: the setup operator is done
    recorder.poll()
    recorder.drain()  # the first operator sets the device clock's reference up; not timed here
    torch.cuda._sleep(cycles)
    began = time.perf_counter_ns()
    for i in range(ops):
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
        "kernel_s": kernel_s,
        "ops": ops,
        "issue_s": round(issue_s, 6),
        "stream_busy_after_issuing": busy_after,
        "completed_by_a_poll_while_busy": int(completed_while_busy),
        "records": int(len(records)),
        "first_record_device_start_lag_behind_issue_s": round((int(first["t_start_ns"]) - int(first["t_issue_ns"])) / 1e9, 4),
        "dropped": recorder.dropped,
    }


def launch_queue(torch, commops, calls: int = 2000, kernel_s: float = 0.5) -> dict:
    """How many calls can queue behind a busy stream before one waits: tiny kernels against
    logged operators (two event records each). CUDA's queue, not the logger, sets the limit."""
    x = torch.ones(16, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    recorder = commops.Recorder(1 << 16, 1 << 14)
    cycles = int(kernel_s * _cycles_per_s(torch))
    out = {}
    for name, call in (("kernel_launches", lambda i: x.add_(1)),
                       ("logged_operators", lambda i: recorder.end_cuda(recorder.begin_cuda(3, i, 1, -1, 8, 0, stream), stream))):
        call(0)  # loads the kernel, creates the events
        torch.cuda.synchronize()
        torch.cuda._sleep(cycles)
        first_wait = None
        for i in range(calls):
            began = time.perf_counter()
            call(i)
            if first_wait is None and time.perf_counter() - began > kernel_s / 10:
                first_wait = i
        torch.cuda.synchronize()
        recorder.poll()
        recorder.drain()
        out[f"{name}_queued_before_a_call_waits"] = first_wait
    return out


def _cycles_per_s(torch) -> float:
    _time_sleep(torch, 50_000_000)  # clocks up first
    return 50_000_000 / _time_sleep(torch, 50_000_000)


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
        behind_kernel = _all_reduces_behind_a_kernel(torch, dist, tensor)
        dropped = logger.session.recorder.dropped
        sleuth.logger.uninstall()
        dist.destroy_process_group()
        from sleuth.recordio import read_parquet

        records = read_parquet(folder)
    expected = ops * (1 + blocks) + 2 * behind_kernel["issued"]
    behind_kernel.update(_records_check(records, expected, behind_kernel))
    behind_kernel["dropped"] = int(dropped)
    paired = [on - off for on, off in zip(times["on"], times["off"])]
    return {
        "hooks_cuda_path": cuda_path,
        "baseline_ns_per_all_reduce_without_hooks": round(statistics.median(times["off"])),
        "ns_per_all_reduce_with_hooks": round(statistics.median(times["on"])),
        "hooks_ns_per_op_median_paired": round(statistics.median(paired)),
        "ratio_with_over_without": round(statistics.median(times["on"]) / statistics.median(times["off"]), 4),
        "behind_a_kernel": behind_kernel,
    }


def _all_reduces_behind_a_kernel(torch, dist, tensor, each: int = 100, kernel_s: float = 0.3) -> dict:
    """Sync and async all-reduces through the hooks, queued behind a spin kernel."""
    cycles_per_s = _cycles_per_s(torch)
    torch.cuda.synchronize()
    issued_at_ns = time.time_ns()
    torch.cuda._sleep(int(kernel_s * cycles_per_s))
    began = time.perf_counter()
    for _ in range(each):
        dist.all_reduce(tensor)
    works = [dist.all_reduce(tensor, async_op=True) for _ in range(each)]
    for work in works:
        work.wait()  # for NCCL: the current stream waits; the host does not
    issue_s = time.perf_counter() - began
    busy = not torch.cuda.current_stream().query()
    torch.cuda.synchronize()
    return {"kernel_s": kernel_s, "issued": each, "issue_s": round(issue_s, 4),
            "stream_busy_after_issuing": busy, "kernel_queued_at_ns": issued_at_ns}


def _records_check(records, expected: int, behind: dict) -> dict:
    """What the written records say about the operators queued behind the kernel."""
    queued_at = behind.pop("kernel_queued_at_ns")
    seq = np.sort(records["seq"])
    behind_kernel = records["t_issue_ns"] >= queued_at
    lag_s = (records["t_start_ns"][behind_kernel] - queued_at) / 1e9
    duration_us = (records["t_end_ns"][behind_kernel] - records["t_start_ns"][behind_kernel]) / 1e3
    return {
        "records_written": int(len(records)), "records_expected": int(expected),
        "seq_consecutive": bool(len(seq) and np.array_equal(seq, np.arange(seq[0], seq[0] + len(seq)))),
        "ops_recorded": sorted({int(v) for v in records["op"]}),
        "records_behind_the_kernel": int(behind_kernel.sum()),
        "first_start_after_kernel_queued_s": round(float(lag_s.min()), 4) if len(lag_s) else None,
        "duration_us_median": round(float(np.median(duration_us)), 2),
        "negative_durations": int((duration_us < 0).sum()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--hooks-ops", type=int, default=20_000)
    parser.add_argument("--hooks-blocks", type=int, default=10)
    args = parser.parse_args()
    torch, commops = require_gpu()
    # The bar is drawn only as it advances, between the timed parts: never while one is timed.
    with progress("logger cuda: hot-path runs", total=args.repeats + 4, redraw_on_timer=False) as steps:
        runs = []
        for _ in range(args.repeats):
            runs.append(hot_path(torch, commops, args.ops))
            steps.advance()
        steps.describe("logger cuda: cudaEventRecord's floor")
        floor = cuda_floor(torch)
        steps.advance(description="logger cuda: operators behind a spin kernel")
        behind = never_synchronizes(torch, commops)
        steps.advance(description="logger cuda: CUDA's launch queue")
        queue = launch_queue(torch, commops)
        steps.advance(description="logger cuda: the hooks on an NCCL group")
        hooked = hooks(torch, args.hooks_ops, args.hooks_blocks)
        steps.advance()
    cuda_ns = statistics.median(r["cuda"] for r in runs)
    host_ns = statistics.median(r["host"] for r in runs)
    print(json.dumps({
        "benchmark": "logger_cuda_path",
        "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
        "hot_path": {
            "ops_per_run": args.ops, "repeats": args.repeats,
            "cuda_ns_per_op_median": round(cuda_ns, 1), "host_ns_per_op_median": round(host_ns, 1),
            "ratio_cuda_over_host": round(cuda_ns / host_ns, 2),
            "cuda_poll_ns_per_op_median": round(statistics.median(r["cuda_poll"] for r in runs), 1),
            "cuda_event_record_ns": round(floor["cudaEventRecord_ns"], 1),
            "ratio_cuda_over_two_event_records": round(cuda_ns / (2 * floor["cudaEventRecord_ns"]), 2),
            "floor": {k: (round(v, 1) if isinstance(v, float) else v) for k, v in floor.items()},
            "dropped": sum(r["dropped"] for r in runs),
        },
        "never_synchronizes": behind,
        "launch_queue": queue,
        "hooks": hooked,
        "goal_c_ns": 500,
    }, indent=1))


if __name__ == "__main__":
    main()
