"""The static plan of an emulated job: what every stage runs, and how its ranks are indexed.

All ranks of one pipeline stage run structurally the same program (design note in
:mod:`sleuth.sim.engine`), so a plan holds, per stage, one list of steps and the index arrays
that map the stage's ranks (its *local positions*, ranks in ascending order) onto communicator
groups, P2P peers and transfer units. The records a stage emits per iteration are its *slots*:
slot ``j`` is the ``j``-th communication operator every rank of the stage runs.

Sequence numbers (``seq``). Collectives: the per-communicator counter of the contract; all
members of a group sit in one stage (tp, cp, ep, dp, edp) or run one such operator per
iteration (embd), so ``seq = iteration x (operators per iteration on that kind) + index``.
P2P: counted per *ordered pair and direction*: the k-th send from A to B on a communicator has
``seq = k`` and so does the k-th receive on B from A. Sender and receiver therefore agree, and
a send pairs with the receive that has the same ``(comm, {rank, peer}, seq)`` and the opposite
direction (a send from A to B and one from B to A may share a seq).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from sleuth.layout import ParallelLayout
from sleuth.records import OpKind

from sleuth.sim.model import ModelSpec, StageCosts, stage_costs
from sleuth.sim.network import Network, UnitSet
from sleuth.sim.schedule import Pass, one_f_one_b, walk_order

__all__ = ["Plan", "Slot", "StagePlan"]

# Step opcodes (tuples keep the engine's inner loop cheap).
COMPUTE, COLL, SEND, RECV, RING = range(5)


@dataclass(frozen=True)
class Slot:
    """One communication operator of a stage's program (the same on every rank of the stage)."""

    kind: str  # communicator kind: tp, cp, ep, dp, edp, pp, embd
    op: OpKind
    nbytes: int
    counter: str  # which seq counter it advances (see the module docstring)
    peer: str = ""  # "next", "prev" (pp), "ring_next", "ring_prev" (cp); "" for collectives


@dataclass
class StagePlan:
    """One stage: its ranks, costs, blocks of steps, slots and local index arrays."""

    stage: int
    ranks: np.ndarray  # global ranks, ascending: local position -> rank
    costs: StageCosts
    blocks: list[list[tuple]]
    tail_reduce: list[tuple]  # after the pipeline: gradient reduction
    tail_update: list[tuple]  # after the embedding all-reduce: optimizer (and ZeRO all-gather)
    slots: list[Slot]
    groups: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]  # kind -> (local table, units, owner)
    n_compute: int = 0
    embd_slot: int = -1  # the embedding all-reduce's slot (first and last stage only)


