"""keyed_spread: a group's median and spread over the current batches and earlier ones, looked up by key."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sleuth.whatif import _groups, _levels, keys
from sleuth.whatif.keys import (_group_spread, _lower_level, _row_spread, dense_ids, group_spread, keyed_spread, lower_level,
                               ranges, row_spread)


def concatenated(keys, values, earlier):
    """The reference: group_spread of everything, earlier batches first; the current values' part."""
    median, spread = group_spread(dense_ids(np.concatenate([*(k for k, _ in earlier), keys])),
                                  np.concatenate([*(v for _, v in earlier), values]))
    return median[-len(keys):], spread[-len(keys):]


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_it_gives_the_statistics_of_every_batch_concatenated(data: st.DataObject) -> None:
    universe = np.array(data.draw(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=30, unique=True)), np.uint64)
    pick = lambda unique: np.array(data.draw(st.lists(st.sampled_from(universe.tolist()), min_size=1, max_size=30,  # noqa: E731
                                                       unique=unique)), np.uint64)
    # Earlier batches may repeat a key (then it falls back to the concatenation); current ones do not.
    earlier = [(k, np.array(data.draw(st.lists(st.floats(0, 100), min_size=len(k), max_size=len(k)))))
               for k in (pick(data.draw(st.booleans())) for _ in range(data.draw(st.integers(0, 5))))]
    current = [pick(True) for _ in range(data.draw(st.integers(1, 3)))]
    keys = np.concatenate(current)
    batch = np.repeat(np.arange(len(current)), [len(k) for k in current])
    values = np.array(data.draw(st.lists(st.floats(0, 100), min_size=len(keys), max_size=len(keys))))
    median, spread = keyed_spread(keys, values, earlier, batch)
    expected = concatenated(keys, values, earlier)
    assert np.array_equal(median, expected[0]) and np.array_equal(spread, expected[1])


def test_a_key_twice_in_one_current_batch_still_counts_both_values() -> None:
    keys = np.array([7, 7, 9], np.uint64)
    values = np.array([1.0, 5.0, 2.0])
    earlier = [(np.array([7, 9], np.uint64), np.array([3.0, 4.0]))]
    median, spread = keyed_spread(keys, values, earlier, np.zeros(3, np.int64))
    assert median.tolist() == [3.0, 3.0, 3.0] and np.array_equal(spread, concatenated(keys, values, earlier)[1])


def test_keys_only_earlier_batches_show_do_not_matter() -> None:
    keys = np.array([1, 2], np.uint64)
    median, _ = keyed_spread(keys, np.array([10.0, 20.0]), [(np.array([2, 3], np.uint64), np.array([30.0, 99.0]))],
                             np.zeros(2, np.int64))
    assert median.tolist() == [10.0, 25.0]


def test_a_history_stepping_up_for_most_of_the_run_keeps_its_level_before_the_step() -> None:
    rng = np.random.default_rng(0)
    values = np.exp(0.05 * rng.standard_normal(100)) * np.where(np.arange(100) >= 20, 4.0, 1.0)
    keys = np.zeros(100, np.uint64)
    median, _ = keyed_spread(keys, values, [], np.arange(100))
    level, jitter = keyed_spread(keys, values, [], np.arange(100), step=(3.0, 4))
    assert median[0] > 3.5 and abs(level[0] - 1.0) < 0.05 and jitter[0] < 0.5


def test_a_step_after_a_few_steady_values_is_split_where_it_steps() -> None:
    # A switch slowed from the 16th of 95 iterations (the network suite's slowed spine, its transfers
    # about 4x longer and noisier): the raw rank-sum statistic peaks up to 27 values past the step,
    # where the later values' ranks walk it, and the level before took in the slow ones.
    rng = np.random.default_rng(4)
    table = np.where(np.arange(95) < 15, rng.normal(178, 9, (200, 95)), rng.normal(680, 30, (200, 95)))
    level, _, stepped = lower_level(table, 3.0, 4)
    assert stepped.all() and (np.abs(level - 178) < 15).all()


def test_a_few_scattered_values_at_one_end_are_no_step() -> None:
    # A loaded machine's all-reduce: 20 values of 10-42 ms, then 5 of which two are far below.
    row = np.array([[19.8, 28.0, 22.8, 10.5, 22.1, 35.3, 34.7, 25.7, 24.5, 18.5, 24.8, 41.7, 20.6, 21.0, 22.8, 21.9,
                     22.0, 25.0, 24.4, 42.0, 5.3, 40.5, 0.6, 28.5, 5.7]])
    assert not lower_level(row, 3.0, 4)[2].any()


