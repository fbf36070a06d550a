"""The packed-key sorts give what numpy's unique and lexsort give."""

from __future__ import annotations

import numpy as np

from sleuth.stream.detection.features import _stable_order
from sleuth.stream.detection.group_keys import by_group_then_value, unique_inverse
from sleuth.whatif.keys import dense_ids


def test_unique_inverse_is_numpys() -> None:
    packed = np.random.default_rng(1).integers(-(2**40), 2**40, 5000) // 2**30
    unique, inverse = unique_inverse(packed)
    expected_unique, expected_inverse = np.unique(packed, return_inverse=True)
    assert np.array_equal(unique, expected_unique) and np.array_equal(inverse, expected_inverse)


def test_group_then_value_sorts_as_lexsort() -> None:
    rng = np.random.default_rng(2)
    group = rng.integers(0, 50, 4000)
    for values in (rng.integers(-5000, 10**9, 4000).astype(float),  # integer-valued: packed
                   rng.normal(size=4000),  # fractions: ranked
                   np.r_[rng.integers(0, 9, 3999), 2.0**50].astype(float)):  # too wide to pack
        order = by_group_then_value(group, values)
        expected = np.lexsort((values, group))
        assert np.array_equal(group[order], group[expected]) and np.array_equal(values[order], values[expected])


def test_dense_ids_pack_or_sort_alike() -> None:
    rng = np.random.default_rng(3)
    small = [rng.integers(-3, 40, 3000) for _ in range(3)]
    wide = [rng.integers(0, 2**40, 3000), rng.integers(0, 2**40, 3000) // 2**38]
    for keys in (small, wide):
        stacked = np.stack(keys, axis=1)
        expected = np.unique(stacked, axis=0, return_inverse=True)[1].reshape(-1)
        assert np.array_equal(dense_ids(*keys), expected)


def test_stable_order_is_lexsorts_ties_included() -> None:
    rng = np.random.default_rng(4)
    keys = (rng.integers(0, 3, 3000), rng.integers(0, 5, 3000).astype(np.uint32), rng.integers(-2, 2, 3000))
    assert np.array_equal(_stable_order(*keys), np.lexsort(keys[::-1]))
    wide = (rng.integers(0, 2**40, 3000) // 2**35, rng.integers(0, 2**40, 3000))  # too wide to pack
    assert np.array_equal(_stable_order(*wide), np.lexsort(wide[::-1]))
