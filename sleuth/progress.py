"""Progress bars for the runs a user waits for, on stderr, and only when stderr is a terminal.

The one home of them: ``sleuth sim suite``, ``sleuth detect train`` / ``eval``, ``sleuth localize``,
the benchmarks and ``scripts/train_default_model.py`` use :func:`track` (a loop) or :func:`progress`
(steps advanced by hand, or set to a measure such as seconds gone with ``Steps.reach``). On a pipe,
a file or under pytest nothing is written, so stderr logs read as before and the JSON a command
prints on stdout is never touched (the bar does not redirect stdout). The bar is transient: it is erased when the work is done.

rich draws it (the ``service`` extra brings rich); where rich is not installed (the logger's
install in a training container) nothing is shown. ``FORCE_COLOR`` does not turn it on: rich
would then call a pipe a terminal.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Sized
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from sleuth.validation import non_negative_number

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["Steps", "progress", "track"]

T = TypeVar("T")


class Steps:
    """What :func:`progress` yields: ``advance`` the bar, optionally renaming the step under way.
    When no bar is shown it does nothing."""

    def __init__(self, bar: Any = None, task: Any = None, *, redraw: bool = False) -> None:
        self._bar = bar
        self._task = task
        self._redraw = redraw  # no timer draws the bar: each change does

    @property
    def shown(self) -> bool:
        return self._bar is not None

    def advance(self, steps: float = 1, *, description: str | None = None) -> None:
        if self._bar is not None:
            self._bar.update(self._task, advance=steps, refresh=self._redraw,
                             **({} if description is None else {"description": description}))

    def describe(self, description: str) -> None:
        """Rename the step under way without advancing."""
        if self._bar is not None:
            self._bar.update(self._task, description=description, refresh=self._redraw)

    def reach(self, completed: float, *, description: str | None = None) -> None:
        """Set the bar to ``completed`` steps: for work measured rather than counted, such as the
        seconds gone of a run of set length (``bench_chaos --seconds``)."""
        non_negative_number("completed", completed, error=ValueError)
        if self._bar is not None:
            self._bar.update(self._task, completed=completed, refresh=self._redraw,
                             **({} if description is None else {"description": description}))


def _stderr_console() -> Console | None:
    """A console on stderr when stderr is a terminal and rich is installed, else None."""
    isatty = getattr(sys.stderr, "isatty", None)
    if isatty is None or not isatty():
        return None
    try:
        from rich.console import Console
    except ImportError:
        return None
    return Console(stderr=True)


@contextmanager
def progress(description: str, *, total: float | None = None, console: Console | None = None,
             redraw_on_timer: bool = True) -> Iterator[Steps]:
    """A bar of ``total`` steps (a spinner when None) for the ``with`` block.

    ``console``: where to draw (tests pass one); by default stderr, only when it is a terminal.
    A console given is drawn on only when it is a terminal (``Console(force_terminal=True)``).
    ``redraw_on_timer``: a thread redraws the bar ten times a second (its elapsed time ticks);
    False draws it only when it changes, so that a micro-benchmark advancing it between its
    timed blocks never shares the CPU with it while timing."""
    if total is not None:
        non_negative_number("total", total, error=ValueError)
    if console is None:
        console = _stderr_console()
    if console is None or not console.is_terminal:
        yield Steps()
        return
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    columns = [SpinnerColumn(), TextColumn("[progress.description]{task.description}"), BarColumn(),
               MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn()]
    # stdout is not redirected: what a command prints there (JSON) must reach its pipe unchanged.
    with Progress(*columns, console=console, transient=True, redirect_stdout=False,
                  auto_refresh=redraw_on_timer) as bar:
        yield Steps(bar, bar.add_task(description, total=total), redraw=not redraw_on_timer)


def track(items: Iterable[T], description: str, *, total: float | None = None,
          console: Console | None = None, redraw_on_timer: bool = True) -> Iterator[T]:
    """``items``, advancing a bar after each one (``total``: their count, ``len(items)`` by default;
    ``redraw_on_timer`` as for :func:`progress`)."""
    if total is None and isinstance(items, Sized):
        total = len(items)
    with progress(description, total=total, console=console, redraw_on_timer=redraw_on_timer) as steps:
        for item in items:
            yield item
            steps.advance()
