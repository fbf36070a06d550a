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

This script is the command line and the block writer; the renderers are in ``benchmarks/sections/``,
one module an area, ``SECTIONS`` mapping each kind to its renderer. The kinds: ``localizer`` (``bench_localizer.py``): a row per scenario and the summary the JSON
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
from pathlib import Path

# The renderers live beside this script (benchmarks/sections/), also when it is loaded by its path.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from sections import SECTIONS, localizer_figure  # noqa: E402

__all__ = ["BLOCK_BEGIN", "BLOCK_END", "SECTIONS", "main", "render_blocks"]

#: The repository's root: the JSON paths in RESULTS.md's markers are relative to it.
ROOT = Path(__file__).resolve().parents[1]
#: A generated block's first and last lines.
BLOCK_BEGIN = re.compile(r"<!-- results\.py (?P<kind>\S+) (?P<json>\S+) -->")
BLOCK_END = "<!-- end results.py -->"


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
