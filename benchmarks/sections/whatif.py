"""The what-if attribution's sections: ``bench_attribution.py``, ``bench_streaming_attribution.py`` and
``bench_live_localizer.py``, a row per scale and seed; ``bench_lost_records.py``, a row per scenario,
seed and share of the records lost."""

from __future__ import annotations

from .cells import number, require, rows_of, spread, table, verdict

__all__ = ["attribution_section", "live_section", "lost_section", "streaming_section"]


def attribution_section(document: dict) -> str:
    """``bench_attribution.py``'s row per scale and seed, as markdown."""
    rows = rows_of(document, "bench_attribution.py", "attribution_s")
    one_part = any("one_part_s" in r for r in rows)
    lines = ["| GPUs | seed | records | attribution s | detection s | ratio "
             + ("| one part s | parts ratio | S, one part " if one_part else "")
             + "| S | stragglers' part of S | S truth (actual / fault-free twin) | the same, the twin without its pauses "
             "| top worker group holds the faulty GPU |",
             "|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|---|" if one_part else "")]
    for r in rows:
        holds = f"{r['top_worker_group_has_fault']} ({r['top_worker_group']} ranks)" if "top_worker_group" in r else "-"
        baseline = [number(r.get("one_part_s"), 2), number(r.get("parts_ratio"), 3),
                    number(r.get("one_part_slowdown"))] if one_part else []
        lines.append("| " + " | ".join([
            f"{r['world']:,}", str(r["seed"]), f"{r['records']:,}", f"{r['attribution_s']:.2f}",
            number(r.get("detection_s"), 2), number(r.get("ratio"), 3), *baseline, number(r.get("slowdown")),
            number(r.get("stragglers_slowdown")), number(r.get("slowdown_truth")),
            number(r.get("slowdown_truth_without_pauses")), holds,
        ]) + " |")
    return "\n".join(lines) + "\n"


def streaming_section(document: dict) -> str:
    """``bench_streaming_attribution.py``'s row per scale and seed, as markdown (with the ClickHouse
    reads' columns where the run read from ClickHouse)."""
    rows = rows_of(document, "bench_streaming_attribution.py", "round_s")
    read = any("read_s" in r for r in rows)
    lines = ["| GPUs | seed | records / iteration | round s (median, max) | whole-window round s | ratio "
             + ("| read s (median, max) " if read else "")
             + "| incidents before the fault's | opened at (sustained at) | opening round s "
             + ("(its read) " if read else "") + "| top suspect is the fault | full-window attribution s | ratio |",
             "|---" * (13 if read else 12) + "|"]
    for r in rows:
        before = "; ".join(f"`{i['cause']}` at {i['at']} ({i['round_s']} s)" for i in r.get("incidents", [])) or "none"
        opening = number(r.get("opening_round_s"), 2)
        if read and "opening_read_s" in r:
            opening += f" ({r['opening_read_s']:.2f})"
        lines.append("| " + " | ".join([
            f"{r['world']:,}", str(r["seed"]), f"{r['records_per_iteration']:,}", spread(r["round_s"]),
            spread(r["window_round_s"]), number(r.get("round_ratio"), 3),
            *([spread(r["read_s"]) if "read_s" in r else "-"] if read else []),
            before, f"{r.get('opened_at')} ({r['sustained_at']})", opening,
            str(r.get("top_suspect_is_fault", "-")), number(r.get("full_round_s"), 2), number(r.get("ratio"), 3),
        ]) + " |")
    return "\n".join(lines) + "\n"


def live_section(document: dict) -> str:
    """``bench_live_localizer.py``'s row per scale and seed, as markdown."""
    rows = rows_of(document, "bench_live_localizer.py", "latency_s")
    lines = ["| GPUs | seed | records / iteration | pace s | insert s (median, max) | rounds | incidents before the fault's "
             "| opened at (sustained at) | top suspect | latency s | its round s | offline attribution s | ratio |",
             "|---" * 13 + "|"]
    for r in rows:
        before = "; ".join(f"`{i['cause']}` in {i['iterations'][0]}-{i['iterations'][1]}" for i in r.get("incidents_before", []))
        lines.append("| " + " | ".join([
            f"{r['world']:,}", str(r["seed"]), f"{r['records_per_iteration']:,}", number(r["pace_s"], 1),
            spread(r["insert_s"]), str(r["rounds"]), before or "none", f"{r.get('opened_at')} ({r['sustained_at']})",
            f"`{r['top']}`" if r.get("top") else "none", number(r.get("latency_s"), 2), number(r.get("round_s"), 2),
            number(r.get("offline_s"), 2), number(r.get("ratio"), 3),
        ]) + " |")
    return "\n".join(lines) + "\n"


def lost_section(document: dict) -> str:
    """``bench_lost_records.py``'s row per scenario, seed and share lost: S whole (the same-run
    baseline), as lost and filled in, and whether the top two name the faults, whole and filled in;
    then each share's summary, as markdown."""
    require(document, "bench_lost_records.py", "rows", "summary", benchmark="lost_records")
    lines = table(["scenario", "seed", "share lost", "records lost / filled in", "S whole", "S as lost (ratio)",
                   "S filled in (ratio)", "top 2, whole / filled in"],
                  [[r["scenario"], str(r["seed"]), f"{r['share']:.1%}", f"{r['lost']:,} / {r['filled']:,}",
                    f"{r['slowdown_whole']:.4f}", f"{r['slowdown_as_lost']:.4f} ({r['ratio_as_lost']:.3f})",
                    f"{r['slowdown_filled']:.4f} ({r['ratio_filled']:.3f})",
                    f"{verdict(r['top2_whole'])} / {verdict(r['top2_filled'])}"] for r in document["rows"]])
    summary = [f"{float(share):.1%} lost: top two right on {s['top2_filled']} of {s['rows']} filled in "
               f"({s['top2_whole']} whole); S within 5% of the whole's on {s['within_5pct_filled']} filled in, "
               f"{s['within_5pct_as_lost']} as lost; the lowest ratio filled in {number(s['worst_ratio_filled'], 3)}."
               for share, s in document["summary"].items()]
    return lines + "\n" + "\n".join(summary) + "\n"
