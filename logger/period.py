"""The iteration period of a rank's operator sequence, when nothing marks its steps.

Greyhound (§4.2): a training job repeats the same sequence of communication operators every
iteration, so the sequence's autocorrelation peaks at the iteration's length. Operators are
categorical (kind, communicator, size, peer), so the autocorrelation at lag L is the share of
positions whose operator equals the one L later; the period is the smallest lag at which that
share reaches the threshold (0.95) with at least two whole periods observed.
"""

from __future__ import annotations

import numpy as np

from sleuth.validation import fraction, integer

__all__ = ["find_period", "signatures"]


def signatures(records: np.ndarray) -> np.ndarray:
    """One integer per operator: equal when kind, communicator, size and peer are equal."""
    keys = np.stack(
        [
            records["op"].astype("i8"),
            records["comm"].astype("i8"),
            records["nbytes"].astype("i8", casting="unsafe"),
            records["peer"].astype("i8"),
        ],
        axis=1,
    )
    return np.unique(keys, axis=0, return_inverse=True)[1].reshape(-1)


def find_period(codes: np.ndarray, *, threshold: float = 0.95, min_repeats: int = 2) -> int | None:
    """The smallest lag L with autocorrelation ≥ ``threshold``, observed ``min_repeats`` times.

    ``codes`` is the operator sequence (integers, equal when the operators are alike). None
    when no lag qualifies yet: the sequence is too short or not periodic.
    """
    fraction("threshold", threshold, error=ValueError)
    integer("min_repeats", min_repeats, low=2, error=ValueError)
    codes = np.asarray(codes)
    n = len(codes)
    for lag in range(1, n // min_repeats + 1):
        if (codes[lag:] == codes[:-lag]).mean() >= threshold:
            return lag
    return None
