"""Nanoseconds per recorded operator on the logger's hot path; prints one JSON object.

    python benchmarks/bench_logger_hotpath.py [--ops 1000000] [--repeats 5]

For each twin of the recorder (the C extension and the pure-Python module) it times
``begin`` + ``end`` of one operator on the host clock, the ring drained every 32,768 operators
(as the drainer would), and reports the median over ``repeats`` runs of ``ops`` operators.
Also timed: the same through ``Session.begin`` (sequence numbers and iteration added), which
is what a hook pays on top of torch. The baseline in the same run is an empty Python loop
calling a no-op method twice per operator, and the Python twin itself (ratio python / c).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

from sleuth.logger import core
from sleuth.logger.identity import Identity
from sleuth.logger.session import Session
from sleuth.progress import progress

DRAIN_EVERY = 1 << 15


def recorder_ns(impl, ops: int) -> float:
    recorder = impl.Recorder(1 << 16)
    begin, end, drain = recorder.begin, recorder.end, recorder.drain
    start = time.perf_counter_ns()
    for i in range(ops):
        end(begin(3, i, 1, -1, 4096, 7))
        if not i & (DRAIN_EVERY - 1):
            drain()
    elapsed = time.perf_counter_ns() - start
    assert recorder.dropped == 0
    return elapsed / ops


def session_ns(impl, ops: int) -> float:
    session = Session(
        ring=1 << 16, impl=impl,
        resolve_identity=lambda: Identity("bench", 0, 1, "h", 0),
        group_ranks=lambda group: ((0, 1), "g", "group", ""),
    )
    info = session.group("tp")
    begin, end, drain = session.begin, session.recorder.end, session.recorder.drain
    start = time.perf_counter_ns()
    for i in range(ops):
        end(begin(info, 1, -1, 4096))
        if not i & (DRAIN_EVERY - 1):
            drain()
    return (time.perf_counter_ns() - start) / ops


class _Noop:
    def call(self, *args: int) -> int:
        return 0


def baseline_ns(ops: int) -> float:
    noop = _Noop().call
    start = time.perf_counter_ns()
    for i in range(ops):
        noop(noop(3, i, 1, -1, 4096, 7))
        if not i & (DRAIN_EVERY - 1):
            noop()
    return (time.perf_counter_ns() - start) / ops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    twins = {name: core.load(name) for name in ("c", "python")}
    runs: dict[str, list[float]] = {}
    # The bar is drawn only as it advances, between the timed runs: never while one is timed.
    with progress("logger hot path: timed runs", total=args.repeats * (2 * len(twins) + 1),
                  redraw_on_timer=False) as steps:
        for _ in range(args.repeats):  # interleaved, so that machine noise hits every variant alike
            for name, impl in twins.items():
                runs.setdefault(f"recorder_{name}", []).append(recorder_ns(impl, args.ops))
                steps.advance()
                runs.setdefault(f"session_{name}", []).append(session_ns(impl, args.ops))
                steps.advance()
            runs.setdefault("baseline_noop_calls", []).append(baseline_ns(args.ops))
            steps.advance()
    median = {key: round(statistics.median(values), 1) for key, values in runs.items()}
    print(json.dumps({
        "benchmark": "logger_hotpath",
        "machine": platform.machine(), "python": platform.python_version(),
        "ops_per_run": args.ops, "repeats": args.repeats,
        "ns_per_op_median": median,
        "ratio_python_over_c_recorder": round(median["recorder_python"] / median["recorder_c"], 2),
        "ratio_python_over_c_session": round(median["session_python"] / median["session_c"], 2),
        "ratio_c_recorder_over_noop_baseline": round(median["recorder_c"] / median["baseline_noop_calls"], 2),
        "goal_c_ns": 500,
    }, indent=1))


if __name__ == "__main__":
    main()
