"""Real jobs' sections: ``bench_loaded_jobs.py``'s, a row per job and a column per run, and
``bench_real_traces.py``'s, a row per committed trace and a column per reading; the wrong in bold."""

from __future__ import annotations

from .cells import rows_of, table

__all__ = ["loaded_section", "traces_section"]


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


def traces_section(document: dict) -> str:
    """``bench_real_traces.py``'s traces, a row each: its faulty device and each reading's incidents
    (cause, iterations, the device named first), in bold where wrong, as markdown."""
    rows = rows_of(document, "bench_real_traces.py", "trace", "truth", "offline", "live")

    def cell(reading: dict) -> str:
        text = "; ".join(f"{i['cause']} {i['iterations'][0]}-{i['iterations'][1]}"
                         + (f" {i['first']}" if i["first"] else "") for i in reading["incidents"]) or "nothing"
        return text if reading["right"] else f"**{text}**"

    lines = table(["trace", "GPUs", "slow device", "offline (`sleuth localize`)", "live (irregular iterations)"],
                  ([r["trace"], str(r["world"]), _slow(r), cell(r["offline"]), cell(r["live"])] for r in rows))
    right = {side: sum(bool(r[side]["right"]) for r in rows) for side in ("offline", "live")}
    return lines + f"\n**Right: offline {right['offline']} of {len(rows)}, live {right['live']} of {len(rows)}.**\n"


def _slow(row: dict) -> str:
    """A trace's slow device, and those its job also paid for that nobody injected."""
    return (row["truth"] or "none") + "".join(f" (also {device})" for device in row.get("also", []))
