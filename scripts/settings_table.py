"""Print the README's settings table, generated from ``Settings.describe()``.

    .venv/bin/python scripts/settings_table.py                 # the markdown table, to stdout
    .venv/bin/python scripts/settings_table.py --write README.md   # replace the table between the markers

Every setting is declared once in ``sleuth/settings.py``; the README holds this script's output
between ``<!-- settings:begin -->`` and ``<!-- settings:end -->``, and
``tests/test_settings.py`` checks that the two agree.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sleuth.settings import Settings

BEGIN = "<!-- settings:begin -->"
END = "<!-- settings:end -->"


def table() -> str:
    """The markdown table of every setting: variable, default, meaning (ends with a newline)."""
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    for env, _name, default, help_text in Settings.describe():
        cell = help_text.replace("|", r"\|")  # a pipe in the help would end the cell
        lines.append(f"| `{env}` | `{default}` | {cell} |")
    return "\n".join(lines) + "\n"


def between_markers(text: str) -> str:
    """What a document holds between the two markers (each on a line of its own)."""
    start = text.index(BEGIN + "\n") + len(BEGIN) + 1
    return text[start:text.index(END, start)]


def replace_table(text: str) -> str:
    """The document with the table between the markers replaced by ``table()``."""
    start = text.index(BEGIN + "\n") + len(BEGIN) + 1
    return text[:start] + table() + text[text.index(END, start):]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, metavar="FILE",
                        help=f"replace the table between {BEGIN} and {END} in FILE instead of printing it")
    args = parser.parse_args(argv)
    if args.write is None:
        sys.stdout.write(table())
        return 0
    args.write.write_text(replace_table(args.write.read_text()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
