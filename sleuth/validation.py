"""Small checks shared by the modules that validate user input (layouts, job specs, topologies)."""

from __future__ import annotations

import numbers
from collections.abc import Hashable, Iterable
from typing import TypeVar

_T = TypeVar("_T", bound=Hashable)


def is_int(value: object) -> bool:
    """An integer of any integral type (numpy's included), but not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def first_duplicate(items: Iterable[_T]) -> _T | None:
    """The first item seen twice, or None: lets an error name the value, not just say "duplicate"."""
    seen: set[_T] = set()
    for item in items:
        if item in seen:
            return item
        seen.add(item)
    return None
