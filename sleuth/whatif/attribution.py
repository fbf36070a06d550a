"""What-if attribution (What-if paper §3.2-§5): what a job pays for its stragglers, and to whom.

From a job's records (every rank, many iterations) the replay (``timeline``) runs the job

* as recorded: ``T_orig`` (the paper simulates the original timeline too, so that the replay's
  own error cancels out of the ratio);
* with every operator at the length its peers show: ``T_ideal``. A compute gap (the time between
  a rank's clock and its next operator's start) that lies beyond the spread of that gap over the
  ranks running the same program in the same iteration (``programs``) takes their median (where
  they sit on two hosts, the faster host's for the slower's: ``_faster_host``); a
  transfer beyond the spread of that slot, of its type and volume on every program (``_volume_put_back``),
  or of its own operator identity's other iterations
  (those at its lower level where they step from one level to another and stay:
  ``keys.lower_level``), takes the lower such median, so that a slow link present from the first
  iteration, one slowing a whole program, and one slowing most of the slot for most of the run
  are all put back. Lengths within their peers' spread stay as recorded: the paper equalizes
  them too, which counts the job's jitter as stragglers (S 1.044 on a fault-free 8,192-GPU
  emulated run, whose twin is itself). Then each micro-batch's compute is spread evenly over the
  data-parallel replicas where their work differs beyond jitter (``_data_rebalanced``): the
  paper's average over them amounts to rebalancing the data, sequence lengths (§5.3). Then the
  compute is spread evenly over the pipeline stages (``_rebalanced``): the paper averages compute
  over stages too, which amounts to rebalancing the split (§3.2, §5.2). The ideal without that
  last step (``hardware_ideal_ns``) is what S_w, M_W and the host's share are measured against.

Then, following the paper's definitions, ``S = T_orig / T_ideal`` (eq. 1), the same per iteration,
``S_t = T_(all but type t fixed) / T_ideal`` per operator type (eq. 2), ``S_w`` per worker (eq. 4)
by the paper's approximation when the job has a layout (fix all but one data-parallel replica,
then all but one pipeline stage; a worker gets the smaller of its two) and per rank otherwise,
``M_W`` the share of the slowdown the top 3% of workers explain (eq. 5), the same for the top
worker's host, and ``M_S`` the last pipeline stage's share (§5.2); GPU-hours lost are ``(1 - 1/S) x wall time x GPUs`` (eq. 3).

The job's iterations are replayed as one timeline, as the paper simulates the whole job (§3.2):
a rank starts an iteration where its own last one left it, opening its first operator as long
after its clock at the end of the iteration before as it did (where that iteration is recorded;
else every rank opens it at 0, its first gap from its iteration record's start, or the
iteration's first operator anywhere), so that ranks that run into the next
iteration apart (a pipeline's stages, a rank a slow transfer holds back) overlap as recorded
rather than start each iteration together. An iteration's length is how far it moves the job's
latest end. The operator types' and the workers' variants replay each iteration on its own from
a common start, against the same replays as recorded and ideal: what a type or a worker costs is
charged to the iteration it was paid in. The workers' run on the ``worker_iterations`` iterations
with the largest slowdown only (the paper's §4.2: a straggling job's steps have similar
slowdowns); every variant of a batch shares one sweep.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from sleuth.errors import ConfigError, RecordError
from sleuth.jobspec import JobSpec
from sleuth.records import IterationBatch, OpKind, RecordBatch
from sleuth.validation import fraction, integer
from sleuth.whatif.keys import (dense_ids, first_of_each, group_median, group_spread, keyed_spread, lexical_order, mix,
                                places_in_runs, unique_rows, unique_small)
from sleuth.whatif.beside import beside
from sleuth.whatif.programs import ProgramSlots, program_slots
from sleuth.whatif.rules import ATTRIBUTION_RULES
from sleuth.whatif.timeline import Dependencies, carry_links, dependencies, holds_rank, latest_ends, member_groups

__all__ = ["COMPUTE", "Attribution", "PeerHistory", "attribute", "attribute_and_leave", "newest_slowdowns"]

_RULES = ATTRIBUTION_RULES

#: The operator type of compute gaps (the other types are "<communicator kind>.<op>").
COMPUTE = "compute"
#: Operator-variants each batch of replicas replays together (``_replicas``): at 8,192 GPUs and
#: up, a batch of a few replicas; at small scales every replica at once.
_BATCH_VALUES = 1 << 25
_NS_PER_HOUR = 3_600e9
#: Communicators whose transfers of one type and volume make a median (``_volume_put_back``): of
#: two, one slow, neither is the peers' (the faster is, where they lie apart: ``_lower_level_of_peers``).
_VOLUME_PEERS = 3
#: A rank's clock where it has no records in an iteration.
_NO_CLOCK = np.iinfo(np.int64).min
#: Guards the jobs' subset caches (``_subset``).
_SUBSETS = threading.RLock()
#: What a replay of a job's operators caches on the job (``_Job``'s cached properties) and on its
#: graph (``Dependencies``'): ``_release`` drops them.
_CARRY_CACHES = ("links", "leveled_lead")  # only the replays on the one timeline read these
_REPLAY_CACHES = ("leveled", *_CARRY_CACHES, "iteration_bounds")
_GRAPH_CACHES = ("order", "flat")


@dataclass(frozen=True)
class Attribution:
    """The what-if result of one job over its recorded iterations."""

    job: str
    world: int
    iterations: tuple[int, ...]
    original_ns: tuple[float, ...]  # each iteration replayed as recorded
    ideal_ns: tuple[float, ...]  # each iteration replayed with every operator at its peers' length
    #: each iteration replayed with the stragglers put back but the pipeline's split as recorded:
    #: S_w, M_W and the host's share are measured against it, so an uneven split blames no worker
    hardware_ideal_ns: tuple[float, ...]
    recorded_ns: tuple[float, ...]  # each iteration as recorded (earliest rank's start to last end of any rank)
    by_type: dict[str, float]  # S_t
    by_worker: tuple[float, ...]  # S_w per rank (1.0 where not measured)
    worker_unit: str  # "replica x stage" (the paper's approximation), "rank", or "" when not measured
    worker_share: float  # M_W
    host_share: float  # the same share for the top worker's host (all its ranks fixed)
    last_stage_share: float | None  # M_S (None without pipeline stages)
    wall_ns: float  # first record's start to last record's end
    last_stage_evenness: float = 0.0  # the last stage's median worker excess (S_w - 1) over its largest
    worker_iterations: tuple[int, ...] = ()  # the iterations S_w, M_W and M_S were measured on
    slowest_replica: tuple[int, ...] = ()  # per worker iteration, the replica that cost most (with a layout)
    #: per iteration (``iterations``), the data-parallel replica of the rank that computed longest
    #: against the same place in the other replicas (with two replicas or more): replicas run the
    #: same model on the same number of micro-batches, so it holds the costliest data or the slow device
    costliest_replica: tuple[int, ...] = ()
    costliest_rank: tuple[int, ...] = ()  # per iteration, the rank that made its replica the costliest
    costliest_host: tuple[str, ...] = ()  # per iteration, the host of the rank that made its replica the costliest
    #: per iteration, the share of that replica's ranks at the other places that computed longer than
    #: their place's median: every layer's work grows with a batch's tokens, so costly data is costly at
    #: every place (near 1), a slow device at its own (the others at chance, about a half); () without other places
    costliest_breadth: tuple[float, ...] = ()
    replicas: int = 0  # data-parallel replicas (x expert-parallel groups) of the layout, 0 without one
    #: per iteration and rank, its compute over its place's median (as ``costliest_rank`` reads it); None without two replicas
    relative_compute: np.ndarray | None = field(default=None, repr=False, compare=False)
    #: per iteration and type (``by_type``'s order), the iteration's ideal length times its S_t (its
    #: replay with everything fixed but that type over its ideal, the iteration on its own): S_t over
    #: any stretch of iterations; None where not measured
    by_type_ns: np.ndarray | None = field(default=None, repr=False, compare=False)
    #: per iteration and rank, the share of its compute (its gaps at their put-back lengths) that ran
    #: beyond its peers' spread: a slow device slows most of a rank's work, a pause one step of it
    persistent_compute: np.ndarray | None = field(default=None, repr=False, compare=False)
    #: per iteration and rank, how many of its gaps ran longer than their peers' median (0) and how many
    #: were compared (1; ties and gaps without enough peers are not): a batch's tokens or a slow device
    #: lengthen every layer a little, within the spread, a pause one step a lot
    gaps_above_median: np.ndarray | None = field(default=None, repr=False, compare=False)
    hosts: int = 0  # hosts the job runs on
    replayable: _Job | None = field(default=None, repr=False, compare=False)  # for contributors.py's finer variants
    prepared: _Prepared | None = field(default=None, repr=False, compare=False)  # for ``over``
    seconds: float = 0.0

    @property
    def slowdown(self) -> float:
        """S: the job's replayed time as recorded over its ideal time."""
        ideal = sum(self.ideal_ns)
        return sum(self.original_ns) / ideal if ideal > 0 else 1.0

    @property
    def split_slowdown(self) -> float:
        """What an even pipeline split saves beyond putting the stragglers back (1.0: nothing)."""
        ideal = sum(self.ideal_ns)
        return sum(self.hardware_ideal_ns) / ideal if ideal > 0 else 1.0

    @property
    def per_iteration(self) -> tuple[float, ...]:
        return tuple(o / i if i > 0 else 1.0 for o, i in zip(self.original_ns, self.ideal_ns))

    @property
    def gpu_hours_lost(self) -> float:
        return (1.0 - 1.0 / self.slowdown) * self.wall_ns * self.world / _NS_PER_HOUR

    @property
    def fidelity(self) -> float:
        """The replay as recorded over the recorded time (the paper keeps jobs within 5%)."""
        recorded = sum(self.recorded_ns)
        return sum(self.original_ns) / recorded if recorded > 0 else 1.0

    def over(self, iterations: Iterable[int]) -> Attribution:
        """The attribution of ``iterations`` alone (an episode of a longer run), each operator still
        put back to the peers of every iteration this one measured: its ranks and types, not the
        costliest stretch's, and its S per iteration the same as here."""
        if self.prepared is None:
            raise ConfigError("this attribution keeps no prepared job (made without records?)")
        at = np.flatnonzero(np.isin(self.prepared.steps, np.fromiter(iterations, np.int64)))
        if not len(at):
            raise ConfigError(f"none of those iterations is among the {len(self.iterations)} attributed")
        return _measured(self.prepared, at, wall_ns=float(self.prepared.recorded[at].sum()), began=time.perf_counter())[0]

    def persistent_transfers(self, iterations: Iterable[int], *, most: float) -> float:
        """The share of what transfers ran beyond their peers over ``iterations`` (recorded less put
        back) that operators running beyond them in more than ``most`` of those iterations carry: a
        slowed link, NIC or switch lengthens every transfer through it at every step it is slow (near
        1), a loaded host's jitter one transfer in one step, another in the next (near 0). 1.0 where
        no transfer ran beyond its peers, or without the prepared job to tell."""
        if self.prepared is None:
            return 1.0
        job = self.prepared.job
        wanted = np.isin(job.steps, np.fromiter(iterations, np.int64))
        at = np.flatnonzero(wanted[job.iteration] & (job.kind >= 0))
        excess = job.transfer[at] - job.ideal_transfer[at]
        # A put-back length is never longer (``_beyond_spread``): only the transfers beyond their peers count.
        beyond = excess > 0
        if not beyond.any():
            return 1.0
        _, identity = np.unique(job.identity[at[beyond]], return_inverse=True)
        beyond_in = np.bincount(identity)
        carried = np.bincount(identity, weights=excess[beyond])
        iterations_read = np.count_nonzero(np.bincount(job.iteration[at], minlength=len(job.steps)))
        persistent = beyond_in > most * iterations_read
        return float(carried[persistent].sum() / carried.sum())

    def top_workers(self, k: int = 5) -> tuple[tuple[int, float], ...]:
        order = np.argsort(-np.asarray(self.by_worker), kind="stable")[:k]
        return tuple((int(r), float(self.by_worker[r])) for r in order if self.by_worker[r] > 1.0)

    def top_types(self, k: int = 3) -> tuple[tuple[str, float], ...]:
        ranked = sorted(self.by_type.items(), key=lambda item: -item[1])[:k]
        return tuple((t, s) for t, s in ranked if s > 1.0)

    def to_dict(self) -> dict:
        return {
            "job": self.job,
            "world": self.world,
            "slowdown": round(self.slowdown, 4),
            "split_slowdown": round(self.split_slowdown, 4),
            "gpu_hours_lost": self.gpu_hours_lost,
            "iterations": list(self.iterations),
            "per_iteration": [round(s, 4) for s in self.per_iteration],
            "by_type": {t: round(s, 4) for t, s in sorted(self.by_type.items())},
            "top_workers": [{"rank": r, "slowdown": round(s, 4)} for r, s in self.top_workers()],
            "worker_unit": self.worker_unit,
            "worker_share": round(self.worker_share, 4),
            "host_share": round(self.host_share, 4),
            "last_stage_share": None if self.last_stage_share is None else round(self.last_stage_share, 4),
            "last_stage_evenness": round(self.last_stage_evenness, 4),
            "worker_iterations": list(self.worker_iterations),
            "slowest_replica": list(self.slowest_replica),
            "costliest_replica": list(self.costliest_replica),
            "costliest_rank": list(self.costliest_rank),
            "costliest_host": list(self.costliest_host),
            "costliest_breadth": [round(b, 4) for b in self.costliest_breadth],
            "replicas": self.replicas,
            "hosts": self.hosts,
            "fidelity": round(self.fidelity, 4),
            "wall_ns": self.wall_ns,
            "seconds": round(self.seconds, 4),
        }


