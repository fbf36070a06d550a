"""The importers' sections: ``bench_import.py`` (each format's import and Flight Recorder's watchdog lag)
and ``bench_follow.py`` (a poll of ``--follow`` against the offline import, per folder size)."""

from __future__ import annotations

from .cells import require
__all__ = ["follow_section", "import_section"]

#: ``bench_import.py``'s whole-job imports, in the order RESULTS.md names them.
_IMPORTERS = (("nccl_inspector", "NCCL Inspector"),
              ("torch_profiler", "PyTorch profiler traces (`record_param_comms` ops and their kernels)"))


def import_section(document: dict) -> str:
    """``bench_import.py``'s import of each format, and Flight Recorder's start error and top suspect
    per watchdog lag with and without ``duration_ms``, as markdown; a suspect other than the truth is
    marked wrong."""
    require(document, "bench_import.py", "flight_recorder", "truth")
    lags, truth = document["flight_recorder"], document["truth"]

    def suspect(found: dict) -> str:
        if found["top_suspect"] is None:
            unresolved = found.get("not_reported", 0)
            return f"none, {unresolved} under the lag not reported" if unresolved else "none (wrong)"
        return found["top_suspect"] + ("" if found["top_suspect"] == truth else " (wrong)")

    lines = [f"{document['records']:,} records, {document['ranks']} ranks, the slow GPU `{truth}`.", "",
             "| format | import s | records/s | start error at most | top suspect |", "|---|---|---|---|---|"]
    for key, name in _IMPORTERS:
        if key in document:
            found = document[key]
            error = found.get("start_error_us_max")
            lines.append(f"| {name} | {found['import_s']:.3f} | {found['records_per_s']:,} | "
                         f"{'-' if error is None else _microseconds(error)} | {suspect(found)} |")
    lines += ["", "| watchdog lag | with `duration_ms` (`TORCH_NCCL_ENABLE_TIMING=1`): start error median / p99, top suspect "
              "| without: start error median / p99, top suspect | with, the host 20 ms ahead of its GPU "
              "| with, the host 0-20 ms ahead |", "|---|---|---|---|---|"]
    by_lag: dict[float, dict[tuple[bool, float, float], dict]] = {}
    for run in lags:
        way = (bool(run["timing"]), run.get("host_ahead_ms", 0), run.get("host_ahead_spread_ms", 0))
        by_lag.setdefault(run["watchdog_lag_ms"], {})[way] = run
    for lag, runs in sorted(by_lag.items()):
        cells = ["-" if way not in runs else
                 f"{_microseconds(runs[way]['start_error_us_median'])} / "
                 f"{_microseconds(runs[way]['start_error_us_p99'])}, {suspect(runs[way])}"
                 for way in ((True, 0, 0), (False, 0, 0), (True, 20, 0), (True, 0, 20))]
        lines.append(f"| {lag:g} ms | " + " | ".join(cells) + " |")
    if "flight_recorder_shapes" in document:
        lines += ["", "| Flight Recorder dumps | steps kept | per-step S, fault's steps / before | top suspect | from step |",
                  "|---|---|---|---|---|"]
        for shape in document["flight_recorder_shapes"]:
            first, last = shape["steps"]
            lines.append(f"| {_SHAPES.get(shape['shape'], shape['shape'])} | {first}-{last} | "
                         f"{shape['fault_steps_s']:.4f} / {shape['before_s']:.4f} | "
                         f"{suspect(shape)} | {shape['incident_from']} |")
    return "\n".join(lines) + "\n"


#: ``bench_import.py``'s shapes of a long job's Flight Recorder dumps, as RESULTS.md names them.
_SHAPES = {"whole": "as written (the baseline)",
           "world_all_reduce_every_10": "a world all-reduce after every 10th step",
           "wrapped_2000_ranks_4_7_ahead": "wrapped at 2,000 entries, ranks 4-7 1,020 operators ahead"}


def _microseconds(value: float) -> str:
    return f"{value:.0f} µs" if value < 1000 else f"{value / 1000:.1f} ms"


def follow_section(document: dict) -> str:
    """``bench_follow.py``'s poll against the offline import (the baseline) at each folder size, and
    the share of a core the follower takes there, as markdown."""
    require(document, "bench_follow.py", "sizes", benchmark="follow")
    lines = ["| steps | records | poll | import (baseline) | ratio | share of a core |", "|---|---|---|---|---|---|"]
    lines += [f"| {s['steps']:,} | {s['records']:,} | {s['poll_s']:.3f} s | {s['import_s']:.3f} s | "
              f"{s['ratio_to_import']:.2f} | {s['core_share']:.2f} |" for s in document["sizes"]]
    return "\n".join(lines) + "\n"
