"""ClickHouse's section: ``bench_ingest.py --insert-only`` (the workers' inserts), ``bench_clickhouse_big_read.py``
(one large read) and ``bench_clickhouse_read.py`` (the localizer's reads), a row each, their runs side by side."""

from __future__ import annotations

from .cells import table

__all__ = ["clickhouse_section"]


def clickhouse_section(documents: list[dict]) -> str:
    """Each measure against its same-run baseline, the runs of one benchmark in one row: inserts
    against protobuf encoding, one big read against the driver's plain read, the localizer's reads
    against the same reads with ``FINAL`` and their CPU against the server's default read steps, as markdown."""
    inserts, big, reads = [], [], []
    for document in documents:
        if "clickhouse_insert_rps" in document.get("stages", {}) and "baseline_encode_rps" in document:
            inserts.append(document)
        elif document.get("benchmark") == "clickhouse_big_read":
            big.append(document)
        elif document.get("benchmark") == "clickhouse_read":
            reads += document["rows"]
        else:
            raise ValueError("not bench_ingest.py --insert-only's, bench_clickhouse_big_read.py's or bench_clickhouse_read.py's "
                             "output: no 'stages' with 'clickhouse_insert_rps', nor 'benchmark': 'clickhouse_big_read' or "
                             "'clickhouse_read'")
    rows = []
    if inserts:
        first = inserts[0]
        rows.append([f"inserts, {first['world']:,} GPUs, {first['batches']:,} batches (protobuf encoding)",
                     " and ".join(f"{d['stages']['clickhouse_insert_rps']:,.0f}" for d in inserts) + " records/s ("
                     + ", ".join(f"{d['ratios_to_baseline']['stage_clickhouse_insert_rps']:.3f}" for d in inserts) + ")"])
    if big:
        rows.append([f"one {big[0]['rows']:,}-row read (the driver's plain columnar read)",
                     " and ".join(f"{d['select_records_s']:.3f}" for d in big) + " s ("
                     + ", ".join(f"{d['ratio']:.2f}" for d in big) + ")"])
    if reads:
        first = reads[0]
        rows.append([f"{first['world']:,} GPUs, the localizer's reads (the same reads with `FINAL`)",
                     "; ".join(f"{r['reads']} reads, {r['rows']:,} rows: {r['read_s']:.2f} s ({r['ratio']:.3f})" for r in reads)])
        stepped = [r for r in reads if "blocks_cpu_ratio" in r]
        if stepped:
            rows.append(["the same reads' CPU in the localizer's process (the server's default read steps)",
                         " and ".join(f"{r['read_cpu_s']:.2f}" for r in stepped) + " s ("
                         + ", ".join(f"{r['blocks_cpu_ratio']:.3f}" for r in stepped) + ")"])
    return table(["measure (same-run baseline)", "figure (ratio to the baseline)"], rows)
