"""The columnar record types every part of sleuth shares.

A batch holds one numpy array per field (structure of arrays), because every consumer (the
gateway's validation, the detectors, the ClickHouse sink, the localizer) works a column at a
time. String fields (job, comm) are stored as ``uint32`` codes into a per-batch string table,
as on the wire, so that a batch of a million records does not hold a million Python strings.

``RecordBatch`` carries CommOps records (docs/design.md, "CommOps record"); ``IterationBatch`` carries
iteration records. Conversions: ``sleuth.proto.codec`` (wire), ``sleuth.recordio`` (Parquet and
JSON lines).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import numpy as np

from sleuth.errors import RecordError
from sleuth.validation import is_int
from sleuth.whatif.keys import lexical_order


class OpKind(enum.IntEnum):
    """Communication operator kinds; the numbers are the wire values of ``commops.proto``."""

    UNKNOWN = 0
    ALL_REDUCE = 1
    ALL_GATHER = 2
    REDUCE_SCATTER = 3
    ALL_TO_ALL = 4
    BROADCAST = 5
    REDUCE = 6
    SEND = 7
    RECV = 8
    BARRIER = 9
    GATHER = 10
    SCATTER = 11

    @property
    def label(self) -> str:
        """The lower-case name used in JSON, Parquet and SQL: ``all_reduce``."""
        return self.name.lower()

    @property
    def is_p2p(self) -> bool:
        return self in (OpKind.SEND, OpKind.RECV)

    @classmethod
    def parse(cls, text: str) -> OpKind:
        try:
            return cls[text.upper()]
        except KeyError:
            known = ", ".join(kind.label for kind in cls if kind is not cls.UNKNOWN)
            raise RecordError(f"unknown op kind {text!r} (known: {known})") from None


@dataclass(frozen=True)
class Field:
    """One column of a batch schema: its name, numpy dtype, and whether it is a coded string."""

    name: str
    dtype: np.dtype
    is_string: bool = False


def _fields(*spec: tuple[str, str]) -> tuple[Field, ...]:
    return tuple(
        Field(name, np.dtype("u4") if kind == "str" else np.dtype(kind), kind == "str")
        for name, kind in spec
    )


class ColumnBatch:
    """A batch of records as equal-length numpy columns plus a shared string table.

    Immutable by convention: the arrays are marked read-only, and every operation returns a
    new batch. Subclasses set ``FIELDS``.
    """

    FIELDS: ClassVar[tuple[Field, ...]] = ()
    __slots__ = ("_columns", "_strings")

    def __init__(self, columns: Mapping[str, np.ndarray], strings: Sequence[str]) -> None:
        """Wrap already-encoded columns (string fields as codes into ``strings``).

        Most callers want ``from_columns``, which accepts plain values and strings.
        """
        names = [f.name for f in self.FIELDS]
        missing = [n for n in names if n not in columns]
        extra = [n for n in columns if n not in names]
        if missing or extra:
            raise RecordError(
                f"{type(self).__name__}: missing fields {missing}, unknown fields {extra}"
                if extra
                else f"{type(self).__name__}: missing fields {missing}"
            )
        table = tuple(strings)
        length = None
        encoded: dict[str, np.ndarray] = {}
        for field in self.FIELDS:
            array = _as_column(columns[field.name], field)
            if length is None:
                length = len(array)
            elif len(array) != length:
                raise RecordError(
                    f"column {field.name!r} has {len(array)} values, "
                    f"column {self.FIELDS[0].name!r} has {length}"
                )
            if field.is_string and len(array) and int(array.max()) >= len(table):
                raise RecordError(
                    f"column {field.name!r}: code {int(array.max())} is outside the string table "
                    f"of {len(table)} entries"
                )
            array.flags.writeable = False
            encoded[field.name] = array
        self._columns = encoded
        self._strings = table

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def from_columns(cls, **values: Any) -> Self:
        """A batch from plain columns: sequences or arrays, with strings for string fields.

        A string field may also be a single string, meaning "this value for every record".
        """
        lengths = {
            len(v) for f in cls.FIELDS if not isinstance(v := values.get(f.name), str) and v is not None
        }
        length = max(lengths) if lengths else 0
        table: dict[str, int] = {}
        columns: dict[str, np.ndarray] = {}
        for field in cls.FIELDS:
            if field.name not in values:
                raise RecordError(f"{cls.__name__}: field {field.name!r} is missing")
            value = values[field.name]
            if field.is_string:
                if isinstance(value, str):
                    value = [value] * length
                columns[field.name] = _encode_strings(value, table, field.name)
            else:
                columns[field.name] = value
        unknown = sorted(set(values) - {f.name for f in cls.FIELDS})
        if unknown:
            raise RecordError(f"{cls.__name__}: unknown fields {unknown}")
        return cls(columns, list(table))

    @classmethod
    def empty(cls) -> Self:
        return cls({f.name: np.empty(0, f.dtype) for f in cls.FIELDS}, ())

    @classmethod
    def concat(cls, batches: Iterable[ColumnBatch]) -> Self:
        """One batch holding the records of all ``batches`` in order, string tables merged."""
        batches = list(batches)
        if not batches:
            return cls.empty()
        table: dict[str, int] = {}
        parts: dict[str, list[np.ndarray]] = {f.name: [] for f in cls.FIELDS}
        for batch in batches:
            if not isinstance(batch, cls):
                raise RecordError(f"cannot concatenate a {type(batch).__name__} into a {cls.__name__}")
            remap = np.array([table.setdefault(s, len(table)) for s in batch._strings], dtype="u4")
            for field in cls.FIELDS:
                column = batch._columns[field.name]
                parts[field.name].append(remap[column] if field.is_string else column)
        return cls({name: np.concatenate(arrays) for name, arrays in parts.items()}, list(table))

    # -- access ------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._columns[self.FIELDS[0].name])

    def __getitem__(self, name: str) -> np.ndarray:
        """The raw column (codes for string fields), read-only."""
        return self._columns[name]

    @property
    def strings(self) -> tuple[str, ...]:
        return self._strings

    @property
    def columns(self) -> Mapping[str, np.ndarray]:
        return dict(self._columns)

    def decoded(self, name: str) -> np.ndarray:
        """A string field as an object array of Python strings (one per record)."""
        return self._looked_up(name, lambda strings: strings)

    def utf8(self, name: str) -> np.ndarray:
        """A string field as an object array of its UTF-8 bytes, each string of the table encoded once:
        what a ClickHouse ``String`` holds, so that the driver sends them without encoding each record's."""
        return self._looked_up(name, lambda strings: [s.encode() for s in strings])

    def _looked_up(self, name: str, table_of: Callable[[tuple[str, ...]], Sequence[object]]) -> np.ndarray:
        """A string field's codes looked up in ``table_of`` the string table, another field as it is."""
        if not self._field(name).is_string:
            return self._columns[name]
        if not len(self):
            return np.empty(0, object)
        return np.asarray(table_of(self._strings), dtype=object)[self._columns[name]]

    def isin(self, name: str, values: Iterable[str]) -> np.ndarray:
        """Boolean mask of the records whose string field ``name`` is one of ``values``."""
        field = self._field(name)
        if not field.is_string:
            raise TypeError(f"field {name!r} is not a string field")
        wanted = set(values)
        codes = np.fromiter((i for i, s in enumerate(self._strings) if s in wanted), dtype=np.int64)
        return np.isin(self._columns[name], codes)

    def take(self, selector: np.ndarray | slice) -> Self:
        """The records at ``selector`` (a boolean mask, integer indices or a slice)."""
        return type(self)({n: c[selector] for n, c in self._columns.items()}, self._strings)

    def compact(self) -> Self:
        """The same records with a string table holding only the strings they use.

        Costs O(n log n) in the records held, never O(size of the string table): a slice of a
        hostile batch (a million-entry table, a record per rank) is compacted once per slice.
        """
        string_fields = [f.name for f in self.FIELDS if f.is_string]
        codes = np.concatenate([self._columns[name] for name in string_fields])
        used, inverse = np.unique(codes, return_inverse=True)
        if len(used) == len(self._strings):
            return self  # every entry is used (the codes are in range: checked at construction)
        inverse = inverse.astype("u4")
        columns = dict(self._columns)
        for k, name in enumerate(string_fields):
            columns[name] = inverse[k * len(self) : (k + 1) * len(self)]
        strings = self._strings
        return type(self)(columns, [strings[code] for code in used.tolist()])

    def rows(self) -> Iterable[dict[str, Any]]:
        """Records one at a time as plain dicts (strings decoded): for output, not hot paths."""
        lists = {
            f.name: self.decoded(f.name).tolist() if f.is_string else self._columns[f.name].tolist()
            for f in self.FIELDS
        }
        for i in range(len(self)):
            yield {name: values[i] for name, values in lists.items()}

    def to_structured(self) -> np.ndarray:
        """A numpy structured array (one row per record; string fields as object)."""
        dtype = [(f.name, object if f.is_string else f.dtype) for f in self.FIELDS]
        out = np.empty(len(self), dtype=dtype)
        for field in self.FIELDS:
            out[field.name] = self.decoded(field.name)
        return out

    def equals(self, other: object) -> bool:
        """Same type, same records in the same order, same decoded strings."""
        if type(other) is not type(self) or len(other) != len(self):
            return False
        for field in self.FIELDS:
            a, b = self._columns[field.name], other._columns[field.name]
            if field.is_string:
                if not np.array_equal(self.decoded(field.name), other.decoded(field.name)):
                    return False
            elif not np.array_equal(a, b):
                return False
        return True

    def __eq__(self, other: object) -> bool:
        return self.equals(other)

    __hash__ = None  # type: ignore[assignment]  # mutable-looking container: not hashable

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} records, {len(self._strings)} strings)"

    def _field(self, name: str) -> Field:
        for field in self.FIELDS:
            if field.name == name:
                return field
        raise KeyError(name)


