"""``bench_loaded_jobs.py``'s section: a row per job, a column per run, the wrong runs in bold."""

from __future__ import annotations

from .cells import rows_of

__all__ = ["loaded_section"]


def loaded_section(document: dict) -> str:
    """``bench_loaded_jobs.py``'s runs, a row per job and a column per run, each run's incidents
    (cause, iterations, suspects, S) in bold where the script's rule calls it wrong, as markdown."""
    rows = rows_of(document, "bench_loaded_jobs.py", "incidents", "right")
    jobs: dict[str, dict] = {}
    for r in rows:
        jobs.setdefault(r["job"], {"truth": r["truth"]})[r["run"]] = r
    runs = sorted({r["run"] for r in rows})
    lines = ["| job | truth | " + " | ".join(f"run {k}" for k in runs) + " |", "|---|---|" + "---|" * len(runs)]
    for job, found in jobs.items():
        cells = []
        for k in runs:
            run = found.get(k)
            text = "-" if run is None else "; ".join(
                f"{i['cause']} {i['iterations'][0]}-{i['iterations'][1]}" + (f" {', '.join(i['suspects'])}" if i["suspects"] else "")
                + f" x{i['slowdown']:.2f}" for i in run["incidents"]) or "nothing"
            cells.append(text if run is None or run["right"] else f"**{text}**")
        lines.append(f"| {job} | {found['truth']} | " + " | ".join(cells) + " |")
    right = sum(bool(r["right"]) for r in rows)
    return "\n".join(lines) + "\n" + f"\n**{right} of {len(rows)} right.**\n"
