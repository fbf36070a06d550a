"""The windows' statistics, computed in fewer passes, are numpy's own bit for bit."""

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


def _windows_of(rng: np.random.Generator, rows: int, window: int, decimals: int):
    """Operator windows holding ``rows`` identities' rings, each filled some number of times."""
    from sleuth.stream.detection.features import OperatorWindows

    windows = OperatorWindows(window=window, min_history=1)
    rings = []
    for _ in range(2):  # the durations' and the transfers' (which may hold none)
        filled = rng.integers(0, 3 * window, rows)
        ring = rng.lognormal(10, 2, (rows, window)).round(decimals)  # rounding makes ties
        ring[np.arange(window)[None, :] >= np.minimum(filled, window)[:, None]] = np.nan
        rings.append((ring, filled.astype(np.int64)))
    (windows._ring, windows._filled), (windows._transfer_ring, windows._tfilled) = rings
    windows._stats = np.full((rows, 8), np.nan)
    return windows


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_the_compiled_window_statistics_give_what_numpy_gives_to_the_bit(data: st.DataObject) -> None:
    import copy

    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    rows, window = data.draw(st.integers(1, 60)), data.draw(st.sampled_from([2, 5, 8, 20, 33, 150]))
    compiled = _windows_of(rng, rows, window, data.draw(st.integers(-4, 0)))
    reference = copy.deepcopy(compiled)
    picked = rng.permutation(rows)[:data.draw(st.integers(1, rows))]
    compiled._refresh(picked)
    reference._numpy_refresh(picked)
    assert np.array_equal(compiled._stats, reference._stats, equal_nan=True)


def test_the_compiled_window_statistics_are_built() -> None:
    # pyproject marks them optional for users without a compiler; the project's own install builds them.
    from sleuth.stream.detection import _window_stats, features

    assert features._window_stats is _window_stats and callable(_window_stats.refresh)


def test_the_default_window_sorts_by_the_compiled_network_as_numpy_sorts() -> None:
    import copy

    from sleuth.stream.detection import _window_stats
    from sleuth.stream.detection.rules import DetectionRules

    window = DetectionRules().operator_window
    assert _window_stats.UNROLLED == window  # the default's rings take the network, not the insertion sort
    rng = np.random.default_rng(8)
    compiled = _windows_of(rng, 4000, window, -2)
    # Signs, zeros of both signs, infinities and empty slots anywhere in a ring: the network's integer keys order them all.
    odd = rng.random(compiled._ring.shape)
    compiled._ring[odd < 0.05] *= -1
    compiled._ring[(odd >= 0.05) & (odd < 0.07)] = 0.0
    compiled._ring[(odd >= 0.07) & (odd < 0.08)] = -0.0
    compiled._ring[(odd >= 0.08) & (odd < 0.09)] = np.inf
    compiled._ring[(odd >= 0.09) & (odd < 0.10)] = -np.inf
    compiled._ring[(odd >= 0.10) & (odd < 0.12)] = np.nan
    compiled._filled = np.maximum(compiled._filled, window)  # full rings: their NaN slots count too
    reference = copy.deepcopy(compiled)
    rows = np.arange(4000)
    compiled._refresh(rows)
    with np.errstate(invalid="ignore"):  # infinities of both signs in one ring: numpy's inf - inf
        reference._numpy_refresh(rows)
    assert np.array_equal(compiled._stats, reference._stats, equal_nan=True)
