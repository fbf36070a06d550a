"""Chaos: nothing the gateway confirmed is lost or counted twice, and every incident reaches an alert receiver,
while the broker is killed and paused, ClickHouse, the gateway and a worker are killed, and jobs restart.

Starts its own Kafka, ClickHouse, Alertmanager, gateway, worker, localizer and alerter on free ports with a
state folder of its own (the services on the default ports are never touched), streams emulated 16-GPU jobs
with a slow GPU through the logger's sender, injects faults at random times, and prints one JSON object:
``records_confirmed``, ``records_lost``, ``records_double_counted`` (and the same for iterations),
``incidents_raised``, ``alerts_lost``, ``faults_injected`` by kind. Exit status 1 when anything was lost or
counted twice, an incident went unalerted, or a fault kind was never injected.

    python benchmarks/bench_chaos.py --seconds 300 [--seed 0] [--jobs 2] [--gap 5 20] [--down 1 8] [--state-dir DIR]

The run goes on past ``--seconds`` until every fault kind came once. On a terminal, a bar on stderr
follows ``--seconds`` (``run_chaos``'s, naming the stack's start and the settling after).
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
from pathlib import Path

from sleuth.sim.chaos.faults import DOWN_S, GAP_S, KINDS
from sleuth.sim.chaos.run import run_chaos

REPO_ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300.0, help="how long jobs stream and faults come")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2, help="jobs streaming at once")
    parser.add_argument("--gap", type=float, nargs=2, default=GAP_S, metavar=("LOW", "HIGH"),
                        help="seconds between two faults, uniform in [LOW, HIGH]")
    parser.add_argument("--down", type=float, nargs=2, default=DOWN_S, metavar=("LOW", "HIGH"),
                        help="seconds a killed process stays down or the broker stays paused, uniform in [LOW, HIGH]")
    parser.add_argument("--state-dir", type=Path, default=None, help="the private stack's state (default: a temporary folder, removed)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    state_dir = args.state_dir or Path(tempfile.mkdtemp(prefix="sleuth-chaos-"))
    try:
        figures = run_chaos(REPO_ROOT, state_dir, seconds=args.seconds, seed=args.seed, concurrent=args.jobs,
                            gap_s=tuple(args.gap), down_s=tuple(args.down))
    finally:
        if args.state_dir is None:
            shutil.rmtree(state_dir, ignore_errors=True)
    print(json.dumps(figures, indent=1))
    clean = not any(figures[k] for k in ("records_lost", "records_double_counted", "iterations_lost",
                                         "iterations_double_counted", "alerts_lost"))
    return 0 if clean and all(figures["faults_injected"][kind] for kind in KINDS) else 1


if __name__ == "__main__":
    sys.exit(main())
