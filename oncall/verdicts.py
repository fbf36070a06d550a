"""On-call verdicts (``sleuth ack``) as training labels, and those labels read back for training.

A verdict labels the operator instances the incident blamed: each root operator (iteration,
communicator, sequence number) on the ranks the localizer names for it (a network root: its whole
group; a compute root: the late rank). Confirmed: abnormal = 1; rejected (a false alarm):
abnormal = 0. Note that a compute root's own record is often of normal length (its peers waited
for it), so a confirmed compute verdict teaches the detector "this operator instance mattered",
not "this record ran long". Rows go to ClickHouse ``labels`` with ``source = oncall:<verdict>:<incident>``;
a later verdict on the same incident replaces the earlier one (ReplacingMergeTree on the operator).
"""

from __future__ import annotations

import time
from typing import Any

from sleuth.localizer.incident import Incident
from sleuth.stream.schema import check_database_name

__all__ = ["CONFIRMED", "REJECTED", "label_rows", "read_labels", "store_verdict"]

CONFIRMED, REJECTED = "confirmed", "rejected"
_COLUMNS = ("job", "rank", "comm", "seq", "iteration", "abnormal", "source", "labeled_ns")


def label_rows(incident: Incident, verdict: str, *, labeled_ns: int) -> list[tuple]:
    """``labels`` rows for a verdict on an incident."""
    if verdict not in (CONFIRMED, REJECTED):
        raise ValueError(f"verdict must be {CONFIRMED!r} or {REJECTED!r}, got {verdict!r}")
    abnormal = 1 if verdict == CONFIRMED else 0
    source = f"oncall:{verdict}:{incident.incident}"
    rows = {}
    for root in incident.roots:
        for rank in root.ranks or (root.rank,):
            # ``ran``: the iteration the operator ran in, which its seq belongs to (not always the one searched).
            key = (incident.job, rank, root.comm, root.seq, root.ran)
            rows[key] = key + (abnormal, source, labeled_ns)
    return list(rows.values())


def store_verdict(client: Any, database: str, incident: Incident, verdict: str) -> int:
    """Insert the verdict's labels; how many operator instances it labelled."""
    rows = label_rows(incident, verdict, labeled_ns=time.time_ns())
    if rows:
        client.execute(f"INSERT INTO {check_database_name(database)}.labels ({', '.join(_COLUMNS)}) VALUES", rows)
    return len(rows)


def read_labels(client: Any, database: str, jobs: list[str]) -> list[tuple[str, int, str, int, int, bool]]:
    """(job, rank, comm, seq, iteration, abnormal) of every label of ``jobs``."""
    return [
        (job, rank, comm, seq, iteration, bool(abnormal))
        for job, rank, comm, seq, iteration, abnormal in client.execute(
            f"SELECT job, rank, comm, seq, iteration, abnormal FROM {check_database_name(database)}.labels FINAL "
            "WHERE job IN %(jobs)s", {"jobs": tuple(jobs)})
    ]
