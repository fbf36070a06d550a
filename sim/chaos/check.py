"""The checker: every record and iteration the gateway confirmed against ClickHouse (``FINAL``), and every
incident raised against the alerts a receiver got.

A row is known by its table's key (records: job, rank, iteration, comm, seq, op, peer; iterations: job,
rank, iteration), hashed to 64 bits (a collision among a few million keys is a 1e-7 chance). Lost: a
confirmed key ClickHouse lacks. Double counted: a key ClickHouse holds more than once after ``FINAL``,
or a row no logger ever confirmed nor sent (a replay that changed a key would show as one).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from sleuth.records import ColumnBatch

if TYPE_CHECKING:
    from clickhouse_driver import Client

RECORD_KEY = ("job", "rank", "iteration", "comm", "seq", "op", "peer")
ITERATION_KEY = ("job", "rank", "iteration")
_STRINGS = {"job", "comm"}


class Codes:
    """A number for each string seen, the same across batches and query results."""

    def __init__(self) -> None:
        self._codes: dict[str, int] = {}

    def of(self, values: Iterable[str]) -> np.ndarray:
        values = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=object)
        unique, inverse = np.unique(values.astype(str), return_inverse=True) if len(values) else ([], np.empty(0, int))
        table = np.array([self._codes.setdefault(s, len(self._codes)) for s in unique], dtype=np.int64)  # type: ignore[attr-defined]  # unique is an array or, when empty, a list
        return table[inverse] if len(values) else np.empty(0, np.int64)


def key_hashes(columns: Sequence[np.ndarray]) -> np.ndarray:
    """One 64-bit hash per row of the key ``columns`` (integers; strings already coded)."""
    n = len(columns[0]) if columns else 0
    h = np.full(n, 0x9E3779B97F4A7C15, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for column in columns:
            h ^= np.asarray(column).astype(np.int64).view(np.uint64)
            h *= np.uint64(0xBF58476D1CE4E5B9)
            h ^= h >> np.uint64(31)
    return h


def batch_hashes(batches: Iterable[ColumnBatch], key: Sequence[str], codes: Codes) -> np.ndarray:
    parts = [key_hashes([codes.of(b.decoded(name)) if name in _STRINGS else b[name] for name in key])
             for b in batches if len(b)]
    return np.concatenate(parts) if parts else np.empty(0, np.uint64)


def table_hashes(client: Client, table: str, key: Sequence[str], jobs: Sequence[str], codes: Codes) -> np.ndarray:
    """The key hashes of ``table FINAL``'s rows of ``jobs``, one per row (a key twice: twice)."""
    rows = client.execute(f"SELECT {', '.join(key)} FROM {table} FINAL WHERE job IN %(jobs)s",
                          {"jobs": tuple(jobs)}, columnar=True)
    if not rows:
        return np.empty(0, np.uint64)
    return key_hashes([codes.of(col) if name in _STRINGS else np.asarray(col) for name, col in zip(key, rows)])


@dataclass(frozen=True)
class Tally:
    confirmed: int  # distinct keys the gateway confirmed
    lost: int
    double_counted: int


def compare(confirmed: np.ndarray, sent: np.ndarray, stored: np.ndarray) -> Tally:
    """``sent``: every key handed to a logger; one landed unconfirmed (its confirmation lost) is at least once at work."""
    confirmed = np.unique(confirmed)
    distinct, counts = np.unique(stored, return_counts=True)
    return Tally(confirmed=len(confirmed), lost=len(np.setdiff1d(confirmed, distinct, assume_unique=True)),
                 double_counted=int((counts - 1).sum()) + len(np.setdiff1d(distinct, sent)))


def check(client: Client, table: str, key: Sequence[str], jobs: Sequence[str], confirmed: Iterable[ColumnBatch],
          sent: Iterable[ColumnBatch]) -> Tally:
    codes = Codes()
    return compare(batch_hashes(confirmed, key, codes), batch_hashes(sent, key, codes),
                   table_hashes(client, table, key, jobs, codes))


def incidents_alerted(alerts: Iterable[dict[str, Any]]) -> set[tuple[str, str]]:
    """(job, incident) for every incident a received alert cites (its ``incidents`` annotation)."""
    cited = set()
    for alert in alerts:
        job = alert.get("labels", {}).get("sleuth_job", "")
        for incident in alert.get("annotations", {}).get("incidents", "").split(","):
            if incident:
                cited.add((job, incident))
    return cited
