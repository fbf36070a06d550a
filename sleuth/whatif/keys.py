"""Vectorised keys and per-group statistics over record arrays (no loops over records)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

try:  # the compiled split (sleuth/whatif/_levels.c); the numpy one below is its reference
    from sleuth.whatif import _levels
except ImportError as error:  # not built on this machine: numpy splits, several times slower
    _levels = None  # type: ignore[assignment]
    logging.getLogger(__name__).warning("the what-if's compiled level split is not built (%s): numpy splits, "
                                        "several times slower; reinstall sleuth with a C compiler", error)
try:  # the compiled per-group statistics (sleuth/whatif/_groups.c); numpy's below are their reference
    from sleuth.whatif import _groups
except ImportError as error:  # not built on this machine: numpy sorts, several times slower
    _groups = None  # type: ignore[assignment]
    logging.getLogger(__name__).warning("the what-if's compiled group statistics are not built (%s): numpy sorts, "
                                        "several times slower; reinstall sleuth with a C compiler", error)

__all__ = ["dense_ids", "first_of_each", "group_median", "group_spread", "keyed_spread", "lexical_order", "lower_level",
           "mix", "packed_key", "places_in_runs", "ranges", "row_spread", "unique_rows", "unique_small"]


def dense_ids(*keys: np.ndarray) -> np.ndarray:
    """Dense id of each element's combination of ``keys`` (equal keys, equal id): a lexsort and a
    diff, several times faster than ``np.unique(axis=1)``, which sorts structured rows."""
    bounds = _bounds(keys)
    table = _table_key(keys, bounds)
    if table is not None:
        # Keys spanning few combinations: count them in a table instead of sorting; the same ids.
        key, size = table
        present = np.zeros(size, bool)
        present[key] = True
        return (np.cumsum(present) - 1)[key]
    packed = packed_key(keys, bounds)
    if packed is not None:
        # One argsort of one key costs a third of a lexsort over several; the ids are the same.
        # Stable (timsort): records come in runs (by rank, in program order), which it merges.
        order = np.argsort(packed, kind="stable")
        ordered = packed[order]
        ids = np.empty(len(order), np.int64)
        ids[order] = np.cumsum(np.r_[False, ordered[1:] != ordered[:-1]])
        return ids
    order = np.lexsort(keys[::-1])
    change = np.zeros(len(order), bool)
    for key in keys:
        sorted_key = key[order]
        change[1:] |= sorted_key[1:] != sorted_key[:-1]
    ids = np.empty(len(order), np.int64)
    ids[order] = np.cumsum(change)
    return ids


def places_in_runs(starts: np.ndarray) -> np.ndarray:
    """Each element's place (0, 1, ...) in its run, where runs begin at ``starts`` (a bool array
    whose first element begins the first run): an operator's ordinal among its group's, sorted."""
    index = np.arange(len(starts))
    return index - np.maximum.accumulate(np.where(starts, index, 0))


def ranges(starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """The indices of every range [start, stop), one range after another."""
    counts = np.asarray(stops, np.int64) - starts
    return np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))


def lexical_order(keys: tuple[np.ndarray, ...]) -> np.ndarray:
    """``np.lexsort(keys[::-1])`` (the first key most significant): one stable argsort of the keys
    packed into one int64 where they fit, which merges the runs records come in instead of
    sorting each key in turn."""
    packed = packed_key(keys)
    if packed is None:
        return np.lexsort(keys[::-1])
    return np.argsort(packed, kind="stable")


def unique_small(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` of integers spanning a short range (a window's
    iterations): a table over the range, no sort."""
    if not len(values):
        return np.unique(values, return_inverse=True)
    low, high = int(values.min()), int(values.max())
    if values.dtype.kind not in "iu" or high - low > len(values):
        return np.unique(values, return_inverse=True)
    offset = (values - low).astype(np.intp)
    present = np.zeros(high - low + 1, bool)
    present[offset] = True
    dense = np.cumsum(present) - 1
    return (np.flatnonzero(present) + low).astype(values.dtype), dense[offset].astype(np.intp)


