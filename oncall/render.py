"""Incidents as terminal tables (rich): the list for ``sleuth incidents``, one incident for ``sleuth incident show``."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone

from rich.console import Group
from rich.table import Table
from rich.text import Text

from sleuth.oncall.queries import IncidentRow

__all__ = ["incident_detail", "incidents_table"]


def _when(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S") if ns else "-"


def _span(iterations: tuple[int, ...] | list[int]) -> str:
    return f"{min(iterations)}-{max(iterations)} ({len(iterations)})" if iterations else "-"


def incidents_table(rows: list[IncidentRow]) -> Table:
    table = Table(title=f"{len(rows)} incidents", title_justify="left")
    for column in ("incident", "job", "state", "cause", "iterations", "slowdown", "GPU-h lost", "top suspect",
                   "score", "verdict", "created (UTC)"):
        table.add_column(column, justify="right" if column in ("slowdown", "GPU-h lost", "score") else "left")
    for row in rows:
        table.add_row(
            row.incident, row.job, Text("open", style="bold red") if row.open else "closed", row.cause,
            _span(row.iterations), f"x{row.slowdown:.2f}", f"{row.gpu_hours_lost:.3f}", row.top_suspect or "-",
            f"{row.top_score:.3f}", row.verdict or "-", _when(row.created_ns),
        )
    return table


def incident_detail(document: dict) -> Group:
    impact = document["impact"]
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    head.add_row("incident", document["incident"])
    head.add_row("job", document["job"])
    head.add_row("cause", document["cause"])
    head.add_row("irregular iterations", ", ".join(map(str, document["iterations"])))
    head.add_row("window", f"{_when(document['t_from_ns'])} - {_when(document['t_to_ns'])} UTC")
    head.add_row("impact", f"slowdown x{impact['slowdown']:.3f} (baseline {impact['baseline_ns'] / 1e6:.2f} ms, "
                           f"now {impact['actual_ns'] / 1e6:.2f} ms per iteration), "
                           f"{impact['gpu_hours_lost']:.4f} GPU-hours lost over {impact['iterations']} iterations")
    head.add_row("search", f"{document['ranks_fetched']} of {document['world']} ranks fetched in "
                           f"{document['seconds']:.3f} s")
    if document.get("advice"):
        head.add_row("advice", document["advice"])

    suspects = Table(title="suspects", title_justify="left")
    for column in ("#", "device", "kind", "score"):
        suspects.add_column(column)
    for k, s in enumerate(document["suspects"], start=1):
        suspects.add_row(str(k), s["device"], s["kind"], f"{s['score']:.3f}")

    roots = Table(title="root operators", title_justify="left")
    for column in ("iteration", "ran in", "cause", "rank", "op", "comm", "seq", "group ranks", "R"):
        roots.add_column(column)
    for r in document["roots"]:
        ranks = r["ranks"]
        shown = ", ".join(map(str, ranks[:8])) + (f" ... ({len(ranks)})" if len(ranks) > 8 else "")
        roots.add_row(str(r["iteration"]), str(r.get("ran", r["iteration"])), r["cause"], str(r["rank"]), r["op"],
                      r["comm"], str(r["seq"]), shown, f"{r['rate']:.3f}")

    visited = document["traversal"]
    traversal = Text(f"traversal: {len(visited)} ranks visited, in order: "
                     + " -> ".join(map(str, visited[:40])) + (" ..." if len(visited) > 40 else ""))
    causes = Counter(r["cause"] for r in document["roots"])
    summary = Text("root causes: " + ", ".join(f"{c} x{n}" for c, n in causes.most_common()) if causes else "no roots")
    return Group(head, suspects, roots, summary, traversal)