class RecordBatch(ColumnBatch):
    """CommOps records: one per communication operator per rank (docs/design.md)."""

    FIELDS = _fields(
        ("job", "str"),
        ("rank", "u4"),
        ("comm", "str"),
        ("seq", "u8"),
        ("op", "u1"),
        ("peer", "i4"),
        ("nbytes", "u8"),
        ("iteration", "i8"),
        ("t_issue_ns", "i8"),
        ("t_start_ns", "i8"),
        ("t_end_ns", "i8"),
    )
    __slots__ = ()

    #: A record's identity: a repeat of one is the same operator again (a batch sent twice).
    IDENTITY: ClassVar[tuple[str, ...]] = ("job", "rank", "iteration", "comm", "seq", "op", "peer")

    def one_per_identity(self) -> RecordBatch:
        """These records in ``IDENTITY`` order (strings by their text), each identity once: the
        pipeline delivers at least once and a records folder may hold a batch twice, and one
        operator counted twice would be its own peer, and a second member of its group."""
        if len(self) < 2:
            return self
        rank_of_string = np.argsort(np.argsort(np.array(self.strings, dtype=object)))
        strings = {f.name for f in self.FIELDS if f.is_string}
        keys = tuple(rank_of_string[self[name]] if name in strings else self[name] for name in self.IDENTITY)
        ordered = self.take(lexical_order(keys))
        repeated = np.ones(len(ordered) - 1, dtype=bool)
        for name in self.IDENTITY:
            column = ordered[name]
            repeated &= column[1:] == column[:-1]
        if not repeated.any():
            return ordered
        return ordered.take(np.flatnonzero(~np.concatenate(([False], repeated))))

    def problems(self) -> list[str]:
        """What makes these records invalid beyond their types, one message per broken rule.

        Empty when the batch is valid. Used by the gateway to reject a batch with a message that
        names the field (and the first offending record).
        """
        found: list[str] = []
        known_ops = np.array([int(k) for k in OpKind if k is not OpKind.UNKNOWN], dtype="u1")
        checks = (
            ("op", ~np.isin(self["op"], known_ops), "unknown op kind"),
            ("peer", self["peer"] < -1, "peer below -1"),
            ("iteration", self["iteration"] < -1, "iteration below -1"),
            ("t_start_ns", self["t_start_ns"] < 0, "negative time"),
            ("t_end_ns", self["t_end_ns"] < self["t_start_ns"], "ends before it starts"),
            ("t_issue_ns", self["t_issue_ns"] < 0, "negative time"),
        )
        for name, bad, what in checks:
            if bad.any():
                first = int(np.flatnonzero(bad)[0])
                found.append(
                    f"{name}: {what} in {int(bad.sum())} records "
                    f"(first at index {first}: {self[name][first]})"
                )
        p2p = np.isin(self["op"], [OpKind.SEND, OpKind.RECV])
        missing_peer = p2p & (self["peer"] < 0)
        if missing_peer.any():
            first = int(np.flatnonzero(missing_peer)[0])
            found.append(f"peer: send/recv without a peer in {int(missing_peer.sum())} records (first at index {first})")
        for name in ("job", "comm"):
            if any(not self.strings[code] for code in np.unique(self[name])):
                found.append(f"{name}: empty name")
        return found


