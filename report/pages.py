"""The pages ``sleuth report`` writes and ``sleuth serve`` serves, from ClickHouse.

The fabric is not in ClickHouse: the caller supplies a ``Fabric``, the topology for a job spec
(a topology file, or a default built from the spec) with a note saying where it came from.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import jinja2

from sleuth.errors import ConfigError
from sleuth.jobspec import JobSpec
from sleuth.localizer.incident import Incident
from sleuth.oncall.links import incident_path
from sleuth.records_folder import read_records
from sleuth.sources import MemorySource
from sleuth.storage.incidents import IncidentRow, incident_by_id
from sleuth.storage.source import ClickHouseSource
from sleuth.topology import Topology, load_topology
from sleuth.topology.job_fabric import single_leaf

from sleuth.report.render import ENVIRONMENT, build_report

if TYPE_CHECKING:
    from clickhouse_driver import Client

__all__ = ["Fabric", "clickhouse_report", "fabric_from", "folder_report", "folder_source", "index_html"]

#: The topology of a job, and a note for the report saying where it came from.
Fabric = Callable[[JobSpec], tuple[Topology, str]]


def fabric_from(path: str | Path | None) -> Fabric:
    """The topology file at ``path`` for every job; without one, one leaf over each job's hosts."""
    if path is None:
        return lambda spec: (single_leaf(spec), "one leaf over the job's hosts (no topology file given)")
    if not Path(path).is_file():
        raise ConfigError(f"--topology {path}: no such file")
    topology = load_topology(path)
    return lambda spec: (topology, Path(path).name)


def clickhouse_report(client: Client, database: str, incident_id: str, *, fabric: Fabric) -> str:
    """The HTML report of an incident stored in ClickHouse, from the records stored there."""
    incident = incident_by_id(client, database, incident_id)
    source = ClickHouseSource(client, database, incident.job)
    topology, note = fabric(source.job_spec())
    return build_report(incident, source, topology, database=database, topology_note=note)


def folder_report(
    incident: Incident, records: Path, *, fabric: Fabric, job: Path | None = None, database: str = "sleuth"
) -> str:
    """The HTML report of ``incident`` from the records folder (logger or emulator) it was found in.

    The job spec is the folder's ``job.json`` unless ``job`` names one. No ClickHouse is needed;
    the SQL under the figures names ``database``.
    """
    source = folder_source(records, job=job)
    topology, note = fabric(source.job_spec())
    return build_report(incident, source, topology, database=database, topology_note=note)


def folder_source(records: Path, *, job: Path | None = None) -> MemorySource:
    """The records folder (or Parquet file) ``records`` and its job spec (``job``, else the folder's ``job.json``)."""
    if not records.exists():
        raise ConfigError(f"records {records}: no such file or folder")
    batch, iterations = read_records(records)
    spec = JobSpec.read(job if job is not None else records if records.is_dir() else records.parent)
    return MemorySource(spec, batch, iterations)


def index_html(summaries: list[IncidentRow], *, database: str) -> str:
    """The incident list, newest first, each linking to its report."""
    def when(ns: int) -> str:
        return datetime.datetime.fromtimestamp(ns / 1e9, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")

    rows = [
        {"summary": s, "href": incident_path(s.incident), "created": when(s.created_ns), "started": when(s.t_from_ns)}
        for s in summaries
    ]
    template: jinja2.Template = ENVIRONMENT.get_template("index.html.j2")
    return template.render(rows=rows, database=database)
