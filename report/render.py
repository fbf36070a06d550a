"""The incident report as ONE self-contained HTML page: inline SVG, inline CSS, no script, no link.

It opens from a file, a mail attachment or ``sleuth serve`` with no network: nothing is fetched
(the tests check every ``src`` and ``href`` is a fragment or ``data:``). Jinja2 autoescapes
every value; only the SVG that matplotlib wrote goes in unescaped.
"""

from __future__ import annotations

import datetime
from pathlib import Path

import jinja2
from markupsafe import Markup

from sleuth.localizer.incident import Incident
from sleuth.sources import RecordSource
from sleuth.topology import Topology

from sleuth.report import figures
from sleuth.report.evidence import ReportData, gather

__all__ = ["ENVIRONMENT", "build_report", "render_html", "write_report"]

#: Search steps listed in the page's table (the figure shows more).
MAX_STEP_ROWS = 200

ENVIRONMENT = jinja2.Environment(
    loader=jinja2.PackageLoader("sleuth.report", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,  # a typo in the template fails the render, not the reader
    trim_blocks=True,
    lstrip_blocks=True,
)


def _utc(ns: int) -> str:
    return datetime.datetime.fromtimestamp(ns / 1e9, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def render_html(data: ReportData) -> str:
    """The page for gathered data."""
    incident = data.incident
    svg = {
        "iterations": figures.iterations_svg(data.iterations),
        "timeline": figures.timeline_svg(data.timeline),
        "traversal": figures.traversal_svg(incident.steps, incident.traversal),
        "topology": figures.topology_svg(data.neighbourhood),
        "scores": figures.scores_svg(incident.suspects),
        "impact": figures.impact_svg(incident.impact),
        "heatmap": figures.heatmap_svg(data.heatmap),
    }
    return ENVIRONMENT.get_template("report.html.j2").render(
        incident=incident,
        data=data,
        svg={name: Markup(text) for name, text in svg.items()},
        sql=data.queries,
        window=(_utc(incident.t_from_ns), _utc(incident.t_to_ns)),
        steps=incident.steps[:MAX_STEP_ROWS],
        generated=_utc(int(datetime.datetime.now(tz=datetime.UTC).timestamp() * 1e9)),
    )


def build_report(
    incident: Incident, source: RecordSource, topology: Topology, *, database: str = "sleuth", topology_note: str = ""
) -> str:
    """The HTML report of ``incident`` from its job's records and the fabric."""
    return render_html(gather(incident, source, topology, database=database, topology_note=topology_note))


def write_report(html: str, path: str | Path) -> Path:
    """Write the page (UTF-8), creating the folder; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")
    return path
