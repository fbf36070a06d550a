"""Dense ids of integer keys (packed job, rank, ...) kept across batches, looked up a batch at a time.

What ``{key: id}.setdefault(key, len(...))`` over a batch's sorted distinct keys gives, bit for
bit, but only the keys never seen before cost Python: the known ones are one ``searchsorted`` over
the sorted keys. New keys are numbered on in ascending order, as that loop numbers them.
"""

from __future__ import annotations

from collections.abc import ItemsView

import numpy as np

__all__ = ["KeyIds"]


class KeyIds:
    """``key -> id`` for non-negative integer keys below 2**63; ids 0..len-1 in order of arrival."""

    def __init__(self, items: dict[int, int] | None = None) -> None:
        self._ids_of: dict[int, int] = dict(items or {})
        keys = np.fromiter(self._ids_of.keys(), np.int64, len(self._ids_of))
        ids = np.fromiter(self._ids_of.values(), np.int64, len(self._ids_of))
        order = np.argsort(keys)
        self._keys, self._ids = keys[order], ids[order]

    def __len__(self) -> int:
        return len(self._ids_of)

    def get(self, key: int) -> int | None:
        return self._ids_of.get(key)

    def items(self) -> ItemsView[int, int]:
        return self._ids_of.items()

    def ids(self, unique: np.ndarray) -> np.ndarray:
        """The id of each of ``unique`` (ascending, distinct), numbering the new ones on."""
        unique = unique.astype(np.int64, copy=False)
        pos = np.searchsorted(self._keys, unique)
        found = pos < len(self._keys)
        found[found] = self._keys[pos[found]] == unique[found]
        out = np.empty(len(unique), np.int64)
        out[found] = self._ids[pos[found]]
        new = np.flatnonzero(~found)
        if len(new):
            out[new] = np.arange(len(self._ids_of), len(self._ids_of) + len(new))
            self._ids_of.update(zip(unique[new].tolist(), out[new].tolist()))
            keys = np.concatenate([self._keys, unique[new]])
            order = np.argsort(keys)
            self._keys, self._ids = keys[order], np.concatenate([self._ids, out[new]])[order]
        return out
