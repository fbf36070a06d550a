"""CommOps records in ClickHouse: the table layout and columnar insert and select.

SQL stays within what ClickHouse 18.16 runs (docs/design.md): timestamps are Int64 nanoseconds, no
DateTime64, no TTL. The table is a ReplacingMergeTree on the record's natural key, so a replayed
batch does not double count once merged (queries that must be exact before a merge use FINAL, or
drop the repeated keys themselves, as ``select_records`` does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

import numpy as np
import pyarrow as pa

from sleuth.errors import RecordError
from sleuth.records import ColumnBatch, RecordBatch

if TYPE_CHECKING:
    from clickhouse_driver import Client

B = TypeVar("B", bound=ColumnBatch)

#: ClickHouse column types of the CommOps record, in ``RecordBatch.FIELDS`` order.
RECORD_COLUMN_TYPES = {
    "job": "String",
    "rank": "UInt32",
    "comm": "String",
    "seq": "UInt64",
    "op": "UInt8",
    "peer": "Int32",
    "nbytes": "UInt64",
    "iteration": "Int64",
    "t_issue_ns": "Int64",
    "t_start_ns": "Int64",
    "t_end_ns": "Int64",
}


#: Per-query driver settings: columns go in and come out as numpy arrays, not a Python object per value.
_NUMPY = {"use_numpy": True}

#: Per-select settings: a filtered read returns a block per read step whatever its rows, and the driver
#: decodes every block's columns in Python, so the steps are large (a few rows of each of many granules
#: come back in a few blocks, not a thousand): the server's defaults are 1 MiB and 65,536 rows a step.
_READ = _NUMPY | {"preferred_block_size_bytes": 64 << 20, "max_block_size": 1 << 18}

#: The records table's sorting key, which is also the record's identity (ReplacingMergeTree).
RECORD_KEY = ("job", "iteration", "rank", "comm", "seq", "op", "peer")


def records_table_ddl(table: str) -> str:
    """``CREATE TABLE IF NOT EXISTS`` for a records table named ``table`` (may be db-qualified)."""
    columns = ",\n    ".join(f"{name} {kind}" for name, kind in RECORD_COLUMN_TYPES.items())
    return (
        f"CREATE TABLE IF NOT EXISTS {table} (\n    {columns},\n"
        "    day Date MATERIALIZED toDate(intDiv(t_start_ns, 1000000000))\n"
        ") ENGINE = ReplacingMergeTree()\n"
        "PARTITION BY day\n"
        # Iteration before rank: the streaming localizer reads an iteration of every rank, a range of
        # this key, where a rank-first key has it scan the job's whole history (docs/streaming.md).
        f"ORDER BY ({', '.join(RECORD_KEY)})"
    )


def insert_records(client: Client, table: str, batch: RecordBatch) -> int:
    """Insert ``batch`` into ``table`` in one columnar block; returns the number of rows."""
    names = ", ".join(RECORD_COLUMN_TYPES)
    return insert_batch(client, f"INSERT INTO {table} ({names}) VALUES", batch, tuple(RECORD_COLUMN_TYPES))


def insert_batch(client: Client, query: str, batch: ColumnBatch, names: tuple[str, ...]) -> int:
    """Run ``query`` (``INSERT INTO t (names) VALUES``) with the ``names`` columns of ``batch`` as one
    columnar block, string fields as their UTF-8 bytes; returns the number of rows (nothing is sent for none)."""
    if not len(batch):
        return 0
    # use_numpy: the driver writes each numeric column's bytes, not a Python int per value.
    client.execute(query, [batch.utf8(name) for name in names], columnar=True, settings=_NUMPY)
    return len(batch)


def select_records(client: Client, table: str, *, where: str = "", params: dict | None = None) -> RecordBatch:
    """The records of ``table`` (optionally filtered by a ``where`` clause), rank by rank, each
    rank's in (iteration, comm, seq, op, peer) order, one row per key as ``FINAL`` reads them
    (``RecordBatch.one_per_identity``).

    The rows a replay inserted twice are dropped here rather than by ``FINAL``, which merges every
    part the query touches on one thread, several times the read's own cost (``bench_clickhouse_read``).
    A replay sends the same record again, so the row kept does not matter. They are put in order
    here too, not by an ``ORDER BY``: the server compares the string columns byte by byte, several
    times the cost of one sort of their packed key here."""
    names = ", ".join(RECORD_COLUMN_TYPES)
    query = f"SELECT {names} FROM {table}"
    if where:
        query += f" WHERE {where}"
    return select_batch(client, RecordBatch, query, params).one_per_identity()


def select_batch(client: Client, kind: type[B], query: str, params: dict | None = None) -> B:
    """A ``kind`` batch of what ``query`` returns, which selects ``kind.FIELDS`` in order.

    Read with ``use_numpy`` as Arrow columns (``query_arrow``): each number column arrives as one array
    and each string column as one buffer, dictionary-encoded into the batch's codes, so no value
    becomes a Python object (a numpy ``execute`` on a client without ``use_numpy`` gives tuples)."""
    table = client.query_arrow(query, params or {}, settings=_READ)
    if not table.num_rows:
        return kind.empty()
    arrays: dict[str, np.ndarray] = {}
    strings: dict[str, int] = {}
    for field, column in zip(kind.FIELDS, table.columns):  # a field left out: the batch names it
        if not field.is_string:
            arrays[field.name] = column.to_numpy()
            continue
        if not pa.types.is_string(column.type):
            raise RecordError(f"column {field.name!r} must hold strings, got {column.type}")
        encoded = column.combine_chunks().dictionary_encode()
        # Each field's strings numbered in their sorted order after the fields before it: the same
        # codes whatever order the rows came in.
        values = encoded.dictionary.to_pylist()
        for value in sorted(values):
            strings.setdefault(value, len(strings))
        codes = np.array([strings[value] for value in values], dtype="u4")
        arrays[field.name] = codes[encoded.indices.to_numpy()]
    return kind(arrays, list(strings))
