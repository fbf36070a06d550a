"""One rank's operators over the analysis window, as slots x iterations matrices.

The search needs, for a rank it reached: the instance of a given operator (by ``comm`` and
``seq``), the operators that rank ran before it in the same iteration, and whether each was
abnormal. Records are laid out as a matrix: a *slot* is the k-th operator of one channel in an
iteration, a channel being (communicator, collective | send | recv, peer); a column is one
iteration of the window. The same slot in other iterations is the same operator of the
training step, which gives each operator its own baseline (the median over healthy iterations)
without any model of the job.

Why slots and not a dict keyed by ``(comm, seq)``: a rank holds ~10^5 operator instances over a
100-iteration window; numpy matrices build in milliseconds where a dict of that size costs a
second per rank.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sleuth.errors import ConfigError
from sleuth.records import OpKind, RecordBatch

from sleuth.localizer.graph import OperatorGraph
from sleuth.localizer.rules import LOCALIZER_RULES
from sleuth.validation import checked, non_negative_number
from sleuth.whatif.keys import unique_rows

__all__ = [
    "COLLECTIVE", "RECV", "SEND", "RankOperators", "Thresholds", "Window", "baseline", "make_window", "rank_operators",
    "rebase",
]

#: Channel classes: collectives share one seq counter per communicator; P2P count per direction.
COLLECTIVE, SEND, RECV = 0, 1, 2


@dataclass(frozen=True, kw_only=True)
class Thresholds:
    """When a duration (or a blocking or transfer time) counts as abnormal.

    Abnormal: more than ``max(spread_k x spread, relative x baseline, floor_ns)`` above the
    baseline, where the baseline is the median over the window's healthy iterations and the
    spread is their scaled median absolute deviation (robust to the faulty iterations).
    """

    #: Robust spreads over the baseline: every slot of every rank read is a test of its own, so the bar
    #: sits well past one test's 3, where a healthy slot's jitter does not reach.
    spread_k: float = 5.0
    #: Share of the baseline: a slot whose healthy lengths barely vary would otherwise call a delay of a
    #: few percent of one operator abnormal, far too little to make an iteration δ-irregular.
    relative: float = 0.25
    #: Nanoseconds: below 20 µs a delay is launch and timer jitter, lost in an iteration of milliseconds.
    floor_ns: float = 20_000.0

    def __post_init__(self) -> None:
        checked(self, prefix="thresholds.", spread_k=non_negative_number, relative=non_negative_number,
                floor_ns=non_negative_number)

    def limit(self, base: np.ndarray | float, spread: np.ndarray | float) -> np.ndarray | float:
        return np.maximum(np.maximum(self.spread_k * spread, self.relative * base), self.floor_ns)


@dataclass(frozen=True)
class Window:
    """The iterations analysed: ids ascending, which are irregular, which are healthy references."""

    iterations: np.ndarray
    irregular: np.ndarray
    reference: np.ndarray

    def column(self, iteration: int) -> int:
        col = int(np.searchsorted(self.iterations, iteration))
        if col >= len(self.iterations) or self.iterations[col] != iteration:
            raise ConfigError(f"iteration {iteration} is not in the analysis window")
        return col

    def __len__(self) -> int:
        return len(self.iterations)


def make_window(available: np.ndarray, irregular: Sequence[int], *, size: int,
                min_reference: int = LOCALIZER_RULES.min_reference) -> Window:
    """The ``size`` iterations around ``irregular`` (all of which must be ``available``).

    The window starts up to half its size before the first irregular iteration. Reference
    (healthy) iterations are the regular ones before the first irregular iteration that has at
    least ``min_reference`` of them before it; when none has, every iteration not irregular. Why
    not simply "not irregular": a persistent fault stops being δ-irregular once the window mean
    catches up, and those slow iterations would make the fault look normal. Why not "before the
    first irregular one": a lone hiccup in the first few iterations leaves too few before it,
    and the fallback would then take a later fault's caught-up iterations as healthy.
    """
    available = np.unique(np.asarray(available, dtype=np.int64))
    wanted = np.unique(np.asarray(list(irregular), dtype=np.int64))
    if not len(wanted):
        raise ConfigError("no irregular iterations to localize")
    missing = wanted[~np.isin(wanted, available)]
    if len(missing):
        raise ConfigError(f"irregular iteration {int(missing[0])} is not among the source's iterations")
    first = int(np.searchsorted(available, wanted[0]))
    last = int(np.searchsorted(available, wanted[-1]))
    start = max(0, first - size // 2)
    end = min(len(available), max(start + size, last + 1))
    start = max(0, min(start, end - size))
    ids = available[start:end]
    irregular_mask = np.isin(ids, wanted)
    regular = ~irregular_mask
    reference = regular
    for col in np.flatnonzero(irregular_mask):
        if regular[:col].sum() >= min_reference:
            reference = regular & (np.arange(len(ids)) < col)
            break
    return Window(ids, irregular_mask, reference)


def rebase(
    window: Window, irregular: Sequence[int], *, reference_from: int, reference_to: int, min_reference: int = 5
) -> Window | None:
    """The same iterations with other irregular ones, and as reference the columns
    ``reference_from`` to ``reference_to - 1`` (a level the iteration time held before a step,
    so that what a first fault slowed counts as normal there); None with too few references."""
    columns = np.arange(len(window))
    irregular_mask = np.isin(window.iterations, np.asarray(list(irregular), dtype=np.int64))
    reference = (columns >= reference_from) & (columns < reference_to) & ~irregular_mask
    if not irregular_mask.any() or reference.sum() < min_reference:
        return None
    return Window(window.iterations, irregular_mask, reference)


@dataclass(frozen=True, eq=False)
class RankOperators:
    """A rank's operators in the window: per slot, per column start/end/seq and abnormality."""

    rank: int
    slot_comm: np.ndarray  # group index in the graph
    slot_class: np.ndarray  # COLLECTIVE, SEND, RECV
    slot_peer: np.ndarray  # peer rank (P2P) or -1
    slot_op: np.ndarray  # OpKind value
    start: np.ndarray  # (slots, columns) int64; meaningless where not present
    end: np.ndarray
    seq: np.ndarray
    present: np.ndarray
    abnormal: np.ndarray
    base: np.ndarray  # baseline duration of each slot (ns)
    spread: np.ndarray
    gap: np.ndarray  # (slots, columns) compute time before each operator: start - latest earlier end
    gap_base: np.ndarray  # baseline of each slot's gap
    channels: dict[tuple[int, int, int], np.ndarray]

    @property
    def n_slots(self) -> int:
        return len(self.slot_comm)

    def duration(self, row: int, col: int) -> float:
        return float(self.end[row, col] - self.start[row, col])

    def excess(self, row: int, col: int) -> float:
        return self.duration(row, col) - float(self.base[row])

    def find(self, comm: int, cls: int, peer: int, seq: int, col: int) -> int:
        """The slot holding instance ``seq`` of the channel in column ``col``; -1 when absent."""
        rows = self.channels.get((comm, cls, peer))
        if rows is None:
            return -1
        hit = rows[(self.seq[rows, col] == seq) & self.present[rows, col]]
        return int(hit[0]) if len(hit) else -1

    def restricted(self, comm: int) -> "RankOperators":
        """The slots of communicator ``comm`` alone, in the order a layout of that communicator's
        records alone would give them (``rank_operators(complete=False)``), gaps unknown (NaN):
        what is between two of them was spent on the rank's other operators too."""
        rows = np.flatnonzero(self.slot_comm == comm)
        unknown = np.full((len(rows), self.start.shape[1]), np.nan)
        return RankOperators(
            rank=self.rank,
            slot_comm=self.slot_comm[rows],
            slot_class=self.slot_class[rows],
            slot_peer=self.slot_peer[rows],
            slot_op=self.slot_op[rows],
            start=self.start[rows],
            end=self.end[rows],
            seq=self.seq[rows],
            present=self.present[rows],
            abnormal=self.abnormal[rows],
            base=self.base[rows],
            spread=self.spread[rows],
            gap=unknown,
            gap_base=np.full(len(rows), np.nan),
            channels={key: np.searchsorted(rows, held) for key, held in self.channels.items() if key[0] == comm},
        )

    def before(self, row: int, col: int) -> np.ndarray:
        """Slots this rank started before slot ``row`` in column ``col``, latest first."""
        starts = self.start[:, col]
        earlier = np.flatnonzero(self.present[:, col] & (starts < starts[row]))
        return earlier[np.argsort(-starts[earlier], kind="stable")]


