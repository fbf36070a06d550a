"""Incidents as terminal tables (rich): the list for ``sleuth incidents``, one incident for ``sleuth incident show``."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from sleuth.localizer.incident import Incident, RootOperator
from sleuth.oncall.columns import Column, fit_table
from sleuth.storage.incidents import IncidentRow

__all__ = ["incident_detail", "incidents_table"]


def _when(ns: int, *, short: bool = False) -> str:
    if not ns:
        return "-"
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).strftime("%m-%d %H:%M" if short else "%Y-%m-%d %H:%M:%S")


def _span(iterations: tuple[int, ...] | list[int]) -> str:
    return f"{min(iterations)}-{max(iterations)} ({len(iterations)})" if iterations else "-"


#: ``sleuth incidents``: what on-call reads first (priority 0) is always shown; the rest by priority.
INCIDENT_COLUMNS = (
    Column("incident", overflow="fold", min_width=20),
    Column("state"),
    Column("top suspect", overflow="fold", min_width=12),
    Column("slowdown, cause"),
    Column("since (UTC)"),
    Column("job", priority=1, overflow="fold", min_width=12),
    Column("iterations", priority=2, min_width=8, max_width=24),
    Column("GPU-h lost", priority=3, justify="right"),
    Column("score", priority=4, justify="right"),
    Column("verdict", priority=5),
    Column("created (UTC)", priority=6),
)


def incidents_table(rows: list[IncidentRow], *, width: int | None) -> Group:
    """The incident list for a terminal ``width`` columns wide (None: every column, ``--wide``);
    a line under it names the columns left out."""
    cells = [
        (row.incident, Text("open", style="bold red") if row.open else "closed", row.top_suspect or "-",
         f"x{row.slowdown:.2f} {row.cause}", _when(row.t_from_ns, short=True), row.job, _span(row.iterations),
         f"{row.gpu_hours_lost:.3f}", f"{row.top_score:.3f}", row.verdict or "-", _when(row.created_ns))
        for row in rows
    ]
    if not rows:
        return Group(Text("0 incidents"))
    fitted = fit_table(INCIDENT_COLUMNS, cells, width=width, title=f"{len(rows)} incidents")
    parts: list[RenderableType] = [fitted.table]
    if fitted.hidden:
        parts.append(Text(f"not shown at {width} columns: {', '.join(fitted.hidden)} (sleuth incidents --wide, "
                          "or --json)", style="dim"))
    return Group(*parts)


def _runs(values: list[int] | tuple[int, ...]) -> str:
    """Sorted integers as runs: 15-39, or 3, 7-9, 12."""
    runs: list[list[int]] = []
    for v in sorted(set(values)):
        if runs and v == runs[-1][1] + 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    return ", ".join(f"{a}-{b}" if b > a else str(a) for a, b in runs) or "-"


#: ``sleuth incident show``'s root operators, one row per operator (rank, op, communicator),
#: however many irregular iterations it was a root in.
ROOT_COLUMNS = (
    Column("rank", justify="right"),
    Column("op"),
    Column("comm", overflow="fold", min_width=8),
    Column("cause"),
    Column("iterations", min_width=12, max_width=30),
    Column("roots", justify="right"),
    Column("R", justify="right"),
    Column("group ranks", priority=1, min_width=12, max_width=40),
)


def _root_groups(roots: tuple[RootOperator, ...]) -> list[tuple]:
    """(rank, op, comm, cause, iterations, instances, largest R, member ranks) per root operator, the
    operators that were roots in the most iterations first, then by R."""
    groups: dict[tuple, list[RootOperator]] = {}
    for r in roots:
        groups.setdefault((r.rank, r.op, r.comm, r.cause), []).append(r)
    rows = []
    for (rank, op, comm, cause), members in groups.items():
        ranks = members[0].ranks
        shown = ", ".join(map(str, ranks[:6])) + (f" ... ({len(ranks)})" if len(ranks) > 6 else "")
        rows.append((rank, op, comm, cause, [m.iteration for m in members], len(members),
                     max(m.rate for m in members), shown))
    return sorted(rows, key=lambda g: (-g[5], -g[6], g[0], g[2]))


def incident_detail(incident: Incident, *, width: int | None, roots_shown: int | None = 8,
                    more: str | None = None) -> Group:
    """One incident for a terminal ``width`` columns wide (None: every column): a headline with what
    on-call reads first, the details, the suspects, and the ``roots_shown`` root operators that
    recur most (None: all), with a line saying how many more there are and ``more``, where to see them
    (default: ``sleuth incident show ID --all``)."""
    impact = incident.impact
    suspects = incident.suspects
    top = f"{suspects[0].device} ({suspects[0].score:.3f})" if suspects else "none"
    headline = Text.assemble((incident.incident, "bold"), "  ", (incident.cause.value, "bold"),
                             "  top suspect ", (top, "bold red" if suspects else ""),
                             f"  slowdown x{impact.slowdown:.3f}",
                             f"  since {_when(incident.t_from_ns)} UTC")
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold", no_wrap=True)
    head.add_column()
    head.add_row("job", incident.job)
    head.add_row("irregular iterations", f"{_runs(incident.iterations)} ({len(incident.iterations)})")
    head.add_row("window", f"{_when(incident.t_from_ns)} - {_when(incident.t_to_ns)} UTC")
    head.add_row("impact", f"slowdown x{impact.slowdown:.3f} (baseline {impact.baseline_ns / 1e6:.2f} ms, "
                           f"now {impact.actual_ns / 1e6:.2f} ms per iteration), "
                           f"{impact.gpu_hours_lost:.4f} GPU-hours lost over {impact.iterations} iterations")
    head.add_row("search", f"{incident.ranks_fetched} of {incident.world} ranks fetched in "
                           f"{incident.seconds:.3f} s")
    if incident.advice:
        head.add_row("advice", incident.advice)

    suspect_table = Table(title="suspects", title_justify="left")
    suspect_table.add_column("#", justify="right")
    suspect_table.add_column("device", overflow="fold", no_wrap=True)
    suspect_table.add_column("kind", no_wrap=True)
    suspect_table.add_column("score", justify="right")
    for k, s in enumerate(suspects, start=1):
        suspect_table.add_row(str(k), s.device, s.kind.value, f"{s.score:.3f}")

    groups = _root_groups(incident.roots)
    shown = groups if roots_shown is None else groups[:roots_shown]
    cells = [(str(rank), op, comm, cause.value, _runs(its), str(n), f"{rate:.3f}", ranks)
             for rank, op, comm, cause, its, n, rate, ranks in shown]
    roots = fit_table(ROOT_COLUMNS, cells, width=width,
                      title=f"root operators: {len(groups)} ({len(incident.roots)} instances)")
    parts: list[RenderableType] = [headline, head, suspect_table if suspects else Text("suspects: none"),
                                   roots.table if groups else Text("root operators: none")]
    if len(shown) < len(groups):
        hidden = groups[len(shown):]
        where = more or f"sleuth incident show {incident.incident} --all"
        parts.append(Text(f"... {len(hidden)} more root operators ({sum(g[5] for g in hidden)} instances): {where}",
                          style="bold"))
    causes = Counter(r.cause.value for r in incident.roots)
    parts.append(Text("root causes: " + ", ".join(f"{c} x{n}" for c, n in causes.most_common()) if causes
                      else "no roots"))
    visited = incident.traversal
    parts.append(Text(f"traversal: {len(visited)} ranks visited, in order: "
                      + " -> ".join(map(str, visited[:40])) + (" ..." if len(visited) > 40 else "")))
    return Group(*parts)
