"""Reading a JSON document field by field, so that a bad document fails naming the field.

Each problem raises :class:`ConfigError` with the field's path and what stood there, in the words
the job spec uses: ``roots[2].cause: must be one of compute, network, got 'cosmic rays'``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from typing import Any, TypeVar

from sleuth.errors import ConfigError
from sleuth.validation import is_int, is_number

__all__ = ["JsonObject", "json_type"]

_E = TypeVar("_E", bound=enum.Enum)
_REQUIRED: Any = object()
_SHOWN = 40  # characters of a bad value quoted in a message: enough to recognise it, not a whole document


def json_type(value: Any) -> str:
    """What a decoded JSON value is, in JSON's words ("an array", not "list")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def _got(value: Any) -> str:
    if value is None or isinstance(value, Mapping | list | tuple):
        return json_type(value)
    shown = repr(value)
    return f"{json_type(value)} {shown if len(shown) <= _SHOWN else shown[:_SHOWN] + '...'}"


class JsonObject:
    """One JSON object of a document, at ``path`` (``""`` for the document itself).

    Each reader takes the key and, optionally, the value to use when the key is absent (fields
    added to a format later have one, so that documents written before still read).
    """

    __slots__ = ("_data", "_path")

    def __init__(self, data: Any, path: str = "") -> None:
        if not isinstance(data, Mapping):
            raise ConfigError(f"{path}: must be an object, got {_got(data)}" if path
                              else f"expected a JSON object, got {_got(data)}")
        self._data = data
        self._path = path

    def _where(self, key: str) -> str:
        return f"{self._path}.{key}" if self._path else key

    def _value(self, key: str, default: Any) -> Any:
        if key in self._data:
            return self._data[key]
        if default is _REQUIRED:
            raise ConfigError(f"{self._where(key)}: missing")
        return default

    def text(self, key: str, default: Any = _REQUIRED) -> str:
        value = self._value(key, default)
        if not isinstance(value, str):
            raise ConfigError(f"{self._where(key)}: must be a string, got {_got(value)}")
        return value

    def integer(self, key: str, default: Any = _REQUIRED) -> int:
        return _integer(self._value(key, default), self._where(key))

    def number(self, key: str, default: Any = _REQUIRED) -> float:
        value = self._value(key, default)
        if not is_number(value):
            raise ConfigError(f"{self._where(key)}: must be a number, got {_got(value)}")
        return float(value)

    def number_or_null(self, key: str, default: Any = _REQUIRED) -> float | None:
        return None if self._value(key, default) is None else self.number(key)

    def choice(self, key: str, kind: type[_E], default: Any = _REQUIRED) -> _E:
        """A member of the enum ``kind``, written as its value."""
        value = self._value(key, default)
        if isinstance(value, kind):
            return value
        try:
            return kind(value)
        except ValueError:
            names = ", ".join(str(member.value) for member in kind)
            raise ConfigError(f"{self._where(key)}: must be one of {names}, got {_got(value)}") from None

    def integers(self, key: str, default: Any = _REQUIRED) -> tuple[int, ...]:
        where = self._where(key)
        return tuple(_integer(item, f"{where}[{k}]") for k, item in enumerate(_array(self._value(key, default), where)))

    def objects(self, key: str, default: Any = _REQUIRED) -> list[JsonObject]:
        where = self._where(key)
        return [JsonObject(item, f"{where}[{k}]") for k, item in enumerate(_array(self._value(key, default), where))]

    def object(self, key: str) -> JsonObject:
        return JsonObject(self._value(key, _REQUIRED), self._where(key))

    def object_or_null(self, key: str, default: Any = _REQUIRED) -> JsonObject | None:
        return None if self._value(key, default) is None else self.object(key)


def _array(value: Any, where: str) -> list | tuple:
    if not isinstance(value, list | tuple):
        raise ConfigError(f"{where}: must be an array, got {_got(value)}")
    return value


def _integer(value: Any, where: str) -> int:
    # A whole float reads as its integer: JSON writers in other languages write 3.0 for 3.
    if is_int(value) or (isinstance(value, float) and math.isfinite(value) and value.is_integer()):
        return int(value)
    raise ConfigError(f"{where}: must be an integer, got {_got(value)}")
