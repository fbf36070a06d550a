"""The wire's packed varints compiled (``proto/_varints.c``) against their numpy reference, in the
two places every record passes: a worker's (and the gateway's) decode of a Kafka message
(``kafka_records.from_message``) and the gateway's encode of a logger batch into its Kafka messages
(``kafka_records.to_messages``). Prints one JSON object: records/s of CPU each way, compiled and
numpy (the same-run baseline), and their ratios; the best of ``--repeat``. No services needed.

    python benchmarks/bench_wire.py [--world 512] [--iterations 4] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable

import ingest_job
from sleuth.proto import wire
from sleuth.stream.ingest import kafka_records


def best_cpu_s(work: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        began = time.process_time()
        work()
        best = min(best, time.process_time() - began)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=int, default=512)
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--ranks-per-batch", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if wire._compiled is None:
        raise SystemExit("proto/_varints.c is not built: reinstall sleuth with a C compiler")

    layout = ingest_job.layout_for(args.world)
    records, iterations = ingest_job.emulate(args.world, args.iterations)
    batches = ingest_job.batches(records, iterations, ranks_per_batch=args.ranks_per_batch)
    total = sum(len(b.records) for b in batches)

    def encode() -> list[bytes]:
        return [v for b in batches for _, v in kafka_records.to_messages(b.records, layout_of=lambda _: layout)]

    messages = encode()

    def decode() -> None:
        for value in messages:
            kafka_records.from_message(value)

    compiled = {"decode": best_cpu_s(decode, args.repeat), "encode": best_cpu_s(encode, args.repeat)}
    saved, wire._compiled = wire._compiled, None
    try:
        assert encode() == messages  # the reference writes the same bytes
        numpy = {"decode": best_cpu_s(decode, args.repeat), "encode": best_cpu_s(encode, args.repeat)}
    finally:
        wire._compiled = saved
    print(json.dumps({
        "benchmark": "wire", "machine": platform.machine(), "world": args.world, "iterations": args.iterations,
        "records": total, "messages": len(messages),
        **{f"{way}_cpu_rps": round(total / compiled[way], 1) for way in compiled},
        **{f"baseline_numpy_{way}_cpu_rps": round(total / numpy[way], 1) for way in numpy},
        **{f"{way}_ratio_to_baseline": round(numpy[way] / compiled[way], 3) for way in compiled},
    }, indent=2))


if __name__ == "__main__":
    main()
