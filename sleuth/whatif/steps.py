"""Iterations for the records that carry none, from the groups they ran in.

A rank's records carry iteration -1 where nothing marked its steps and its operator stream showed
no period (a Flight Recorder or Inspector dump too short for two periods, a stream whose sizes vary
from step to step): the replay and the search leave such records out, so that rank, a slow GPU's
perhaps, drops out of the analysis and the job reads as if it paid nothing. But a collective is one
operation of all its members, and a send and its receive are one transfer: they ran in the same
step. Each unnumbered record takes the iteration its group's numbered members carry (the most
common, should they disagree); a record whose group has none stays -1.
"""

from __future__ import annotations

import numpy as np

from sleuth.records import RecordBatch
from sleuth.whatif.keys import dense_ids
from sleuth.whatif.timeline import member_groups

__all__ = ["number_from_groups"]


def number_from_groups(records: RecordBatch) -> tuple[RecordBatch, int]:
    """``records`` with each unnumbered record (iteration < 0) given its group's iteration, and how
    many were numbered; ``records`` as they are where none could be."""
    iteration = records["iteration"].astype(np.int64)
    unnumbered = iteration < 0
    if not unnumbered.any() or unnumbered.all():
        return records, 0
    group = member_groups(records["comm"].astype(np.int64), records["seq"].astype(np.int64),
                         records["rank"].astype(np.int64), records["peer"].astype(np.int64),
                         records["op"].astype(np.int64))
    numbered = np.flatnonzero(~unnumbered)
    # Each group's most common iteration among its numbered members (the smallest where tied): the
    # (group, iteration) pairs with their votes, sorted by group, then most votes, then iteration.
    _, one, votes = np.unique(dense_ids(group[numbered], iteration[numbered]), return_index=True, return_counts=True)
    pair_group, pair_iteration = group[numbered[one]], iteration[numbered[one]]
    by = np.lexsort((pair_iteration, -votes, pair_group))
    head = by[np.r_[True, pair_group[by][1:] != pair_group[by][:-1]]]
    chosen = np.full(int(group.max()) + 1, -1, np.int64)
    chosen[pair_group[head]] = pair_iteration[head]
    found = unnumbered & (chosen[group] >= 0)
    if not found.any():
        return records, 0
    columns = dict(records.columns)
    columns["iteration"] = np.where(found, chosen[group], iteration).astype(records["iteration"].dtype)
    return RecordBatch(columns, records.strings), int(found.sum())
