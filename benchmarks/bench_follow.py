"""What ``sleuth import nccl-profiler --follow`` costs per poll as a job's folder grows; prints one JSON object.

    python benchmarks/bench_follow.py [--ranks 16] [--steps 500 2000 8000] [--seed 2511]

A folder in the plugin's format (``sleuth.importers.nccl_profiler``) grows step by step: per step
each rank runs a pattern of collectives on the world communicator (4-12 of them, sizes drawn with
``--seed``), with jittered host times. At each size the follower polls (reads what grew, converts
the folder, hands what settled to a counting sink); the same-run baseline is the offline import's
conversion of the same folder read whole (``read_dumps`` + ``convert``). Reported per size: the
poll's and the baseline's seconds, their ratio, records per second of poll, and the share of a core
the follower takes at that size with its pause rule (at least four times the poll between polls,
at least ``--interval`` seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

from sleuth.importers.nccl_follow import Follower
from sleuth.importers.nccl_profiler import FLAGS, NCCL_RECORD_DTYPE, convert, read_dumps
from sleuth.progress import progress


class CountingSink:
    """Counts what the follower hands over (the Sink protocol of sleuth.logger.sinks)."""

    def __init__(self) -> None:
        self.count = 0

    def records(self, batch, *, dropped) -> None:
        self.count += len(batch)

    def spec(self, spec) -> None:
        pass

    def iterations(self, batch) -> None:
        pass


def _sidecar(folder: Path, rank: int, world: int) -> None:
    (folder / f"nccl-h{rank // 8}-{1000 + rank}.json").write_text(json.dumps({
        "format": "sleuth-nccl-profiler", "version": 1, "record_size": 64, "pid": 1000 + rank, "host": f"h{rank // 8}",
        "job": "bench", "global_rank": rank, "gpu": rank % 8, "clock": {"monotonic_ns": 0, "realtime_ns": 1_700_000_000_000_000_000},
        "comms": [{"index": 0, "hash": "00000000000000aa", "name": "", "nranks": world, "rank": rank, "nnodes": world // 8 or 1, "api": 5}],
    }))


def _grow(folder: Path, world: int, pattern: np.ndarray, first: int, steps: int, rng: np.random.Generator) -> None:
    """Append steps ``first``..``first + steps - 1`` to every rank's records file."""
    per = len(pattern)
    n = steps * per
    index = np.arange(first * per, first * per + n)
    for rank in range(world):
        rec = np.zeros(n, dtype=NCCL_RECORD_DTYPE)
        t = index * 1_000_000 + rng.integers(0, 50_000, n)
        rec["t_issue_ns"], rec["t_start_ns"], rec["t_end_ns"] = t, t + 20_000, t + 400_000
        rec["seq"], rec["nbytes"], rec["iteration"], rec["peer"] = index, np.tile(pattern, steps), -1, -1
        rec["op"], rec["flags"] = 1, FLAGS["host_child"]  # all-reduce, host times
        with (folder / f"nccl-h{rank // 8}-{1000 + rank}.bin").open("ab") as f:
            f.write(rec.tobytes())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=16)
    parser.add_argument("--steps", type=int, nargs="+", default=[500, 2000, 8000])
    parser.add_argument("--seed", type=int, default=2511)
    parser.add_argument("--interval", type=float, default=0.5, help="SLEUTH_FLUSH_S: the least pause between polls")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    pattern = rng.integers(1, 64, rng.integers(4, 13)) << 16
    rows = []
    sizes = sorted(args.steps)
    with tempfile.TemporaryDirectory() as tmp, progress("follow: growing the folder", total=len(sizes),
                                                        redraw_on_timer=False) as bar:
        folder = Path(tmp)
        for rank in range(args.ranks):
            _sidecar(folder, rank, args.ranks)
        sink = CountingSink()
        follower = Follower(folder, sink)
        written = 0
        for steps in sizes:
            _grow(folder, args.ranks, pattern, written, steps - written, rng)
            written = steps
            began = time.perf_counter()
            follower.poll()
            poll_s = time.perf_counter() - began
            began = time.perf_counter()
            convert(read_dumps(folder), folder)
            import_s = time.perf_counter() - began
            records = args.ranks * steps * len(pattern)
            pause = max(args.interval, 4 * poll_s)
            rows.append({
                "steps": steps, "records": records, "poll_s": round(poll_s, 4), "import_s": round(import_s, 4),
                "ratio_to_import": round(poll_s / import_s, 3), "records_per_s": round(records / poll_s),
                "core_share": round(poll_s / (poll_s + pause), 3), "sent": sink.count,
            })
            bar.advance()
    print(json.dumps({"benchmark": "follow", "machine": platform.machine(), "cpus": os.cpu_count(),
                      "ranks": args.ranks, "collectives_per_step": len(pattern), "seed": args.seed,
                      "interval_s": args.interval, "sizes": rows}, indent=2))


if __name__ == "__main__":
    main()
