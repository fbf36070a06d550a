"""Each rank's clock as its collectives tell it, and records read on one clock.

The members of a collective finish it together (its last step is every member's), so a rank whose
collectives end a steady distance from its peers' ends runs its clock that far off. Hosts' clocks
disagree by what NTP leaves them (milliseconds) or by seconds without it, and the replay (a
collective's transfer starts when its last member starts) and the δ rule (a step spans every
rank) compare times across ranks: a rank's offset larger than a collective's own spread of ends
is its clock's, and is taken off its times before anything reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from sleuth.records import ColumnBatch, IterationBatch, OpKind, RecordBatch
from sleuth.whatif.keys import dense_ids, group_median

_Batch = TypeVar("_Batch", bound=ColumnBatch)

#: Collectives every member leaves at its last step (rooted ones and pairs may leave early).
SYMMETRIC = (OpKind.ALL_REDUCE, OpKind.ALL_GATHER, OpKind.REDUCE_SCATTER, OpKind.ALL_TO_ALL, OpKind.BARRIER)
#: Rounds of (group medians, rank offsets): each takes the skewed ranks' pull off the medians.
_ROUNDS = 3
#: Records read at most: a rank's clock is one number, which a million collective records over the
#: job's ranks measure many times over (every n-th collective of each communicator, whole).
_MOST_RECORDS = 1 << 20


@dataclass(frozen=True)
class ClockOffsets:
    """The ranks whose clocks were off, and by how much each ran ahead of its peers' (ns)."""

    offsets_ns: dict[int, int]
    spread_ns: float  # how far apart one collective's members end, at the median, on the corrected clocks

    def __bool__(self) -> bool:
        return bool(self.offsets_ns)


def clock_offsets(records: RecordBatch) -> ClockOffsets:
    """Each rank's offset from its peers' clocks: the median over its symmetric collectives of how
    much later it ended them than their members' median end, refined over ``_ROUNDS`` and centred on
    the ranks' median; kept only where it is larger than the median collective's spread of ends.
    Reads at most ``_MOST_RECORDS`` of them: every n-th collective of each communicator, whole."""
    chosen = np.isin(records["op"], np.asarray(SYMMETRIC, np.uint8)) & (records["peer"] < 0)
    rank = records["rank"][chosen].astype(np.int64)
    end = records["t_end_ns"][chosen].astype(np.int64)
    group = dense_ids(records["comm"][chosen].astype(np.int64), records["seq"][chosen].astype(np.int64))
    shared = np.bincount(group)[group] > 1 if len(group) else np.zeros(0, bool)
    every = -(-int(shared.sum()) // _MOST_RECORDS)
    shared &= group % max(every, 1) == 0
    rank, end, group = rank[shared], end[shared], dense_ids(group[shared])
    if not len(rank):
        return ClockOffsets({}, 0.0)
    world = int(rank.max()) + 1
    offset = np.zeros(world, np.int64)
    for _ in range(_ROUNDS):
        own = end - offset[rank]
        residual = own - group_median(group, own)
        offset += np.nan_to_num(group_median(rank, residual, size=world)).astype(np.int64)
    present = np.bincount(rank, minlength=world) > 0
    offset -= int(np.median(offset[present]))
    own = end - offset[rank]
    low = np.full(int(group.max()) + 1, np.iinfo(np.int64).max)
    high = np.full(int(group.max()) + 1, np.iinfo(np.int64).min)
    np.minimum.at(low, group, own)
    np.maximum.at(high, group, own)
    spread = float(np.median(high - low))
    off = np.flatnonzero(present & (np.abs(offset) > spread))
    return ClockOffsets({int(r): int(offset[r]) for r in off}, spread)


def on_one_clock(records: RecordBatch, iterations: IterationBatch,
                 offsets: ClockOffsets) -> tuple[RecordBatch, IterationBatch]:
    """``records`` and ``iterations`` with each off rank's times moved onto its peers' clock."""
    if not offsets:
        return records, iterations
    return _shifted(records, offsets, ("t_issue_ns", "t_start_ns", "t_end_ns")), _shifted(
        iterations, offsets, ("t_start_ns", "t_end_ns"))


def _shifted(batch: _Batch, offsets: ClockOffsets, fields: tuple[str, ...]) -> _Batch:
    """``batch`` with ``fields`` of each off rank's rows less its offset."""
    size = max(max(offsets.offsets_ns) + 1, int(batch["rank"].max(initial=0)) + 1)
    by_rank = np.zeros(size, np.int64)
    for rank, offset in offsets.offsets_ns.items():
        by_rank[rank] = offset
    shift = by_rank[batch["rank"].astype(np.int64)]
    columns = {name: column - shift if name in fields else column for name, column in batch.columns.items()}
    return type(batch)(columns, batch.strings)

