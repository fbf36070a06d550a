"""Localization and what-if S when the loggers lost records at random; prints one JSON object.

    python benchmarks/bench_lost_records.py [--seeds 5885 5886] [--shares 0.001 0.01 0.05]
                                            [--suites from-start moderate network two-moderate]

Each scenario of the emulator suites (128 GPUs, held-out seeds) is localized as ``sleuth localize``
does (``localize_records``: clocks on one, lost group members filled in, the attribution and the
device search) on its whole records, the same-run baseline, and on copies that lost each share of
their records at random (seeded). Per row: S of the whole records, of the lossy ones as they are
(the attribution without the filling) and filled in, each lossy S's ratio to the whole's; the
records lost and filled in; whether every injected device is among the first two suspects of its
side (``bench_localizer.named_at_top``), whole and filled in; seconds.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import numpy as np
from bench_localizer import named_at_top


def _as_lost_slowdown(records, iterations, spec) -> float:
    """S of ``records`` read as ``localize_records`` reads them, but for the filling in."""
    from sleuth.localizer.offline import steady_from, steady_steps
    from sleuth.settings import Settings
    from sleuth.whatif.attribution import attribute
    from sleuth.whatif.clocks import read_on_one_clock

    settings = Settings()
    records, iterations, _ = read_on_one_clock(records, iterations, spec)
    first = steady_from(records, iterations, warmup=settings.attribution_warmup, sustain=settings.attribution_sustain)
    steady, steady_iterations = steady_steps(records, iterations, first)
    return attribute(steady, spec, iterations=steady_iterations).slowdown


def run_scenario(scenario, shares: list[float], seed: int) -> list[dict]:
    from sleuth.localizer.offline import localize_records
    from sleuth.sim import Emulation

    emulation = Emulation(scenario)
    spec, records, iterations = emulation.job_spec(), emulation.records(), emulation.iterations()
    devices = [truth["device"] for truth in emulation.fault_truths()]

    def localized(kept):
        started = time.perf_counter()
        found = localize_records(spec, kept, iterations, topology=scenario.topology, routing="static")
        right = all(named_at_top(device, list(found.incidents)) for device in devices)
        return found, right, time.perf_counter() - started

    whole, whole_right, whole_s = localized(records)
    rows = []
    for share in shares:
        kept = records.take(np.flatnonzero(np.random.default_rng(seed).random(len(records)) >= share))
        filled, filled_right, filled_s = localized(kept)
        as_lost = _as_lost_slowdown(kept, iterations, spec)
        rows.append({
            "scenario": scenario.name, "seed": seed, "devices": devices, "share": share,
            "lost": len(records) - len(kept), "filled": filled.filled,
            "slowdown_whole": round(whole.attribution.slowdown, 4),
            "slowdown_as_lost": round(as_lost, 4), "slowdown_filled": round(filled.attribution.slowdown, 4),
            "ratio_as_lost": round(as_lost / whole.attribution.slowdown, 4),
            "ratio_filled": round(filled.attribution.slowdown / whole.attribution.slowdown, 4),
            "top2_whole": whole_right, "top2_filled": filled_right,
            "seconds_whole": round(whole_s, 2), "seconds_filled": round(filled_s, 2),
        })
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[5885, 5886])
    parser.add_argument("--shares", type=float, nargs="+", default=[0.001, 0.01, 0.05])
    parser.add_argument("--suites", nargs="+", default=["from-start", "moderate", "network", "two-moderate"])
    args = parser.parse_args()
    if not all(0 < share < 1 for share in args.shares):
        parser.error(f"--shares: each a share of the records between 0 and 1, got {args.shares}")
    from sleuth.sim import suite

    rows = []
    for seed in args.seeds:
        for name in args.suites:
            for scenario in suite(name, seed=seed):
                rows.extend(run_scenario(scenario, args.shares, seed))
    summary = {}
    for share in args.shares:
        at = [r for r in rows if r["share"] == share]
        summary[str(share)] = {
            "rows": len(at),
            "top2_whole": sum(r["top2_whole"] for r in at), "top2_filled": sum(r["top2_filled"] for r in at),
            "within_5pct_as_lost": sum(abs(r["ratio_as_lost"] - 1) <= 0.05 for r in at),
            "within_5pct_filled": sum(abs(r["ratio_filled"] - 1) <= 0.05 for r in at),
            "worst_ratio_filled": min((r["ratio_filled"] for r in at), default=None),
        }
    json.dump({"benchmark": "lost_records", "machine": platform.machine(), "seeds": args.seeds, "suites": args.suites,
               "rows": rows, "summary": summary}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
