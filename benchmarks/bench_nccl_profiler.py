"""What libnccl-profiler-sleuth.so costs NCCL's calling threads per operator; prints one JSON object.

    python benchmarks/bench_nccl_profiler.py [--iters 100000] [--repeats 5]

The C harness of the tests (tests/logger/nccl_harness.c) plays NCCL for one rank: per iteration one
all-reduce on 2 channels and a send and a recv on 1 channel each (3 operators; 29 start/stop
calls and 14 recordEventState calls in all, with proxy ops and steps). Timed, alternating, in the
same run: the harness with sleuth's plugin writing records (to a temp folder), and with the test's
counting plugin (tests/logger/nccl_next_plugin.c: one malloc/free per event, nothing written) as
the baseline of "NCCL calls some plugin". Reported: the median wall time per operator of each and
their difference. No GPU: NCCL's own work and the kernels are absent, so this is the plugin's CPU
cost on the calling threads, not a job's slowdown.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from sleuth.progress import progress

ROOT = Path(__file__).resolve().parent.parent
OPS_PER_ITER = 3


def build(out: Path) -> None:
    src = ROOT / "logger" / "nccl_profiler"
    subprocess.run(["make", "-s", "-C", str(src), f"OUT={out}"], check=True)
    tests = ROOT / "tests" / "logger"
    subprocess.run(["gcc", "-O2", f"-I{src}", "-o", str(out / "harness"), str(tests / "nccl_harness.c"), "-ldl"], check=True)
    subprocess.run(["gcc", "-O2", "-fPIC", "-shared", f"-I{src}", "-o", str(out / "libnext.so"), str(tests / "nccl_next_plugin.c")], check=True)


def run(out: Path, plugin: str, iters: int, log_dir: Path) -> float:
    shutil.rmtree(log_dir, ignore_errors=True)
    env = {"SLEUTH_LOG_DIR": str(log_dir), "RANK": "0", "PATH": "/usr/bin:/bin"}
    args = [str(out / "harness"), str(out / plugin), "5", "0", "1", str(iters), "-1", "0", "0", str(time.time_ns())]
    start = time.perf_counter_ns()
    subprocess.run(args, env=env, check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter_ns() - start) / (iters * OPS_PER_ITER)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    # The bar is drawn only as it advances, between the timed harness runs: never while one is timed.
    with tempfile.TemporaryDirectory() as tmp, progress("nccl profiler: building the plugins", total=1 + 2 * args.repeats,
                                                        redraw_on_timer=False) as steps:
        out = Path(tmp)
        build(out)
        steps.advance(description="nccl profiler: timed harness runs (sleuth's plugin, the counting one)")
        sleuth, baseline = [], []
        for _ in range(args.repeats):
            sleuth.append(run(out, "libnccl-profiler-sleuth.so", args.iters, out / "logs"))
            written = sum(p.stat().st_size for p in (out / "logs").glob("*.bin")) // 64
            steps.advance()
            baseline.append(run(out, "libnext.so", args.iters, out / "logs"))
            steps.advance()
    s, b = statistics.median(sleuth), statistics.median(baseline)
    print(json.dumps({
        "benchmark": "nccl_profiler", "machine": platform.machine(), "iters": args.iters, "repeats": args.repeats,
        "ns_per_op_sleuth": round(s, 1), "ns_per_op_baseline_plugin": round(b, 1), "ns_per_op_added": round(s - b, 1),
        "ratio": round(s / b, 3), "records_written_per_run": written,
    }))


if __name__ == "__main__":
    main()
