"""Benchmark of the streaming localizer's what-if rounds at scale; prints one JSON object.

    .venv/bin/python benchmarks/bench_streaming_attribution.py [--scales 1024 8192] [--seeds 461]

Per scale (the ``scale`` suite's shape: tp8, pp4 or pp8, a slow GPU from iteration 10) and
held-out seed, the rounds ``sleuth localizer`` runs as each iteration lands
(``stream.slowdown_watch``: the window's records held, each new iteration's S measured, the full
attribution and device search once a slowdown is sustained), on records already in memory (the
ClickHouse read of one new iteration is not in these figures):

* ``round_s``: the median and largest round that only measured (no sustained slowdown yet), each
  replaying the iteration that landed, its peers across iterations from the earlier ones' history;
* the same-run baseline ``window_round_s``: the same rounds replaying their whole window (what a
  round cost before the history was kept), and ``round_ratio`` = round_s / window_round_s (medians);
* ``incidents``: each incident a round opened before the fault's (``at``, ``cause``, ``top``,
  ``round_s``): a job may pay before the fault, e.g. for a pipeline split the layout makes uneven;
* ``opening_round_s``: the round that opened the fault's incident (its top suspect the fault, or the
  last incident when none names it), from its start to the incident made (the streaming latency
  once the sustaining iteration has landed, less the read);
* ``opened_at`` against ``sustained_at`` (the fault's start + sustain - 1): in the same round;
* ``top_suspect_is_fault``;
* the same-run baseline ``full_round_s``: one round that replays and attributes the whole window
  the way ``sleuth localize`` does offline, and ``ratio`` = opening_round_s / full_round_s.

Times are wall seconds on a shared 2-core machine: compare within one run.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from dataclasses import replace


def run(world: int, seed: int, iterations: int) -> dict:
    from sleuth.settings import Settings
    from sleuth.sim import Emulation, suite
    from sleuth.stream.services.slowdown_watch import SlowdownWatch, WindowCache, slowdown_incidents
    from sleuth.whatif.attribution import attribute, newest_slowdowns

    [scenario] = [sc for sc in suite("scale", seed=seed) if sc.layout.world == world]
    emulation = Emulation(replace(scenario, iterations=iterations))
    records, rows = emulation.records(), emulation.iterations()
    spec, topology, truth = emulation.job_spec(), scenario.topology, emulation.truth()
    fault = truth.faults[0]
    settings = Settings()
    watch = SlowdownWatch(interval_s=settings.attribution_interval_s, window=settings.attribution_window,
                          sustain=settings.attribution_sustain, warmup=settings.attribution_warmup)
    cache = WindowCache()
    measuring: list[float] = []
    whole: list[float] = []  # the same rounds replaying their whole window: the baseline
    opened = None
    before: list[dict] = []  # incidents opened before the fault's
    for landed in range(settings.attribution_warmup, iterations):
        first, last = watch.window_of(spec.job, landed, float(landed))
        began = time.perf_counter()
        wanted = cache.missing(first, last)
        at = records["iteration"]
        cache.add(wanted, records.take((at >= wanted[0]) & (at <= wanted[-1])),
                  rows.take((rows["iteration"] >= wanted[0]) & (rows["iteration"] <= wanted[-1])))
        incidents = slowdown_incidents(cache, spec, first, last, topology=topology, settings=settings)
        seconds = time.perf_counter() - began
        watch.done(spec.job, last)
        if incidents:
            named = [i for i in incidents if i.suspects and i.suspects[0].device == fault["device"]]
            opened = (landed, seconds, (named or incidents)[0])
            if named:
                break
            before.extend({"at": landed, "cause": i.cause.value, "top": i.suspects[0].device if i.suspects else None,
                           "round_s": round(seconds, 2)} for i in incidents)
            continue
        measuring.append(seconds)
        window_records, window_rows = cache.window(first, last)
        began = time.perf_counter()
        newest_slowdowns(window_records, spec, iterations=window_rows)
        whole.append(time.perf_counter() - began)
    row = {
        "world": world, "seed": seed, "records_per_iteration": len(records) // iterations,
        "window": settings.attribution_window,
        "round_s": {"median": round(statistics.median(measuring), 2), "max": round(max(measuring), 2)},
        "window_round_s": {"median": round(statistics.median(whole), 2), "max": round(max(whole), 2)},
        "round_ratio": round(statistics.median(measuring) / statistics.median(whole), 3),
        "sustained_at": int(fault["start"]) + settings.attribution_sustain - 1, "incidents": before,
    }
    if opened is None:
        return row | {"opened_at": None}
    landed, seconds, incident = opened
    window = records.take((records["iteration"] >= max(0, landed - settings.attribution_window + 1))
                          & (records["iteration"] <= landed))
    began = time.perf_counter()
    attribute(window, spec, iterations=rows)
    full = time.perf_counter() - began
    return row | {
        "opened_at": landed, "opening_round_s": round(seconds, 2),
        "top_suspect_is_fault": bool(incident.suspects) and incident.suspects[0].device == fault["device"],
        "full_round_s": round(full, 2), "ratio": round(seconds / full, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scales", type=int, nargs="+", default=[1024, 8192])
    parser.add_argument("--iterations", type=int, default=16)
    parser.add_argument("--seeds", type=int, nargs="+", default=[461])
    args = parser.parse_args()
    from sleuth.progress import track

    runs = [(world, seed) for world in args.scales for seed in args.seeds]
    rows = [run(world, seed, args.iterations) for world, seed in track(runs, "streaming attribution runs")]
    print(json.dumps({"benchmark": "streaming_attribution", "machine": platform.machine(), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
