"""Benchmark of sleuth.localizer on emulator suites with held-out seeds; prints one JSON object.

    python benchmarks/bench_localizer.py [--seeds 101 102] [--scales 1024 2048] [--graph 8192 16384]
                                         [--suites dims types network concurrent nonhw clean] [--no-baselines]

Figures:
* ``graph``: grouped operator graph build time (s) and memory (bytes of its arrays, and the
  tracemalloc peak while building) at each ``--graph`` size (tp8 pp8); the naive operator x GPU
  graph's edge count for comparison (operators per rank from a 1-iteration emulation x ranks x
  mean group size);
* ``accuracy``: per suite, per scale and per fault kind / profile: the fraction of scenarios
  whose every injected device is in the top K=2 suspects, for sleuth and each baseline
  (``earliest``, ``random_walk``, ``nvrx_relative_median``);
* ``nonhardware``: whether stage / sequence-length imbalance scenarios got that cause;
* ``false_alarms``: clean runs localized on their 5 slowest iterations (clean runs have no
  δ-irregular iteration at all, so this forces the search); any hardware suspect is an alarm;
* ``fetched``: ranks fetched / world per scale; ``latency_s``: localization time per scale,
  irregular iterations in to incident out, fetching from the emulator included.

Irregular iterations are the emulator's ground-truth δ-irregular iterations (the detector is
another issue); a scenario with none (sequence-length imbalance) uses its 5 slowest after the
fault starts. Timings are for comparison between runs on these shared 2-core machines.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import tracemalloc

import numpy as np


def graph_figures(worlds: list[int]) -> dict:
    from sleuth.jobspec import JobSpec
    from sleuth.layout import ParallelLayout
    from sleuth.localizer import build_graph

    out = {}
    for world in worlds:
        spec = JobSpec.from_layout("bench", ParallelLayout(world, 8, 8, world // 64))
        tracemalloc.start()
        began = time.perf_counter()
        graph = build_graph(spec)
        seconds = time.perf_counter() - began
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        mean_group = graph.n_edges / graph.n_groups
        out[str(world)] = {
            "build_s": round(seconds, 4),
            "array_bytes": graph.nbytes(),
            "tracemalloc_peak_bytes": peak,
            "groups": graph.n_groups,
            "group_rank_edges": graph.n_edges,
            "naive_edges_per_1000_ops_per_rank": int(1000 * world * mean_group),
        }
    return out


def _irregular(emulation) -> list[int]:
    truth = emulation.truth()
    found = [t.iteration for t in truth.iterations if t.irregular]
    if found:
        return found
    start = min((f["start"] for f in truth.faults), default=0)
    late = [t for t in truth.iterations if t.iteration >= start]
    return sorted(t.iteration for t in sorted(late, key=lambda t: -t.time_ns)[:5])


def run_scenario(scenario, *, baselines: bool) -> dict:
    from sleuth.localizer import localize
    from sleuth.localizer.baselines import earliest_abnormal, random_walk, relative_median
    from sleuth.sim import Emulation

    emulation = Emulation(scenario)
    truth = emulation.truth()
    devices = [f["device"] for f in truth.faults if f["device"]]
    irregular = _irregular(emulation)
    window = min(100, scenario.iterations)
    began = time.perf_counter()
    incidents = localize(emulation, irregular_iterations=irregular, topology=scenario.topology, window=window)
    latency = time.perf_counter() - began
    suspects = [s.device for i in incidents for s in i.suspects]
    row = {
        "name": scenario.name,
        "world": scenario.layout.world,
        "faults": [f"{f['kind']}:{f['profile']}" for f in truth.faults],
        "devices": devices,
        "suspects": suspects,
        "causes": [i.cause.value for i in incidents],
        "correct": bool(devices) and all(d in suspects for d in devices),
        "hardware_alarm": any(i.cause.hardware for i in incidents),
        "fetched": max((i.ranks_fetched for i in incidents), default=0) / scenario.layout.world,
        "latency_s": round(latency, 3),
    }
    if baselines and devices:
        for name, method in (("earliest", earliest_abnormal), ("random_walk", random_walk), ("nvrx_relative_median", relative_median)):
            found = method(emulation, irregular_iterations=irregular, window=window)
            row[name] = all(d in found for d in devices)
    return row


def _rate(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows if key in r]
    return round(float(np.mean(values)), 4) if values else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[101, 102])
    parser.add_argument("--scales", type=int, nargs="*", default=[1024, 2048])
    parser.add_argument("--graph", type=int, nargs="*", default=[8192, 16384])
    parser.add_argument("--suites", nargs="*", default=["dims", "types", "network", "concurrent", "nonhw", "clean"])
    parser.add_argument("--no-baselines", action="store_true")
    args = parser.parse_args()

    from sleuth.sim import suite

    rows: list[dict] = []
    for seed in args.seeds:
        for name in args.suites:
            for scenario in suite(name, seed=seed):
                rows.append({"suite": name, "seed": seed, **run_scenario(scenario, baselines=not args.no_baselines)})
        for scenario in suite("scale", seed=seed):
            if scenario.layout.world in args.scales:
                rows.append({"suite": "scale", "seed": seed, **run_scenario(scenario, baselines=False)})

    def summary(selected: list[dict]) -> dict:
        return {
            "n": len(selected),
            "sleuth": _rate(selected, "correct"),
            "earliest": _rate(selected, "earliest"),
            "random_walk": _rate(selected, "random_walk"),
            "nvrx_relative_median": _rate(selected, "nvrx_relative_median"),
        }

    faulty = [r for r in rows if r["devices"]]
    by = lambda key: {k: summary([r for r in faulty if key(r) == k]) for k in sorted({key(r) for r in faulty})}
    scale_rows = [r for r in rows if r["suite"] == "scale"]
    clean = [r for r in rows if r["suite"] == "clean"]
    nonhw = [r for r in rows if r["suite"] == "nonhw"]
    report = {
        "machine": platform.machine(),
        "seeds": args.seeds,
        "graph": graph_figures(args.graph),
        "accuracy": {
            "all": summary(faulty),
            "by_suite": by(lambda r: r["suite"]),
            "by_scenario": by(lambda r: r["name"].split("-", 1)[1] if "-" in r["name"] else r["name"]),
        },
        "by_scale": {
            str(w): {
                "accuracy": _rate([r for r in scale_rows if r["world"] == w], "correct"),
                "fetched": _rate([r for r in scale_rows if r["world"] == w], "fetched"),
                "latency_s": _rate([r for r in scale_rows if r["world"] == w], "latency_s"),
            }
            for w in sorted({r["world"] for r in scale_rows})
        },
        "nonhardware": {r["name"] + f"@{r['seed']}": r["causes"] for r in nonhw},
        "false_alarm_rate": _rate(clean, "hardware_alarm"),
        "rows": rows,
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
