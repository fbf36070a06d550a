"""Benchmark of the what-if attribution (sleuth.whatif) at scale; prints one JSON object.

    .venv/bin/python benchmarks/bench_attribution.py [--scales 1024 8192] [--iterations 12] [--seeds 401]
                                                     [--baseline-up-to 2048] [--one-part-baseline]

Per scale (the ``scale`` suite's shape: tp8, pp4 or pp8, a slow GPU from iteration 10, here
over ``--iterations`` iterations so that both healthy and slow ones are in the records) and
held-out seed: the records' count, ``attribution_s`` (``attribute`` on every rank's records,
S_t and the workers' variants included), its ``slowdown`` S and S's stragglers' part
``stragglers_slowdown`` (S over ``split_slowdown``: the fault-free twin keeps the job's pipeline
split, so this part is what the truth measures) against the emulator's truth (actual over
fault-free twin time) and ``slowdown_truth_without_pauses`` (over the same twin with the
emulator's benign garbage-collection pauses at no length: What-if's ideal puts those back too),
whether the top worker group holds the faulty GPU's rank, and the same-run baseline:
``detection_s``, the shipped detector (forest and counterfactual replay, ``abnormal_mask``) on the
same records, and ``ratio`` = attribution_s / detection_s. ``--one-part-baseline`` also times the
attribution, in a process of its own run first, with the replay's levels taken across all iterations
at once (``--one-part``: ``dependencies`` without its parts, so that each sweep level holds every
iteration's operators and its scratch every operator's rows), the way it ran before the levels went
iteration by iteration: ``one_part_s``, ``parts_ratio`` = attribution_s / one_part_s, and its S
(``one_part_slowdown``), which must equal ``slowdown``. The
detector takes minutes above ``--baseline-up-to`` GPUs on these machines, so it is timed up to
there only. ``--allocator default`` leaves the process's allocator as it is, where the ``sleuth``
program (``sleuth localize``, ``sleuth attribute``) tunes it for large arrays (``sleuth.allocator``).
Times are wall seconds on a shared 2-core machine: compare within one run.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from contextlib import nullcontext
from dataclasses import replace
from unittest import mock

import allocator_option


def _one_part(first, holds, group, complete, parts=None):
    """``dependencies`` with no parts: the levels across every iteration at once."""
    from sleuth.whatif.timeline import dependencies

    return dependencies(first, holds, group, complete)


def _one_part_row(world: int, seed: int, iterations: int, allocator: str) -> dict:
    """This scale and seed's row with ``--one-part``, from a process of its own (as a fresh
    ``sleuth localize`` would run it: neither run inherits the other's memory)."""
    command = [sys.executable, __file__, "--scales", str(world), "--seeds", str(seed), "--iterations", str(iterations),
               "--baseline-up-to", "0", "--allocator", allocator, "--one-part"]
    return json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)["rows"][0]


def run(world: int, seed: int, iterations: int, baseline: bool, one_part: bool) -> dict:
    from sleuth.sim import Emulation, suite
    from sleuth.stream.detection import abnormal_mask
    from sleuth.whatif import attribution

    [scenario] = [sc for sc in suite("scale", seed=seed) if sc.layout.world == world]
    emulation = Emulation(replace(scenario, iterations=iterations))
    records, its = emulation.records(), emulation.iterations()
    with mock.patch.object(attribution, "dependencies", _one_part) if one_part else nullcontext():
        began = time.perf_counter()
        found = attribution.attribute(records, emulation.job_spec(), iterations=its)
        seconds = time.perf_counter() - began
    truth = emulation.truth()
    actual = sum(t.time_ns for t in truth.iterations) / sum(t.counterfactual_ns for t in truth.iterations)
    pause_free = sum(t.time_ns for t in truth.iterations) / float(emulation.pause_free_times().sum())
    top = max(found.by_worker)
    named = {r for r, s in enumerate(found.by_worker) if s >= top}
    row = {
        "world": world, "seed": seed, "iterations": iterations, "records": len(records),
        "attribution_s": round(seconds, 2), "slowdown": round(found.slowdown, 4),
        "stragglers_slowdown": round(found.slowdown / found.split_slowdown, 4), "slowdown_truth": round(actual, 4),
        "slowdown_truth_without_pauses": round(pause_free, 4),
        "top_worker_group_has_fault": set(truth.faults[0]["ranks"]) <= named, "top_worker_group": len(named),
    }
    if baseline:
        began = time.perf_counter()
        abnormal_mask(records, its)
        row["detection_s"] = round(time.perf_counter() - began, 2)
        row["ratio"] = round(seconds / row["detection_s"], 3)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scales", type=int, nargs="+", default=[1024, 8192])
    parser.add_argument("--iterations", type=int, default=12)
    parser.add_argument("--seeds", type=int, nargs="+", default=[401])
    parser.add_argument("--baseline-up-to", type=int, default=2048, metavar="WORLD")
    parser.add_argument("--one-part-baseline", action="store_true",
                        help="also time, in a process of its own, the attribution with the replay's levels across "
                             "all iterations at once")
    parser.add_argument("--one-part", action="store_true", help="time only that way (what the baseline runs)")
    allocator_option.add(parser)
    args = parser.parse_args()
    from sleuth.progress import track

    tuned = allocator_option.apply(args)

    rows = []
    for seed, world in track([(seed, world) for seed in args.seeds for world in args.scales], "attribution runs"):
        whole = _one_part_row(world, seed, args.iterations, args.allocator) if args.one_part_baseline else None
        row = run(world, seed, args.iterations, world <= args.baseline_up_to, args.one_part)
        if whole is not None:
            row.update(one_part_s=whole["attribution_s"], parts_ratio=round(row["attribution_s"] / whole["attribution_s"], 3),
                       one_part_slowdown=whole["slowdown"])
        rows.append(row)
    print(json.dumps({"machine": platform.machine(), "allocator": tuned, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
