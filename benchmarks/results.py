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
the committed JSON. ``KIND JSON [JSON ...] [--figure SVG]`` (not with ``--write``) prints one section and,
for the localizer, draws its figure: each scenario's S against the emulator's truth, the 5% band
around equality, the scenarios outside it named.

This script is the command line and the block writer. The renderers are in ``benchmarks/sections/``,
one module an area, each naming the benchmarks it reads: ``SECTIONS`` maps a kind to the renderer
of one JSON file, ``RUN_SECTIONS`` a kind whose table has a row a run to the renderer of several,
all named in its marker (``<!-- results.py progress a.json b.json -->``). The JSON files kept in
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
from sections import RUN_SECTIONS, SECTIONS, localizer_figure  # noqa: E402

__all__ = ["BLOCK_BEGIN", "BLOCK_END", "RUN_SECTIONS", "SECTIONS", "main", "render_blocks", "render_section"]

#: The repository's root: the JSON paths in RESULTS.md's markers are relative to it.
ROOT = Path(__file__).resolve().parents[1]
#: A generated block's first and last lines.
BLOCK_BEGIN = re.compile(r"<!-- results\.py (?P<kind>\S+) (?P<json>\S+(?: \S+)*?) -->")
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
        if kind not in SECTIONS and kind not in RUN_SECTIONS:
            raise ValueError(f"line {at + 1}: unknown kind {kind!r} (known: {', '.join([*SECTIONS, *RUN_SECTIONS])})")
        end = next((k for k in range(at + 1, len(lines)) if lines[k].startswith(("<!-- results.py", BLOCK_END))), None)
        if end is None or lines[end].rstrip("\n") != BLOCK_END:
            where = "the end of the file" if end is None else f"line {end + 1}"
            raise ValueError(f"line {at + 1}: the block of {name} is not closed: no {BLOCK_END} before {where}")
        documents = [_read(root, one, at) for one in name.split()]
        try:
            section = render_section(kind, documents)
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"line {at + 1}: {name}: not what {kind} renders ({error!r})") from error
        out += [lines[at], "\n" + section + "\n", lines[end]]
        at = end + 1
    return "".join(out)


def render_section(kind: str, documents: list[dict]) -> str:
    """The ``kind`` section of ``documents``: one JSON document, or one a run for ``RUN_SECTIONS``' kinds."""
    if kind in RUN_SECTIONS:
        return RUN_SECTIONS[kind](documents)
    if len(documents) != 1:
        raise ValueError(f"{kind} renders one JSON file, not {len(documents)}")
    return SECTIONS[kind](documents[0])


def _read(root: Path, name: str, at: int) -> dict:
    try:
        return json.loads((root / name).read_text())
    except OSError as error:
        raise ValueError(f"line {at + 1}: {name}: {error.strerror or error}") from error
    except json.JSONDecodeError as error:
        raise ValueError(f"line {at + 1}: {name}: not JSON ({error})") from error


def main(argv: list[str] | None = None) -> int:
    kinds = ", ".join([*SECTIONS, *RUN_SECTIONS])
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        usage="%(prog)s KIND JSON [JSON ...] [--figure SVG]\n       %(prog)s --write MARKDOWN")
    parser.add_argument("benchmark", nargs="?", metavar="KIND", help=f"which benchmark's JSON it is: {kinds}")
    parser.add_argument("json", nargs="*", type=Path, metavar="JSON",
                        help="what the benchmark printed (several runs for " + ", ".join(RUN_SECTIONS) + ")")
    parser.add_argument("--figure", type=Path, metavar="SVG", help="draw the section's figure here (localizer)")
    parser.add_argument("--write", type=Path, metavar="MARKDOWN",
                        help="re-render every <!-- results.py KIND JSON --> block of this file in place")
    args = parser.parse_args(argv)
    if args.write is not None:
        if args.benchmark is not None or args.json or args.figure is not None:
            parser.error("--write takes no KIND, JSON or --figure: the file's markers name them")
        return _write(args.write)
    if not args.json:
        parser.error("give KIND and JSON, or --write MARKDOWN")
    if args.benchmark not in SECTIONS and args.benchmark not in RUN_SECTIONS:
        parser.error(f"KIND {args.benchmark!r}: one of {kinds}")
    if args.figure and args.benchmark != "localizer":
        print("results.py: --figure: only the localizer's section has a figure", file=sys.stderr)
        return 2
    try:
        documents = [json.loads(path.read_text()) for path in args.json]
    except (OSError, json.JSONDecodeError) as error:
        print(f"results.py: {error}", file=sys.stderr)
        return 2
    try:
        sys.stdout.write(render_section(args.benchmark, documents))
        if args.figure:
            localizer_figure(documents[0], args.figure)
    except (KeyError, TypeError, ValueError) as error:
        print(f"results.py: {' '.join(map(str, args.json))}: {error!r}", file=sys.stderr)
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
