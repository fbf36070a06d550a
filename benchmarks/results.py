"""Sections of ``benchmarks/RESULTS.md`` written from what a benchmark printed (its JSON), with a figure.

    .venv/bin/python benchmarks/results.py --write benchmarks/RESULTS.md
    .venv/bin/python benchmarks/results.py localizer benchmarks/results/localizer-5879-5880.json \\
        --figure benchmarks/figures/localizer-slowdown-5879-5880.svg
    .venv/bin/python benchmarks/results.py live benchmarks/results/live-5875-5876.json

``--write FILE`` re-renders, in place, every generated block of a markdown file: the lines between

    <!-- results.py KIND JSON -->
    <!-- end results.py -->

become the ``KIND`` section of ``JSON`` (a path from the repository root), a blank line either
side; the text outside the blocks is left as it is. A marker of an unknown kind, a JSON file that
is missing or not that benchmark's, and a block without its end are refused, naming the line.
``tests/test_benchmark_results.py`` checks that RESULTS.md's blocks are what this renders from
the committed JSON. ``KIND JSON [--figure SVG]`` (not with ``--write``) prints one section and,
for the localizer, draws its figure: each scenario's S against the emulator's truth, the 5% band
around equality, the scenarios outside it named.

The kinds: ``localizer`` (``bench_localizer.py``): a row per scenario and the summary the JSON
holds; ``attribution`` (``bench_attribution.py``): a row per scale and seed; ``streaming``
(``bench_streaming_attribution.py``, with or without ``--clickhouse``): a row per scale and seed;
``live`` (``bench_live_localizer.py``): a row per scale and seed; ``ingest`` (``bench_ingest.py``):
each stage alone and each end-to-end run against the encoding baseline; ``loaded``
(``bench_loaded_jobs.py``): a row per job, a column per run, the wrong runs in bold. The JSON files kept in
``benchmarks/results/`` are what RESULTS.md's tables are written from; the commentary around them
is RESULTS.md's own.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["attribution_section", "ingest_section", "live_section", "loaded_section", "localizer_figure",
           "localizer_section", "render_blocks", "streaming_section"]

#: The repository's root: the JSON paths in RESULTS.md's markers are relative to it.
ROOT = Path(__file__).resolve().parents[1]
#: A generated block's first and last lines.
BLOCK_BEGIN = re.compile(r"<!-- results\.py (?P<kind>\S+) (?P<json>\S+) -->")
BLOCK_END = "<!-- end results.py -->"

#: S within this share of the truth is right (the issue's goal for every scenario).
SLOWDOWN_TOLERANCE = 0.05


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
            str(row["suite"]), str(row["name"]), _listed(row.get("devices")), _listed(row.get("suspects")),
            _listed(row.get("causes")), _listed(row.get("triggers")), _number(row.get("slowdown")),
            _number(row.get("slowdown_truth")), _number(row.get("slowdown_truth_without_pauses")),
            _verdict(row.get("correct")) if faulty else "-", _verdict(row.get("correct_top2")) if faulty else "-",
        ]) + " |")
    return "\n".join(lines) + "\n\n" + _summary(document, rows) + "\n"


def _summary(document: dict, rows: list[dict]) -> str:
    seeds = ", ".join(str(s) for s in document.get("seeds", []))
    every = document.get("accuracy", {}).get("all", {})
    parts = [f"Seed{'s' if len(document.get('seeds', [])) > 1 else ''} {seeds}: "
             f"{_count(every.get('sleuth'), every.get('n'))} faulty scenarios right by any suspect, "
             f"{_count(every.get('sleuth_top2'), every.get('n'))} by the top two of a side"]
    # Fault-free runs outside the hiccups suite (whose benign pauses are counted apart) measure false alarms.
    clean = [r for r in rows if r["suite"] == "clean" or (r.get("fault_free") and r["suite"] != "hiccups")]
    hiccups = [r for r in rows if r["suite"] == "hiccups"]
    if clean:
        parts.append(f"clean runs {sum(bool(r.get('hardware_alarm')) for r in clean)} of {len(clean)} alarmed")
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
    return "; ".join(parts) + "."


def attribution_section(document: dict) -> str:
    """``bench_attribution.py``'s row per scale and seed, as markdown."""
    rows = document.get("rows")
    if not isinstance(rows, list) or any("attribution_s" not in r for r in rows):
        raise ValueError("not bench_attribution.py's output: no 'rows' list with 'attribution_s'")
    one_part = any("one_part_s" in r for r in rows)
    lines = ["| GPUs | seed | records | attribution s | detection s | ratio "
             + ("| one part s | parts ratio | S, one part " if one_part else "")
             + "| S | stragglers' part of S | S truth (actual / fault-free twin) | the same, the twin without its pauses "
             "| top worker group holds the faulty GPU |",
             "|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|---|" if one_part else "")]
    for r in rows:
        holds = f"{r['top_worker_group_has_fault']} ({r['top_worker_group']} ranks)" if "top_worker_group" in r else "-"
        baseline = [_number(r.get("one_part_s"), 2), _number(r.get("parts_ratio"), 3),
                    _number(r.get("one_part_slowdown"))] if one_part else []
        lines.append("| " + " | ".join([
            f"{r['world']:,}", str(r["seed"]), f"{r['records']:,}", f"{r['attribution_s']:.2f}",
            _number(r.get("detection_s"), 2), _number(r.get("ratio"), 3), *baseline, _number(r.get("slowdown")),
            _number(r.get("stragglers_slowdown")), _number(r.get("slowdown_truth")),
            _number(r.get("slowdown_truth_without_pauses")), holds,
        ]) + " |")
    return "\n".join(lines) + "\n"


