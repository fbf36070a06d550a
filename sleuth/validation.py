"""Small checks shared by the modules that validate user input (layouts, job specs, topologies,
the options of detectors, the localizer and the emulator).

The parameter checks each raise ``error`` (``ConfigError`` unless the caller names another, e.g.
``TopologyError``) with a message that names the setting and shows the value, "``window must be an
integer >= 2, got 1``", and return the value as a plain ``int`` or ``float``. A bool is never a
number here, although Python counts ``True`` as 1.

``checked`` is the declarative form: an options object and, per attribute, the check it must pass,
``checked(self, window=positive_int, share=fraction)``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Hashable, Iterable
from typing import TypeGuard, TypeVar

from sleuth.errors import ConfigError

_T = TypeVar("_T", bound=Hashable)
_O = TypeVar("_O")

#: A parameter check: ``check(name, value, error=...)`` raises ``error`` naming the parameter, else returns the value.
Check = Callable[..., object]

__all__ = ["Check", "boolean", "checked", "first_duplicate", "fraction", "integer", "is_int", "is_number", "is_of",
           "non_negative_int", "non_negative_number", "number_above", "positive_int", "positive_number"]


def is_int(value: object) -> TypeGuard[int]:
    """An integer of any integral type (numpy's included), but not a bool (to a type checker: an int)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    """A real number of any type (numpy's included), but not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def checked(options: _O, *, prefix: str = "", error: type[Exception] = ConfigError, **checks: Check) -> _O:
    """``options`` once each attribute named in ``checks`` passed its check, in the order given (the
    first bad one raises); ``prefix`` goes before each name in a message (``"thresholds."``)."""
    for name, check in checks.items():
        check(prefix + name, getattr(options, name), error=error)
    return options


def is_of(value: object, kind: type | tuple[type, ...]) -> bool:
    """``isinstance(value, kind)``, except that a bool is no int unless ``kind`` names bool: a file's
    ``true`` is not a count."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return isinstance(value, kinds) and (bool in kinds or not isinstance(value, bool))


def first_duplicate(items: Iterable[_T]) -> _T | None:
    """The first item seen twice, or None: lets an error name the value, not just say "duplicate"."""
    seen: set[_T] = set()
    for item in items:
        if item in seen:
            return item
        seen.add(item)
    return None


def integer(name: str, value: object, *, low: int, high: int | None = None, low_shown: str | None = None,
            high_shown: str | None = None, error: type[Exception] = ConfigError) -> int:
    """``value`` as an int when it is an integer (not a bool) in ``low``..``high`` (no upper bound when
    ``high`` is None). ``low_shown``, ``high_shown``: how the message writes a bound (``"window (20)"``)."""
    if not is_int(value) or value < low or (high is not None and value > high):
        shown = low_shown or low
        bounds = f">= {shown}" if high is None else f"in {shown}..{high_shown or high}"
        raise error(f"{name} must be an integer {bounds}, got {value!r}")
    return int(value)


def positive_int(name: str, value: object, *, error: type[Exception] = ConfigError) -> int:
    """``value`` as an int when it is an integer >= 1 (not a bool)."""
    if not is_int(value) or value < 1:
        raise error(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def non_negative_int(name: str, value: object, *, error: type[Exception] = ConfigError) -> int:
    """``value`` as an int when it is an integer >= 0 (not a bool)."""
    if not is_int(value) or value < 0:
        raise error(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def positive_number(name: str, value: object, *, error: type[Exception] = ConfigError) -> float:
    """``value`` as a float when it is a finite number above 0 (not a bool)."""
    if not is_number(value) or not math.isfinite(value) or value <= 0:  # type: ignore[arg-type, operator]
        raise error(f"{name} must be a positive number, got {value!r}")
    return float(value)  # type: ignore[arg-type]


def number_above(name: str, value: object, low: float, *, finite: bool = True,
                 error: type[Exception] = ConfigError) -> float:
    """``value`` as a float when it is a number (not a bool) above ``low``; finite unless ``finite`` is False."""
    if not is_number(value) or not value > low or (finite and not math.isfinite(value)):  # type: ignore[arg-type, operator]
        raise error(f"{name} must be a number above {low:g}, got {value!r}")
    return float(value)  # type: ignore[arg-type]


def fraction(name: str, value: object, *, zero: bool = False, one: bool = True,
             error: type[Exception] = ConfigError) -> float:
    """``value`` as a float when it is a number (not a bool) between 0 and 1; ``zero`` and ``one`` say
    whether the interval holds its ends (by default (0, 1], a share that may be all)."""
    inside = is_number(value) and (0 <= value if zero else 0 < value) and (value <= 1 if one else value < 1)  # type: ignore[operator]
    if not inside:
        raise error(f"{name} must be in {'[' if zero else '('}0, 1{']' if one else ')'}, got {value!r}")
    return float(value)  # type: ignore[arg-type]


def boolean(name: str, value: object, *, error: type[Exception] = ConfigError) -> bool:
    """``value`` when it is a bool: a switch is true or false, not 0, 1 or "yes"."""
    if not isinstance(value, bool):
        raise error(f"{name} must be true or false, got {value!r}")
    return bool(value)


def non_negative_number(name: str, value: object, *, error: type[Exception] = ConfigError) -> float:
    """``value`` as a float when it is a finite number >= 0 (not a bool)."""
    if not is_number(value) or not math.isfinite(value) or value < 0:  # type: ignore[arg-type, operator]
        raise error(f"{name} must be a number >= 0, got {value!r}")
    return float(value)  # type: ignore[arg-type]
