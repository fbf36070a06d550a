"""KeyIds numbers keys as a dict's setdefault over each batch's sorted distinct keys does."""

from __future__ import annotations

import numpy as np

from sleuth.stream.detection.key_ids import KeyIds


def test_ids_match_setdefault_batch_after_batch_and_after_a_rebuild() -> None:
    rng = np.random.default_rng(8)
    ids, expected = KeyIds(), {}
    for batch in range(30):
        unique = np.unique(rng.integers(0, 2**40, 50) // 2**30 + (batch // 10) * 2**41)
        got = ids.ids(unique)
        assert got.tolist() == [expected.setdefault(int(k), len(expected)) for k in unique.tolist()]
        if batch == 15:  # what forget() does: rebuild from the surviving items
            ids = KeyIds(dict(ids.items()))
    assert len(ids) == len(expected) and ids.get(next(iter(expected))) == 0 and ids.get(-5) is None
