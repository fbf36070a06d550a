"""The test suite's section: ``ci_figures.py``'s figures of one fresh clone's ``.ci/run``."""

from __future__ import annotations

from .cells import require, table


def suite_section(document: dict) -> str:
    """The tests, pytest's time, the whole run's, its largest process and the type check, as markdown."""
    require(document, "ci_figures.py", "passed", "failed", "pytest_s", "wall_s", "max_rss_kb", benchmark="ci_figures")
    typed = document.get("typecheck_files")
    return table(["commit", "tests passed", "failed", "pytest", "`.ci/run`", "largest process", "type check"],
                 [[f"`{document['commit']}`", f"{document['passed']:,}", str(document["failed"]), _clock(document["pytest_s"]),
                   _clock(document["wall_s"]), f"{document['max_rss_kb'] / 1e6:.2f} GB",
                   "not in the log" if typed is None else f"clean, {typed} files"]])


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)}:{seconds % 60:04.1f}"