def streaming_section(document: dict) -> str:
    """``bench_streaming_attribution.py``'s row per scale and seed, as markdown (with the ClickHouse
    reads' columns where the run read from ClickHouse)."""
    rows = document.get("rows")
    if not isinstance(rows, list) or any("round_s" not in r for r in rows):
        raise ValueError("not bench_streaming_attribution.py's output: no 'rows' list with 'round_s'")
    read = any("read_s" in r for r in rows)
    lines = ["| GPUs | seed | records / iteration | round s (median, max) | whole-window round s | ratio "
             + ("| read s (median, max) " if read else "")
             + "| incidents before the fault's | opened at (sustained at) | opening round s "
             + ("(its read) " if read else "") + "| top suspect is the fault | full-window attribution s | ratio |",
             "|---" * (13 if read else 12) + "|"]
    for r in rows:
        before = "; ".join(f"`{i['cause']}` at {i['at']} ({i['round_s']} s)" for i in r.get("incidents", [])) or "none"
        opening = _number(r.get("opening_round_s"), 2)
        if read and "opening_read_s" in r:
            opening += f" ({r['opening_read_s']:.2f})"
        lines.append("| " + " | ".join([
            f"{r['world']:,}", str(r["seed"]), f"{r['records_per_iteration']:,}", _spread(r["round_s"]),
            _spread(r["window_round_s"]), _number(r.get("round_ratio"), 3),
            *([_spread(r["read_s"]) if "read_s" in r else "-"] if read else []),
            before, f"{r.get('opened_at')} ({r['sustained_at']})", opening,
            str(r.get("top_suspect_is_fault", "-")), _number(r.get("full_round_s"), 2), _number(r.get("ratio"), 3),
        ]) + " |")
    return "\n".join(lines) + "\n"


