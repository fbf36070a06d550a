"""The windows' statistics, computed in fewer passes, are numpy's own bit for bit."""

from __future__ import annotations

import numpy as np

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
