"""Step-time overhead of the logger on the real job (sleuth.sim.trainjob); prints one JSON object.

    python benchmarks/bench_logger_overhead.py [--rounds 3] [--iters 30]

Runs the 8-rank gloo job with the logger off and on (``SLEUTH_LOG_DIR`` set), interleaved
round by round, and compares the median step time over all ranks and iterations (the first two
iterations left out as warm-up). The "off" runs are the same-run baseline; the figure is the
ratio on / off. On a 2-core machine with 8 ranks, step times are noisy: read the spread of the
per-round ratios too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def one_run(logged: bool, iters: int, folder: Path) -> list[float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
    if logged:
        env.update(SLEUTH_LOG_DIR=str(folder / "records"), SLEUTH_JOB="bench-overhead",
                   SLEUTH_SPILL_DIR=str(folder / "spill"))
    out = folder / "out"
    subprocess.run(
        [sys.executable, "-m", "sleuth.sim.trainjob", "--iters", str(iters), "--out", str(out)],
        env=env, check=True, capture_output=True, timeout=900,
    )
    times = []
    for result in sorted(out.glob("result-*.json")):
        times += json.loads(result.read_text())["step_times"][2:]
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iters", type=int, default=30)
    args = parser.parse_args()
    medians: dict[str, list[float]] = {"off": [], "on": []}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            for mode in (("off", "on") if round_ % 2 == 0 else ("on", "off")):
                folder = Path(tmp) / f"{mode}-{round_}"
                medians[mode].append(statistics.median(one_run(mode == "on", args.iters, folder)))
    ratios = [on / off for on, off in zip(medians["on"], medians["off"])]
    print(json.dumps({
        "benchmark": "logger_step_overhead",
        "cpus": os.cpu_count(), "ranks": 8, "iters": args.iters, "rounds": args.rounds,
        "median_step_ms": {mode: [round(v * 1000, 2) for v in values] for mode, values in medians.items()},
        "ratio_on_over_off_per_round": [round(r, 4) for r in ratios],
        "ratio_on_over_off_median": round(statistics.median(ratios), 4),
        "goal_ratio": 1.005,
    }, indent=1))


if __name__ == "__main__":
    main()
