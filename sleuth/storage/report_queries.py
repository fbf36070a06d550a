"""The ClickHouse SQL printed under each figure of the report: it reproduces the figure's data.

Every statement is complete and runnable as printed (``clickhouse-client --query``): the job and
incident ids are spliced in as quoted literals, because a reader pastes them, and the driver's
client-side parameters would not be visible. SQL stays within what ClickHouse 18.16 runs
(docs/design.md): ``FINAL`` for exact reads of the ReplacingMergeTree tables, ``extract`` (a regular
expression) rather than the newer JSON functions, no window functions.

The tables are those of ``sleuth.storage.schema``; one query per figure part, so the tests can run
each against the real server and compare it with what the report plotted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sleuth.records import OpKind
from sleuth.storage.schema import check_database_name

__all__ = ["IncidentQueries", "quote"]


def quote(text: str) -> str:
    """A ClickHouse string literal (backslash and quote escaped)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _int_list(values: Sequence[int]) -> str:
    return ", ".join(str(int(v)) for v in values)


# The op column holds OpKind's wire numbers; the query names them as the report does.
_OP_NAME = (
    f"transform(op, [{_int_list([k.value for k in OpKind])}], "
    f"[{', '.join(quote(k.label) for k in OpKind)}], 'unknown') AS op_name"
)


def _json_number(key: str) -> str:
    # The document is json.dumps output ("key": value, with a space), which visitParamExtract*
    # does not read; a regular expression does, on every ClickHouse version.
    return f"toFloat64(extract(document, '\"{key}\": *([-0-9.eE+]+)'))"


@dataclass(frozen=True)
class IncidentQueries:
    """The queries of one incident's report, against database ``database``."""

    database: str
    job: str
    incident: str

    def __post_init__(self) -> None:
        check_database_name(self.database)

    def _table(self, name: str) -> str:
        return f"{self.database}.{name}"

    @property
    def _this_incident(self) -> str:
        return f"job = {quote(self.job)} AND incident = {quote(self.incident)}"

    def iteration_times(self, first: int, last: int) -> str:
        """Mean iteration time (ms) of the ranks the search visited, irregular iterations flagged."""
        incident = f"{self._table('incidents')} FINAL WHERE {self._this_incident}"
        return (
            "SELECT iteration,\n"
            "       avg(t_end_ns - t_start_ns) / 1e6 AS iteration_ms,\n"
            f"       has((SELECT iterations FROM {incident}), iteration) AS irregular\n"
            f"FROM {self._table('iterations')} FINAL\n"
            f"WHERE job = {quote(self.job)} AND iteration BETWEEN {int(first)} AND {int(last)}\n"
            f"  AND rank IN (SELECT arrayJoin(traversal) FROM {incident})\n"
            "GROUP BY iteration\n"
            "ORDER BY iteration"
        )

    def timeline(self, iteration: int, ranks: Sequence[int]) -> str:
        """Every operator of ``ranks`` in ``iteration``, in start order per rank."""
        return (
            f"SELECT rank, comm, seq, {_OP_NAME}, peer, t_start_ns, t_end_ns\n"
            f"FROM {self._table('records')} FINAL\n"
            f"WHERE job = {quote(self.job)} AND iteration = {int(iteration)} AND rank IN ({_int_list(ranks)})\n"
            "ORDER BY rank, t_start_ns, comm, seq"
        )

    def root_operators(self) -> str:
        """The incident's root operators (JSON: iteration, cause, rank, comm, seq, op, ranks, R)."""
        return f"SELECT root_ops\nFROM {self._table('incidents')} FINAL\nWHERE {self._this_incident}"

    def traversal(self) -> str:
        """The search's steps in order."""
        return (
            "SELECT step, action, rank, comm, seq, iteration\n"
            f"FROM {self._table('traversals')} FINAL\n"
            f"WHERE {self._this_incident}\n"
            "ORDER BY step"
        )

    def suspects(self) -> str:
        """Suspect devices, best first, with their scores."""
        return (
            "SELECT position, device, kind, score\n"
            f"FROM {self._table('suspects')} FINAL\n"
            f"WHERE {self._this_incident}\n"
            "ORDER BY position"
        )

    def placements(self) -> str:
        """The job spec (rank → host and GPU) the topology figure places the ranks with."""
        return f"SELECT spec\nFROM {self._table('jobs')} FINAL\nWHERE job = {quote(self.job)}"

    def impact(self) -> str:
        """Slowdown, GPU-hours lost, and the baseline and actual iteration times (ms)."""
        return (
            "SELECT slowdown, gpu_hours_lost,\n"
            f"       {_json_number('baseline_ns')} / 1e6 AS baseline_ms,\n"
            f"       {_json_number('actual_ns')} / 1e6 AS actual_ms,\n"
            "       ranks_fetched, world\n"
            f"FROM {self._table('incident_details')} FINAL\n"
            f"WHERE {self._this_incident}"
        )
