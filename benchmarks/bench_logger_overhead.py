"""Step-time overhead of the logger on the real job (sleuth.sim.trainjob); prints one JSON object.

    python benchmarks/bench_logger_overhead.py [--rounds 3] [--iters 30] [--together]

Runs the 8-rank gloo job with the logger off and on (``SLEUTH_LOG_DIR`` set), interleaved
round by round (the first two iterations of each run left out as warm-up). The "off" runs are
the same-run baseline. Two figures, each a ratio on / off per round and the median over rounds:

* ``wall``: the median step time over all ranks and iterations. On a 2-core machine running 8
  ranks, wall step times vary by tens of percent with what else runs: read the per-round spread.
* ``cpu``: the mean CPU time per step of a rank's process, all its threads (the logger's drainer
  and writer included): what the logger costs the machine, which the other processes on it do
  not inflate the way they inflate wall time. They still inflate it some (shared caches and
  SMT siblings slow every process), and that load changes over minutes on a shared machine.

``--together`` runs each round's two jobs at the same time, 16 processes on the machine: both
then meet the same load, second by second, which makes the ``cpu`` ratio the fairer one. The
``wall`` ratio then understates the cost, since the logger's CPU is taken from both jobs alike.
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


def start_job(logged: bool, iters: int, folder: Path, capture: str = "auto") -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
    if logged:
        env.update(SLEUTH_LOG_DIR=str(folder / "records"), SLEUTH_JOB="bench-overhead",
                   SLEUTH_SPILL_DIR=str(folder / "spill"), SLEUTH_CAPTURE=capture)
    return subprocess.Popen(
        [sys.executable, "-m", "sleuth.sim.trainjob", "--iters", str(iters), "--out", str(folder / "out")],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )


def steps_of(job: subprocess.Popen, folder: Path) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds per step, over every rank's steps after the warm-up."""
    _, err = job.communicate(timeout=1800)
    if job.returncode:
        raise SystemExit(f"the job in {folder} failed ({job.returncode}): {err.decode()[-2000:]}")
    wall, cpu = [], []
    for result in sorted((folder / "out").glob("result-*.json")):
        steps = json.loads(result.read_text())
        wall += steps["step_times"][2:]
        cpu += steps["step_cpu_times"][2:]
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--capture", default="auto", help="SLEUTH_CAPTURE of the logged runs (auto, native, process-group, functions)")
    parser.add_argument("--together", action="store_true",
                        help="run each round's two jobs at the same time (see the module's docstring)")
    args = parser.parse_args()
    wall: dict[str, list[float]] = {"off": [], "on": []}
    cpu: dict[str, list[float]] = {"off": [], "on": []}
    from sleuth.progress import track

    with tempfile.TemporaryDirectory() as tmp:
        for round_ in track(range(args.rounds), "rounds (a job without the logger, one with)"):
            order = ("off", "on") if round_ % 2 == 0 else ("on", "off")
            folders = {mode: Path(tmp) / f"{mode}-{round_}" for mode in order}
            if args.together:
                jobs = {mode: start_job(mode == "on", args.iters, folders[mode], args.capture) for mode in order}
                results = {mode: steps_of(jobs[mode], folders[mode]) for mode in order}
            else:
                results = {mode: steps_of(start_job(mode == "on", args.iters, folders[mode], args.capture), folders[mode])
                           for mode in order}
            for mode, (steps_wall, steps_cpu) in results.items():
                wall[mode].append(statistics.median(steps_wall))
                cpu[mode].append(statistics.fmean(steps_cpu))

    def figures(per_mode: dict[str, list[float]]) -> dict:
        ratios = [on / off for on, off in zip(per_mode["on"], per_mode["off"])]
        return {
            "step_ms": {mode: [round(v * 1000, 2) for v in values] for mode, values in per_mode.items()},
            "ratio_on_over_off_per_round": [round(r, 4) for r in ratios],
            "ratio_on_over_off_median": round(statistics.median(ratios), 4),
        }

    print(json.dumps({
        "benchmark": "logger_step_overhead",
        "cpus": os.cpu_count(), "ranks": 8, "iters": args.iters, "rounds": args.rounds,
        "together": args.together, "capture": args.capture,
        "wall": figures(wall),
        "cpu": figures(cpu),
        "goal_ratio": 1.005,
    }, indent=1))


if __name__ == "__main__":
    main()
