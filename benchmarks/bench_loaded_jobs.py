"""Real gloo jobs on a loaded machine, and what ``sleuth localize`` names; prints one JSON object.

    .venv/bin/python benchmarks/bench_loaded_jobs.py [--runs 2] [--busy 2] [--jobs clean spike ...] [--keep DIR]

Each job runs with sleuth's logger writing a records folder while ``--busy`` processes spin beside
it (``python -c "while True: pass"``), so its processes are descheduled now and then: the jitter a
shared machine, or a host's own daemons, give a real job. Then ``sleuth localize --json`` reads the
folder. Per run: the incidents (cause, first and last iteration, top two suspects, S), and whether
the reading is right:

* a job with no fault or data imbalance names no device and no data (pauses at most); so does one
  whose rank paused once (a hiccup: recorded, never paged);
* uneven batches name sequence-length imbalance and no device, in one incident;
* uneven pipeline stages name the split (stage imbalance) and no device;
* a slowed rank's GPU leads the incident over most of its slowed steps, and no other incident
  names a device first.

There is no same-run baseline: this measures right and wrong, not time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

SLOW_RANK = {"sleuth.sim.frameworkjob": 2, "sleuth.sim.trainjob": 5}


@dataclass(frozen=True)
class Job:
    """One real job: its module and arguments, what it holds, and the steps a slowed rank is slow in."""

    module: str
    args: tuple[str, ...]
    truth: str  # "none", "seqlen", "stage", or "gpu"
    slowed: range = range(0)


JOBS = {
    "clean": Job("sleuth.sim.frameworkjob", ("--world", "4", "--mode", "ddp", "--iters", "30"), "none"),
    "fsdp-clean": Job("sleuth.sim.frameworkjob", ("--world", "4", "--mode", "fsdp", "--iters", "30"), "none"),
    "train-clean": Job("sleuth.sim.trainjob", ("--iters", "30"), "none"),
    "seqlen": Job("sleuth.sim.frameworkjob", ("--world", "4", "--mode", "ddp", "--iters", "30", "--seqlen-jitter", "100"),
                  "seqlen"),
    "fsdp-seqlen": Job("sleuth.sim.frameworkjob", ("--world", "4", "--mode", "fsdp", "--iters", "30", "--seqlen-jitter",
                                                   "100"), "seqlen"),
    "train-seqlen": Job("sleuth.sim.trainjob", ("--iters", "30", "--tp", "2", "--pp", "1", "--dp", "4", "--seqlen-jitter",
                                                "10", "--base-delay-ms", "20"), "seqlen"),
    "spike": Job("sleuth.sim.frameworkjob", ("--world", "4", "--mode", "ddp", "--iters", "30", "--slow-rank", "2",
                                             "--slow-factor", "200", "--slow-iters", "15:25"), "gpu", range(15, 25)),
    "from-start": Job("sleuth.sim.frameworkjob", ("--world", "4", "--mode", "ddp", "--iters", "30", "--slow-rank", "2",
                                                  "--slow-factor", "100", "--slow-iters", "0:30"), "gpu", range(30)),
    "train-slow": Job("sleuth.sim.trainjob", ("--iters", "30", "--slow-rank", "5", "--slow-factor", "200",
                                              "--slow-iters", "15:25"), "gpu", range(15, 25)),
    # One step of one rank's compute 20x as long, then never again: a pause (a hiccup).
    "hiccup": Job("sleuth.sim.frameworkjob", ("--world", "4", "--mode", "ddp", "--iters", "30", "--slow-rank", "2",
                                              "--slow-factor", "20", "--slow-iters", "15:16"), "none"),
    "train-hiccup": Job("sleuth.sim.trainjob", ("--iters", "30", "--slow-rank", "5", "--slow-factor", "20",
                                                "--slow-iters", "15:16"), "none"),
    # The last of two stages computing 3x as long as the first, 20 ms a micro-batch against 60.
    "train-uneven": Job("sleuth.sim.trainjob", ("--iters", "30", "--uneven-stages", "3", "--base-delay-ms", "20"), "stage"),
    # Moderate faults: the slowed rank's compute 3x, a step some tens of percent longer, not 0.4 s.
    "moderate-from-start": Job("sleuth.sim.frameworkjob", ("--world", "4", "--mode", "ddp", "--iters", "30",
                                                           "--slow-rank", "2", "--slow-factor", "3", "--slow-iters",
                                                           "0:30"), "gpu", range(30)),
    "moderate-ramp": Job("sleuth.sim.frameworkjob", ("--world", "4", "--mode", "ddp", "--iters", "30", "--slow-rank", "2",
                                                     "--slow-factor", "5", "--slow-iters", "5:30", "--ramp"), "gpu",
                         range(5, 30)),
    "moderate-fsdp": Job("sleuth.sim.frameworkjob", ("--world", "4", "--mode", "fsdp", "--iters", "30", "--slow-rank",
                                                     "2", "--slow-factor", "3", "--slow-iters", "10:30"), "gpu",
                         range(10, 30)),
}


def run_job(name: str, job: Job, folder: Path, busy: int) -> list[dict]:
    """The job run with ``busy`` spinning processes beside it, then its incidents."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
    env.update(SLEUTH_LOG_DIR=str(folder / "records"), SLEUTH_JOB=name, SLEUTH_FLUSH_S="0.2")
    extra = ("--out", str(folder / "out")) if job.module.endswith("frameworkjob") else ()
    try:
        done = subprocess.run([sys.executable, "-m", job.module, *job.args, *extra], env=env, capture_output=True,
                              text=True, timeout=900)
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    if done.returncode != 0:
        raise SystemExit(f"{name}: the job failed: {done.stderr[-2000:]}")
    found = subprocess.run([sys.executable, "-m", "sleuth", "localize", "--records", str(folder / "records"), "--json"],
                           capture_output=True, text=True, timeout=900)
    if found.returncode != 0:
        raise SystemExit(f"{name}: sleuth localize failed: {found.stderr[-2000:]}")
    return json.loads(found.stdout)


