"""``sleuth attribute``: what a job pays for its stragglers, from its records (What-if analysis).

``sleuth attribute --records FILE_OR_DIR [--job job.json] [--json]``

The records must hold every rank of the job (a logger's or the emulator's folder). Prints the
slowdown S, GPU-hours lost, S per iteration, per operator type and the top workers, M_W and M_S,
the sustained slowdown episodes that would open incidents, and the short runs (benign pauses
unless their device pauses again, which ``sleuth localize`` decides).
"""

from __future__ import annotations

import argparse
import json
import sys

from sleuth.cli.localize import (add_attribution_options, read_job, resolve_attribution_options, say_clocks, say_filled,
                                 say_numbered, say_warmup)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("attribute", help="what-if attribution of a job's records: slowdown, GPU-hours lost, top contributors")
    parser.add_argument("--records", required=True, metavar="FILE_OR_DIR", help="records folder (logger or emulator) or file")
    parser.add_argument("--job", metavar="JOB_JSON", help="job spec (default: job.json in the records folder)")
    parser.add_argument("--json", action="store_true", help="print the attribution as JSON")
    add_attribution_options(parser)
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from sleuth.localizer.attributed import episodes
    from sleuth.localizer.offline import readied, steady_from, steady_steps
    from sleuth.whatif.attribution import attribute

    resolve_attribution_options(args)
    spec, records, iterations = read_job(args)
    ready = readied(records, iterations, spec)
    say_clocks(ready.clocks)
    say_numbered(ready.numbered)
    say_filled(ready.filled, len(records))
    records, iterations = ready.records, ready.iterations
    read_from = steady_from(records, iterations, warmup=args.warmup, sustain=args.sustain)
    say_warmup(read_from, args)
    steady, steady_iterations = steady_steps(records, iterations, read_from)
    found = attribute(steady, spec, iterations=steady_iterations)
    sustained, short = episodes(found, slowdown=args.slowdown, sustain=args.sustain)
    document = {
        **found.to_dict(),
        "episodes": [{"iterations": list(e.iterations), "peak": round(e.peak, 4), "cut": e.cut} for e in sustained],
        "short_runs": [{"iterations": list(e.iterations), "peak": round(e.peak, 4)} for e in short],
    }
    if args.json:
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print(f"job {spec.job}: slowdown x{found.slowdown:.3f} over {len(found.iterations)} iterations, "
          f"{found.gpu_hours_lost:.4f} GPU-hours lost (replay as recorded / recorded: {found.fidelity:.3f})")
    print("by type: " + ", ".join(f"{t} x{s:.3f}" for t, s in sorted(found.by_type.items(), key=lambda i: -i[1])))
    workers = ", ".join(f"{r} x{s:.3f}" for r, s in found.top_workers(8)) or "none"
    print(f"top workers ({found.worker_unit or 'not measured'}): {workers}")
    last = "n/a" if found.last_stage_share is None else f"{found.last_stage_share:.2f}"
    print(f"share of the slowdown: top 3% of workers (M_W) {found.worker_share:.2f}, last stage (M_S) {last}")
    for e in sustained:
        cut = ", cut from a longer run where S steps" if e.cut else ""
        print(f"episode: iterations {e.iterations[0]}-{e.iterations[-1]}, peak x{e.peak:.3f} (opens an incident{cut})")
    for e in short:
        print(f"short run: iterations {list(e.iterations)}, peak x{e.peak:.3f} (a hiccup unless its device "
              "pauses again: sleuth localize decides)")
    return 0
