"""``bench_localizer.py``'s sections: a row per scenario, its summary, and the figure of S against the truth;
the reach of its scale suites (ranks read to find the fault), a row per scale; and sleuth against the
baselines, a row per fault kind."""

from __future__ import annotations

from pathlib import Path
from statistics import fmean

from .cells import count, listed, number, require, table, verdict

__all__ = ["SLOWDOWN_TOLERANCE", "baselines_section", "localizer_figure", "localizer_section", "reach_section"]

#: S within this share of the truth is right (the issue's goal for every scenario).
SLOWDOWN_TOLERANCE = 0.05

#: The suites of drawn scenarios, judged apart (bench_localizer's ``_random_summary``).
_DRAWN = ("random", "random-noisy")


def localizer_section(document: dict) -> str:
    """``bench_localizer.py``'s per-scenario table and summary, as markdown."""
    rows = document.get("rows")
    if not isinstance(rows, list):
        raise ValueError("not bench_localizer.py's output: no 'rows' list")
    lines = ["| suite | scenario | injected | suspects | cause | opened by | S | S truth | the same, the twin without its pauses | any | top 2 |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        faulty = bool(row.get("devices"))
        lines.append("| " + " | ".join([
            str(row["suite"]), str(row["name"]), _injected(row), listed(row.get("suspects")),
            listed(row.get("causes")), listed(row.get("triggers")), number(row.get("slowdown")),
            number(row.get("slowdown_truth")), number(row.get("slowdown_truth_without_pauses")),
            verdict(row.get("correct")) if faulty else "-", verdict(row.get("correct_top2")) if faulty else "-",
        ]) + " |")
    return "\n".join(lines) + "\n\n" + _summary(document, rows) + "\n"


def _injected(row: dict) -> str:
    """The injected devices; in the drawn suites each with what it cost the job where in force."""
    if row.get("suite") not in _DRAWN or not row.get("fault_costs"):
        return listed(row.get("devices"))
    return ", ".join(f"{f['device']} x{f['cost']:.3f}" for f in row["fault_costs"] if f.get("device")) or "-"


def _summary(document: dict, rows: list[dict]) -> str:
    seeds = ", ".join(str(s) for s in document.get("seeds", []))
    every = document.get("accuracy", {}).get("all", {})
    parts = [f"Seed{'s' if len(document.get('seeds', [])) > 1 else ''} {seeds}"]
    if every.get("n"):
        parts[0] += (f": {count(every.get('sleuth'), every.get('n'))} faulty scenarios right by any suspect, "
                     f"{count(every.get('sleuth_top2'), every.get('n'))} by the top two of a side")
    # Fault-free runs outside the hiccups suite (whose benign pauses are counted apart) and the random
    # suites (judged apart) measure false alarms.
    clean = [r for r in rows if r["suite"] == "clean" or (r.get("fault_free") and r["suite"] not in ("hiccups", *_DRAWN))]
    hiccups = [r for r in rows if r["suite"] == "hiccups"]
    if clean:
        # A non-hardware cause on a clean run pages too (its job-level alert): said beside the devices'.
        parts.append(f"clean runs {sum(bool(r.get('hardware_alarm')) for r in clean)} of {len(clean)} alarmed on a device, "
                     f"{sum(bool(r.get('causes')) for r in clean)} with any incident")
    if hiccups:
        parts.append(f"hiccup runs {sum(bool(r.get('hardware_alarm')) for r in hiccups)} of {len(hiccups)} alarmed")
    named = document.get("nonhardware") or {}
    if named:
        # A scenario's key is name@seed: the seed is said where the run had more than one.
        several = len(document.get("seeds", [])) > 1
        said = []
        for key, causes in sorted(named.items()):
            name, _, seed = key.partition("@")
            said.append(f"{name}{f' ({seed})' if several and seed else ''} read as {'/'.join(causes) or 'nothing'}")
        parts.append("non-hardware causes: " + ", ".join(said))
    slowdown = document.get("slowdown") or {}
    if slowdown.get("n"):
        misses = [f"{r['name']} {r['slowdown']:.3f} against {r['slowdown_truth']:.3f}" for r in rows
                  if _outside(r)]
        parts.append(f"S within 5% of the truth on {slowdown.get('within_5pct')} of {slowdown['n']}"
                     + (f" (outside: {'; '.join(misses)})" if misses else ""))
        if slowdown.get("within_5pct_without_pauses") is not None:
            parts.append(f"within 5% of the twin without its pauses on {slowdown['within_5pct_without_pauses']} "
                         f"of {slowdown['n']}")
        if slowdown.get("max_per_iteration_error") is not None:
            parts.append(f"per iteration, S off its truth by {slowdown['max_per_iteration_error']:.3f} at most "
                         "(a scenario's mean)")
    for suite in _DRAWN:
        drawn = document.get(suite)
        if not drawn:
            continue
        parts.append(
            f"{suite} suite ({drawn['n']} drawn): of the {drawn['paid_faults']} faults the job paid the slowdown line for, "
            f"{drawn['paid_right']} right by any suspect and {drawn['paid_right_top2']} by the top two"
            + (f" (missed: {', '.join(drawn['paid_missed'])})" if drawn["paid_missed"] else "")
            + f"; {drawn['unpaid_faults']} runs whose faults cost it less, {len(drawn['unpaid_other_device_blamed'])} of "
            f"them with another device blamed; {len(drawn['clean_device_blamed'])} of {drawn['clean']} fault-free runs with a device blamed"
            + (" (" + ", ".join(f"{name}: {'/'.join(causes)}" for name, causes in drawn["clean_incidents"].items()) + ")"
               if drawn["clean_incidents"] else "") + "; "
            f"{drawn['nonhardware_named']} of {drawn['nonhardware_paid']} paid non-hardware causes named with no device")
    return "; ".join(parts) + "."


def localizer_figure(document: dict, path: Path) -> None:
    """Each scenario's S against the truth (SVG at ``path``), the 5% band, those outside it named."""
    from matplotlib import colormaps, rc_context
    from matplotlib.figure import Figure

    rows = [r for r in document.get("rows", []) if r.get("slowdown") and r.get("slowdown_truth")]
    if not rows:
        raise ValueError("no scenario has both S and its truth: run bench_localizer.py with the attribution")
    figure = Figure(figsize=(6.0, 5.0))
    axes = figure.add_subplot()
    truth = [r["slowdown_truth"] for r in rows]
    top = max(max(truth), max(r["slowdown"] for r in rows)) * 1.03
    line = [1.0, top]
    axes.plot(line, line, color="0.4", linewidth=1, label="S = truth")
    axes.fill_between(line, [v * (1 - SLOWDOWN_TOLERANCE) for v in line], [v * (1 + SLOWDOWN_TOLERANCE) for v in line],
                      color="0.85", label="within 5%")
    suites = sorted({r["suite"] for r in rows})
    colours = colormaps["tab20"]
    for k, suite in enumerate(suites):
        mine = [r for r in rows if r["suite"] == suite]
        axes.scatter([r["slowdown_truth"] for r in mine], [r["slowdown"] for r in mine], s=18, label=suite,
                     color=colours(k % colours.N))
    # Scenarios outside the band at one point (the same fault under two routings) share one label.
    labels: dict[tuple[float, float], list[str]] = {}
    for r in rows:
        if _outside(r):
            labels.setdefault((round(r["slowdown_truth"], 3), round(r["slowdown"], 3)), []).append(r["name"])
    for (x, y), names in labels.items():
        axes.annotate(", ".join(names), (x, y), textcoords="offset points", xytext=(-4, -12), ha="right", fontsize=7)
    axes.set_xlim(1.0, top)
    axes.set_ylim(1.0, top)
    axes.set_xlabel("S truth (actual / balanced fault-free twin)")
    axes.set_ylabel("S (what-if attribution)")
    axes.set_title(f"bench_localizer.py, seed {', '.join(str(s) for s in document.get('seeds', []))}", fontsize=9)
    axes.legend(fontsize=7, loc="upper left")
    path.parent.mkdir(parents=True, exist_ok=True)
    # Text stays text, and no date: the same JSON always draws the same file.
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": "results"}):
        figure.savefig(path, format=path.suffix.lstrip(".") or "svg", bbox_inches="tight", metadata={"Date": None})


def _outside(row: dict) -> bool:
    truth = row.get("slowdown_truth")
    return bool(truth) and abs(row["slowdown"] / truth - 1.0) > SLOWDOWN_TOLERANCE


def reach_section(documents: list[dict]) -> str:
    """The scale suites' rows of one or more ``bench_localizer.py`` runs (their seeds pooled), a row
    per scale, the slow GPU against the slow NIC: right of all, the share of ranks touched (mean;
    max), read whole, of records read, and the latency (mean; max), as markdown."""
    rows = [r for document in documents for r in document.get("rows") or []
            if r.get("suite") in ("scale", "scale-nic") and "fetched" in r]
    if not rows:
        raise ValueError("not bench_localizer.py's output with the scale suites: no 'rows' of suite 'scale' with 'fetched'")
    out = []
    for world in sorted({r["world"] for r in rows}):
        kinds = [[r for r in rows if r["world"] == world and r["kind"] == kind] for kind in ("gpu", "nic")]

        def each(cell) -> str:
            return " / ".join(cell(found) if found else "-" for found in kinds)

        out.append([f"{world:,}", *(f"{sum(bool(r['correct']) for r in found)}/{len(found)}" for found in kinds),
                    each(lambda found: f"{_mean(found, 'fetched'):.1%} ({max(r['fetched'] for r in found):.1%})"),
                    each(lambda found: f"{_mean(found, 'read_whole'):.2%}"), each(lambda found: f"{_mean(found, 'records_read'):.2%}"),
                    each(lambda found: f"{_mean(found, 'latency_s'):.1f} s ({max(r['latency_s'] for r in found):.1f} s)")])
    return table(["GPUs", "right, slow GPU", "right, slow NIC", "ranks touched (mean; max), GPU / NIC",
                  "ranks read whole, GPU / NIC", "records read, GPU / NIC", "latency (mean; max), GPU / NIC"], out)


#: The fault kinds in the order a reader goes from one GPU to the fabric, then two faults at once.
_KINDS = ("gpu", "host", "nvswitch", "nic", "link", "leaf", "spine", "concurrent")
#: Each method's column: sleuth by its first suspect and by the top two of a side, then the baselines.
_METHODS = (("sleuth", "sleuth"), ("sleuth_top2", "sleuth, top 2"), ("earliest", "earliest"),
            ("random_walk", "random walk"), ("nvrx_relative_median", "NVRx relative median"))


def baselines_section(document: dict) -> str:
    """The share of each fault kind's scenarios each method names (``accuracy.by_kind`` of a
    ``bench_localizer.py`` run with its baselines), a row per kind, as markdown."""
    require(document, "bench_localizer.py", "accuracy")
    by_kind = document["accuracy"].get("by_kind")
    if not by_kind or not any(summary.get("earliest") is not None for summary in by_kind.values()):
        raise ValueError("not a bench_localizer.py run with its baselines: no 'accuracy.by_kind' with 'earliest'")
    kinds = [k for k in _KINDS if k in by_kind] + sorted(set(by_kind) - set(_KINDS))
    return table(["fault kind", "n", *(title for _, title in _METHODS)],
                 [[kind, str(by_kind[kind]["n"]), *("not run" if by_kind[kind].get(key) is None
                                                    else f"{by_kind[kind][key]:.2f}" for key, _ in _METHODS)]
                  for kind in kinds])


def _mean(rows: list[dict], key: str) -> float:
    return fmean(r[key] for r in rows)