@dataclass(frozen=True)
class _Job:
    """A job's operators in chain order (iteration, rank, start), ready to replay."""

    deps: Dependencies
    rank: np.ndarray
    iteration: np.ndarray  # dense 0..I-1
    kind: np.ndarray  # dense operator type of each operator's transfer
    kinds: tuple[str, ...]
    gap: np.ndarray
    transfer: np.ndarray
    own: np.ndarray
    ideal_gap: np.ndarray  # as ``hardware_ideal_gap``, then the stages' work evened out
    hardware_gap: np.ndarray  # put back to its program's median only
    hardware_ideal_gap: np.ndarray  # put back, then each micro-batch's work evened out over the replicas (``_data_rebalanced``)
    gap_side: np.ndarray  # int8: +1 where the gap ran longer than its peers' median, -1 shorter, 0 tie or too few peers
    ideal_transfer: np.ndarray
    comm: np.ndarray  # index into comms
    comms: tuple[str, ...]
    seq: np.ndarray
    steps: np.ndarray  # iteration id of each dense iteration
    identity: np.ndarray  # uint64 per operator: its identity across iterations (``_identity_keys``)
    #: bool per operator: it opens its rank's chain in an iteration that goes on from the rank's chain
    #: in the iteration before
    continues: np.ndarray
    #: per operator that ``continues``, from the rank's clock in the iteration before to its origin in
    #: this one (its gap runs from there); 0 elsewhere
    lead: np.ndarray
    world: int
    subsets: dict = field(default_factory=dict, repr=False, compare=False)  # chosen iterations -> (_Job, rows), built once
    #: the job whose leveled lengths this one shares, all but the ideal gaps (``_hardware``'s)
    sharing: _Job | None = field(default=None, repr=False, compare=False)

    @cached_property
    def leveled(self) -> tuple[np.ndarray, ...]:
        """Anchors (0: each iteration on its own, every rank from 0), gaps, ideal gaps, transfers,
        ideal transfers and own lengths in the replay's level order, made once for all its variants."""
        if self.sharing is not None:
            anchor, gap, _, transfer, ideal_transfer, own = self.sharing.leveled
            return anchor, gap, self.deps.leveled(self.ideal_gap), transfer, ideal_transfer, own
        # Zeros from calloc: pages the sweep only reads stay the kernel's one zero page, not memory.
        zeros = np.zeros(len(self.deps.order))
        return zeros, *(self.deps.leveled(a) for a in (self.gap, self.ideal_gap, self.transfer, self.ideal_transfer,
                                                        self.own))

    @cached_property
    def links(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The replay's carry links and slots (ranks) in level order (``timeline.carry_links``), or
        None where an iteration's chains or groups cross into another's (iterations cannot chain)."""
        if self.sharing is not None and self.sharing.deps is self.deps:
            return self.sharing.links
        if not self.deps.by_part:
            return None
        return self.deps.leveled(carry_links(self.deps, self.continues)), self.deps.leveled(self.rank.astype(np.int32))

    @cached_property
    def leveled_lead(self) -> np.ndarray:
        """The anchors of the replay as one timeline (``lead``), in level order."""
        if self.sharing is not None and self.sharing.deps is self.deps:
            return self.sharing.leveled_lead
        return self.deps.leveled(self.lead)

    @cached_property
    def iteration_bounds(self) -> np.ndarray:
        """Where each iteration's operators begin (operators are in iteration order)."""
        return _starts(self.iteration)


@dataclass(frozen=True)
class _Subset:
    """A job's operators of some iterations as their replays read them (``_run_variants``): the
    graph over them, and the job's columns the replay reads, gathered straight into its level
    order from the job's (``rows``), so that no other column of the job is copied."""

    deps: Dependencies
    rows: np.ndarray  # the job's operators kept, ascending (chain order)
    iteration_bounds: np.ndarray  # where each kept iteration's operators begin among them
    #: the job's own columns (every operator): gap, ideal gap, transfer, ideal transfer, own length,
    #: continues, rank and lead (``_Job``'s)
    columns: tuple[np.ndarray, ...]
    #: the subset whose level order and lengths this one shares, all but the ideal gaps (``_hardware``'s)
    sharing: _Subset | None = None

    @cached_property
    def level_rows(self) -> np.ndarray:
        """The job's operators in the subset's level order."""
        if self.sharing is not None:
            return self.sharing.level_rows
        return self.rows[self.deps.order]

    def _leveled(self, values: np.ndarray) -> np.ndarray:
        """A column of the job's, the subset's operators in its level order (``Dependencies.leveled``)."""
        return np.ascontiguousarray(values[self.level_rows])

    @cached_property
    def leveled(self) -> tuple[np.ndarray, ...]:
        """``_Job.leveled`` of the subset's operators."""
        gap, ideal_gap, transfer, ideal_transfer, own = self.columns[:5]
        if self.sharing is not None:
            anchor, shared_gap, _, shared_transfer, shared_ideal_transfer, shared_own = self.sharing.leveled
            return anchor, shared_gap, self._leveled(ideal_gap), shared_transfer, shared_ideal_transfer, shared_own
        zeros = np.zeros(len(self.deps.order))
        return zeros, *(self._leveled(a) for a in (gap, ideal_gap, transfer, ideal_transfer, own))

    @cached_property
    def links(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``_Job.links`` of the subset's operators."""
        if self.sharing is not None:
            return self.sharing.links
        if not self.deps.by_part:
            return None
        continues, rank = self.columns[5][self.rows], self.columns[6]
        return self.deps.leveled(carry_links(self.deps, continues)), self._leveled(rank).astype(np.int32)

    @cached_property
    def leveled_lead(self) -> np.ndarray:
        """``_Job.leveled_lead`` of the subset's operators."""
        if self.sharing is not None:
            return self.sharing.leveled_lead
        return self._leveled(self.columns[7])


def _starts(iteration: np.ndarray) -> np.ndarray:
    """Where each iteration's operators begin in chain order (iteration first): the replay's parts,
    since every rank starts each iteration from its own anchor."""
    return np.r_[0, np.flatnonzero(np.diff(iteration)) + 1].astype(np.int64)


def attribute(records: RecordBatch, spec: JobSpec, *, iterations: IterationBatch | None = None,
              worker_iterations: int = _RULES.worker_iterations, top_workers: float = _RULES.top_workers,
              history: Sequence[PeerHistory] = ()) -> Attribution:
    """The what-if attribution of one job's records (all its ranks; iteration -1 records are left out).

    ``history``: what earlier iterations left (``newest_slowdowns``), joining the peers across
    iterations, so that attributing only an episode's iterations measures them as the whole window would.
    """
    return _attributed(records, spec, iterations, history, worker_iterations, top_workers)[0]


def attribute_and_leave(records: RecordBatch, spec: JobSpec, *, iterations: IterationBatch | None = None,
                        history: Sequence[PeerHistory] = (), newest: int = 1) -> tuple[Attribution, dict[int, PeerHistory]]:
    """``attribute``, and what each of the ``newest`` iterations leaves for later ones' peers (by
    iteration id), from one preparation.

    Every iteration's peers are the same here as in ``newest_slowdowns`` of the same records and
    history, so the newest ones' S (``Attribution.per_iteration[-newest:]``) are the ones that
    measure: a streaming round that both measures the iterations that landed and attributes the
    episode they end prepares each once."""
    integer("newest", newest, low=1)
    attribution, left = _attributed(records, spec, iterations, history, _RULES.worker_iterations, _RULES.top_workers,
                                    leave=slice(-newest, None))
    return attribution, {h.step: h for h in left}


def _attributed(records: RecordBatch, spec: JobSpec, iterations: IterationBatch | None,
                history: Sequence[PeerHistory], worker_iterations: int, top_workers: float,
                leave: slice = slice(0)) -> tuple[Attribution, list[PeerHistory]]:
    """``attribute``'s attribution, and what the iterations ``leave`` picks leave (``_prepare``)."""
    began = time.perf_counter()
    integer("worker_iterations", worker_iterations, low=1)
    fraction("top_workers", top_workers)
    job, steps, recorded, left = _prepare(_one_jobs(records, spec), spec, iterations, history, leave=leave)
    prepared = _Prepared(job, _hardware(job), steps, recorded, spec, worker_iterations, top_workers,
                         _carried_in(steps, history))
    wall_ns = float(records["t_end_ns"].max() - records["t_start_ns"].min())
    attribution, offsets = _measured(prepared, np.arange(len(steps)), wall_ns=wall_ns, began=began)
    if left and offsets is not None and left[-1].step == int(steps[-1]):
        left[-1] = replace(left[-1], offsets=offsets)
    return attribution, left


@dataclass(frozen=True)
class _Prepared:
    """A job's records ready to replay (``_prepare``), kept with its attribution so that any stretch
    of its iterations is measured against the peers of all of them (``Attribution.over``)."""

    job: _Job
    hardware: _Job  # the stragglers put back, the pipeline's split as recorded
    steps: np.ndarray  # iteration id of each dense iteration
    recorded: np.ndarray  # per dense iteration, as recorded
    spec: JobSpec
    worker_iterations: int
    top_workers: float
    #: per rank, (as recorded, ideal) replayed clocks the history's newest iteration left, where it is
    #: the iteration before the first (``PeerHistory.offsets``); None: every rank starts the first at 0
    carried: np.ndarray | None = None


def _just_before(steps: np.ndarray, history: Sequence[PeerHistory]) -> PeerHistory | None:
    """The ``history``'s newest iteration where it is the one just before the first of ``steps``."""
    newest = history[-1] if history else None
    return newest if len(steps) and newest is not None and newest.step == int(steps[0]) - 1 else None


def _carried_in(steps: np.ndarray, history: Sequence[PeerHistory]) -> np.ndarray | None:
    """What the ``history``'s newest iteration left the replay of ``steps`` (``_Prepared.carried``)."""
    before = _just_before(steps, history)
    return None if before is None else before.offsets


def _carry(prepared: _Prepared, at: np.ndarray, columns: Sequence[int]) -> np.ndarray:
    """The clocks each rank starts the replay of ``at`` with, one column per variant (``columns``:
    0 as recorded, 1 ideal): what the iteration before left where the replay starts at the first
    iteration and that one is known, else 0 for every rank."""
    carry = np.zeros((prepared.job.world, len(columns)))
    if prepared.carried is not None and len(at) and at[0] == 0:
        carry[:] = prepared.carried[:, list(columns)]
    return carry


def _measured(prepared: _Prepared, at: np.ndarray, *, wall_ns: float,
              began: float) -> tuple[Attribution, np.ndarray | None]:
    """The attribution of the dense iterations ``at`` of ``prepared``, and each rank's (as recorded,
    ideal) replayed clocks after the last of them (``PeerHistory.offsets``; None where iterations
    cannot chain)."""
    job, hardware, steps, spec = prepared.job, prepared.hardware, prepared.steps, prepared.spec
    # Replays of the iterations ``at``, laid out over every dense iteration (0 elsewhere), so that
    # the worker measures below index them by dense iteration.
    original, ideal, hardware_ideal = (np.zeros(len(steps)) for _ in range(3))
    # As recorded and ideal on the one timeline, the hardware ideal beside them (only the ideal
    # variant: the recorded replay is the same for both jobs), each variant going on from where it
    # left the iteration before.
    recorded_or_ideal, none_kept = _every_operator(job, [True, False]), _every_operator(job, [False])
    hardware_replay = (beside(_run_variants, hardware, none_kept, none_kept, at, _carry(prepared, at, [1]))
                       if hardware is not job else None)
    # Each iteration on its own from a common start, as recorded, ideal, and S_t's: everything fixed
    # but one type (compute gaps, or one communicator kind's op's transfers); one sweep replays them
    # all, beside the one timeline's. What a type or a worker costs is charged to the iteration it
    # was paid in, not to the ones a stagger it left carries into; these are the workers' baselines too.
    types = (COMPUTE, *job.kinds)
    keep_gap = _every_operator(job, [True, False, True] + [False] * (len(types) - 1))
    keep_transfer = np.empty((len(job.gap), 2 + len(types)), bool)
    keep_transfer[:, 0], keep_transfer[:, 1] = True, False
    np.equal(job.kind[:, None], np.arange(-1, len(job.kinds))[None, :], out=keep_transfer[:, 2:])
    alone_replay = beside(_run_variants, job, keep_gap, keep_transfer, at)
    carry = _carry(prepared, at, [0, 1])
    replayed = _run_variants(job, recorded_or_ideal, recorded_or_ideal, at, carry)
    original[at], ideal[at] = replayed[:, 0], replayed[:, 1]
    alone = alone_replay.result()
    alone_original, alone_ideal = (np.zeros(len(steps)) for _ in range(2))
    alone_original[at], alone_ideal[at] = alone[:, 0], alone[:, 1]
    # Each iteration's S_t laid on its ideal length on the one timeline, so that they add up as S does.
    type_iterations = np.divide(alone[:, 2:], alone[:, 1:2], out=np.ones_like(alone[:, 2:]),
                                where=alone[:, 1:2] > 0) * ideal[at][:, None]
    hardware_ideal[at] = hardware_replay.result()[:, 0] if hardware_replay is not None else ideal[at]
    base = ideal[at].sum()
    by_type = {name: float(t / base) if base > 0 else 1.0 for name, t in zip(types, type_iterations.sum(axis=0))}

    # S_w on the slowest iterations, and the shares of the slowdown the top workers and last stage explain.
    # The stragglers' slowest iterations: the workers are measured against the ideal that keeps the split.
    chosen = np.sort(at[np.argsort(-(original[at] / np.where(hardware_ideal[at] > 0, hardware_ideal[at], np.nan)),
                                   kind="stable")[:prepared.worker_iterations]])
    # The workers' variants replay each chosen iteration on its own, against the hardware ideal replayed so too.
    alone_hardware = alone_ideal.copy()
    if hardware is not job:
        alone_hardware[chosen] = _run_variants(hardware, none_kept, none_kept, chosen)[:, 0]
    top_workers = prepared.top_workers
    stage, replica = _stage_replica(spec)
    costliest, breadth, relative = _costliest_rank(job, spec, replica, len(steps))
    costliest, breadth = tuple(costliest[i] for i in at) if costliest else (), tuple(breadth[i] for i in at) if breadth else ()
    fixed_last_replay = None
    if stage is not None and stage.max() > 0:
        # M_S against the whole ideal (the last stage's stragglers and its share of an uneven split),
        # replayed beside the workers'; the chosen iterations' subset is cached first, so that the
        # two threads do not both build it.
        _subset(job, chosen)
        last = stage[job.rank] == stage.max()
        fixed_last_replay = beside(_run_variants, job, ~last[:, None], ~last[:, None], chosen)
    unit, by_worker, slowest = _workers(hardware, spec, stage, replica, chosen, alone_hardware, alone_original,
                                        top_workers)
    lost = alone_original[chosen].sum() - alone_hardware[chosen].sum()
    worker_share = host_share = last_share = 0.0
    if fixed_last_replay is not None:
        fixed_last = fixed_last_replay.result()[:, 0].sum()
        whole_lost = alone_original[chosen].sum() - alone_ideal[chosen].sum()
        last_share = float((alone_original[chosen].sum() - fixed_last) / whole_lost) if whole_lost > 0 else 0.0
    if unit:
        count = max(1, math.ceil(top_workers * spec.world))
        # Workers tied with the last of the top share are in it too: the replica x stage
        # approximation gives a whole tensor group one value, and cannot tell its ranks apart.
        cutoff = np.sort(by_worker)[::-1][count - 1]
        # The top worker's host too: its CPU or NVSwitch slows all its GPUs, more than 3% of a small job.
        hosts = np.array([p.host for p in spec.placements])
        fixed = [(by_worker >= cutoff)[job.rank], (hosts == hosts[int(np.argmax(by_worker))])[job.rank]]
        keep = ~np.stack(fixed, axis=1)
        times = _run_variants(hardware, keep, keep, chosen).sum(axis=0)
        if lost > 0:
            worker_share, host_share = (float((alone_original[chosen].sum() - t) / lost) for t in times[:2])
            if len(set(hosts.tolist())) == 1:
                # One host holds the whole job: fixing it fixes everything, which names no host.
                host_share = 0.0
    offsets = carry[:, :2].copy() if _subset(job, at)[0].links is not None else None
    _release(prepared, at, chosen)
    return Attribution(
        job=spec.job, world=spec.world, iterations=tuple(int(i) for i in steps[at]),
        original_ns=tuple(float(t) for t in original[at]), ideal_ns=tuple(float(t) for t in ideal[at]),
        hardware_ideal_ns=tuple(float(t) for t in hardware_ideal[at]),
        recorded_ns=tuple(float(t) for t in prepared.recorded[at]), by_type=by_type, by_type_ns=type_iterations,
        by_worker=tuple(float(s) for s in by_worker), worker_unit=unit, worker_share=worker_share, host_share=host_share,
        worker_iterations=tuple(int(i) for i in steps[chosen]), slowest_replica=slowest,
        costliest_replica=tuple(int(replica[r]) for r in costliest) if replica is not None else (),
        costliest_rank=costliest, relative_compute=None if relative is None else relative[at],
        persistent_compute=_persistence(job, spec.world, len(steps))[at],
        gaps_above_median=_gaps_above_median(job, spec.world, len(steps))[at],
        costliest_host=tuple(spec.placements[r].host for r in costliest), costliest_breadth=breadth,
        replicas=0 if replica is None else int(replica.max()) + 1,
        hosts=len({p.host for p in spec.placements}),
        replayable=hardware, prepared=prepared,
        last_stage_share=None if stage is None or stage.max() == 0 else last_share,
        last_stage_evenness=_evenness(by_worker, stage) if unit and stage is not None else 0.0,
        wall_ns=wall_ns,
        seconds=time.perf_counter() - began,
    ), offsets


def _costliest_rank(job: _Job, spec: JobSpec, replica: np.ndarray | None,
                    iterations: int) -> tuple[tuple[int, ...], tuple[float, ...], np.ndarray | None]:
    """Per dense iteration, the rank that computed longest against its counterparts in the other
    replicas (the ranks at its place in the tensor, context and pipeline layout: the same work on
    other data), and the share of its replica's ranks at the other places that computed longer than
    their counterparts' median (``Attribution.costliest_breadth``), and every rank's compute over its
    place's median (``Attribution.relative_compute``); ((), (), None) without two replicas.
    One slow GPU stands out at its place however little of its replica's work it does; a costly
    batch at every place."""
    if replica is None or replica.max() < 1 or spec.layout is None:
        return (), (), None
    world = spec.world
    compute = np.bincount(job.iteration * world + job.rank, weights=job.gap, minlength=iterations * world)
    compute = compute.reshape(iterations, world)
    coords = spec.layout.coordinate_array()  # columns tp, cp, ep, dp, pp
    _, place = unique_rows(coords[:, 0], coords[:, 1], coords[:, 4])
    relative = np.zeros_like(compute)
    for p in range(int(place.max()) + 1):
        ranks = np.flatnonzero(place == p)
        median = np.median(compute[:, ranks], axis=1, keepdims=True)
        relative[:, ranks] = np.divide(compute[:, ranks], median, out=np.ones((iterations, len(ranks))), where=median > 0)
    costliest = relative.argmax(axis=1)
    breadth: list[float] = []
    if place.max() > 0:
        for it, rank in enumerate(costliest.tolist()):
            others = (replica == replica[rank]) & (place != place[rank])
            breadth.append(float((relative[it, others] > 1.0).mean()))
    return tuple(int(r) for r in costliest), tuple(breadth), relative


def _persistence(job: _Job, world: int, iterations: int) -> np.ndarray:
    """Per dense iteration and rank, the share of its compute that ran beyond its peers' spread
    (``Attribution.persistent_compute``): its gaps put back, weighed by their put-back lengths
    (the work each carries; a gap between two back-to-back operators carries none)."""
    cell = job.iteration * world + job.rank
    size = iterations * world
    work = np.bincount(cell, weights=job.hardware_gap, minlength=size)
    beyond = job.gap > job.hardware_gap
    slow = np.bincount(cell[beyond], weights=job.hardware_gap[beyond], minlength=size)
    return np.divide(slow, work, out=np.zeros(size), where=work > 0).reshape(iterations, world)


def _gaps_above_median(job: _Job, world: int, iterations: int) -> np.ndarray:
    """Per dense iteration and rank, (gaps longer than their peers' median, gaps compared)
    (``Attribution.gaps_above_median``)."""
    cell = job.iteration * world + job.rank
    size = iterations * world
    above = np.bincount(cell, weights=job.gap_side > 0, minlength=size)
    compared = np.bincount(cell, weights=job.gap_side != 0, minlength=size)
    return np.stack([above, compared], axis=1).astype(np.int64).reshape(iterations, world, 2)


@dataclass(frozen=True)
class PeerHistory:
    """What one prepared iteration leaves for a later iteration's peers (``newest_slowdowns``): its
    complete transfers keyed by their operator identity (rank, place in its program, communicator,
    op) with their lengths, and each pipeline stage's work in it (``_rebalanced``)."""

    keys: np.ndarray  # uint64, ascending
    transfer: np.ndarray
    stage_work: np.ndarray | None  # per stage, NaN where the iteration shows none; None without stages
    step: int = -1  # the iteration's id
    #: per rank, its clock as recorded at the iteration's end (``_NO_CLOCK``: no records): where its next one goes on from
    clocks: np.ndarray | None = field(default=None, repr=False)
    end_ns: int | None = None  # the iteration's latest recorded end
    #: per rank, its replayed clocks (as recorded, ideal) at the iteration's end, less the iteration's
    #: latest replayed end: where the next iteration's replay starts each rank (None: not replayed last)
    offsets: np.ndarray | None = field(default=None, repr=False)


def newest_slowdowns(records: RecordBatch, spec: JobSpec, *, iterations: IterationBatch | None = None,
                     history: Sequence[PeerHistory] = ()) -> tuple[np.ndarray, np.ndarray, dict[int, PeerHistory]]:
    """(iteration ids, S of each, what each leaves for later ones' peers) of ``records``' iterations:
    the replay as recorded over the ideal one. Their peers across iterations are their own and the
    ``history`` of the window's earlier ones, so that each iteration's S is the one the whole
    window's records give, at the cost of the new iterations alone. Whether a job pays needs these
    two variants; the attributions that explain it (S_t, S_w) cost many more."""
    job, steps, _, left = _prepare(_one_jobs(records, spec), spec, iterations, history, leave=slice(None))
    carried = _carried_in(steps, history)
    carry = np.zeros((spec.world, 2)) if carried is None else carried.copy()
    original, ideal = _as_recorded_and_ideal(job, np.arange(len(steps)), carry)
    if job.links is not None:
        left[-1] = replace(left[-1], offsets=carry)
    slowdowns = np.divide(original, ideal, out=np.ones_like(original), where=ideal > 0)
    return steps, slowdowns, dict(zip((int(s) for s in steps), left))


def _one_jobs(records: RecordBatch, spec: JobSpec) -> RecordBatch:
    """The records with a known iteration, checked to be one job's within its world."""
    if not isinstance(records, RecordBatch):
        raise RecordError(f"attribute takes a RecordBatch, got {type(records).__name__}")
    known = records["iteration"] >= 0
    if not known.all():  # a copy of every column only where some are left out
        records = records.take(np.flatnonzero(known))
    if not len(records):
        raise RecordError("attribute: no records with a known iteration")
    job = records["job"]
    if job.min() != job.max():  # a sort only where it fails
        raise RecordError(f"attribute: records of {len(np.unique(records['job']))} jobs; give it one job's")
    if int(records["rank"].max()) >= spec.world:
        raise RecordError(f"attribute: rank {int(records['rank'].max())} is outside the job's world of {spec.world}")
    return records


def _as_recorded_and_ideal(job: _Job, chosen: np.ndarray,
                           carry: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    recorded_or_ideal = _every_operator(job, [True, False])
    original, ideal = _run_variants(job, recorded_or_ideal, recorded_or_ideal, chosen, carry).T
    return original, ideal


def _prepare(records: RecordBatch, spec: JobSpec, iterations: IterationBatch | None,
             history: Sequence[PeerHistory] = (), *, leave: slice = slice(0)) -> tuple[_Job, np.ndarray, np.ndarray, list[PeerHistory]]:
    """The job ready to replay, its iteration ids, each iteration's recorded span, and what the
    iterations ``leave`` picks (of all, in order) leave for later ones' peers; the ``history`` of
    earlier ones joins the peers across iterations (a transfer's other iterations, a stage's work)."""
    steps, it = unique_small(records["iteration"])
    rank = records["rank"].astype(np.int64)
    op = records["op"].astype(np.int64)
    start = records["t_start_ns"].astype(np.int64)
    end = records["t_end_ns"].astype(np.int64)
    order = lexical_order((it, rank, start, op))
    rank, it, op, start, end = rank[order], it[order], op[order], start[order], end[order]
    comm = records["comm"].astype(np.int64)[order]
    n = len(order)
    first = np.r_[True, (rank[1:] != rank[:-1]) | (it[1:] != it[:-1])]
    last = np.r_[first[1:], True]
    holds = holds_rank(start, end, last)
    clock = np.where(holds, end, start)
    # A rank's iteration starts at its iteration record's start, else at the iteration's first operator anywhere.
    origin = np.full(n, 0, np.int64)
    earliest = np.full(len(steps), np.iinfo(np.int64).max)
    np.minimum.at(earliest, it[first], start[first])
    origin[first] = earliest[it[first]]
    if iterations is not None and len(iterations):
        heads = np.flatnonzero(first)
        wanted = rank[heads] * len(steps) + it[heads]
        at = np.searchsorted(steps, iterations["iteration"])
        listed = (at < len(steps)) & (steps[np.minimum(at, len(steps) - 1)] == iterations["iteration"])
        keys = iterations["rank"].astype(np.int64)[listed] * len(steps) + at[listed]
        key_order = np.argsort(keys, kind="stable")
        found = np.searchsorted(keys[key_order], wanted)
        hit = found < len(keys)
        hit[hit] &= keys[key_order][found[hit]] == wanted[hit]
        t = iterations["t_start_ns"][listed][key_order][np.minimum(found, max(len(keys) - 1, 0))] if len(keys) else wanted
        use = hit & (t <= start[heads])
        origin[heads[use]] = t[use]
    gap = np.maximum(start - np.where(first, origin, np.r_[0, clock[:-1]]), 0).astype(np.float64)
    continues, before = _continued(steps, it, rank, first, last, start, clock, spec.world, history)
    # Where a rank goes on from its iteration before, it opens this one this long after its clock
    # there (less where its origin came first): recorded in every variant, as the origin is.
    lead = np.where(continues, origin - before, 0).astype(np.float64)

    stage, replica = _stage_replica(spec)
    nbytes = records["nbytes"][order]
    # The program slots, then the gaps' peers, beside the transfers' groups and the replay's levels:
    # neither needs the other, and the slots come first (the transfers' identities need them).
    program = beside(program_slots, op, nbytes.astype(np.int64), rank, it, first,
                     None if stage is None else stage[rank])
    rank_host = _host_of_rank(spec)
    host = _hosts_of_pairs(rank_host, stage)
    gaps = beside(lambda: _gap_peers(program.result(), rank, it, first, gap, op, stage, replica, host, history))

    group = member_groups(comm, records["seq"][order], rank, records["peer"][order], op)
    groups = int(group.max()) + 1
    distinct = first_of_each(group, rank)
    members = np.bincount(group[distinct], minlength=groups)
    # Hosts each collective or pair spans: NVLink within one, the NICs and the fabric between.
    spans = np.bincount(group[first_of_each(group, rank_host[rank])], minlength=groups)
    # A pair is whole with both ends; a collective with as many members as its communicator has
    # shown in a collective (a world group carries pipeline pairs beside its barriers).
    p2p = records["peer"][order] >= 0
    comm_members = np.zeros(int(comm.max()) + 1, np.int64)
    np.maximum.at(comm_members, comm[~p2p], members[group[~p2p]])
    complete = np.where(p2p, members[group] == 2, members[group] >= comm_members[comm]) & (members[group] > 1)
    latest = np.full(groups, np.iinfo(np.int64).min)
    np.maximum.at(latest, group, start)
    transfer = np.where(complete, end - latest[group], 0).astype(np.float64)
    own = (end - start).astype(np.float64)
    slots = program.result()

    # An operator type: its communicator's kind (the name's prefix) and its op, send and receive together.
    prefixes = [c.split(".", 1)[0] if "." in c else "" for c in records.strings]
    prefix_names, prefix_code = np.unique(np.array(prefixes + [""]), return_inverse=True)
    # A transfer's peers: the same slot on the ranks running its program; the transfers of its type
    # and volume among as many members on every program (§3.2: a type's volume is the same across
    # pipeline and data-parallel ranks, where one program's groups may all share a slow device);
    # and its own other iterations.
    identity = _identity_keys(rank, slots.position, comm, op, nbytes, records.strings)
    temporal = transfer.copy()
    jitter = np.zeros(len(transfer))  # each complete transfer's spread over its own iterations
    measured = np.flatnonzero(complete)
    # Its other iterations at its level before (or after) a step: a fabric slowed from some
    # iteration on slows most of its slot for the rest of the run, and then most of its history.
    # Beside, after the gaps' peers: this thread meanwhile puts the transfers back among their slot's.
    earlier = [(h.keys, h.transfer) for h in history]
    history_spread = beside(lambda: keyed_spread(identity[measured], transfer[measured], earlier, it[measured],
                                                 step=(_RULES.spread_k, _RULES.level_iterations)))
    slot_spatial = _put_back(transfer, slots.slot, (slots.peers >= _RULES.min_peers) & complete)
    deps = dependencies(first, holds, group, complete, _starts(it))
    hardware_gap, hardware_ideal_gap, gap_side, work, ideal_gap = gaps.result()
    left: list[PeerHistory] = []
    # Copies of the complete transfers of the iterations ``leave`` picks: only the streaming rounds keep them.
    bounds = np.searchsorted(it, np.arange(len(steps) + 1))  # operators are in iteration order
    for k in range(len(steps))[leave]:
        a, b = bounds[k], bounds[k + 1]
        keys, lengths = identity[a:b][complete[a:b]], transfer[a:b][complete[a:b]]
        by_key = np.argsort(keys)  # sorted once here, each later round's lookup of them runs in order
        clocks = np.full(spec.world, _NO_CLOCK)
        tails = np.flatnonzero(last[a:b]) + a
        clocks[rank[tails]] = clock[tails]
        left.append(PeerHistory(keys[by_key], lengths[by_key], None if work is None else work[k], step=int(steps[k]),
                                clocks=clocks, end_ns=int(end[a:b].max())))

    labels = [_op_label(code) for code in range(256)]
    label_names, label_code = np.unique(np.array(labels), return_inverse=True)
    type_key = prefix_code[comm] * len(label_names) + label_code[op]
    present, kind = unique_small(type_key)
    kinds = [f"{prefix_names[k // len(label_names)]}.{label_names[k % len(label_names)]}".lstrip(".") for k in present.tolist()]
    if not deps.acyclic:
        raise RecordError(f"attribute: {int((~deps.settled).sum())} operators' start order contradicts their groups' "
                          "(clocks skewed between hosts?); the replay cannot order them")
    # As recorded, from where the replay starts it (the earliest rank's origin, or the iteration
    # before's last end where it goes on from that one) to its last end.
    span_start = np.full(len(steps), np.iinfo(np.int64).max)
    span_end = np.full(len(steps), np.iinfo(np.int64).min)
    np.minimum.at(span_start, it[first], origin[first])
    np.maximum.at(span_end, it, end)
    went_on = np.zeros(len(steps), bool)
    went_on[it[continues]] = True
    previous_end = np.r_[_previous_end(steps, history), span_end[:-1]]
    span_start = np.where(went_on & (previous_end != _NO_CLOCK), previous_end, span_start)
    level, jitter[measured] = history_spread.result()
    temporal[measured] = _beyond_spread(transfer[measured], level, jitter[measured], np.ones(len(measured), bool))
    spatial = np.minimum(slot_spatial, _volume_put_back(transfer, complete, group, members, spans, it, comm,
                                                        records["seq"][order], prefix_code[comm], op, nbytes, jitter))
    ideal_transfer = np.where(complete, np.minimum(spatial, temporal), 0.0)
    seq = records["seq"][order].astype(np.uint64)
    job = _Job(deps, rank, it, kind, tuple(str(k) for k in kinds), gap, transfer, own, ideal_gap, hardware_gap, hardware_ideal_gap,
               gap_side, ideal_transfer, comm, tuple(records.strings), seq, steps, identity, continues, lead, spec.world)
    return job, steps, (span_end - span_start).astype(np.float64), left


def _continued(steps: np.ndarray, it: np.ndarray, rank: np.ndarray, first: np.ndarray, last: np.ndarray,
               start: np.ndarray, clock: np.ndarray, world: int,
               history: Sequence[PeerHistory]) -> tuple[np.ndarray, np.ndarray]:
    """Which operators open a rank's chain that goes on from its chain in the iteration before
    (that iteration recorded, here or in the ``history``'s newest, and its clock not after this
    start), and that clock: a rank starts its next iteration where its last one left it, whatever
    the others do."""
    heads, tails = np.flatnonzero(first), np.flatnonzero(last)
    clocks = np.full((len(steps) + 1, world), _NO_CLOCK)  # row 0: the iteration before the first
    clocks[it[tails] + 1, rank[tails]] = clock[tails]
    newest = _just_before(steps, history)
    if newest is not None and newest.clocks is not None:
        clocks[0] = newest.clocks
    adjacent = np.r_[True, np.diff(steps) == 1]  # the iteration before each is the one recorded before it
    before = clocks[it[heads], rank[heads]]
    goes_on = adjacent[it[heads]] & (before != _NO_CLOCK) & (before <= start[heads])
    continues = np.zeros(len(first), bool)
    continues[heads[goes_on]] = True
    earlier = np.zeros(len(first), np.int64)
    earlier[heads] = before
    return continues, earlier


def _previous_end(steps: np.ndarray, history: Sequence[PeerHistory]) -> int:
    """The latest recorded end of the iteration before the first of ``steps``, where the ``history``'s newest is it."""
    newest = _just_before(steps, history)
    return int(_NO_CLOCK) if newest is None or newest.end_ns is None else newest.end_ns


def _gap_peers(slots: ProgramSlots, rank: np.ndarray, it: np.ndarray, first: np.ndarray, gap: np.ndarray, op: np.ndarray,
               stage: np.ndarray | None, replica: np.ndarray | None, host: np.ndarray | None,
               history: Sequence[PeerHistory]
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
    """``_prepare``'s gaps measured against their peers (the ``slots``' ranks): their hardware
    lengths, hardware ideal lengths, side of their peers' median, each stage's work, and their
    ideal lengths. ``host``: each rank's (dense ids; None: no stage on two hosts, ``_hosts_of_pairs``)."""
    enough = slots.peers >= _RULES.min_peers
    gap_median, gap_spread = group_spread(slots.slot, gap)
    reference = (gap_median, gap_spread) if host is None else _faster_host(slots.slot, host[rank], gap, gap_median, gap_spread)
    hardware_gap = _beyond_spread(gap, *reference, enough)
    gap_side = np.where(enough, np.sign(gap - gap_median), 0).astype(np.int8)
    work = _stage_work(hardware_gap, first, rank, it, stage, replica)
    earlier = [h.stage_work for h in history if h.stage_work is not None]
    ideal_gap = _rebalanced(hardware_gap, first, rank, stage, None if work is None else np.vstack([*earlier, work]))
    data = _data_rebalanced(hardware_gap, gap_spread, op, rank, it, first, enough, slots, stage, replica)
    # Both ideals even out the data: unlike a stage split it moves between replicas each iteration, so
    # it is read on the stragglers' side (``localizer.attributed.work_moves``), not as the pipeline's split.
    hardware_ideal_gap = hardware_gap if data is None else hardware_gap * data
    if data is not None:  # the stages' evening, where there was one, on top of the data's
        ideal_gap = hardware_ideal_gap if ideal_gap is hardware_gap else ideal_gap * data
    return hardware_gap, hardware_ideal_gap, gap_side, work, ideal_gap


def _host_of_rank(spec: JobSpec) -> np.ndarray:
    """Each rank's host, as dense ids."""
    return np.unique(np.array([p.host for p in spec.placements]), return_inverse=True)[1].astype(np.int64)


def _hosts_of_pairs(host: np.ndarray, stage: np.ndarray | None) -> np.ndarray | None:
    """Each rank's ``host`` for ``_faster_host``, or None where no pipeline stage's ranks sit on
    exactly two hosts (a large job's stages span many: nothing to pair, nothing to spend)."""
    if stage is not None:
        hosts_per_stage = np.bincount(np.unique(np.c_[stage, host], axis=0)[:, 0])
        if not (hosts_per_stage == 2).any():
            return None
    return host


def _faster_host(slot: np.ndarray, host: np.ndarray, gap: np.ndarray, median: np.ndarray,
                 spread: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each gap's reference (median, spread): its slot's, but where the slot's ranks sit on two hosts,
    ``_RULES.min_peers`` or more on each, the faster host's (the median and spread of its own ranks'
    gaps) for the slower host's, where the slower's median lies beyond the faster's by ``spread_k``
    times the larger of their spreads. A contended host slows every rank on it, and where it holds
    half of a stage's ranks (several replicas a host, two hosts a stage), the slot's median is half
    slowed with them: a fault only adds time, so the faster host shows what the work takes."""
    cell = dense_ids(slot, host)
    cell_median, cell_spread = group_spread(cell, gap)
    one = first_of_each(cell)
    sized = np.bincount(cell)[cell[one]] >= _RULES.min_peers
    pair = np.bincount(slot[one], sized, minlength=int(slot.max()) + 1) == 2  # two hosts, each sized
    fast, fast_spread, noise = _faster_of_two(slot[one], cell_median[one], cell_spread[one])
    if not (pair & np.isfinite(fast)).any():
        return median, spread
    slower = (pair & (noise > 0))[slot] & (cell_median > fast[slot] + _RULES.spread_k * noise[slot])
    return np.where(slower, fast[slot], median), np.where(slower, fast_spread[slot], spread)


def _faster_of_two(group: np.ndarray, value: np.ndarray, spread: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per group (dense ids) of exactly two (value, spread) members, the faster's value and spread and
    the larger spread (inf, 0, 0 for any other group): of two that should run alike, a fault only
    adds time, so the faster shows what the work takes (``_faster_host``)."""
    size = int(group.max()) + 1
    fast, noise, fast_spread = np.full(size, np.inf), np.zeros(size), np.zeros(size)
    np.minimum.at(fast, group, value)
    np.maximum.at(noise, group, spread)
    at = value == fast[group]
    fast_spread[group[at]] = spread[at]
    two = np.bincount(group, minlength=size) == 2
    return np.where(two, fast, np.inf), np.where(two, fast_spread, 0.0), np.where(two, noise, 0.0)


def _identity_keys(rank: np.ndarray, position: np.ndarray, comm: np.ndarray, op: np.ndarray, nbytes: np.ndarray,
                   strings: Sequence[str]) -> np.ndarray:
    """One uint64 per operator for (rank, place in its program, communicator name, op, bytes), the
    same in every batch of the job (a batch's communicator index is its own, the name is not). The
    bytes, because a transfer's length steps with its size (a longer sequence, a new bucket), and
    only one of the same size is its peer."""
    named = np.array([int.from_bytes(hashlib.blake2b(c.encode(), digest_size=8).digest(), "little") for c in strings],
                     np.uint64)
    with np.errstate(over="ignore"):
        key = mix(rank.astype(np.uint64))
        for part in (position.astype(np.uint64), named[comm], op.astype(np.uint64), nbytes.astype(np.uint64)):
            key = mix(key + part)
    return key


def _volume_put_back(transfer: np.ndarray, complete: np.ndarray, group: np.ndarray, members: np.ndarray,
                     spans: np.ndarray, it: np.ndarray, comm: np.ndarray, seq: np.ndarray, kind: np.ndarray,
                     op: np.ndarray, nbytes: np.ndarray, jitter: np.ndarray) -> np.ndarray:
    """Each complete transfer, or the median of its peers where it lies beyond their spread
    (``_put_back``): the iteration's transfers of its ``kind`` (communicator kind), op and
    volume among as many members on as many hosts (``spans``, per group), each the same in its
    own communicator's order of them (its first of that volume, its second, ...), on every
    communicator; each collective or pair counted once, its members ending it together. A
    communicator's several transfers of one volume (a job's gradient buckets) are different
    operators, which the paper's peers never mix (§3.2). Where the communicators' transfers sit
    at two levels (``_lower_level_of_peers``: the widest gap between them beyond the lower ones'
    ``jitter``, each one's spread over its own iterations), the lower level's median, however
    few are at it (two rings a stage, one a tensor rank, one behind a slow NIC; the rings a slow
    spine's hashed hops missed): a fault only adds time. The slower ones' own spread is the
    fault's too where the fault comes and goes."""
    head = np.empty(len(members), np.int64)
    head[group] = np.arange(len(group))  # a row of each group: whichever, its members end it together
    used = np.flatnonzero(complete[head])
    rows = head[used]
    # Each communicator's transfers of one volume in an iteration, in the order it issued them (its sequence numbers).
    same = dense_ids(it[rows], comm[rows], op[rows], nbytes[rows])
    by_same = np.lexsort((seq[rows], same))
    ordinal = np.empty(len(rows), np.int64)
    ordinal[by_same] = places_in_runs(np.r_[True, np.diff(same[by_same]) != 0])
    peers = dense_ids(it[rows], kind[rows], op[rows], nbytes[rows], members[used], spans[used], ordinal)
    median, spread = group_spread(peers, transfer[rows])
    # A median of three communicators or more: of one, its members' ends are the slot's to judge.
    count = np.bincount(peers)[peers]
    judged = count >= _VOLUME_PEERS
    medians, spreads = np.full(len(head), np.inf), np.zeros(len(head))
    medians[used[judged]], spreads[used[judged]] = median[judged], spread[judged]
    if (count >= 2).any():
        level, noise, split = _lower_level_of_peers(peers, transfer[rows], jitter[rows])
        known = (count >= 2) & split[peers]
        medians[used[known]], spreads[used[known]] = level[peers[known]], noise[peers[known]]
    return _beyond_spread(transfer, medians[group], spreads[group], complete)


def _lower_level_of_peers(peers: np.ndarray, value: np.ndarray,
                          jitter: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per group of ``peers`` (dense ids), where its values sit at two levels: the lower level's
    median, the largest ``jitter`` among its members, and True; else (inf, 0, False). The levels
    part at the group's widest gap between consecutive values, and are two where that gap exceeds
    ``spread_k`` times the lower level's largest jitter (its members' spreads over their own
    iterations; none known: not judged). Of transfers that should run alike, a fault only adds
    time: the ones no fault reached show what the fabric does and how much it varies, however few
    (a spine a ring's hashed hops miss, the one other ring of two), and however many were slowed."""
    size = int(peers.max()) + 1
    order = np.lexsort((value, peers))
    group, ordered = peers[order], value[order]
    same = np.r_[False, group[1:] == group[:-1]]
    gap = np.where(same, ordered - np.r_[ordered[:1], ordered[:-1]], -np.inf)
    widest = np.full(size, -np.inf)
    np.maximum.at(widest, group, gap)
    # The upper level opens at each group's first widest gap; the rows before it are the lower level.
    opens = same & (gap == widest[group])
    first_open = np.full(size, len(order))
    np.minimum.at(first_open, group[opens], np.flatnonzero(opens))
    lower = np.arange(len(order)) < first_open[group]
    noise = np.zeros(size)
    np.maximum.at(noise, group[lower], jitter[order][lower])
    level = np.full(size, np.inf)
    if lower.any():
        below, _ = group_spread(group[lower], ordered[lower])
        level[group[lower]] = below
    split = np.isfinite(widest) & (noise > 0) & (widest > _RULES.spread_k * noise)
    return np.where(split, level, np.inf), np.where(split, noise, 0.0), split


def _put_back(values: np.ndarray, group: np.ndarray, usable: np.ndarray) -> np.ndarray:
    """Each value, or its group's median where it lies more than ``AttributionRules.spread_k`` robust standard
    deviations above it: a length its peers never show is a straggler's; one within their
    spread is a length they show too, jitter the fault-free run has as well."""
    return _beyond_spread(values, *group_spread(group, values), usable)


def _beyond_spread(values: np.ndarray, median: np.ndarray, spread: np.ndarray, usable: np.ndarray) -> np.ndarray:
    """``_put_back`` given each value's group median and spread."""
    return np.where(usable & (values > median + _RULES.spread_k * spread), median, values)


def _stage_work(gap: np.ndarray, first: np.ndarray, rank: np.ndarray, it: np.ndarray,
                stage: np.ndarray | None, replica: np.ndarray | None) -> np.ndarray | None:
    """Per dense iteration and pipeline stage, the stage's work (``_rebalanced``; NaN where it shows
    none), or None without two stages and replicas."""
    if stage is None or replica is None or stage.max() == 0 or not len(gap):
        return None
    interior = ~first
    run = np.cumsum(first) - 1
    work = np.bincount(run, weights=np.where(interior, gap, 0.0))
    run_rank, run_it = rank[first], it[first]
    stages, replicas, iterations = int(stage.max()) + 1, int(replica.max()) + 1, int(it.max()) + 1
    cell = (run_it * stages + stage[run_rank]) * replicas + replica[run_rank]
    per_replica = group_median(cell, work, size=iterations * stages * replicas).reshape(iterations, stages, replicas)
    per_iteration = np.min(np.where(np.isfinite(per_replica), per_replica, np.inf), axis=2)
    return np.where(np.isfinite(per_iteration), per_iteration, np.nan)


def _rebalanced(gap: np.ndarray, first: np.ndarray, rank: np.ndarray, stage: np.ndarray | None,
                per_iteration: np.ndarray | None) -> np.ndarray:
    """The compute gaps with the work spread evenly over the pipeline stages (What-if
    §3.2, §5.2): compute lengths take their average over stages too, which amounts to rebalancing
    the partition.

    A replica's work on a stage in an iteration is the median over its ranks there of their
    interior gaps (a run's first gap also holds data loading and the previous step's tail); a
    stage's work in an iteration is its least replica's, since waiting hidden in a gap (an
    asynchronous receive waited on later) only ever adds to it; and its work is the median of
    that over the iterations, since a partition does not change between steps (the paper averages
    over steps too) and a per-step split would count the job's jitter as imbalance. Each stage's
    interior gaps are scaled by the mean stage work over its own, so the work stays and every
    stage gets an equal share, unless no stage's work lies beyond ``AttributionRules.spread_k`` standard errors of
    its median from that mean (jitter, not a split). Gaps already put back to their program's median go in, so one
    slow rank does not weigh either. ``per_iteration``: ``_stage_work``'s rows, of these iterations
    and of the window's earlier ones."""
    if per_iteration is None or stage is None:
        return gap
    interior = ~first
    run = np.cumsum(first) - 1
    run_stage = stage[rank[first]]
    stages = per_iteration.shape[1]
    with np.errstate(all="ignore"):
        per_stage = np.nanmedian(per_iteration, axis=0)
        quartiles = np.nanpercentile(per_iteration, [25, 75], axis=0)
    present = np.isfinite(per_stage) & (per_stage > 0)
    if present.sum() < 2:
        return gap  # fewer than two stages seen: nothing to rebalance
    # A median's standard error (1.2533 sigma / sqrt n, sigma from the interquartile range): stages
    # within spread_k (AttributionRules) of them from their mean differ by the job's jitter, not by its split.
    error = 1.2533 * (quartiles[1] - quartiles[0]) / 1.349 / np.sqrt(np.maximum((~np.isnan(per_iteration)).sum(axis=0), 1))
    if (np.abs(per_stage - per_stage[present].mean()) <= _RULES.spread_k * error)[present].all():
        return gap
    factor = np.ones(stages)
    factor[present] = per_stage[present].mean() / per_stage[present]
    return np.where(interior, gap * factor[run_stage][run], gap)


def _data_rebalanced(hardware_gap: np.ndarray, spread: np.ndarray, op: np.ndarray, rank: np.ndarray,
                     it: np.ndarray, first: np.ndarray, enough: np.ndarray, slots: ProgramSlots,
                     stage: np.ndarray | None, replica: np.ndarray | None) -> np.ndarray | None:
    """Per gap, the factor that leaves the compute gaps with each micro-batch's work spread evenly over the data-parallel replicas
    (What-if §3.2, §5.3): replicas run the same program on as many micro-batches, so the paper's
    average over them amounts to rebalancing the data (sequence lengths) between them.

    Data skew is coherent: a costly micro-batch lengthens every compute gap its replica's ranks run
    on it, where the job's jitter is independent per operator, so a replica's summed work varies by
    jitter only by the root of the sum of its slots' variances (each slot's robust spread over its
    program's ranks). A replica's work in a program (an iteration's stage) is the median over its
    ranks there of their interior gaps (put back to their slot's median first, so one slow rank
    weighs neither it nor its replica); unless some replica's work lies beyond
    ``AttributionRules.spread_k`` standard errors of it from the replicas' mean, the program is left
    as it is (jitter, not data). Else each segment (the gaps between two pipeline transfers: one
    micro-batch's forward or backward) of each replica is moved toward the segment's mean over the
    replicas by the share of its deviation that is not jitter (the replicas' variance less the
    jitter's, over theirs: what its data, not its jitter, costs), every rank of the replica alike,
    so that each keeps its own jitter and its own excess over its peers. None: nothing moves.

    Where a replica has one rank a stage, a slot's peers are the other replicas, whose spread holds
    their data too: the jitter is read instead from what a replica's stages do not share
    (``_stages_unshared``), since a micro-batch's data lengthens it on every stage it passes."""
    if replica is None or replica.max() == 0 or not len(hardware_gap):
        return None
    interior = ~first & enough
    work, variance = np.where(interior, hardware_gap, 0.0), np.where(interior, spread * spread, 0.0)
    run = slots.run
    heads = slots.run_start
    program = slots.slot[heads]  # a program's first slot names it
    # Segments: a run's gaps between two pipeline transfers (a gap precedes its operator).
    p2p = (op == int(OpKind.SEND)) | (op == int(OpKind.RECV))
    before = np.cumsum(p2p) - p2p
    segment = before - before[heads][run]
    opens = first | np.r_[True, segment[1:] != segment[:-1]]
    cell = np.cumsum(opens) - 1  # (run, segment), in chain order
    at = np.flatnonzero(opens)
    cell_work, cell_variance = np.bincount(cell, work), np.bincount(cell, variance)
    cell_run = run[at]
    # The gate, on whole runs: the replicas' work in each program against its jitter's standard error.
    run_work, run_variance = np.bincount(cell_run, cell_work), np.bincount(cell_run, cell_variance)
    run_replica = replica[rank[heads]]
    unshared = None if stage is None else _stages_unshared(run_work, it[heads], stage[rank[heads]], run_replica)
    if unshared is not None:
        # A run's jitter is its segments' together: a segment's relative variance is the run's times their count.
        run_variance = np.multiply(run_work ** 2, unshared, dtype=np.float64)
        cell_variance = np.multiply(cell_work ** 2, unshared * np.bincount(cell_run)[cell_run], dtype=np.float64)
    fired = _data_skewed(program, run_replica, run_work, run_variance)
    if not fired.any():
        return None
    # Per (program, segment), each replica's work toward the replicas' mean by its data's share.
    kept = fired[program[cell_run]]
    factor = np.ones(len(at))
    sub = np.flatnonzero(kept)
    place = dense_ids(program[cell_run[sub]], segment[at[sub]])
    factor[sub] = _toward_mean(place, run_replica[cell_run[sub]], cell_work[sub], cell_variance[sub])
    return np.where(interior, factor[cell], 1.0)


def _stages_unshared(run_work: np.ndarray, run_it: np.ndarray, run_stage: np.ndarray,
                     run_replica: np.ndarray) -> float | None:
    """The relative variance of a run's work that its replica's other stages do not share: the
    two-way residual of its log over each iteration's replicas and stages, pooled over the
    iterations whose table is whole; None unless every replica has one rank a stage and some
    iteration shows two stages and two replicas or more."""
    cell = dense_ids(run_it, run_replica, run_stage)
    if np.bincount(cell).max(initial=0) != 1 or run_stage.max(initial=0) < 1 or (run_work <= 0).any():
        return None
    log = np.log(run_work)
    per_it = dense_ids(run_it)
    means = []
    for group in (dense_ids(per_it, run_replica), dense_ids(per_it, run_stage), per_it):
        means.append((np.bincount(group, log) / np.bincount(group))[group])
    residual = log - means[0] - means[1] + means[2]
    replicas = np.bincount(per_it[first_of_each(per_it, run_replica)])
    stages = np.bincount(per_it[first_of_each(per_it, run_stage)])
    whole = np.bincount(per_it) == replicas * stages
    freedom = int(((replicas - 1) * (stages - 1))[whole].sum())
    if freedom < 1:
        return None
    return float((residual[whole[per_it]] ** 2).sum() / freedom)


def _replica_work(place: np.ndarray, member: np.ndarray, work: np.ndarray,
                  variance: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per element (a rank's work at a ``place``): its replica's work there (the median over its
    ranks), that median's jitter variance, the mean of the replicas' works at the place, and the
    replicas present there; and one element of each replica at each place."""
    group = dense_ids(place, member)
    replica_work = group_median(group, work)
    ranks = np.bincount(group)[group]
    # A median's standard error: 1.2533 sigma / sqrt(n) (its own value where a replica has one rank).
    error2 = np.where(ranks > 1, 1.2533**2, 1.0) * group_median(group, variance) / ranks
    one = first_of_each(group)
    replicas = np.bincount(place[one], minlength=int(place.max()) + 1)
    mean = np.bincount(place[one], replica_work[one], minlength=len(replicas)) / np.maximum(replicas, 1)
    return replica_work, error2, mean[place], replicas[place], one


def _data_skewed(program: np.ndarray, member: np.ndarray, work: np.ndarray, variance: np.ndarray) -> np.ndarray:
    """Per program, whether some replica's work lies beyond ``AttributionRules.spread_k`` standard
    errors of its jitter from the replicas' mean (``_data_rebalanced``'s gate)."""
    replica_work, error2, mean, replicas, _ = _replica_work(program, member, work, variance)
    beyond = (replicas > 1) & (np.abs(replica_work - mean) > _RULES.spread_k * np.sqrt(error2))
    return np.bincount(program, beyond, minlength=int(program.max()) + 1) > 0


def _toward_mean(place: np.ndarray, member: np.ndarray, work: np.ndarray, variance: np.ndarray) -> np.ndarray:
    """Per element, the factor that moves its replica's work at its ``place`` toward the replicas'
    mean there by the share of the replicas' spread that jitter does not explain (an empirical-Bayes
    estimate of the data's part of each deviation; 0 where jitter explains it all)."""
    replica_work, error2, mean, replicas, one = _replica_work(place, member, work, variance)
    deviation = replica_work - mean
    size = int(place.max()) + 1
    # The replicas' variance about their mean (n - 1), against their jitter's mean variance.
    spread2 = np.bincount(place[one], deviation[one] ** 2, minlength=size)[place] / np.maximum(replicas - 1, 1)
    jitter2 = np.bincount(place[one], error2[one], minlength=size)[place] / np.maximum(replicas, 1)
    share = np.clip(1.0 - np.divide(jitter2, spread2, out=np.ones_like(spread2), where=spread2 > 0), 0.0, 1.0)
    target = replica_work - share * deviation
    return np.divide(target, replica_work, out=np.ones_like(target), where=(replica_work > 0) & (replicas > 1))


def _op_label(code: int) -> str:
    try:
        kind = OpKind(code)
    except ValueError:
        return "unknown"
    return "send_recv" if kind in (OpKind.SEND, OpKind.RECV) else kind.label


def _run_variants(job: _Job, keep_gap: np.ndarray, keep_transfer: np.ndarray, chosen: np.ndarray,
                  carry: np.ndarray | None = None) -> np.ndarray:
    """Replayed iteration times, (len(chosen), variants): variant ``v`` keeps the recorded gap of the
    operators where ``keep_gap[:, v]`` (the ideal elsewhere), likewise transfers; batches of
    variants share a sweep. Without ``carry``, each iteration lasts until its last operator ends,
    every rank starting it at 0. With it (ranks by variants: the clocks the ranks start the first
    with; written with those they end the last with), the iterations run as one timeline (see the
    module's docstring), each lasting as far as it moves the latest end; where they cannot chain
    (``_Job.links``), each on its own as without, and ``carry`` is left as it is."""
    subset, kept = _subset(job, chosen)
    # The masks' rows of the subset's operators, in the order the replay sweeps them.
    rows = subset.level_rows if isinstance(subset, _Subset) else subset.deps.order
    anchor, gap, ideal_gap, transfer, ideal_transfer, own = subset.leveled
    kept_gap = _mask_rows(keep_gap, rows)
    kept_transfer = kept_gap if keep_transfer is keep_gap else _mask_rows(keep_transfer, rows)
    links = subset.links if carry is not None else None
    if links is not None:
        anchor = subset.leveled_lead
    return latest_ends(subset.deps, segments=subset.iteration_bounds, anchor=anchor, gap=gap, ideal_gap=ideal_gap,
                       transfer=transfer, ideal_transfer=ideal_transfer, own=own, keep_gap=kept_gap,
                       keep_transfer=kept_transfer, link=None if links is None else links[0],
                       slot=None if links is None else links[1], carry=carry if links is not None else None)


def _every_operator(job: _Job, row: list[bool]) -> np.ndarray:
    """A mask whose every operator keeps what ``row`` says (one value per variant): a read-only view
    of that one row, which ``_mask_rows`` repeats instead of gathering."""
    return np.broadcast_to(np.array(row, bool), (len(job.gap), len(row)))


def _mask_rows(mask: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``mask[rows]`` of a (operators, variants) mask, each row moved as one item of its bytes: a
    fancy index over a 2-D array moves one element at a time, several times slower."""
    if len(mask) and mask.strides[0] == 0:  # one row repeated (``_every_operator``): every row is it
        return np.broadcast_to(mask[0], (len(rows), mask.shape[1]))
    mask = np.ascontiguousarray(mask, bool)
    width = mask.shape[1]
    return mask.view(np.dtype((np.void, width)))[rows].view(bool).reshape(len(rows), width)


def _subset(job: _Job, chosen: np.ndarray) -> tuple[_Job | _Subset, np.ndarray | None]:
    """The job restricted to the ``chosen`` iterations (each replays on its own, so the graph splits),
    and the job's operators it keeps (None: the job itself, every one)."""
    if len(chosen) == int(job.iteration.max()) + 1:
        return job, None
    key = tuple(int(c) for c in chosen)
    # The replays ``beside`` runs ask for the same subset from two threads: it is built once.
    with _SUBSETS:
        if key not in job.subsets:
            job.subsets[key] = _shared_subset(job, chosen) if job.sharing is not None else _new_subset(job, chosen)
        return job.subsets[key]


def _release(prepared: _Prepared, at: np.ndarray, chosen: np.ndarray) -> None:
    """Drops what the replays of ``at`` cached (their subset, or the whole job's level order) once
    ``_measured`` is done with them: at scale they are the size of the job again, and a later
    replay of those iterations builds them anew. The ``chosen`` iterations' subset stays (the whole
    job's, where they are every iteration): the finer variants (``contributors``) replay those."""
    key, kept = tuple(int(c) for c in at), tuple(int(c) for c in chosen)
    with _SUBSETS:
        for job in {id(j): j for j in (prepared.job, prepared.hardware)}.values():
            whole = len(at) == int(job.iteration.max()) + 1
            if whole and key == kept:  # the chosen are every iteration: only what carries clocks goes
                for name in _CARRY_CACHES:
                    job.__dict__.pop(name, None)
            elif whole:
                for name in _REPLAY_CACHES:
                    job.__dict__.pop(name, None)
                for name in _GRAPH_CACHES:
                    job.deps.__dict__.pop(name, None)
            elif key != kept:
                job.subsets.pop(key, None)


def _columns(job: _Job) -> tuple[np.ndarray, ...]:
    """The job's columns a replay of a subset reads (``_Subset.columns``)."""
    return job.gap, job.ideal_gap, job.transfer, job.ideal_transfer, job.own, job.continues, job.rank, job.lead


def _new_subset(job: _Job, chosen: np.ndarray) -> tuple[_Subset, np.ndarray]:
    keep = np.flatnonzero(np.isin(job.iteration, chosen))
    group = dense_ids(job.deps.group[keep])
    _, iteration = unique_small(job.iteration[keep])
    bounds = _starts(iteration)
    deps = dependencies(job.deps.first[keep], job.deps.holds[keep], group, job.deps.complete[keep], bounds)
    return _Subset(deps, keep, bounds, _columns(job)), keep


def _shared_subset(job: _Job, chosen: np.ndarray) -> tuple[_Subset, np.ndarray]:
    """A ``_hardware`` job's subset: the shared job's, but for its ideal gaps (the hardware ones), so
    that the two keep one copy of the subset's graph and lengths."""
    assert job.sharing is not None
    base, kept = _subset(job.sharing, chosen)
    assert isinstance(base, _Subset) and kept is not None
    return replace(base, columns=_columns(job), sharing=base), kept


def _hardware(job: _Job) -> _Job:
    """The job whose ideal puts the stragglers back but keeps the stage split as recorded (itself
    when the split is even or there are no stages)."""
    if job.hardware_ideal_gap is job.ideal_gap:
        return job
    return replace(job, ideal_gap=job.hardware_ideal_gap, subsets={}, sharing=job)


def _evenness(by_worker: np.ndarray, stage: np.ndarray) -> float:
    """How evenly the last stage's workers pay: their median excess over their largest (1: all alike,
    as an uneven pipeline split makes them; near 0: a few of them, as a broken device does)."""
    excess = np.clip(by_worker[stage == stage.max()] - 1.0, 0.0, None)
    return float(np.median(excess) / excess.max()) if excess.max() > 0 else 0.0


def _stage_replica(spec: JobSpec) -> tuple[np.ndarray | None, np.ndarray | None]:
    if spec.layout is None:
        return None, None
    coords = spec.layout.coordinate_array()  # columns tp, cp, ep, dp, pp
    return coords[:, 4], coords[:, 3] * spec.layout.ep + coords[:, 2]


def _workers(job: _Job, spec: JobSpec, stage: np.ndarray | None, replica: np.ndarray | None, chosen: np.ndarray,
             ideal: np.ndarray, original: np.ndarray, top_workers: float) -> tuple[str, np.ndarray, tuple[int, ...]]:
    """S_w per rank on the ``chosen`` iterations (the paper's replica x stage approximation, else per
    rank), and with replicas, the one whose recorded lengths cost most in each chosen iteration.

    A worker's value is the median over the chosen iterations of its per-iteration slowdown (the
    paper's per-step heatmap, §8), not the slowdown of their sum: one benign pause in one of them
    would otherwise outweigh a straggler present in all of them."""
    base = ideal[chosen]
    if (base <= 0).any():
        return "", np.ones(spec.world), ()
    if stage is not None and replica is not None and (stage.max() > 0 or replica.max() > 0):
        stages = np.unique(stage)
        per_stage = beside(_run_variants, job, *(2 * (stage[job.rank][:, None] == stages[None, :],)), chosen)
        by_replica, slowest = _replicas(job, replica, chosen, base, original[chosen], top_workers)
        by_stage = np.ones(int(stage.max()) + 1)
        by_stage[stages] = np.median(per_stage.result() / base[:, None], axis=0)
        return "replica x stage", np.minimum(by_replica[replica], by_stage[stage]), slowest
    if spec.world > _RULES.max_rank_variants:
        return "", np.ones(spec.world), ()
    keep = job.rank[:, None] == np.arange(spec.world)[None, :]
    return "rank", np.median(_run_variants(job, keep, keep, chosen) / base[:, None], axis=0), ()


def _replicas(job: _Job, replica: np.ndarray, chosen: np.ndarray, base: np.ndarray, recorded: np.ndarray,
              top_workers: float) -> tuple[np.ndarray, tuple[int, ...]]:
    """S per data-parallel replica (all but it fixed; the median over the chosen iterations) and
    the replica that cost most in each chosen iteration.

    A replay lengthens an iteration by at most the lengths its kept operators add up to (the
    longest path grows by at most what was added on it), and by at most what keeping every
    operator does (``recorded``: replays grow with the lengths, and a put-back length is never
    longer), so the smaller of ``1 + excess / base`` and ``recorded / base`` bounds a replica's
    slowdown in an iteration from above, and the median of those bounds its value. Replicas are
    replayed in order of that bound, in batches, until the next bound falls below the smallest
    value that could still enter the top share, below ``AttributionRules.negligible`` of the
    costliest replica's slowdown, or under ``AttributionRules.worker_floor``; the rest keep their
    bound, an upper one. After the first batch, when more than two batches' worth are left, one
    replay keeping each of a batch's worth of groups of them bounds each member by its group's
    (at a large scale the first bound is loose: the jitter tails of a replica's many ranks add up).
    A replica that puts nothing back has S = 1 exactly.
    """
    kept = np.isin(job.iteration, chosen)
    excess = (job.gap - job.ideal_gap) + (job.transfer - job.ideal_transfer)
    n = int(replica.max()) + 1
    column = np.searchsorted(chosen, job.iteration[kept])
    added = np.zeros((len(chosen), n))
    np.add.at(added, (column, replica[job.rank[kept]]), excess[kept])
    bound = np.median(np.minimum(1.0 + added / base[:, None], (recorded / base)[:, None]), axis=0)
    present = np.unique(replica)
    candidates = present[np.argsort(-bound[present], kind="stable")]
    needed = max(1, math.ceil(top_workers * len(present)))
    batch = max(needed, _BATCH_VALUES // max(int(kept.sum()), 1))
    value = bound.copy()
    per_iteration = np.zeros((len(chosen), n))
    done = 0
    grouped = False
    while done < len(candidates):
        part = candidates[done : done + batch]
        keep = replica[job.rank][:, None] == part[None, :]
        times = _run_variants(job, keep, keep, chosen)
        per_iteration[:, part] = times
        value[part] = np.median(times / base[:, None], axis=0)
        done += len(part)
        replayed_values = np.sort(value[candidates[:done]])[::-1]
        floor = max(replayed_values[min(needed, done) - 1], 1.0 + _RULES.negligible * (replayed_values[0] - 1.0),
                    1.0 + _RULES.worker_floor)
        if done < len(candidates) and bound[candidates[done]] <= floor:
            break
        rest = candidates[done:]
        if not grouped and len(rest) > 2 * batch:
            # One replay of ``batch`` groups of the rest: keeping a group's lengths bounds each member's
            # slowdown too (replays grow with the lengths kept), so groups that pay nothing drop out whole.
            grouped = True
            groups = np.array_split(rest, batch)
            group_of = np.full(n, -1)
            for k, group in enumerate(groups):
                group_of[group] = k
            keep = group_of[replica[job.rank]][:, None] == np.arange(len(groups))[None, :]
            ceilings = np.median(_run_variants(job, keep, keep, chosen) / base[:, None], axis=0)
            for group, ceiling in zip(groups, ceilings.tolist()):
                value[group] = bound[group] = np.minimum(bound[group], ceiling)
            candidates = np.r_[candidates[:done], rest[np.argsort(-bound[rest], kind="stable")]]
            if bound[candidates[done]] <= floor:
                break
    replayed = candidates[:done]
    slowest = replayed[np.argmax(per_iteration[:, replayed], axis=1)]
    return value, tuple(int(d) for d in slowest)