def test_jitter_and_a_steady_drift_are_no_step() -> None:
    rng = np.random.default_rng(1)
    table = np.exp(0.05 * rng.standard_normal((2000, 100)))
    assert not lower_level(table, 3.0, 4)[2].any()
    drift = 1.0 + np.linspace(0.0, 0.3, 100)[None, :] * (1.0 + 0.001 * rng.standard_normal((50, 100)))
    assert not lower_level(drift, 3.0, 4)[2].any()


def _drawn_table(data: st.DataObject, *, empty: float) -> tuple[np.ndarray, np.random.Generator]:
    """A table of up to 60 rows of up to 30 values, ties among them, up to ``empty`` of its cells NaN."""
    rows, width = data.draw(st.integers(1, 60)), data.draw(st.integers(1, 30))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    table = rng.normal(100, 5, (rows, width)).round(data.draw(st.integers(0, 2)))  # rounding makes ties
    table[rng.random((rows, width)) < data.draw(st.floats(0, empty))] = np.nan  # rows short of values, or empty
    return table, rng


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_the_compiled_split_gives_what_numpy_gives_to_the_bit(data: st.DataObject) -> None:
    table, rng = _drawn_table(data, empty=0.6)
    rows, width = table.shape
    stepping = rng.random(rows) < 0.3
    cut = rng.integers(0, width, rows)
    table[stepping] += np.where(np.arange(width)[None, :] >= cut[stepping, None], rng.normal(30, 20), 0.0)
    k, least = data.draw(st.sampled_from([0.5, 3.0, 6.0])), data.draw(st.integers(0, 6))
    for compiled, reference in zip(lower_level(table, k, least), _lower_level(table, k, least)):
        assert np.array_equal(compiled, reference, equal_nan=True)


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_the_compiled_row_statistics_give_what_numpy_gives_to_the_bit(data: st.DataObject) -> None:
    table, _ = _drawn_table(data, empty=1.0)
    for compiled, reference in zip(row_spread(table), _row_spread(table)):
        assert np.array_equal(compiled, reference, equal_nan=True)


def test_the_compiled_split_is_built() -> None:
    # pyproject marks it optional for users without a compiler; the project's own install builds it.
    assert keys._levels is _levels and callable(_levels.lower_level) and callable(_levels.row_spread)


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_the_compiled_group_statistics_give_what_numpy_gives_to_the_bit(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 3000))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    # Groups of one value to groups of thousands (a slot's peers), ids dense or with gaps.
    group = rng.integers(0, data.draw(st.integers(1, n)), n)
    values = rng.lognormal(3, 1, n).round(data.draw(st.integers(0, 2)))  # rounding makes ties
    for compiled, reference in zip(group_spread(group, values), _group_spread(group, values)):
        assert np.array_equal(compiled, reference)