def rank_operators(
    graph: OperatorGraph,
    rank: int,
    records: RecordBatch,
    window: Window,
    *,
    thresholds: Thresholds,
    abnormal: np.ndarray | None = None,
    complete: bool = True,
) -> RankOperators:
    """Lay out one rank's records (already filtered to that rank) over the window's columns.

    ``abnormal`` (aligned with ``records``) comes from a detector; without it an instance is
    abnormal when its duration exceeds its slot baseline by more than ``thresholds`` allow.
    Records on communicators the spec does not know are left out (they cannot be followed).
    ``complete=False``: the records are some communicators' only, so the time between two
    operators is not known to be compute: gaps are NaN (``RankOperators.restricted``).
    """
    comm = graph.record_groups(records)
    col = np.searchsorted(window.iterations, records["iteration"])
    col_ok = col < len(window)
    col_ok[col_ok] = window.iterations[col[col_ok]] == records["iteration"][col_ok]
    keep = (comm >= 0) & col_ok
    op = records["op"][keep]
    comm, col = comm[keep], col[keep]
    seq = records["seq"][keep].astype(np.int64)
    start = records["t_start_ns"][keep]
    end = records["t_end_ns"][keep]
    flags = None if abnormal is None else np.asarray(abnormal, dtype=bool)[keep]
    cls = np.where(op == OpKind.SEND, SEND, np.where(op == OpKind.RECV, RECV, COLLECTIVE)).astype(np.int64)
    peer = np.where(cls == COLLECTIVE, -1, records["peer"][keep].astype(np.int64))

    # Channel of each record, then its offset among the channel's records of the same iteration.
    channel_keys, channel = unique_rows(comm, cls, peer)
    order = np.lexsort((seq, channel, col))
    group_key = col[order] * (len(channel_keys) + 1) + channel[order]
    new_group = np.ones(len(order), dtype=bool)
    new_group[1:] = group_key[1:] != group_key[:-1]
    first = np.maximum.accumulate(np.where(new_group, np.arange(len(order)), 0))
    offset = np.empty(len(order), dtype=np.int64)
    offset[order] = np.arange(len(order)) - first
    slot_keys, slot = unique_rows(channel, offset)
    n_slots, n_cols = len(slot_keys), len(window)

    def matrix(values: np.ndarray, fill: int) -> np.ndarray:
        out = np.full((n_slots, n_cols), fill, dtype=np.int64)
        out[slot, col] = values
        return out

    present = np.zeros((n_slots, n_cols), dtype=bool)
    present[slot, col] = True
    start_m, end_m, seq_m = matrix(start, 0), matrix(end, 0), matrix(seq, -1)
    slot_channel = slot_keys[:, 0] if n_slots else np.empty(0, np.int64)
    first_of_slot = np.zeros(n_slots, dtype=np.int64)
    first_of_slot[slot] = np.arange(len(slot))
    duration = np.where(present, end_m - start_m, 0).astype(np.float64)
    base, spread = baseline(duration, present, window.reference)
    if complete:
        gap = _gaps(start_m, end_m, present, np.r_[False, np.diff(window.iterations) == 1])
        gap_base, _ = baseline(gap, present, window.reference)
    else:
        gap, gap_base = np.full((n_slots, n_cols), np.nan), np.full(n_slots, np.nan)
    if flags is not None:
        abnormal_m = np.zeros((n_slots, n_cols), dtype=bool)
        abnormal_m[slot, col] = flags
    else:
        abnormal_m = present & (duration - base[:, None] > thresholds.limit(base, spread)[:, None])
    channels = {
        tuple(int(v) for v in channel_keys[c]): np.flatnonzero(slot_channel == c) for c in range(len(channel_keys))
    }
    return RankOperators(
        rank=int(rank),
        slot_comm=channel_keys[slot_channel, 0] if n_slots else np.empty(0, np.int64),
        slot_class=channel_keys[slot_channel, 1] if n_slots else np.empty(0, np.int64),
        slot_peer=channel_keys[slot_channel, 2] if n_slots else np.empty(0, np.int64),
        slot_op=op[first_of_slot] if n_slots else np.empty(0, np.uint8),
        start=start_m,
        end=end_m,
        seq=seq_m,
        present=present,
        abnormal=abnormal_m,
        base=base,
        spread=spread,
        gap=gap,
        gap_base=gap_base,
        channels=channels,
    )