class IterationBatch(ColumnBatch):
    """Iteration records: when each rank started and ended each training step."""

    FIELDS = _fields(
        ("job", "str"),
        ("rank", "u4"),
        ("iteration", "i8"),
        ("t_start_ns", "i8"),
        ("t_end_ns", "i8"),
    )
    __slots__ = ()


def _as_column(values: Any, field: Field) -> np.ndarray:
    """``values`` as a 1-D array of ``field.dtype``, refusing any value the dtype cannot hold."""
    if not isinstance(values, np.ndarray):
        return _column_from_sequence(values, field)
    if values.ndim != 1:
        raise RecordError(f"column {field.name!r} has shape {values.shape}, expected one dimension")
    if values.dtype == field.dtype:
        # A view, so that marking the batch's column read-only leaves the caller's array alone.
        return values.view()
    if values.size == 0:
        return np.empty(0, field.dtype)
    if values.dtype.kind not in "iu":
        raise RecordError(f"column {field.name!r} holds {values.dtype} values, expected integers")
    _check_range(int(values.min()), int(values.max()), field)
    return values.astype(field.dtype)


def _column_from_sequence(values: Any, field: Field) -> np.ndarray:
    # Checked value by value: numpy would turn a list mixing 2**64 - 1 and small ints into floats.
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise RecordError(f"column {field.name!r} is a single value, not a column")
    values = list(values)
    for value in values:
        if not is_int(value):
            raise RecordError(
                f"column {field.name!r} holds {type(value).__name__} {value!r}, expected integers"
            )
    if values:
        _check_range(int(min(values)), int(max(values)), field)
    return np.array(values, dtype=field.dtype)


def _check_range(low: int, high: int, field: Field) -> None:
    info = np.iinfo(field.dtype)
    if low < info.min or high > info.max:
        bad = low if low < info.min else high
        raise RecordError(
            f"column {field.name!r}: value {bad} does not fit {field.dtype} ({info.min}..{info.max})"
        )


def _encode_strings(values: Any, table: dict[str, int], name: str) -> np.ndarray:
    """Codes of ``values`` in ``table``, adding unseen strings to it."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu":
        raise RecordError(f"column {name!r} must hold strings, got {values.dtype} codes")
    values = list(values)
    for value in set(values):
        if not isinstance(value, str):
            raise RecordError(f"column {name!r} holds {type(value).__name__} {value!r}, expected a string")
    return np.array([table.setdefault(v, len(table)) for v in values], dtype="u4")
