"""``bench_progress.py``'s section: the two progress questions against their same-run baselines, a row a run."""

from __future__ import annotations

from .cells import require
__all__ = ["progress_section"]


def progress_section(documents: list[dict]) -> str:
    """A row per ``bench_progress.py`` run (one JSON each): rank 0's rows against every rank's for the
    active jobs, the rows from the first that resolves against every row for the completed iteration,
    the medians in seconds and their ratios, as markdown."""
    require(documents, "bench_progress.py", "active_jobs_ratio", benchmark="progress")
    lines = ["| job | rows | active jobs: every rank (baseline) | rank 0 | ratio | completed: every row (baseline) "
             "| from the first that resolves | ratio |", "|---|---|---|---|---|---|---|---|"]
    for d in documents:
        lines.append(f"| {d['ranks']:,} ranks, {d['iterations']:,} steps | {d['rows']:,} | {d['every_rank_s']['median']:.3f} s "
                     f"| {d['active_jobs_s']['median']:.3f} s | {d['active_jobs_ratio']:.3f} | {d['every_row_s']['median']:.3f} s "
                     f"| {d['completed_s']['median']:.3f} s | {d['completed_ratio']:.3f} |")
    return "\n".join(lines) + "\n"