def _gaps(start: np.ndarray, end: np.ndarray, present: np.ndarray, follows: np.ndarray) -> np.ndarray:
    """Per operator, the time the rank spent outside communication just before it (ns, >= 0).
    An iteration's first operator follows the rank's latest end in the column before where that
    column is the iteration before (``follows``): what a data-parallel rank computes (the forward
    pass, the backward up to its first bucket) lies there; else nothing is known before it (0)."""
    gap = np.zeros(start.shape, dtype=np.float64)
    latest: int | None = None  # the rank's latest end in the column before
    for col in range(start.shape[1]):
        rows = np.flatnonzero(present[:, col])
        if not len(rows):
            latest = None
            continue
        order = rows[np.argsort(start[rows, col], kind="stable")]
        ends = np.maximum.accumulate(end[order, col])
        first = latest if latest is not None and follows[col] else start[order[0], col]
        previous = np.concatenate(([first], ends[:-1]))
        gap[order, col] = np.maximum(start[order, col] - previous, 0)
        latest = int(ends[-1])
    return gap


def baseline(values: np.ndarray, present: np.ndarray, reference: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Median and scaled MAD of each row over the reference columns where a value is present.

    A row with no reference value falls back to all its present values (an operator seen only
    in irregular iterations), and to 0 when it has none.
    """
    if not values.shape[0]:
        return np.empty(0), np.empty(0)
    masked = np.where(present & reference[None, :], values, np.nan)
    missing = np.all(np.isnan(masked), axis=1)
    if missing.any():
        masked[missing] = np.where(present[missing], values[missing], np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: handled just below
        base = np.nanmedian(masked, axis=1)
        spread = 1.4826 * np.nanmedian(np.abs(masked - base[:, None]), axis=1)
    return np.nan_to_num(base), np.nan_to_num(spread)