def live_section(document: dict) -> str:
    """``bench_live_localizer.py``'s row per scale and seed, as markdown."""
    rows = document.get("rows")
    if not isinstance(rows, list) or any("latency_s" not in r for r in rows):
        raise ValueError("not bench_live_localizer.py's output: no 'rows' list with 'latency_s'")
    lines = ["| GPUs | seed | records / iteration | pace s | insert s (median, max) | rounds | incidents before the fault's "
             "| opened at (sustained at) | top suspect | latency s | its round s | offline attribution s | ratio |",
             "|---" * 13 + "|"]
    for r in rows:
        before = "; ".join(f"`{i['cause']}` in {i['iterations'][0]}-{i['iterations'][1]}" for i in r.get("incidents_before", []))
        lines.append("| " + " | ".join([
            f"{r['world']:,}", str(r["seed"]), f"{r['records_per_iteration']:,}", _number(r["pace_s"], 1),
            _spread(r["insert_s"]), str(r["rounds"]), before or "none", f"{r.get('opened_at')} ({r['sustained_at']})",
            f"`{r['top']}`" if r.get("top") else "none", _number(r.get("latency_s"), 2), _number(r.get("round_s"), 2),
            _number(r.get("offline_s"), 2), _number(r.get("ratio"), 3),
        ]) + " |")
    return "\n".join(lines) + "\n"