def right(job: Job, incidents: list[dict], gpu: str) -> bool:
    """Whether ``incidents`` read ``job`` as its truth says (the module docstring's rules)."""
    blamed = [i["suspects"][0]["device"] for i in incidents if i["suspects"]]
    if job.truth == "none":
        return not blamed and all(i["cause"] != "seqlen_imbalance" for i in incidents)
    if job.truth == "seqlen":
        return [(i["cause"], bool(i["suspects"])) for i in incidents] == [("seqlen_imbalance", False)]
    if job.truth == "stage":
        return not blamed and any(i["cause"] == "stage_imbalance" for i in incidents)
    covering = max(incidents, key=lambda i: len(set(job.slowed) & set(i["iterations"])), default=None)
    return covering is not None and bool(covering["suspects"]) and set(blamed) == {gpu} \
        and covering["suspects"][0]["device"] == gpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="runs of each job (default 2)")
    parser.add_argument("--busy", type=int, default=2, help="spinning processes beside each job (default 2)")
    parser.add_argument("--jobs", nargs="+", choices=sorted(JOBS), default=list(JOBS))
    parser.add_argument("--keep", type=Path, help="keep each run's records folder under this folder "
                                                  "(to re-read with sleuth localize); default: a temporary one")
    args = parser.parse_args()
    from sleuth.jobspec import JobSpec
    from sleuth.topology.ids import gpu_id

    rows = []
    with tempfile.TemporaryDirectory() as temporary:
        scratch = args.keep or Path(temporary)
        for run in range(args.runs):
            for name in args.jobs:
                job = JOBS[name]
                folder = scratch / f"{name}-{run}"
                incidents = run_job(f"{name}-{run}", job, folder, args.busy)
                placement = JobSpec.read(folder / "records").placements[SLOW_RANK[job.module]]
                gpu = gpu_id(placement.host, placement.gpu)
                rows.append({
                    "job": name, "run": run, "truth": job.truth, "right": right(job, incidents, gpu),
                    "incidents": [{"cause": i["cause"], "iterations": [i["iterations"][0], i["iterations"][-1]],
                                   "suspects": [s["device"] for s in i["suspects"][:2]],
                                   "slowdown": i["impact"]["slowdown"]} for i in incidents],
                })
                print(json.dumps(rows[-1]), file=sys.stderr)
    json.dump({"benchmark": "loaded_jobs", "busy": args.busy, "runs": args.runs, "cpus": os.cpu_count(),
               "python": platform.python_version(), "right": sum(r["right"] for r in rows), "of": len(rows),
               "rows": rows}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
