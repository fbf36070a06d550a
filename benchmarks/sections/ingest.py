"""``bench_ingest.py``'s section: each stage alone and each end-to-end run against the encoding baseline."""

from __future__ import annotations

from .cells import number

__all__ = ["ingest_section"]


#: ``bench_ingest.py``'s stages, in the order a record passes them, and what each measures.
_INGEST_STAGES = (
    ("gateway_decode_validate_rps", "gateway: protobuf decode and validation"),
    ("gateway_to_kafka_rps", "gateway process: gRPC in, Kafka out (lz4, acks=all)"),
    ("kafka_consume_decode_rps", "worker: Kafka consume and decode (faust, inserts discarded)"),
    ("worker_decode_rps", "worker: decode of its batches alone"),
    ("detection_rps", "worker: detection (the deployed detectors)"),
    ("detection_warm_rps", "worker: detection, the run's second half (the vote screen learned from the first)"),
    ("decode_detection_rps", "worker: decode and detection (the deployed detectors, a slice of whole iterations at a time)"),
    ("decode_detection_warm_rps", "worker: decode and detection, the run's second half (the vote screen learned from the first)"),
    ("clickhouse_insert_rps", "worker: ClickHouse inserts of the same batches"),
)


def ingest_section(document: dict) -> str:
    """``bench_ingest.py``'s stages alone and each end-to-end run, records/s with their ratio to the
    same run's encoding baseline, as markdown."""
    runs = document.get("end_to_end")
    if not isinstance(runs, list) or "baseline_encode_rps" not in document:
        raise ValueError("not bench_ingest.py's output: no 'end_to_end' list and 'baseline_encode_rps'")
    baseline = float(document["baseline_encode_rps"])
    lines = ["| measure | records/s (ratio) |", "|---|---|"]
    stages = document.get("stages") or {}
    lines += [f"| {what} | {stages[key]:,.0f} ({stages[key] / baseline:.2f}) |" for key, what in _INGEST_STAGES if key in stages]
    length = f", {document['iterations']} iterations" if "iterations" in document else ""
    lines += [f"| **end to end, {r['workers']} worker{'s' if r['workers'] > 1 else ''}{length}** | **{r['rps']:,.0f} "
              f"({r['rps'] / baseline:.3f})** |" for r in runs]
    lines += ["", "| workers | p50 / p99 send to queryable s (at the latency run's load) | 2x overload offered / accepted "
              "records/s | peak RSS MiB |", "|---|---|---|---|"]
    for r in runs:
        overload = r.get("overload") or {}
        peaks = ", ".join(f"{name} {mib:,.0f}" for name, mib in (overload.get("peak_rss_mib") or {}).items()) or "-"
        lines.append(f"| {r['workers']} | {number(r.get('latency_p50_s'), 2)} / {number(r.get('latency_p99_s'), 2)} "
                     f"({r.get('latency_load_rps', 0):,.0f}) | {overload.get('offered_rps', 0):,.0f} / "
                     f"{overload.get('accepted_rps', 0):,.0f} | {peaks} |")
    cpu = [(r["workers"], r["cpu_us_per_record"]) for r in runs if r.get("cpu_us_per_record")]
    if cpu:
        lines += ["", "| workers | CPU µs a record over the timed run, by process (total) |", "|---|---|"]
        lines += [f"| {n} | {', '.join(f'{name} {us:.2f}' for name, us in parts.items())} ({sum(parts.values()):.2f}) |"
                  for n, parts in cpu]
    return "\n".join(lines) + "\n" + f"\nBaseline (protobuf encoding of the same records): {baseline:,.0f} records/s.\n"