#: ``bench_ingest.py``'s stages, in the order a record passes them, and what each measures.
_INGEST_STAGES = (
    ("gateway_decode_validate_rps", "gateway: protobuf decode and validation"),
    ("gateway_to_kafka_rps", "gateway process: gRPC in, Kafka out (lz4, acks=all)"),
    ("kafka_consume_decode_rps", "worker: Kafka consume and decode (faust, inserts discarded)"),
    ("detection_rps", "worker: detection (the deployed detectors)"),
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
    lines += [f"| **end to end, {r['workers']} worker{'s' if r['workers'] > 1 else ''}** | **{r['rps']:,.0f} "
              f"({r['rps'] / baseline:.3f})** |" for r in runs]
    lines += ["", "| workers | p50 / p99 send to queryable s (at the latency run's load) | 2x overload offered / accepted "
              "records/s | peak RSS MiB |", "|---|---|---|---|"]
    for r in runs:
        overload = r.get("overload") or {}
        peaks = ", ".join(f"{name} {mib:,.0f}" for name, mib in (overload.get("peak_rss_mib") or {}).items()) or "-"
        lines.append(f"| {r['workers']} | {_number(r.get('latency_p50_s'), 2)} / {_number(r.get('latency_p99_s'), 2)} "
                     f"({r.get('latency_load_rps', 0):,.0f}) | {overload.get('offered_rps', 0):,.0f} / "
                     f"{overload.get('accepted_rps', 0):,.0f} | {peaks} |")
    return "\n".join(lines) + "\n" + f"\nBaseline (protobuf encoding of the same records): {baseline:,.0f} records/s.\n"


def loaded_section(document: dict) -> str:
    """``bench_loaded_jobs.py``'s runs, a row per job and a column per run, each run's incidents
    (cause, iterations, suspects, S) in bold where the script's rule calls it wrong, as markdown."""
    rows = document.get("rows")
    if not isinstance(rows, list) or any("incidents" not in r or "right" not in r for r in rows):
        raise ValueError("not bench_loaded_jobs.py's output: no 'rows' list with 'incidents' and 'right'")
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


#: Each kind of block, and the function that renders it from its JSON.
SECTIONS: dict[str, Callable[[dict], str]] = {"localizer": localizer_section, "attribution": attribution_section,
                                               "streaming": streaming_section, "live": live_section,
                                               "ingest": ingest_section, "loaded": loaded_section}


def render_blocks(text: str, root: Path = ROOT) -> str:
    """``text`` with every block between ``<!-- results.py KIND JSON -->`` and ``<!-- end results.py -->``
    re-rendered from its JSON (relative to ``root``); the lines outside the blocks as they were.

    Raises ``ValueError`` naming the line of a malformed or unclosed marker, an unknown kind, a stray
    end, or a JSON file that is missing, unreadable or not that kind's."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    at = 0
    while at < len(lines):
        line = lines[at].rstrip("\n")
        if line == BLOCK_END:
            raise ValueError(f"line {at + 1}: {BLOCK_END} without a <!-- results.py KIND JSON --> before it")
        if not line.startswith("<!-- results.py"):
            out.append(lines[at])
            at += 1
            continue
        marker = BLOCK_BEGIN.fullmatch(line)
        if marker is None:
            raise ValueError(f"line {at + 1}: {line!r} is not a marker: write <!-- results.py KIND JSON -->")
        kind, name = marker["kind"], marker["json"]
        if kind not in SECTIONS:
            raise ValueError(f"line {at + 1}: unknown kind {kind!r} (known: {', '.join(SECTIONS)})")
        end = next((k for k in range(at + 1, len(lines)) if lines[k].startswith(("<!-- results.py", BLOCK_END))), None)
        if end is None or lines[end].rstrip("\n") != BLOCK_END:
            where = "the end of the file" if end is None else f"line {end + 1}"
            raise ValueError(f"line {at + 1}: the block of {name} is not closed: no {BLOCK_END} before {where}")
        try:
            document = json.loads((root / name).read_text())
        except OSError as error:
            raise ValueError(f"line {at + 1}: {name}: {error.strerror or error}") from error
        except json.JSONDecodeError as error:
            raise ValueError(f"line {at + 1}: {name}: not JSON ({error})") from error
        try:
            section = SECTIONS[kind](document)
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"line {at + 1}: {name}: not what {kind} renders ({error!r})") from error
        out += [lines[at], "\n" + section + "\n", lines[end]]
        at = end + 1
    return "".join(out)


def _spread(times: dict) -> str:
    return f"{times['median']:.2f}, {times['max']:.2f}"


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


def _listed(values: list | None) -> str:
    return ", ".join(str(v) for v in values) if values else "-"


def _number(value: float | None, places: int = 4) -> str:
    return "-" if value is None else f"{value:.{places}f}"


def _verdict(value: bool | None) -> str:
    return "-" if value is None else "yes" if value else "no"


def _count(share: float | None, n: int | None) -> str:
    if not n or share is None:
        return "0 of 0"
    return f"{round(share * n)} of {n}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        usage="%(prog)s KIND JSON [--figure SVG]\n       %(prog)s --write MARKDOWN")
    parser.add_argument("benchmark", nargs="?", metavar="KIND", help=f"which benchmark's JSON it is: {', '.join(SECTIONS)}")
    parser.add_argument("json", nargs="?", type=Path, metavar="JSON", help="what the benchmark printed")
    parser.add_argument("--figure", type=Path, metavar="SVG", help="draw the section's figure here (localizer)")
    parser.add_argument("--write", type=Path, metavar="MARKDOWN",
                        help="re-render every <!-- results.py KIND JSON --> block of this file in place")
    args = parser.parse_args(argv)
    if args.write is not None:
        if args.benchmark is not None or args.figure is not None:
            parser.error("--write takes no KIND, JSON or --figure: the file's markers name them")
        return _write(args.write)
    if args.json is None:
        parser.error("give KIND and JSON, or --write MARKDOWN")
    if args.benchmark not in SECTIONS:
        parser.error(f"KIND {args.benchmark!r}: one of {', '.join(SECTIONS)}")
    try:
        document = json.loads(args.json.read_text())
    except (OSError, json.JSONDecodeError) as error:
        print(f"results.py: {args.json}: {error}", file=sys.stderr)
        return 2
    if args.figure and args.benchmark != "localizer":
        print("results.py: --figure: only the localizer's section has a figure", file=sys.stderr)
        return 2
    try:
        sys.stdout.write(SECTIONS[args.benchmark](document))
        if args.figure:
            localizer_figure(document, args.figure)
    except (KeyError, TypeError, ValueError) as error:
        print(f"results.py: {args.json}: {error!r}", file=sys.stderr)
        return 2
    return 0


def _write(path: Path) -> int:
    try:
        text = path.read_text()
        rendered = render_blocks(text)
    except (OSError, ValueError) as error:
        print(f"results.py: {path}: {error}", file=sys.stderr)
        return 2
    if rendered != text:
        path.write_text(rendered)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
