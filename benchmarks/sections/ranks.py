"""Issue 32's 16,384-rank sections: ``bench_idle_jobs.py`` (what a worker holds, idle jobs dropped),
``bench_spec_registration.py`` (the job spec through the store and on the wire) and
``bench_gateway_ranks.py`` (a gateway serving every rank's stream, a column per run)."""

from __future__ import annotations

from .cells import require
__all__ = ["gateway_section", "idle_section", "spec_section"]


def idle_section(document: dict) -> str:
    """``bench_idle_jobs.py``'s state held at the end with idle jobs dropped, against never dropping
    them (the same-run baseline), as markdown."""
    require(document, "bench_idle_jobs.py", "baseline", "evicting", "heap_ratio")
    lines = ["| | jobs held at the end | rank rows | operator identities | Python heap held | s per batch |",
             "|---|---|---|---|---|---|"]
    for name, run in (("baseline (never dropped)", document["baseline"]),
                      (f"`SLEUTH_JOB_IDLE_S={document['evicting']['idle_s']:g}`", document["evicting"])):
        heap = f"{run['heap_bytes'] / 1e6:.2f} MB" + (f" (ratio {document['heap_ratio']:.3f})" if run is document["evicting"] else "")
        lines.append(f"| {name} | {run['jobs_held']:,} | {run['rank_rows']:,} | {run['identities']:,} | {heap} "
                     f"| {run['s_per_batch']:.3f} |")
    return "\n".join(lines) + "\n"


def spec_section(document: dict) -> str:
    """``bench_spec_registration.py``'s store entry and rank 0's reads, registering and when a group
    appears, against the scheme before (the same-run baseline), and the merged spec's bytes on the
    wire, as markdown."""
    require(document, "bench_spec_registration.py", "entry_bytes", "baseline_spec_wire_bytes")
    d = document
    baseline_gb = d["baseline_rank0_bytes_read_registration"] / 1e9
    return "\n".join([
        "| | baseline | now |", "|---|---|---|",
        f"| one rank's store entry | {d['baseline_entry_bytes']:,} bytes | {d['entry_bytes']:,} bytes |",
        f"| rank 0's reads, registration | {d['baseline_rank0_reads_registration']:,} entries, {baseline_gb:.2f} GB "
        f"| {d['rank0_reads_registration']:,} reads, {d['rank0_bytes_read_registration'] / 1e6:.2f} MB |",
        f"| rank 0's reads when a group appears on 8 ranks | {d['baseline_rank0_reads_new_group_on_8_ranks']:,} entries "
        f"| {d['rank0_reads_new_group_on_8_ranks']:,} |",
        f"| the merged spec ({d['communicators']:,} communicators) on the wire | {d['baseline_spec_wire_bytes']:,} bytes "
        f"| {d['spec_wire_bytes']:,} bytes ({d['spec_kafka_message_bytes'] / d['kafka_cap_bytes']:.0%} of Kafka's "
        f"{d['kafka_cap_bytes'] >> 20} MiB cap as a message) |",
    ]) + "\n" + f"\n{d['layout']}, {d['world']:,} ranks; registration took {d['registration_s']:.2f} s.\n"


#: ``bench_gateway_ranks.py``'s figures, a row each, and how each is written.
_GATEWAY_ROWS = (
    ("ranks served / s", lambda r: f"{r['ranks_per_s']:,.0f}"),
    ("every rank's batches confirmed after", lambda r: "-" if r["all_ranks_confirmed_s"] is None else f"{r['all_ranks_confirmed_s']:.1f} s"),
    ("ranks not served", lambda r: f"{r['ranks_failed']:,}"),
    ("time to confirmation p50 / p99", lambda r: f"{r['confirmed_after_s_p50']:.1f} s / {r['confirmed_after_s_p99']:.1f} s"),
    ("per-stream time p50 / p99 (open to summary)", lambda r: f"{r['stream_s_p50']:.1f} s / {r['stream_s_p99']:.1f} s"),
    ("attempts per rank (mean)", lambda r: f"{r['attempts_mean']:.1f}"),
    ("gateway peak RSS (before the ranks)", lambda r: f"{r['gateway_peak_rss_mb_during_ranks']:.0f} MB ({r['gateway_rss_before_mb']:.0f} MB)"),
    ("gateway threads, peak", lambda r: f"{r['gateway_peak_threads']}"),
    ("baseline: one stream, batches / s", lambda r: f"{r['baseline_one_stream_batches_per_s']:,.0f}"),
    ("rank streams' batches / s over one stream's", lambda r: f"{r['ranks_vs_one_stream']:.2f}"),
)


def gateway_section(documents: list[dict]) -> str:
    """``bench_gateway_ranks.py``'s runs, a column each: ranks served, confirmation and stream times,
    the gateway's memory and threads, against one stream's batches (the same-run baseline), as markdown."""
    require(documents, "bench_gateway_ranks.py", "ranks_per_s", "ranks_vs_one_stream")
    lines = ["| | " + " | ".join(f"run {k + 1}: {d['world']:,} ranks, {d['batches_per_rank']} batch"
                                 f"{'es' if d['batches_per_rank'] > 1 else ''} a stream" for k, d in enumerate(documents)) + " |",
             "|---|" + "---|" * len(documents)]
    lines += [f"| {name} | " + " | ".join(cell(d) for d in documents) + " |" for name, cell in _GATEWAY_ROWS]
    return "\n".join(lines) + "\n"
