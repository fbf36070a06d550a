"""Terminal views at 80 and 200 columns: what on-call reads first always shows, whole; the rest folds."""

from __future__ import annotations

import dataclasses

import pytest
from rich.cells import cell_len
from rich.console import Console

from sleuth.localizer.incident import Incident
from sleuth.oncall.columns import Column, fit_table, wide_console
from sleuth.oncall.render import incident_detail, incidents_table
from sleuth.storage.incidents import IncidentRow

NOW = 1_764_076_000 * 10**9
JOB = "llama-70b-pretrain-run3"


def rows(count: int = 5) -> list[IncidentRow]:
    return [IncidentRow(JOB, f"{JOB}-{a}-{a + 24}", NOW - a * 10**12, NOW, tuple(range(a, a + 25)),
                        "network" if a % 2 else "compute", 1.2 + a / 100, 12.5 * a,
                        "link:nic:h0012/3~leaf:p0r3" if a == 3 else f"gpu:h0451/{a}", 0.0186, a == 4,
                        "confirmed" if a == 3 else "", NOW - a * 10**11)
            for a in range(1, count + 1)]


def spine_incident(operators: int = 70, iterations: int = 25) -> Incident:
    """An incident like the demo's spine job: many operators, each a root in several iterations."""
    roots = []
    for op in range(operators):
        repeats = 1 + (op * 7) % iterations
        for it in range(15, 15 + repeats):
            roots.append({"iteration": it, "ran": it, "cause": "network", "rank": 8 * op,
                          "comm": f"pp.{op}" if op % 2 else f"dp.{op}", "seq": it * 4,
                          "op": "send" if op % 2 else "all_reduce",
                          "ranks": [8 * op, 8 * op + 1024] if op % 2 else list(range(op, 4096, 32)),
                          "rate": round(0.5 + (op % 40) / 100, 3), "again": []})
    return Incident.from_dict({
        "job": "demo-spine", "incident": "demo-spine-15-39", "t_from_ns": NOW, "t_to_ns": NOW + 10**9,
        "iterations": list(range(15, 40)), "cause": "network",
        "suspects": [{"device": "spine:s0", "kind": "spine", "score": 0.0186},
                     {"device": "leaf:p0r3", "kind": "leaf", "score": 0.0047}],
        "roots": roots, "traversal": list(range(94)), "steps": [], "ranks_fetched": 523, "world": 4096,
        "impact": {"slowdown": 1.237, "baseline_ns": 91_590_000, "actual_ns": 113_330_000,
                   "gpu_hours_lost": 0.6183, "iterations": 25},
        "advice": "", "seconds": 6.354,
    })


def render(renderable, width: int) -> list[str]:
    console = Console(width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text().splitlines()


def flat(lines: list[str]) -> str:
    """The lines as one, as a person reads a wrapped sentence."""
    return " ".join(line.strip() for line in lines)


def test_the_incident_list_fits_80_columns_with_what_oncall_reads_first() -> None:
    lines = render(incidents_table(rows(), width=80), 80)
    assert max(map(cell_len, lines)) <= 80
    text = "\n".join(lines)
    header = next(line for line in lines if "incident" in line and "state" in line)
    for column in ("top suspect", "slowdown, cause", "since (UTC)"):
        assert column in header
    assert "x1.21 network" in text and "11-25 12:50" in text and "open" in text and "gpu:h0451/1" in text
    # Folded, never cut: every incident id and suspect reads whole once the cells' lines are joined.
    cells = "".join(line.split("│")[1].strip() for line in lines if line.startswith("│"))
    assert all(row.incident in cells for row in rows())
    suspects = "".join(line.split("│")[3].strip() for line in lines if line.startswith("│"))
    assert "link:nic:h0012/3~leaf:p0r3" in suspects and "…" not in text.split("not shown")[0]
    assert "not shown at 80 columns: job, iterations, GPU-h lost, score, verdict, created (UTC)" in flat(lines)


def test_the_incident_list_at_200_columns_shows_more_and_wide_shows_all() -> None:
    lines = render(incidents_table(rows(), width=200), 200)
    assert max(map(cell_len, lines)) <= 200
    assert all(any(row.incident in line and row.top_suspect in line for line in lines) for row in rows())
    assert "job" in lines[2] and "GPU-h lost" in lines[2] and "iterations" in lines[2]
    assert not any("not shown" in line for line in lines)
    table = incidents_table(rows(), width=None)
    console = wide_console(table, Console(width=80))
    assert console.width > 80
    wide = render(table, console.width)
    assert "created (UTC)" in wide[2] and "verdict" in wide[2] and not any("not shown" in line for line in wide)
    assert any("confirmed" in line and "2025-11-25 13:01:40" in line for line in wide)


def test_an_incident_folds_its_root_operators_into_a_count_line() -> None:
    incident = spine_incident()
    for width in (80, 200):
        lines = render(incident_detail(incident, width=width), width)
        assert max(map(cell_len, lines)) <= width
        # The headline, first: incident, cause, top suspect, slowdown, since when.
        assert lines[0].startswith("demo-spine-15-39  network  top suspect spine:s0 (0.019)  slowdown x1.237")
        body = [line for line in lines if line.startswith("│") and ("send" in line or "all_reduce" in line)]
        assert len(body) == 8
        assert "... 62 more root operators" in flat(lines)
        assert "sleuth incident show demo-spine-15-39 --all" in flat(lines)
    # The most recurrent operators first: 25 iterations each, then by R.
    lines = render(incident_detail(incident, width=200), 200)
    first = next(line for line in lines if line.startswith("│") and "all_reduce" in line)
    assert "15-39" in first and "25" in first
    assert "group ranks" in flat(lines) and "group ranks" not in flat(render(incident_detail(incident, width=80), 80))


def test_all_root_operators_and_another_place_to_read_them() -> None:
    incident = spine_incident(operators=12)
    every = render(incident_detail(incident, width=80, roots_shown=None), 80)
    assert sum(line.startswith("│") and ("send" in line or "all_reduce" in line) for line in every) == 12
    assert not any("more root operators" in line for line in every)
    lines = render(incident_detail(incident, width=80, more="every one in /tmp/r.html"), 80)
    assert "... 4 more root operators" in flat(lines) and "every one in /tmp/r.html" in flat(lines)


def test_fit_table_drops_low_priority_columns_first_and_refuses_bad_input() -> None:
    columns = (Column("id"), Column("a", priority=2), Column("b", priority=1), Column("c", priority=3))
    cells = [("x" * 10, "a" * 30, "b" * 30, "c")]
    assert fit_table(columns, cells, width=50).hidden == ("a", "c")  # b (priority 1) fits, a does not, nor c after it
    assert fit_table(columns, cells, width=100).hidden == ()
    assert fit_table(columns, cells, width=None).hidden == ()
    with pytest.raises(ValueError, match="4 cells"):
        fit_table(columns, [("x", "y")], width=80)
    with pytest.raises(ValueError, match="at least 20"):
        fit_table(columns, cells, width=5)


def test_nothing_to_show_says_so() -> None:
    assert render(incidents_table([], width=80), 80) == ["0 incidents"]
    incident = dataclasses.replace(spine_incident(operators=0), suspects=())
    text = flat(render(incident_detail(incident, width=80), 80))
    assert "top suspect none" in text and "suspects: none" in text and "root operators: none" in text
