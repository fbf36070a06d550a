"""Record batches to and from files: Parquet (via Arrow) and JSON lines. Lossless both ways.

Parquet keeps each column's exact integer type; job and comm become dictionary-encoded string
columns (the batch's codes and string table map onto Arrow dictionaries directly), so pandas,
DuckDB or ClickHouse read the files with names, not codes. ``op`` stays the wire number
(``sleuth.records.OpKind``) so that any value a batch can hold survives the trip.

JSON lines hold one record per line with names decoded and ``op`` as its label
(``"all_reduce"``); a number is written for a value outside ``OpKind`` and accepted back.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sleuth.errors import RecordError
from sleuth.records import ColumnBatch, IterationBatch, OpKind, RecordBatch
from sleuth.validation import is_int

_Batch = TypeVar("_Batch", bound=ColumnBatch)

#: Called after each file of a folder is read: the file, the files read so far, the files in all
#: (``sleuth localize`` names them on its bar: a large logger folder holds a file per rank and flush).
FileRead = Callable[[Path, int, int], None]

# Parquet key-value metadata naming which batch type a file holds.
_KIND_KEY = b"sleuth.batch"
_KIND_OF = {RecordBatch: b"records", IterationBatch: b"iterations"}


# -- Arrow -------------------------------------------------------------------------------------


def to_arrow(batch: ColumnBatch) -> pa.Table:
    """``batch`` as an Arrow table: integer columns as they are, strings as dictionaries."""
    dictionary = pa.array(batch.strings, type=pa.string())
    arrays = []
    for field in batch.FIELDS:
        column = batch[field.name]
        if field.is_string:
            arrays.append(pa.DictionaryArray.from_arrays(pa.array(column, pa.uint32()), dictionary))
        else:
            arrays.append(pa.array(column))
    table = pa.table(arrays, names=[f.name for f in batch.FIELDS])
    return table.replace_schema_metadata({_KIND_KEY: _KIND_OF[type(batch)]})


def from_arrow(table: pa.Table, batch_type: type[_Batch]) -> _Batch:
    """The batch held by an Arrow table; string columns may be dictionaries or plain strings."""
    names = set(table.column_names)
    missing = [f.name for f in batch_type.FIELDS if f.name not in names]
    if missing:
        raise RecordError(f"{batch_type.__name__} table lacks columns {missing}")
    parts = [_from_arrow_chunk(chunk, batch_type) for chunk in table.to_batches()]
    return batch_type.concat(parts) if parts else batch_type.empty()


def _from_arrow_chunk(chunk: pa.RecordBatch, batch_type: type[_Batch]) -> _Batch:
    strings: dict[str, int] = {}
    columns: dict[str, np.ndarray] = {}
    for field in batch_type.FIELDS:
        array = chunk.column(field.name)
        if array.null_count:
            raise RecordError(f"column {field.name!r} has {array.null_count} missing values")
        if not field.is_string:
            columns[field.name] = array.to_numpy(zero_copy_only=False)
            continue
        if not pa.types.is_dictionary(array.type):
            array = array.dictionary_encode()
        # Each column may carry its own dictionary: map its entries into the one string table.
        remap = np.array(
            [strings.setdefault(s, len(strings)) for s in array.dictionary.to_pylist()], dtype="u4"
        )
        codes = array.indices.to_numpy(zero_copy_only=False)
        columns[field.name] = remap[codes] if len(codes) else np.empty(0, "u4")
    return batch_type(columns, list(strings))


# -- Parquet -----------------------------------------------------------------------------------


def write_parquet(batch: ColumnBatch, path: str | Path) -> Path:
    """Write ``batch`` to one Parquet file (zstd-compressed) and return its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(to_arrow(batch), path, compression="zstd")
    return path


def read_parquet(path: str | Path, batch_type: type[_Batch] = RecordBatch, *,  # type: ignore[assignment]
                 on_file: FileRead | None = None) -> _Batch:
    """Read a Parquet file, or every ``*.parquet`` file of a folder in name order, as one batch;
    ``on_file`` hears of each file read."""
    path = Path(path)
    files = sorted(path.glob("*.parquet")) if path.is_dir() else [path]
    if not files:
        raise RecordError(f"{path}: no .parquet files in this folder")
    batches = []
    for file in files:
        if not file.exists():
            raise RecordError(f"{file}: no such file")
        table = pq.read_table(file)
        kind = (table.schema.metadata or {}).get(_KIND_KEY)
        if kind is not None and kind != _KIND_OF[batch_type]:
            raise RecordError(f"{file}: holds {kind.decode()}, not {_KIND_OF[batch_type].decode()}")
        try:
            batches.append(from_arrow(table, batch_type))
        except RecordError as error:
            raise RecordError(f"{file}: {error}") from None
        if on_file is not None:
            on_file(file, len(batches), len(files))
    return batch_type.concat(batches)


# -- JSON lines --------------------------------------------------------------------------------


def write_jsonl(batch: ColumnBatch, out: IO[str]) -> int:
    """Write one JSON object per record to ``out``; returns the number of lines."""
    labels = {int(kind): kind.label for kind in OpKind}
    count = 0
    for row in batch.rows():
        if "op" in row:
            row["op"] = labels.get(row["op"], row["op"])
        out.write(json.dumps(row, separators=(",", ":")))
        out.write("\n")
        count += 1
    return count


def read_jsonl(lines: IO[str] | Iterator[str], batch_type: type[_Batch] = RecordBatch) -> _Batch:  # type: ignore[assignment]
    """Read JSON lines written by ``write_jsonl`` (or by hand); errors name the line and field."""
    names = [f.name for f in batch_type.FIELDS]
    string_fields = {f.name for f in batch_type.FIELDS if f.is_string}
    columns: dict[str, list] = {name: [] for name in names}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise RecordError(f"line {number}: not JSON ({error.msg})") from None
        if not isinstance(row, dict):
            raise RecordError(f"line {number}: expected an object, got {type(row).__name__}")
        missing = [n for n in names if n not in row]
        if missing:
            raise RecordError(f"line {number}: missing fields {missing}")
        for name in names:
            value = row[name]
            if name == "op" and isinstance(value, str):
                try:
                    value = int(OpKind.parse(value))
                except RecordError as error:
                    raise RecordError(f"line {number}: {error}") from None
            elif name in string_fields:
                if not isinstance(value, str):
                    raise RecordError(f"line {number}: field {name!r} must be a string, got {value!r}")
            elif not is_int(value):
                raise RecordError(f"line {number}: field {name!r} must be an integer, got {value!r}")
            columns[name].append(value)
    return batch_type.from_columns(**columns)
