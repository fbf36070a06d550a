"""Memory the logger holds during a long collector outage; prints one JSON object.

    python benchmarks/bench_logger_outage.py [--mib 512] [--buffer-mib 64] [--spill-mib 128]

Feeds the gRPC sink ``--mib`` MiB of serialized record batches (10,000 records each, as the
drainer makes them) while no collector listens, and reports the most bytes it held in memory
(its own accounting), the process's resident-set growth (ru_maxrss) over the same-run baseline
of building the same batches with no sink, the bytes in the spill file, and the records
dropped (counted for the gap record) once the spill bound was passed.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import tempfile

import numpy as np

from sleuth.logger.sender import GrpcSink
from sleuth.progress import progress
from sleuth.records import RecordBatch


def make_batch(start: int, n: int = 10_000) -> RecordBatch:
    seq = np.arange(start, start + n, dtype=np.uint64)
    return RecordBatch(
        {
            "job": np.zeros(n, "u4"), "rank": np.full(n, 5, "u4"), "comm": (seq % 7).astype("u4") + 1,
            "seq": seq, "op": np.ones(n, "u1"), "peer": np.full(n, -1, "i4"),
            "nbytes": np.full(n, 1 << 20, "u8"), "iteration": (seq // 100).astype("i8"),
            "t_issue_ns": seq.astype("i8"), "t_start_ns": seq.astype("i8"), "t_end_ns": seq.astype("i8") + 5,
        },
        ["job-outage", *[f"c2-{i:08x}" for i in range(7)]],
    )


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=int, default=512)
    parser.add_argument("--buffer-mib", type=int, default=64)
    parser.add_argument("--spill-mib", type=int, default=128)
    args = parser.parse_args()
    # Baseline: the same batches built and dropped, no sink.
    probe = make_batch(0)
    from sleuth.proto import commops_pb2 as pb
    from sleuth.proto.codec import records_to_proto

    per_batch = len(pb.StreamMessage(records=records_to_proto(probe)).SerializeToString())
    batches = args.mib * (1 << 20) // per_batch
    # The bar (and rich, once loaded) is there before the baseline's RSS is read: the growth is the sink's alone.
    with progress("logger outage: baseline batches", total=batches // 10 + batches, redraw_on_timer=False) as steps:
        for k in range(batches // 10):
            make_batch(k * 10_000)
            steps.advance()
        gc.collect()
        base = rss_mib()
        with tempfile.TemporaryDirectory() as spill:
            sink = GrpcSink(
                "127.0.0.1:9", spill_dir=spill, buffer_bytes=args.buffer_mib << 20,
                spill_bytes=args.spill_mib << 20, backoff_s=(0.5, 2.0),
            )
            steps.describe("logger outage: batches fed to a sink with no collector")
            for k in range(batches):
                sink.records(make_batch(k * 10_000), dropped=0)
                steps.advance()
            stats = sink.stats()
            grown = rss_mib() - base
            sink.close(0.1)
    print(json.dumps({
        "benchmark": "logger_outage_memory",
        "fed_mib": round(batches * per_batch / (1 << 20), 1), "batches": batches, "records": batches * 10_000,
        "buffer_bound_mib": args.buffer_mib, "spill_bound_mib": args.spill_mib,
        "peak_held_mib": round(stats["peak_bytes"] / (1 << 20), 2),
        "peak_held_over_bound": round(stats["peak_bytes"] / (args.buffer_mib << 20), 3),
        "rss_growth_over_baseline_mib": round(grown, 1),
        "spilled_mib": round(stats["spilled_bytes"] / (1 << 20), 1),
        "dropped_records_counted": stats["dropped"],
    }, indent=1))


if __name__ == "__main__":
    main()
