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

With ``--clickhouse`` (a ClickHouse server as the settings name it, e.g. started by
``deploy/clickhouse.sh up``), the records are written to a database of their own first and each
round reads what it lacks from there as ``sleuth localizer`` does (the last landed iteration, then
the records and iteration rows of the new iterations, each key once): ``read_s`` (median, max) and
``opening_read_s`` time those reads, and ``opening_round_s`` includes its read. The database is
dropped at the end.

``--allocator default`` leaves the process's allocator as it is, where the ``sleuth`` program's
processes tune it for large arrays (``sleuth.allocator``): the run measures what that is worth.

Times are wall seconds on a shared 2-core machine: compare within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from dataclasses import replace

import numpy as np

import allocator_option


class _Stored:
    """The job's records in a ClickHouse database of their own, read back as the localizer reads them."""

    def __init__(self, settings, records, rows, spec, seed: int) -> None:
        from sleuth.storage import schema
        from sleuth.storage.sink import ClickHouseSink
        from sleuth.stream import connect

        self.client = connect.clickhouse_client(settings)
        self.database = f"bench_streaming_{spec.layout.world if spec.layout else 0}_{seed}_{os.getpid()}"
        schema.migrate(self.client, self.database)
        sink = ClickHouseSink(self.client, self.database)
        for it in np.unique(rows["iteration"]).tolist():  # iteration by iteration, as the workers insert
            sink.write(records.take(records["iteration"] == it), rows.take(rows["iteration"] == it), [spec])
        self.job, self.world = spec.job, spec.world

    def read(self, wanted: list[int], last: int):
        from sleuth.storage.source import ClickHouseSource, landed_through

        landed_through(self.client, self.database, self.job, world=self.world, since=wanted[0])
        source = ClickHouseSource(self.client, self.database, self.job, through=last)
        return source.ranks_records(None, iterations=wanted), source.iterations(iterations=wanted)

    def drop(self) -> None:
        self.client.execute(f"DROP DATABASE IF EXISTS {self.database}")
        self.client.disconnect()


def run(world: int, seed: int, iterations: int, clickhouse: bool = False) -> dict:
    from sleuth.settings import Settings
    from sleuth.sim import Emulation, suite
    from sleuth.stream.services.slowdown_watch import SlowdownWatch, WindowCache, slowdown_incidents
    from sleuth.whatif.attribution import newest_slowdowns

    [scenario] = [sc for sc in suite("scale", seed=seed) if sc.layout.world == world]
    emulation = Emulation(replace(scenario, iterations=iterations))
    records, rows = emulation.records(), emulation.iterations()
    spec, topology, truth = emulation.job_spec(), scenario.topology, emulation.truth()
    fault = truth.faults[0]
    settings = Settings.from_env()
    stored = _Stored(settings, records, rows, spec, seed) if clickhouse else None
    watch = SlowdownWatch(interval_s=settings.attribution_interval_s, window=settings.attribution_window,
                          sustain=settings.attribution_sustain, warmup=settings.attribution_warmup)
    cache = WindowCache()
    measuring: list[float] = []
    reads: list[float] = []
    whole: list[float] = []  # the same rounds replaying their whole window: the baseline
    opened = None
    before: list[dict] = []  # incidents opened before the fault's
    for landed in range(settings.attribution_warmup, iterations):
        first, last = watch.window_of(spec.job, landed, float(landed))
        began = time.perf_counter()
        wanted = cache.missing(first, last)
        if stored is not None:
            cache.add(wanted, *stored.read(wanted, last), spec)
        else:
            at = records["iteration"]
            cache.add(wanted, records.take((at >= wanted[0]) & (at <= wanted[-1])),
                      rows.take((rows["iteration"] >= wanted[0]) & (rows["iteration"] <= wanted[-1])), spec)
        read = time.perf_counter() - began
        incidents = slowdown_incidents(cache, spec, first, last, topology=topology, settings=settings)
        seconds = time.perf_counter() - began
        watch.done(spec.job, last)
        if incidents:
            named = [i for i in incidents if i.suspects and i.suspects[0].device == fault["device"]]
            opened = (landed, seconds, (named or incidents)[0])
            opening_read = read
            if named:
                break
            before.extend({"at": landed, "cause": i.cause.value, "top": i.suspects[0].device if i.suspects else None,
                           "round_s": round(seconds, 2)} for i in incidents)
            continue
        measuring.append(seconds)
        reads.append(read)
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
    if stored is not None:
        stored.drop()
        row["read_s"] = {"median": round(statistics.median(reads), 2), "max": round(max(reads), 2)}
    if opened is None:
        return row | {"opened_at": None}
    landed, seconds, incident = opened
    full = window_attribution_s(records, rows, spec, landed, settings.attribution_window)
    if stored is not None:
        row["opening_read_s"] = round(opening_read, 2)
    return row | {
        "opened_at": landed, "opening_round_s": round(seconds, 2),
        "top_suspect_is_fault": bool(incident.suspects) and incident.suspects[0].device == fault["device"],
        "full_round_s": round(full, 2), "ratio": round(seconds / full, 3),
    }


def window_attribution_s(records, rows, spec, last: int, window: int) -> float:
    """Seconds to attribute the ``window`` iterations through ``last`` in memory, as ``sleuth localize``
    does offline: the same-run baseline of a streaming round."""
    from sleuth.whatif.attribution import attribute

    held = records.take((records["iteration"] >= max(0, last - window + 1)) & (records["iteration"] <= last))
    began = time.perf_counter()
    attribute(held, spec, iterations=rows)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scales", type=int, nargs="+", default=[1024, 8192])
    parser.add_argument("--iterations", type=int, default=16)
    parser.add_argument("--seeds", type=int, nargs="+", default=[461])
    allocator_option.add(parser)
    parser.add_argument("--clickhouse", action="store_true",
                        help="rounds read their records from ClickHouse (SLEUTH_CLICKHOUSE_HOST/PORT), as the localizer does")
    args = parser.parse_args()
    from sleuth.progress import track

    tuned = allocator_option.apply(args)

    runs = [(world, seed) for world in args.scales for seed in args.seeds]
    rows = [run(world, seed, args.iterations, args.clickhouse) for world, seed in track(runs, "streaming attribution runs")]
    print(json.dumps({"benchmark": "streaming_attribution", "machine": platform.machine(), "allocator": tuned,
                      "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
