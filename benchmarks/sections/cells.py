"""The cells RESULTS.md's generated tables share: numbers to fixed places, lists, verdicts, spreads."""

from __future__ import annotations

__all__ = ["count", "listed", "number", "spread", "verdict"]


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
