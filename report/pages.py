"""The pages ``sleuth report`` writes and ``sleuth serve`` serves, from ClickHouse.

The fabric is not in ClickHouse: the caller supplies a ``Fabric``, the topology for a job spec
(a topology file, or a default built from the spec) with a note saying where it came from.
"""

from __future__ import annotations

import datetime
import urllib.parse
from collections.abc import Callable
from typing import Any

import jinja2

from sleuth.jobspec import JobSpec
from sleuth.topology import Topology

from sleuth.report.clickhouse import IncidentSummary, clickhouse_record_source, incident_by_id, list_incidents
from sleuth.report.render import ENVIRONMENT, build_report

__all__ = ["Fabric", "clickhouse_report", "index_html", "report_path"]

#: The topology of a job, and a note for the report saying where it came from.
Fabric = Callable[[JobSpec], tuple[Topology, str]]


def clickhouse_report(client: Any, database: str, incident_id: str, *, fabric: Fabric) -> str:
    """The HTML report of an incident stored in ClickHouse, from the records stored there."""
    incident = incident_by_id(client, database, incident_id)
    source = clickhouse_record_source(client, database, incident.job)
    topology, note = fabric(source.job_spec())
    return build_report(incident, source, topology, database=database, topology_note=note)


def report_path(incident_id: str) -> str:
    """The server's path of an incident's report."""
    return "/incidents/" + urllib.parse.quote(incident_id, safe="")


def index_html(summaries: list[IncidentSummary], *, database: str) -> str:
    """The incident list, newest first, each linking to its report."""
    def when(ns: int) -> str:
        return datetime.datetime.fromtimestamp(ns / 1e9, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")

    rows = [
        {"summary": s, "href": report_path(s.incident), "created": when(s.created_ns), "started": when(s.t_from_ns)}
        for s in summaries
    ]
    template: jinja2.Template = ENVIRONMENT.get_template("index.html.j2")
    return template.render(rows=rows, database=database)
