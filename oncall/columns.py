"""Tables that fit the terminal: columns by priority, the least important left out first.

rich shrinks every column of a table that is too wide, so that at 80 columns an eleven-column
table cut each cell to a few characters. Here each column has a priority: those of priority 0
are always shown (with a minimum width, so that they stay readable), the others are added in
order of priority while the table still fits its width at its natural size (the first that does
not fit ends it), and the caller says which were left out. ``width=None`` keeps every column (``--wide``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.table import Table

__all__ = ["Column", "FittedTable", "fit_table", "wide_console"]


@dataclass(frozen=True)
class Column:
    """One column: ``priority`` 0 is always shown, higher numbers are left out first.

    ``overflow``: "fold" for what a person copies (ids), "ellipsis" for the rest. ``min_width``:
    what the column keeps when the table is squeezed (at most its longest cell); None: its longest
    cell, never squeezed. ``max_width``: the most it takes (longer cells end in an ellipsis or fold)."""

    header: str
    priority: int = 0
    justify: Literal["left", "right", "center"] = "left"
    overflow: Literal["fold", "ellipsis"] = "ellipsis"
    min_width: int | None = None
    max_width: int | None = None


@dataclass(frozen=True)
class FittedTable:
    table: Table
    hidden: tuple[str, ...]  # headers of the columns left out, most important first


def _overhead(count: int) -> int:
    """Characters a rich Table with ``count`` columns adds: edges, separators, a space each side of a cell."""
    return 3 * count + 1


def _natural(column: Column, cells: list[str]) -> int:
    longest = max([len(column.header), *map(len, cells)])
    return longest if column.max_width is None else min(longest, column.max_width)


def _least(column: Column, natural: int) -> int:
    return natural if column.min_width is None else min(max(column.min_width, len(column.header)), natural)


def _squeezed(columns: Sequence[Column], naturals: list[int], width: int | None) -> list[int]:
    """Column widths: natural, less what the table exceeds ``width`` by, taken from the columns that
    may shrink, the one with the most room first, none below its ``min_width``."""
    widths = list(naturals)
    if width is None:
        return widths
    excess = sum(widths) + _overhead(len(widths)) - width
    while excess > 0:
        room = [(widths[k] - _least(columns[k], naturals[k]), k) for k in range(len(widths))]
        spare, k = max(room)
        if spare <= 0:
            break  # the columns that must show are wider than the terminal: rich crops the rest
        widths[k] -= 1
        excess -= 1
    return widths


def _table(columns: Sequence[Column], rows: Sequence[Sequence[RenderableType]], kept: Sequence[int],
           title: str | None, width: int | None) -> Table:
    shown = [columns[k] for k in kept]
    naturals = [_natural(columns[k], [str(row[k]) for row in rows]) for k in kept]
    widths = _squeezed(shown, naturals, width)
    table = Table(title=title, title_justify="left")
    for column, w in zip(shown, widths):
        # A folded cell goes on over more lines (an id stays whole, to copy); the others stay on one.
        table.add_column(column.header, justify=column.justify, overflow=column.overflow,
                         no_wrap=column.overflow != "fold", min_width=w, max_width=w)
    for row in rows:
        table.add_row(*(row[k] for k in kept))
    return table


def fit_table(columns: Sequence[Column], rows: Sequence[Sequence[RenderableType]], *, width: int | None,
              title: str | None = None) -> FittedTable:
    """A table of ``rows`` with the columns that fit in ``width`` (every column when None): the
    priority-0 columns always (squeezed down to their ``min_width`` when they do not fit), then the
    others in order of priority while the table still fits with all its columns at their natural width."""
    if any(len(row) != len(columns) for row in rows):
        raise ValueError(f"every row must have {len(columns)} cells, one per column")
    if width is not None and width < 20:
        raise ValueError(f"width must be at least 20 columns, got {width}")
    order = sorted(range(len(columns)), key=lambda k: columns[k].priority)
    if width is None:
        kept = order
    else:
        kept = [k for k in order if columns[k].priority == 0]
        for k in order:
            if k in kept:
                continue
            trial = sorted([*kept, k])
            natural = sum(_natural(columns[j], [str(row[j]) for row in rows]) for j in trial)
            if natural + _overhead(len(trial)) > width:
                break  # strictly by priority: none of lower priority joins once one is left out
            kept = trial
    kept = sorted(kept)
    hidden = tuple(columns[k].header for k in order if k not in kept)
    return FittedTable(_table(columns, rows, kept, title, width), hidden)


def wide_console(renderable: RenderableType, console: Console | None = None) -> Console:
    """A console at least as wide as ``renderable`` at its natural width (``--wide``: lines longer than
    the terminal, for ``less -S`` or a wider window)."""
    console = console or Console()
    natural = Measurement.get(console, console.options.update_width(100_000), renderable).maximum
    return console if natural <= console.width else Console(width=natural)
