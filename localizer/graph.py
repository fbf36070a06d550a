"""The grouped communication operator graph (Holmes §4.3.1, figure 11c).

The naive graph links every operator to every GPU taking part in it: |O| x |D| edges (10^10 at
4,096 GPUs). Grouped, an operator links to exactly one communicator group, and a group to its
member ranks, so the graph is two sparse incidence lists built from the job spec alone:

* group -> member ranks (CSR: ``member_ptr``, ``members``), in the group's own rank order, which
  is the ring order NCCL runs a collective in;
* rank -> groups (CSR: ``rank_ptr``, ``rank_groups``).

Operators themselves are never enumerated for the whole job: an operator instance is a record
``(comm, seq)`` on some rank, and it names its group by ``comm``; the search materializes a
rank's operators only when it reaches that rank (``sleuth.localizer.operators``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from sleuth.errors import ConfigError
from sleuth.jobspec import JobSpec
from sleuth.records import RecordBatch
from sleuth.topology.ids import gpu_id, parse_device

__all__ = ["OperatorGraph", "build_graph"]


@dataclass(frozen=True, eq=False)
class OperatorGraph:
    """Communicator groups of one job as sparse incidence arrays; see the module docstring.

    ``stage`` and ``replica`` (pipeline stage and data replica of each rank) come from the job's
    parallel layout; they are ``None`` when the spec has none (a job logged without one).
    """

    job: str
    world: int
    comms: tuple[str, ...]
    kinds: tuple[str, ...]
    member_ptr: np.ndarray
    members: np.ndarray
    rank_ptr: np.ndarray
    rank_groups: np.ndarray
    gpus: tuple[str, ...]  # device id of each rank's GPU (gpu:<host>/<i>)
    stage: np.ndarray | None
    replica: np.ndarray | None
    _index: dict[str, int] = field(repr=False)

    def comm_index(self, comm: str) -> int:
        """The group index of communicator ``comm``; -1 when the spec does not know it."""
        return self._index.get(comm, -1)

    def record_groups(self, records: RecordBatch) -> np.ndarray:
        """The group index of each record's communicator; -1 where the spec does not know it."""
        if not len(records):
            return np.empty(0, np.int64)
        code_to_group = np.array([self.comm_index(s) for s in records.strings], dtype=np.int64)
        return code_to_group[records["comm"]]

    def group(self, index: int) -> np.ndarray:
        """Member ranks of group ``index``, in the group's rank order."""
        return self.members[self.member_ptr[index] : self.member_ptr[index + 1]]

    def groups_of(self, rank: int) -> np.ndarray:
        """Group indices rank ``rank`` is a member of."""
        return self.rank_groups[self.rank_ptr[rank] : self.rank_ptr[rank + 1]]

    @property
    def n_groups(self) -> int:
        return len(self.comms)

    @property
    def n_edges(self) -> int:
        """Operator-to-group edges per operator are one; group-to-rank edges are these."""
        return int(len(self.members))

    @cached_property
    def hosts(self) -> tuple[str, ...]:
        """Host name of each rank, from its GPU id."""
        return tuple(parse_device(gpu).name for gpu in self.gpus)

    @cached_property
    def group_sizes(self) -> np.ndarray:
        """Per group, how many members it has."""
        return np.diff(self.member_ptr)

    @cached_property
    def host_index(self) -> np.ndarray:
        """Dense id of each rank's host (hosts in name order)."""
        return np.unique(np.array(self.hosts), return_inverse=True)[1].reshape(-1)

    @cached_property
    def spans_hosts(self) -> np.ndarray:
        """Per group, whether its members are on more than one host (its traffic crosses NICs)."""
        of_members = self.host_index[self.members]
        spans = np.zeros(self.n_groups, dtype=bool)
        filled = np.flatnonzero(self.group_sizes > 0)
        if len(filled):
            starts = self.member_ptr[filled]
            spans[filled] = np.minimum.reduceat(of_members, starts) != np.maximum.reduceat(of_members, starts)
        return spans

    def host_ranks(self, rank: int) -> list[int]:
        """The ranks on ``rank``'s host, itself included, in rank order."""
        host = self.hosts[rank]
        return [r for r, name in enumerate(self.hosts) if name == host]

    @cached_property
    def last_stage(self) -> int:
        return -1 if self.stage is None else int(self.stage.max())

    def nbytes(self) -> int:
        """Memory held by the incidence arrays (the strings of ids not counted)."""
        arrays = (self.member_ptr, self.members, self.rank_ptr, self.rank_groups)
        extra = sum(a.nbytes for a in (self.stage, self.replica) if a is not None)
        return int(sum(a.nbytes for a in arrays) + extra)


def build_graph(spec: JobSpec) -> OperatorGraph:
    """The grouped operator graph of ``spec``: group and rank incidence lists, stages, GPUs."""
    if not isinstance(spec, JobSpec):
        raise ConfigError(f"build_graph needs a JobSpec, got {type(spec).__name__}")
    comms = spec.communicators
    sizes = np.fromiter((len(c.ranks) for c in comms), dtype=np.int64, count=len(comms))
    member_ptr = np.zeros(len(comms) + 1, dtype=np.int64)
    np.cumsum(sizes, out=member_ptr[1:])
    members = np.fromiter(
        (rank for c in comms for rank in c.ranks), dtype=np.int32, count=int(member_ptr[-1])
    )
    owner = np.repeat(np.arange(len(comms), dtype=np.int32), sizes)
    # Rank -> groups: the transpose of the member list, by a stable sort on rank.
    order = np.argsort(members, kind="stable")
    rank_groups = owner[order]
    counts = np.bincount(members, minlength=spec.world)
    rank_ptr = np.zeros(spec.world + 1, dtype=np.int64)
    np.cumsum(counts, out=rank_ptr[1:])
    stage = replica = None
    if spec.layout is not None:
        coords = spec.layout.coordinate_array()  # columns tp, cp, ep, dp, pp
        stage = coords[:, 4].astype(np.int32)
        replica = (coords[:, 3] * spec.layout.ep + coords[:, 2]).astype(np.int32)
    gpus = tuple(gpu_id(p.host, p.gpu) for p in spec.placements)
    return OperatorGraph(
        job=spec.job,
        world=spec.world,
        comms=tuple(c.comm for c in comms),
        kinds=tuple(c.kind for c in comms),
        member_ptr=member_ptr,
        members=members,
        rank_ptr=rank_ptr,
        rank_groups=rank_groups,
        gpus=gpus,
        stage=stage,
        replica=replica,
        _index={c.comm: i for i, c in enumerate(comms)},
    )
