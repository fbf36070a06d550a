"""The windows, kept sorted push by push, and their statistics are numpy's own bit for bit."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sleuth.stream.detection.features import _nan_mean_std, _sorted_quantile


def test_mean_and_std_are_nanmean_and_nanstd() -> None:
    rng = np.random.default_rng(5)
    ring = np.sort(rng.integers(1, 10**7, size=(5000, 20)).astype(np.float64), axis=1)
    n = rng.integers(1, 21, size=len(ring))
    n[:100] = 20  # full windows: no empty slot at all
    ring[np.arange(20) >= n[:, None]] = np.nan  # empty slots, which sort last
    mean, std = _nan_mean_std(ring, n)
    assert np.array_equal(mean, np.nanmean(ring, axis=1))
    assert np.array_equal(std, np.nanstd(ring, axis=1))


def test_full_windows_take_the_same_values_without_masks_or_gathers() -> None:
    rng = np.random.default_rng(6)
    ring = np.sort(rng.integers(1, 10**7, size=(3000, 20)).astype(np.float64), axis=1)
    n = np.full(len(ring), 20)
    mean, std = _nan_mean_std(ring, n)
    assert np.array_equal(mean, np.nanmean(ring, axis=1)) and np.array_equal(std, np.nanstd(ring, axis=1))
    mixed = np.r_[n, 19]  # one short window: the general path, row by row
    padded = np.vstack([ring, ring[:1]])
    for q in (0.25, 0.5, 0.75):
        assert np.array_equal(_sorted_quantile(ring, n, q), _sorted_quantile(padded, mixed, q)[:-1])


def test_sorted_groups_give_each_groups_quantiles_and_a_member() -> None:
    from sleuth.stream.detection.features import _SortedGroups

    rng = np.random.default_rng(7)
    rows = rng.integers(0, 40, 3000)
    values = rng.integers(0, 10**6, 3000).astype(np.float64)
    values[:5] = 0.5  # not integer-valued: the other sort
    groups = _SortedGroups(rows, values)
    distinct = np.unique(rows)
    assert np.array_equal(rows[groups.first], distinct) and np.array_equal(distinct[groups.group], rows)
    for q in (0.25, 0.5, 0.75):
        expected = [np.quantile(values[rows == r], q) for r in distinct]
        assert np.allclose(groups.quantile(q), expected, rtol=0, atol=1e-6)


def _empty_windows(identities: int, window: int):
    """Operator windows with ``identities`` rows, none pushed yet."""
    from sleuth.stream.detection.features import OperatorWindows

    windows = OperatorWindows(window=window, min_history=1)
    windows._ring, windows._transfer_ring = np.full((identities, window), np.nan), np.full((identities, window), np.nan)
    windows._born, windows._tborn = np.zeros((identities, window), np.uint16), np.zeros((identities, window), np.uint16)
    windows._filled, windows._tfilled = np.zeros(identities, np.int64), np.zeros(identities, np.int64)
    windows._stats = np.full((identities, 8), np.nan)
    return windows


def test_the_compiled_windows_are_built() -> None:
    # pyproject marks them optional for users without a compiler; the project's own install builds them.
    from sleuth.stream.detection import _window_stats, features

    assert features._window_stats is _window_stats and callable(_window_stats.push)


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_a_window_holds_its_last_values_sorted_and_the_compiled_statistics_are_numpys_to_the_bit(
        data: st.DataObject) -> None:
    import copy

    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    window = data.draw(st.sampled_from([2, 5, 8, 20, 33, 150]))
    identities, decimals = data.draw(st.integers(1, 40)), data.draw(st.integers(-4, 0))  # rounding makes ties
    compiled = _empty_windows(identities, window)
    reference = copy.deepcopy(compiled)
    history: list[list[float]] = [[] for _ in range(identities)]
    for _ in range(data.draw(st.integers(1, 3 * window + 2))):
        rows = np.sort(rng.permutation(identities)[:rng.integers(1, identities + 1)]).astype(np.int64)
        sign = rng.choice([-1.0, 0.0, 1.0], len(rows), p=[0.1, 0.1, 0.8])  # negatives and zeros among them
        values = rng.lognormal(10, 2, len(rows)).round(decimals) * sign
        transfers = np.where(rng.random(len(rows)) < 0.3, np.nan, values / 3)  # some not known
        compiled._append(rows, values, transfers)
        reference._numpy_append(rows, values, transfers)
        for r, v in zip(rows.tolist(), values.tolist()):
            history[r].append(v)
    for name in ("_ring", "_transfer_ring", "_filled", "_tfilled", "_stats"):
        assert np.array_equal(getattr(compiled, name), getattr(reference, name), equal_nan=True), name
    # Ties may hold their push marks in either order; each window holds the same marks.
    for name in ("_born", "_tborn"):
        assert np.array_equal(np.sort(getattr(compiled, name), axis=1), np.sort(getattr(reference, name), axis=1))
    for r, values in enumerate(history):
        kept = sorted(values[-window:])
        assert compiled._ring[r, :len(kept)].tolist() == kept and np.isnan(compiled._ring[r, len(kept):]).all()
        assert compiled._filled[r] == len(values)
