"""Issue 32's 16,384-rank sections: ``bench_idle_jobs.py`` (what a worker holds, idle jobs dropped) and
``bench_spec_registration.py`` (the job spec through the store and on the wire)."""

from __future__ import annotations

from .cells import require
__all__ = ["idle_section", "spec_section"]


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
