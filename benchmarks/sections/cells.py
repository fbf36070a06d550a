"""What RESULTS.md's renderers share: the check that a JSON is the benchmark's, and the cells of their
tables (numbers to fixed places, lists, verdicts, spreads)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["count", "listed", "number", "require", "rows_of", "spread", "table", "verdict"]


def require(documents: dict | list[dict], script: str, *keys: str, benchmark: str | None = None) -> None:
    """Refuses a document (or any of several) that is not ``script``'s output, naming what it lacks:
    any of ``keys``, or ``"benchmark": benchmark`` where the script writes its name."""
    for document in [documents] if isinstance(documents, dict) else documents:
        missing = [f"'benchmark': {benchmark!r}"] if benchmark is not None and document.get("benchmark") != benchmark else []
        missing += [repr(key) for key in keys if key not in document]
        if missing:
            raise ValueError(f"not {script}'s output: no {' and '.join(missing)}")


def rows_of(document: dict, script: str, *keys: str) -> list[dict]:
    """The ``rows`` list of ``script``'s output, each row with every one of ``keys``; refused, naming them, if not."""
    rows = document.get("rows")
    if not isinstance(rows, list) or any(key not in row for row in rows for key in keys):
        raise ValueError(f"not {script}'s output: no 'rows' list with {' and '.join(repr(key) for key in keys)}")
    return rows


def table(columns: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A markdown table: its header, the separator, a line a row, and the last newline."""
    lines = ["| " + " | ".join(columns) + " |", "|---" * len(columns) + "|"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows]) + "\n"


def listed(values: list | None) -> str:
    return ", ".join(str(v) for v in values) if values else "-"


def number(value: float | None, places: int = 4) -> str:
    return "-" if value is None else f"{value:.{places}f}"


def verdict(value: bool | None) -> str:
    return "-" if value is None else "yes" if value else "no"


def count(share: float | None, n: int | None) -> str:
    if not n or share is None:
        return "0 of 0"
    return f"{round(share * n)} of {n}"


def spread(times: dict) -> str:
    return f"{times['median']:.2f}, {times['max']:.2f}"