class Plan:
    """Everything about a job that does not change between iterations or runs."""

    def __init__(
        self, layout: ParallelLayout, model: ModelSpec, microbatches: int, network: Network
    ) -> None:
        self.layout = layout
        self.model = model
        self.microbatches = microbatches
        self.network = network
        coords = layout.coordinate_array()
        self.stage_of = coords[:, 4].copy()
        self.kinds = layout.kinds
        pp = layout.pp
        self.position = np.zeros(layout.world, dtype=np.int64)
        self.stages: list[StagePlan] = []
        for s in range(pp):
            ranks = np.flatnonzero(self.stage_of == s)
            self.position[ranks] = np.arange(len(ranks))
            costs = stage_costs(model, stage=s, pp=pp, tp=layout.tp, cp=layout.cp, ep=layout.ep)
            self.stages.append(StagePlan(s, ranks, costs, [], [], [], [], {}))
        # Data replica of each rank (dp and ep coordinates): ranks that see the same micro-batches.
        self.replica = coords[:, 3] * layout.ep + coords[:, 2]
        self.n_replicas = layout.dp * layout.ep
        self.walk = walk_order(pp, microbatches)
        self._index_groups()
        for stage in self.stages:
            self._build(stage)
        self.counts = [self._seq_counters(stage) for stage in self.stages]

    # -- communicator indexing --------------------------------------------------------------

    def _index_groups(self) -> None:
        layout = self.layout
        self.units: dict[str, UnitSet] = {}
        for kind in self.kinds:
            table = layout.group_array(kind)
            if kind == "pp":
                n = layout.pp
                pairs = [(g * (n - 1) + s, int(row[s]), int(row[s + 1])) for g, row in enumerate(table) for s in range(n - 1)]
                self.units[kind] = self.network.units(kind, pairs, len(table) * (n - 1), 2)
            elif kind == "cp":
                n = layout.cp
                pairs = [(g * n + j, int(row[j]), int(row[(j + 1) % n])) for g, row in enumerate(table) for j in range(n)]
                self.units[kind] = self.network.units(kind, pairs, len(table) * n, 2)
            else:
                n = table.shape[1]
                if kind == "ep":
                    pairs = [(g, int(row[i]), int(row[j])) for g, row in enumerate(table) for i in range(n) for j in range(i + 1, n)]
                else:
                    pairs = [(g, int(row[j]), int(row[(j + 1) % n])) for g, row in enumerate(table) for j in range(n if n > 2 else 1)]
                self.units[kind] = self.network.units(kind, pairs, len(table), n)
        self.owner = {kind: self._owner(kind) for kind in self.kinds}
        self.member_index = {kind: self._member_index(kind) for kind in self.kinds}
        for stage in self.stages:
            for kind in self.kinds:
                if kind in ("pp", "embd"):
                    continue
                table = layout.group_array(kind)
                rows = np.flatnonzero(self.stage_of[table[:, 0]] == stage.stage)
                local = self.position[table[rows]]
                owner = np.empty(len(stage.ranks), dtype=np.int64)
                owner[local] = np.arange(len(rows))[:, None]
                stage.groups[kind] = (local, rows, owner)

    def _owner(self, kind: str) -> np.ndarray:
        table = self.layout.group_array(kind)
        owner = np.full(self.layout.world, -1, dtype=np.int64)
        owner[table] = np.arange(len(table))[:, None]
        return owner

    def _member_index(self, kind: str) -> np.ndarray:
        table = self.layout.group_array(kind)
        index = np.full(self.layout.world, -1, dtype=np.int64)
        index[table] = np.arange(table.shape[1])[None, :]
        return index

    @cached_property
    def ring_peers(self) -> tuple[np.ndarray, np.ndarray]:
        """Next and previous rank around each rank's cp ring (global ranks)."""
        table = self.layout.group_array("cp")
        nxt = np.empty(self.layout.world, dtype=np.int64)
        prv = np.empty(self.layout.world, dtype=np.int64)
        nxt[table] = np.roll(table, -1, axis=1)
        prv[table] = np.roll(table, 1, axis=1)
        return nxt, prv

    # -- programs ---------------------------------------------------------------------------

    def _build(self, stage: StagePlan) -> None:
        c, model, kinds = stage.costs, self.model, self.kinds
        s, pp = stage.stage, self.layout.pp
        sp = model.sequence_parallel
        last = s == pp - 1

        def slot(kind: str, op: OpKind, nbytes: int, counter: str | None = None, peer: str = "") -> int:
            stage.slots.append(Slot(kind, op, int(nbytes), counter or f"coll:{kind}", peer))
            return len(stage.slots) - 1

        def compute(steps: list, base: float, score: float, k: int) -> None:
            steps.append((COMPUTE, base, score, k, stage.n_compute))
            stage.n_compute += 1

        def tp_reduce(steps: list) -> None:
            if "tp" in kinds:
                op = OpKind.REDUCE_SCATTER if sp else OpKind.ALL_REDUCE
                steps.append((COLL, "tp", op, c.tp_bytes, slot("tp", op, c.tp_bytes)))

        def tp_gather(steps: list) -> None:
            if "tp" in kinds and sp:
                steps.append((COLL, "tp", OpKind.ALL_GATHER, c.tp_bytes, slot("tp", OpKind.ALL_GATHER, c.tp_bytes)))

        def a2a(steps: list) -> None:
            if "ep" in kinds:
                steps.append((COLL, "ep", OpKind.ALL_TO_ALL, c.a2a_bytes, slot("ep", OpKind.ALL_TO_ALL, c.a2a_bytes)))

        def ring(steps: list) -> None:
            if "cp" in kinds:
                send = slot("cp", OpKind.SEND, c.cp_bytes, "cp:send", "ring_next")
                recv = slot("cp", OpKind.RECV, c.cp_bytes, "cp:recv", "ring_prev")
                steps.append((RING, c.cp_bytes, send, recv))

        for kind, k in one_f_one_b(s, pp, self.microbatches):
            steps: list[tuple] = []
            scale = 1.0 if kind is Pass.FORWARD else 2.0
            if kind is Pass.FORWARD:
                if s > 0:
                    steps.append((RECV, (kind, k), slot("pp", OpKind.RECV, c.pp_bytes, "pp:fwd:recv", "prev"), s - 1))
                for _ in range(c.layers):
                    ring(steps)
                    tp_gather(steps)
                    compute(steps, c.attn_ns, c.score_ns, k)
                    tp_reduce(steps)
                    tp_gather(steps)
                    a2a(steps)
                    compute(steps, c.mlp_ns, 0.0, k)
                    a2a(steps)
                    tp_reduce(steps)
                if last:
                    compute(steps, c.head_ns, 0.0, k)
                else:
                    steps.append((SEND, (kind, k), slot("pp", OpKind.SEND, c.pp_bytes, "pp:fwd:send", "next")))
            else:
                if not last:
                    steps.append((RECV, (kind, k), slot("pp", OpKind.RECV, c.pp_bytes, "pp:bwd:recv", "next"), s + 1))
                else:
                    compute(steps, scale * c.head_ns, 0.0, k)
                for _ in range(c.layers):
                    tp_gather(steps)
                    a2a(steps)
                    compute(steps, scale * c.mlp_ns, 0.0, k)
                    a2a(steps)
                    tp_reduce(steps)
                    tp_gather(steps)
                    compute(steps, scale * c.attn_ns, scale * c.score_ns, k)
                    tp_reduce(steps)
                    ring(steps)
                if s > 0:
                    steps.append((SEND, (kind, k), slot("pp", OpKind.SEND, c.pp_bytes, "pp:bwd:send", "prev")))
            stage.blocks.append(steps)

        reduce_op = OpKind.REDUCE_SCATTER if model.zero else OpKind.ALL_REDUCE
        for group, nbytes in (("dp", c.dp_bytes), ("edp", c.edp_bytes)):
            if group in kinds and nbytes:
                stage.tail_reduce.append((COLL, group, reduce_op, nbytes, slot(group, reduce_op, nbytes)))
        if "embd" in kinds and s in (0, pp - 1):
            stage.embd_slot = slot("embd", OpKind.ALL_REDUCE, c.embd_bytes)
        compute(stage.tail_update, c.optimizer_ns, 0.0, -1)
        if model.zero:
            for group, nbytes in (("dp", c.dp_bytes), ("edp", c.edp_bytes)):
                if group in kinds and nbytes:
                    stage.tail_update.append(
                        (COLL, group, OpKind.ALL_GATHER, nbytes, slot(group, OpKind.ALL_GATHER, nbytes))
                    )

    def _seq_counters(self, stage: StagePlan) -> tuple[np.ndarray, np.ndarray]:
        """Per slot: operators per iteration on its counter, and its index among them."""
        per_iteration: dict[str, int] = {}
        index = np.empty(len(stage.slots), dtype=np.int64)
        for j, slot in enumerate(stage.slots):
            index[j] = per_iteration.get(slot.counter, 0)
            per_iteration[slot.counter] = index[j] + 1
        count = np.array([per_iteration[slot.counter] for slot in stage.slots], dtype=np.int64)
        return count, index
