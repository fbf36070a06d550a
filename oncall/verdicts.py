"""On-call verdicts (``sleuth ack``) as training labels (read back for training: ``LabelStore.labels``).

A verdict labels the operator instances the incident blamed: each root operator (iteration,
communicator, sequence number) on the ranks the localizer names for it (a network root: its whole
group; a compute root: the late rank). Confirmed: abnormal = 1; rejected (a false alarm):
abnormal = 0. Note that a compute root's own record is often of normal length (its peers waited
for it), so a confirmed compute verdict teaches the detector "this operator instance mattered",
not "this record ran long". Rows go to a ``LabelStore`` (ClickHouse ``labels``: ``sleuth.storage.labels``)
with ``source = oncall:<verdict>:<incident>``; a later verdict on the same incident replaces the
earlier one (ReplacingMergeTree on the operator).
"""

from __future__ import annotations

import time

from sleuth.localizer.incident import Incident
from sleuth.stores import LabelStore

__all__ = ["CONFIRMED", "REJECTED", "label_rows", "store_verdict"]

CONFIRMED, REJECTED = "confirmed", "rejected"


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


def store_verdict(labels: LabelStore, incident: Incident, verdict: str) -> int:
    """Keep the verdict's labels; how many operator instances it labelled."""
    rows = label_rows(incident, verdict, labeled_ns=time.time_ns())
    labels.write(rows)
    return len(rows)
