"""The HTML incident report: one self-contained page per incident (``sleuth report``, ``sleuth serve``).

Modules, one job each:

* :mod:`~sleuth.report.evidence` — the data behind each figure, from an incident, a ``RecordSource``
  and the topology;
* :mod:`~sleuth.report.neighbourhood` — the fabric around the suspects, laid out in tiers;
* :mod:`~sleuth.report.heatmap` — per-worker slowdown on the DP x PP grid (the what-if replay);
* :mod:`~sleuth.report.figures` — matplotlib figures as inline SVG;
* :mod:`~sleuth.report.render` — the page (Jinja2 template ``templates/report.html.j2``);
* :mod:`~sleuth.report.pages` — a report from ClickHouse (``sleuth.storage.incidents``, ``ClickHouseSource``) or a folder;
* :mod:`~sleuth.report.server` — the HTTP server of ``sleuth serve``.
"""

from __future__ import annotations

from sleuth.report.evidence import ReportData, gather
from sleuth.report.render import build_report, render_html, write_report

__all__ = ["ReportData", "build_report", "gather", "render_html", "write_report"]
