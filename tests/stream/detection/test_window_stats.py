"""The windows' statistics, computed in fewer passes, are numpy's own bit for bit."""

from __future__ import annotations

import numpy as np

from sleuth.stream.detection.features import _nan_mean_std


def test_mean_and_std_are_nanmean_and_nanstd() -> None:
    rng = np.random.default_rng(5)
    ring = np.sort(rng.integers(1, 10**7, size=(5000, 20)).astype(np.float64), axis=1)
    n = rng.integers(1, 21, size=len(ring))
    n[:100] = 20  # full windows: no empty slot at all
    ring[np.arange(20) >= n[:, None]] = np.nan  # empty slots, which sort last
    mean, std = _nan_mean_std(ring, n)
    assert np.array_equal(mean, np.nanmean(ring, axis=1))
    assert np.array_equal(std, np.nanstd(ring, axis=1))