def test_the_compiled_group_statistics_are_built_and_name_a_group_id_out_of_range() -> None:
    assert keys._groups is _groups and callable(_groups.spread)
    out = np.empty(2)
    with pytest.raises(ValueError, match="group id 5 outside"):
        _groups.spread(2, 3, np.array([0, 5]), np.array([1.0, 2.0]), out, out.copy())


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_the_packed_order_is_lexsorts_ties_and_all(data: st.DataObject) -> None:
    n = data.draw(st.integers(0, 300))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    # Narrow keys pack into one int64; a wide one (nanosecond clocks far apart) falls back to lexsort.
    high = data.draw(st.sampled_from([1, 3, 2**20, 2**40, 2**62]))
    columns = tuple(rng.integers(0, data.draw(st.sampled_from([2, 5, high])), n, dtype=np.int64) for _ in range(4))
    assert np.array_equal(keys.lexical_order(columns), np.lexsort(columns[::-1]))


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_the_short_range_unique_is_numpys(data: st.DataObject) -> None:
    dtype = data.draw(st.sampled_from([np.int64, np.int32, np.uint32]))
    low = data.draw(st.integers(0, 10**6))
    values = np.array(data.draw(st.lists(st.integers(low, low + data.draw(st.integers(0, 60))), max_size=50)), dtype)
    got, expected = keys.unique_small(values), np.unique(values, return_inverse=True)
    for a, b in zip(got, expected):
        assert np.array_equal(a, b) and a.dtype == b.dtype and a.shape == b.shape


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_the_unique_rows_are_numpys_row_wise_unique(data: st.DataObject) -> None:
    n = data.draw(st.integers(0, 300))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    # Negative keys (a collective's peer, -1) pack as well; a wide one falls back to numpy's rows.
    high = data.draw(st.sampled_from([1, 3, 2**20, 2**62]))
    columns = tuple(rng.integers(-1, data.draw(st.sampled_from([2, 5, high])), n, dtype=np.int64) for _ in range(3))
    rows, inverse = keys.unique_rows(*columns)
    expected_rows, expected_inverse = np.unique(np.stack(columns, axis=1), axis=0, return_inverse=True)
    assert np.array_equal(rows, expected_rows) and rows.dtype == expected_rows.dtype
    assert np.array_equal(inverse, expected_inverse.reshape(-1)) and inverse.shape == (n,)


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_the_first_of_each_combination_is_what_numpys_unique_picks(data: st.DataObject) -> None:
    n = data.draw(st.integers(0, 300))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    high = data.draw(st.sampled_from([2, 7, 2**40]))  # 2**40: too wide to pack, the unique path
    columns = [rng.integers(0, high, n, dtype=np.int64) for _ in range(2)]
    expected = np.zeros(n, bool)
    expected[np.unique(dense_ids(*columns), return_index=True)[1]] = True
    assert np.array_equal(keys.first_of_each(*columns), expected)


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_batches_of_the_same_keys_get_numpys_rows_from_the_first_alone(data: st.DataObject) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    # Keys from 4 values repeat within a batch; from 2**64 - 1 they do not.
    first = rng.integers(0, data.draw(st.sampled_from([4, 2**64 - 1])), data.draw(st.integers(2, 40)), dtype=np.uint64)
    batches = [first.copy() for _ in range(data.draw(st.integers(1, 4)))]
    if data.draw(st.booleans()):  # one batch differs: another key, or one key fewer
        other = batches[data.draw(st.integers(0, len(batches) - 1))]
        batches = [b if b is not other else (np.r_[other[:-1], np.uint64(7)] if data.draw(st.booleans()) else other[:-1])
                   for b in batches]
    keys_, batch = np.concatenate(batches), np.repeat(np.arange(len(batches)), [len(b) for b in batches])
    key_of_row, row, repeats = keys._key_rows(keys_, batch)
    for got, expected in zip((key_of_row, row), np.unique(keys_, return_inverse=True)):
        assert np.array_equal(got, expected) and got.dtype == expected.dtype
    assert repeats == any(len(np.unique(b)) < len(b) for b in batches)


def test_earlier_batches_of_the_same_keys_give_the_statistics_of_everything_concatenated() -> None:
    # The streaming case: every iteration runs the same operators, earlier ones' keys sorted.
    rng = np.random.default_rng(5)
    program = rng.integers(0, 2**64 - 1, 50, dtype=np.uint64)
    earlier = [(np.sort(program), rng.lognormal(3, 1, 50)) for _ in range(4)]
    keys_ = np.tile(program, 3)
    values = rng.lognormal(3, 1, len(keys_))
    batch = np.repeat(np.arange(3), 50)
    median, spread = keyed_spread(keys_, values, earlier, batch)
    expected = concatenated(keys_, values, earlier)
    assert np.array_equal(median, expected[0]) and np.array_equal(spread, expected[1])


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_dense_ids_from_a_table_are_those_of_the_sort(data: st.DataObject) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    n = data.draw(st.integers(1, 300))
    # Narrow ranges take the table, wide ones the sort; negative lows, bools and unsigned keys too.
    columns = [rng.integers(data.draw(st.integers(-5, 3)), data.draw(st.sampled_from([4, 9, 50, 2**40])), n)
               for _ in range(data.draw(st.integers(1, 4)))]
    if data.draw(st.booleans()):
        columns.append(rng.integers(0, 2, n).astype(bool))
    if data.draw(st.booleans()):
        columns.append(rng.integers(0, 7, n).astype(np.uint32))
    expected = np.unique(np.stack(columns, axis=1).astype(np.int64), axis=0, return_inverse=True)[1].reshape(-1)
    ids = dense_ids(*columns)
    assert ids.dtype == np.int64 and np.array_equal(ids, expected)
    table = keys._table_key(tuple(columns), keys._bounds(tuple(columns)))
    assert table is None or len(np.unique(ids)) == int(ids.max()) + 1


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(1, 6), max_size=20))
def test_an_element_s_place_in_its_run_counts_from_the_run_s_start(lengths: list[int]) -> None:
    starts = np.array([i == 0 for n in lengths for i in range(n)], bool)
    assert keys.places_in_runs(starts).tolist() == [i for n in lengths for i in range(n)]


def test_ranges_are_each_range_s_indices_one_after_another() -> None:
    assert ranges(np.array([2, 10, 5]), np.array([4, 13, 5])).tolist() == [2, 3, 10, 11, 12]