def unique_rows(*keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(np.stack(keys, axis=1), axis=0, return_inverse=True)``: each combination of
    ``keys`` once, in lexicographic order, and each element's row among them, from one sort of their
    packed key where they fit (numpy's row-wise unique sorts structured rows, many times slower)."""
    packed = packed_key(keys)
    if packed is None:
        rows, inverse = np.unique(np.stack(keys, axis=1), axis=0, return_inverse=True)
        return rows, inverse.reshape(-1)
    _, first, inverse = np.unique(packed, return_index=True, return_inverse=True)
    return np.stack([key[first] for key in keys], axis=1), inverse.reshape(-1)


def first_of_each(*keys: np.ndarray) -> np.ndarray:
    """Whether each element is the first of its combination of ``keys`` (what
    ``np.unique(dense_ids(*keys), return_index=True)`` picks), from one stable sort."""
    packed = packed_key(keys)
    first = np.zeros(len(keys[0]) if keys else 0, bool)
    if packed is None:
        first[np.unique(dense_ids(*keys), return_index=True)[1]] = True
        return first
    order = np.argsort(packed, kind="stable")  # ties keep their order: each run opens with its first
    ordered = packed[order]
    first[order[np.r_[True, ordered[1:] != ordered[:-1]]]] = True
    return first


def _bounds(keys: tuple[np.ndarray, ...]) -> list[tuple[int, int]] | None:
    """Each of the integer ``keys``' (least, greatest), read once for the packings below; None where
    there are none, one is not integers or an unsigned one reaches 2**62."""
    if not keys or not len(keys[0]) or any(k.dtype.kind not in "iub" for k in keys):
        return None
    bounds = [(int(k.min()), int(k.max())) for k in keys]
    if any(k.dtype.kind == "u" and high >= 1 << 62 for k, (_, high) in zip(keys, bounds)):
        return None
    return bounds


def _table_key(keys: tuple[np.ndarray, ...],
               bounds: list[tuple[int, int]] | None) -> tuple[np.ndarray, int] | None:
    """The integer ``keys`` (their ``_bounds``) as one mixed-radix int64 sorting as they do, with the
    number of combinations it spans, or None when that is over twice the elements (a table would
    cost more than a sort) or the keys are not integers."""
    if bounds is None:
        return None
    n = len(keys[0])
    lows = [low for low, _ in bounds]
    spans = [high - low + 1 for low, high in bounds]
    size = 1
    for span in spans:
        size *= span
        if size > 2 * n + 1024:
            return None
    key = np.zeros(n, np.int64)
    for k, low, span in zip(keys, lows, spans):
        key *= span
        key += k.astype(np.int64) - low
    return key, size


def packed_key(keys: tuple[np.ndarray, ...], bounds: list[tuple[int, int]] | None = None) -> np.ndarray | None:
    """The integer ``keys`` as one int64 sorting as they do (the first most significant), or None
    when they are not integers or their ranges need more than 62 bits together. ``bounds``: their
    ``_bounds`` where already read."""
    if bounds is None:
        bounds = _bounds(keys)
        if bounds is None:
            return None
    lows = [low for low, _ in bounds]
    widths = [(high - low).bit_length() for low, high in bounds]
    if sum(widths) > 62:
        return None
    packed = np.zeros(len(keys[0]), np.int64)
    for key, low, width in zip(keys, lows, widths):
        packed <<= width
        packed |= key.astype(np.int64) - low
    return packed


def mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: spreads each key over 64 bits so that sums of keys rarely collide."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def _sorted_groups(group: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``order`` sorting by (group, value), each group's first position in it, its size, and the sorted values."""
    # One sort on (group, rank of the value): quicker than a two-key lexsort over millions.
    rank = np.empty(len(values), np.int64)
    rank[np.argsort(values)] = np.arange(len(values))
    order = np.argsort(group.astype(np.int64) * len(values) + rank)
    g = group[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    counts = np.diff(np.r_[starts, len(g)])
    return order, starts, counts, values[order]


def group_median(group: np.ndarray, values: np.ndarray, *, size: int | None = None) -> np.ndarray:
    """The median of ``values`` per group: per element when ``size`` is None, else per group id (NaN if empty)."""
    if not len(group):
        return np.empty(0) if size is None else np.full(size, np.nan)
    order, starts, counts, v = _sorted_groups(group, values)
    median = (v[starts + (counts - 1) // 2] + v[starts + counts // 2]) / 2
    if size is None:
        out = np.empty(len(group))
        out[order] = np.repeat(median, counts)
        return out
    out = np.full(size, np.nan)
    out[group[order][starts]] = median
    return out


def group_spread(group: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per element, its group's median and robust standard deviation (interquartile range / 1.349,
    the normal's), compiled where built (``_groups``), else from one numpy sort."""
    if not len(group):
        return np.empty(0), np.empty(0)
    groups = int(group.max()) + 1
    # What the compiled one takes: ids no more than the values (its count table is that size), no NaN (its sort).
    if _groups is not None and group.dtype.kind in "iu" and int(group.min()) >= 0 and groups <= len(group) \
            and not np.isnan(values).any():
        out_median, out_spread = np.empty(len(group)), np.empty(len(group))
        _groups.spread(len(group), groups, np.ascontiguousarray(group, np.int64),
                       np.ascontiguousarray(values, np.float64), out_median, out_spread)
        return out_median, out_spread
    return _group_spread(group, values)


def _group_spread(group: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``group_spread`` in numpy: the reference the compiled one follows, and its stand-in where not built."""
    order, starts, counts, v = _sorted_groups(group, values)
    median = (v[starts + (counts - 1) // 2] + v[starts + counts // 2]) / 2
    spread = (v[starts + (3 * (counts - 1)) // 4] - v[starts + (counts - 1) // 4]) / 1.349
    out_median, out_spread = np.empty(len(group)), np.empty(len(group))
    out_median[order] = np.repeat(median, counts)
    out_spread[order] = np.repeat(spread, counts)
    return out_median, out_spread


def keyed_spread(keys: np.ndarray, values: np.ndarray, earlier: Sequence[tuple[np.ndarray, np.ndarray]],
                 batch: np.ndarray, *, step: tuple[float, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``group_spread`` of ``values`` grouped by ``keys``, each group joined by the ``earlier``
    batches' values of the same key, for ``values`` only; ``batch`` numbers the batch (from 0) each
    of ``values`` belongs to. A key is expected at most once per batch, and values are finite (an
    empty cell of the table below is a NaN).

    One row per key of ``values`` and one column per batch: the earlier batches are looked up in
    the keys, not sorted together with them, so a streaming window's history costs a search per
    round instead of a sort of all of it (faster still when each earlier batch's keys ascend).
    Where a key repeats within a batch: ``group_spread`` of everything concatenated, the same statistics.

    ``step`` (k, least): a key whose values, in batch order, step between two levels (``lower_level``)
    gets its lower level's median and the jitter around its levels instead (not where a key repeats:
    its values have no one order)."""
    if not len(keys):
        return np.empty(0), np.empty(0)
    key_of_row, row, repeated = _key_rows(keys, batch)
    rows = len(key_of_row)
    found_rows: list[np.ndarray] = []
    found_values: list[np.ndarray] = []
    for batch_keys, batch_values in earlier:
        if np.array_equal(batch_keys, key_of_row):  # the same keys, ascending: each is its own row's
            found_rows.append(np.arange(rows))
            found_values.append(batch_values)
            continue
        at = np.minimum(np.searchsorted(key_of_row, batch_keys), rows - 1)
        found = key_of_row[at] == batch_keys
        found_rows.append(at[found])
        found_values.append(batch_values[found])
    repeated = repeated or any(np.bincount(at, minlength=rows).max(initial=0) > 1 for at in found_rows)
    if repeated:
        joined = group_spread(dense_ids(np.concatenate([*(k for k, _ in earlier), keys])),
                              np.concatenate([*(v for _, v in earlier), values]))
        return joined[0][-len(keys):], joined[1][-len(keys):]
    now = int(batch.max()) + 1
    table = np.full((rows, len(earlier) + now), np.nan)
    table[row, len(earlier) + batch] = values
    for column, (at, column_values) in enumerate(zip(found_rows, found_values)):
        table[at, column] = column_values
    if step is not None:
        level, jitter, stepped = lower_level(table, *step)
    median, spread = row_spread(table)
    if step is not None:
        median, spread = np.where(stepped, level, median), np.where(stepped, jitter, spread)
    return median[row], spread[row]


def _key_rows(keys: np.ndarray, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """``np.unique(keys, return_inverse=True)``, and whether a key repeats within a batch. From the
    first batch alone where the batches come one after another and each holds the same keys in the
    same order (a job's operators, iteration after iteration): their keys are the first one's, and
    so are their rows and repeats."""
    now = int(batch.max()) + 1
    size = len(keys) // now
    if now > 1 and size * now == len(keys) and np.array_equal(batch, np.repeat(np.arange(now), size)) \
            and (keys.reshape(now, size) == keys[:size]).all():
        key_of_row, row = np.unique(keys[:size], return_inverse=True)
        return key_of_row, np.tile(row, now), len(key_of_row) < size
    key_of_row, row = np.unique(keys, return_inverse=True)
    return key_of_row, row, bool(np.bincount(row * now + batch, minlength=len(key_of_row) * now).max() > 1)


def row_spread(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's median and robust standard deviation, as ``group_spread``'s (NaN: no value);
    compiled where built (``_levels``: a row is sorted alone, not the whole table)."""
    if _levels is None or not table.size:
        return _row_spread(table)
    rows, width = table.shape
    median, spread = np.empty(rows), np.empty(rows)
    _levels.row_spread(rows, width, np.ascontiguousarray(table, np.float64), median, spread)
    return median, spread


def _row_spread(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``row_spread`` in numpy: the reference the compiled one follows, and its stand-in where not built."""
    table = np.sort(table, axis=1)  # NaN sorts last
    counts = np.maximum((~np.isnan(table)).sum(axis=1), 1)

    def at_rank(index: np.ndarray) -> np.ndarray:
        return np.take_along_axis(table, index[:, None], axis=1)[:, 0]

    median = (at_rank((counts - 1) // 2) + at_rank(counts // 2)) / 2
    spread = (at_rank((3 * (counts - 1)) // 4) - at_rank((counts - 1) // 4)) / 1.349
    return median, spread


def lower_level(table: np.ndarray, k: float, least: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of ``table`` (values in time order, NaN where none): the median of its lower level, the
    robust standard deviation of its values around their own level's median, and whether the row
    steps, for rows whose values sit at one level, then at another.

    The split is Pettitt's (the rank-sum change point, blind to the values' scale and to a few
    outliers), its statistic standardized, with at least ``least`` values each side, then moved to
    where the values cross midway between the two sides' medians; the row steps where its two levels'
    medians lie more than ``k`` of each level's own deviation apart. A steady row does not: the
    deviation is its jitter, and chance moves the medians of a split by a fraction of it. Nor does
    a steady drift D: split in the middle, its levels' medians lie D/2 apart and its values lie
    evenly within D/4 of them, a deviation of D/4/1.349 of which 3 exceed D/2. Nor do a few
    scattered values at one end: their own deviation is as wide as they are."""
    if _levels is None or not table.size:
        return _lower_level(table, k, least)
    rows, width = table.shape
    level, jitter, stepped = np.empty(rows), np.empty(rows), np.empty(rows, np.uint8)
    _levels.lower_level(rows, width, float(k), int(least), np.ascontiguousarray(table, np.float64), level, jitter,
                        stepped)
    return level, jitter, stepped.view(bool)


def _lower_level(table: np.ndarray, k: float, least: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``lower_level`` in numpy: the reference the compiled one follows, and its stand-in where not built."""
    rows, width = table.shape
    valid = ~np.isnan(table)
    counts = valid.sum(axis=1)
    # Each row's values first, in time order; their ranks from 1 (NaN sorts last, past them).
    series = np.take_along_axis(table, np.argsort(~valid, axis=1, kind="stable"), axis=1)
    place = np.arange(width)[None, :]
    inside = place < counts[:, None]
    ranks = np.where(inside, np.argsort(np.argsort(series, axis=1, kind="stable"), axis=1) + 1, 0)
    # Pettitt's statistic of a split after the first t values: 2 x their rank sum - t (n + 1), over
    # its spread where nothing changes (sqrt(t (n - t)) up to a constant): raw, a step near either
    # end loses to splits past it that the later values' ranks walk higher by chance.
    t = place + 1
    pettitt = np.abs(2 * np.cumsum(ranks, axis=1) - t * (counts[:, None] + 1))
    allowed = (t >= least) & (t <= counts[:, None] - least)
    spread = t * (counts[:, None] - t)  # 0 at t = n, where the statistic is 0 too
    standardized = np.where(spread > 0, pettitt / np.sqrt(np.maximum(spread, 1)), 0.0)
    split = np.argmax(np.where(allowed, standardized, -1), axis=1) + 1
    before = place < split[:, None]
    first, _ = _row_spread(np.where(before & inside, series, np.nan))
    then, _ = _row_spread(np.where(~before & inside, series, np.nan))
    # Moved to where the values cross midway between the two levels: the statistic's peak can run
    # past a step into the second level, a value's side of the midway cannot.
    up, above = first < then, series > ((first + then) / 2)[:, None]
    wrong_before = np.where(up[:, None], above, ~above) & inside
    wrong_after = np.where(up[:, None], ~above, above) & inside
    cost = np.cumsum(wrong_before, axis=1) + wrong_after.sum(axis=1)[:, None] - np.cumsum(wrong_after, axis=1)
    refined = np.argmin(np.where(allowed, cost, width + 1), axis=1) + 1
    moves = allowed.any(axis=1) & (first != then) & ~np.isnan(first) & ~np.isnan(then)
    split = np.where(moves, refined, split)
    before = place < split[:, None]
    first, _ = _row_spread(np.where(before & inside, series, np.nan))
    then, _ = _row_spread(np.where(~before & inside, series, np.nan))
    residual = series - np.where(before, first[:, None], then[:, None])
    _, jitter = _row_spread(np.where(inside, residual, np.nan))
    # Each level's own jitter: a step is a change beyond both (a few scattered values at one end are no level).
    _, jitter_before = _row_spread(np.where(before & inside, residual, np.nan))
    _, jitter_then = _row_spread(np.where(~before & inside, residual, np.nan))
    stepped = allowed.any(axis=1) & (np.abs(then - first) > k * np.fmax(jitter_before, jitter_then))
    return np.minimum(first, then), jitter, stepped
