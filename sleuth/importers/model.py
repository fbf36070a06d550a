"""What an importer reads out of another tool's files, before sleuth names or numbers anything.

Each importer (NCCL Inspector, PyTorch Flight Recorder) turns its files into these plain values;
:mod:`sleuth.importers.assemble` then names the communicators, numbers P2P operators and
iterations, and builds the records and the job spec, the same way for every format.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import NamedTuple

from sleuth.jobspec import JobSpec
from sleuth.records import OpKind, RecordBatch

__all__ = ["Imported", "SourceComm", "SourceOp", "SourceRank", "Stream"]


@dataclass(frozen=True)
class SourceRank:
    """One rank as its file describes it: global rank, host, GPU index (None: not said)."""

    rank: int
    host: str
    gpu: int | None
    source: str


@dataclass(frozen=True)
class SourceComm:
    """A communicator as the format identifies it (``key``: a hash or a torch group name)."""

    key: str
    desc: str | None
    ranks: tuple[int, ...]  # global ranks in group-rank order


class SourceOp(NamedTuple):
    """One operator of one rank. ``seq`` is the collective's key on its communicator: any
    sortable value, equal on every member (``assemble`` numbers the keys 0, 1, 2...); P2P
    operators carry -1 and are numbered by ``assemble`` too. ``order`` is the operator's
    position in the rank's operator stream since the job began. ``iteration``: the training step
    when the format marks steps (PyTorch profiler's ``ProfilerStep#N``; -1 outside any step),
    else None and ``assemble`` finds it from the rank's stream."""

    rank: int
    comm: str
    kind: OpKind
    peer: int
    nbytes: int
    seq: Hashable
    order: int
    t_issue_ns: int
    t_start_ns: int
    t_end_ns: int
    iteration: int | None = None


class Stream(NamedTuple):
    """A rank's operator stream for finding the iteration period: one hashable signature per
    element, the first element at position ``first`` (what ``SourceOp.order`` counts)."""

    first: int
    signatures: tuple[Hashable, ...]


@dataclass(frozen=True)
class Imported:
    """The result: records, the job spec, and what the user should know about the import."""

    spec: JobSpec
    records: RecordBatch
    notes: tuple[str, ...]
