"""A scenario (job, fabric, model, faults, seed) and its emulation: records, served lazily, and truth.

:class:`Emulation` runs the timing engine once for all ranks (cheap: arrays per step) and
materializes CommOps records only for the ranks and iterations asked for, so it is a
:class:`sleuth.sources.RecordSource` a localizer can read 50 ranks of without paying for 8,192.
Ground truth (:meth:`Emulation.truth`, :meth:`Emulation.abnormal`) compares against the
fault-free counterfactual: the same scenario and seed with the faults off (drift, jitter and
hiccups stay), run on first use; the slowdown's truth is the *balanced* one, which also spreads
each iteration's pipeline compute evenly over the stages (What-if §3.2: the job as it would run
without stragglers and with an even split of its work).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from sleuth.errors import ConfigError
from sleuth.jobspec import JobSpec, RankPlacement
from sleuth.layout import ParallelLayout
from sleuth.records import IterationBatch, RecordBatch
from sleuth.topology import DeviceKind, Routing, Topology

from sleuth.sim.engine import Effects, Timeline, Timing, run
from sleuth.sim.faults import Fault, FaultKind
from sleuth.sim.model import ModelSpec, stage_costs
from sleuth.sim.network import Network
from sleuth.sim.plan import COMPUTE, Plan
from sleuth.validation import fraction, non_negative_int, positive_int

__all__ = ["ABNORMAL_RATIO", "DELTA", "Emulation", "GroundTruth", "IterationTruth", "Scenario"]

#: An operator instance is abnormal when it lasts more than this times its counterfactual.
ABNORMAL_RATIO = 1.05
#: δ of δ-irregularity, and the window (iterations) whose mean it compares against.
DELTA = 1.1
WINDOW = 10
_SEQLEN_DOCS = 16  # documents packed into one micro-batch


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """One emulated job. Validated at construction; see the module docstrings for the model.

    ``drift``: the base iteration time creeps up linearly by this fraction over the run (0.07
    for a month); ``comm_drift``: likewise every transfer time (a fabric filling up with other
    jobs' traffic, a library update: the operators' own durations drift, Holmes §4.2.2); ``stride``: recorded iterations are every ``stride``-th step of the run (the
    job idles in between), so 100 iterations can span a month. ``routing``: what the fabric tells
    a localizer of how flows pick among equal-cost spines. The emulator hashes every GPU pair onto
    one spine either way (ECMP hashes a flow onto one path and keeps it there), so it changes no
    timing: ``ECMP`` says that hash is unknown to the job's readers, ``STATIC`` that it is known.
    ``host_clocks_ns``: how far each named host's clock runs ahead of true time (hosts synced by NTP
    disagree by milliseconds, without it by seconds): its ranks' records and iteration rows carry
    times that far off; the timeline, and so the truth, stays on true time. A host behind the
    others is the others ahead of it: the job starts at time 0.
    """

    topology: Topology
    layout: ParallelLayout
    model: ModelSpec = field(default_factory=ModelSpec)
    microbatches: int = 8
    iterations: int = 100
    faults: tuple[Fault, ...] = ()
    timing: Timing = field(default_factory=Timing)
    drift: float = 0.0
    comm_drift: float = 0.0
    stride: int = 1
    seed: int = 0
    job: str = "sim"
    name: str = "scenario"
    routing: Routing = Routing.STATIC
    host_clocks_ns: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "routing", Routing(self.routing))
        except ValueError:
            raise ConfigError(f"routing must be one of {', '.join(r.value for r in Routing)}, got {self.routing!r}") from None
        for name in ("microbatches", "iterations", "stride"):
            object.__setattr__(self, name, positive_int(name, getattr(self, name)))
        object.__setattr__(self, "seed", non_negative_int("seed", self.seed))
        for name in ("drift", "comm_drift"):
            value = getattr(self, name)
            fraction(name, value, zero=True, one=False)
        if not self.job:
            raise ConfigError("job must be a non-empty string")
        object.__setattr__(self, "faults", tuple(self.faults))
        layout, topology = self.layout, self.topology
        gph = layout.gpus_per_host
        if topology.num_hosts < layout.n_hosts:
            raise ConfigError(
                f"the layout needs {layout.n_hosts} hosts of {gph} GPUs; the topology has {topology.num_hosts} hosts"
            )
        short = np.flatnonzero(topology.host_gpus[: layout.n_hosts] < gph)
        if len(short):
            host = topology.hosts[int(short[0])]
            raise ConfigError(f"host {host} has {int(topology.host_gpus[short[0]])} GPUs; the layout puts {gph} on each")
        for fault in self.faults:
            if not isinstance(fault, Fault):
                raise ConfigError(f"faults must be Fault objects, got {type(fault).__name__}")
            fault.check(topology)
        clocks = dict(self.host_clocks_ns)
        used = set(topology.hosts[: layout.n_hosts])
        for host, offset in clocks.items():
            if host not in used:
                raise ConfigError(f"host_clocks_ns names {host!r}, not one of the job's {layout.n_hosts} hosts")
            if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)) or offset < 0:
                raise ConfigError(f"host_clocks_ns[{host!r}] must be an int of nanoseconds, 0 or more (the emulated "
                                  f"job starts at time 0, and times are never negative), got {offset!r}")
        # A copy of its own (a dict, so that scenarios pickle to the emulator's worker processes).
        object.__setattr__(self, "host_clocks_ns", {h: int(o) for h, o in sorted(clocks.items())})
        # Fail before any work on a model that does not split over the layout.
        stage_costs(self.model, stage=0, pp=layout.pp, tp=layout.tp, cp=layout.cp, ep=layout.ep)

    @property
    def gpu_of_rank(self) -> np.ndarray:
        """The topology's global GPU index of each rank (host ``r // gpus_per_host``, GPU ``r % ...``)."""
        gph = self.layout.gpus_per_host
        ranks = np.arange(self.layout.world, dtype=np.int64)
        return self.topology.gpu_offsets[ranks // gph] + ranks % gph

    def job_spec(self) -> JobSpec:
        """The job spec, placements named after the topology's hosts."""
        gph = self.layout.gpus_per_host
        placements = tuple(
            RankPlacement(rank, self.topology.hosts[rank // gph], rank % gph) for rank in range(self.layout.world)
        )
        return JobSpec(self.job, self.layout.world, self.layout, placements, tuple(self.layout.groups()))

    def describe(self) -> dict:
        """The scenario's parameters as JSON-ready values (written into truth.json)."""
        model = {name: getattr(self.model, name) for name in self.model.__dataclass_fields__}
        timing = {name: getattr(self.timing, name) for name in self.timing.__dataclass_fields__}
        return {
            "name": self.name,
            "job": self.job,
            "seed": self.seed,
            "world": self.layout.world,
            "layout": self.layout.to_dict(),
            "topology": self.topology.generator or repr(self.topology),
            "model": model,
            "timing": timing,
            "microbatches": self.microbatches,
            "iterations": self.iterations,
            "drift": self.drift,
            "comm_drift": self.comm_drift,
            "stride": self.stride,
            "routing": self.routing.value,
            "host_clocks_ns": dict(self.host_clocks_ns),
        }


@dataclass(frozen=True)
class IterationTruth:
    """One iteration: its time (job span, ns), its fault-free counterfactual, and the labels."""

    iteration: int
    time_ns: int
    counterfactual_ns: int
    irregular: bool  # δ-irregular: longer than δ x the mean of the previous WINDOW iterations
    faults_active: tuple[int, ...]  # indices of faults in force
    balanced_ns: int = 0  # without faults and with the pipeline's work split evenly (S's truth)


@dataclass(frozen=True)
class GroundTruth:
    faults: tuple[dict, ...]
    iterations: tuple[IterationTruth, ...]

    def to_dict(self) -> dict:
        return {
            "faults": list(self.faults),
            "delta": DELTA,
            "window": WINDOW,
            "abnormal_ratio": ABNORMAL_RATIO,
            "iterations": [
                {
                    "iteration": t.iteration,
                    "time_ns": t.time_ns,
                    "counterfactual_ns": t.counterfactual_ns,
                    "irregular": t.irregular,
                    "faults_active": list(t.faults_active),
                    "balanced_ns": t.balanced_ns,
                }
                for t in self.iterations
            ],
        }


class Emulation:
    """A scenario's emulated run: a :class:`~sleuth.sources.RecordSource` plus ground truth."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        layout = scenario.layout
        self.network = Network(scenario.topology, scenario.gpu_of_rank, scenario.faults)
        self.plan = Plan(layout, scenario.model, scenario.microbatches, self.network)
        self._ids = np.arange(scenario.iterations, dtype=np.int64) * scenario.stride
        strings = [scenario.job]
        self._code_of: dict[str, np.ndarray] = {}
        for kind in self.plan.kinds:
            count = len(layout.group_array(kind))
            self._code_of[kind] = len(strings) + self.plan.owner[kind]
            strings.extend(f"{kind}.{g}" for g in range(count))
        self._strings = strings
        self._factors = [
            f.factors(scenario.iterations, seed=scenario.seed * 1000 + k) for k, f in enumerate(scenario.faults)
        ]

    # -- runs -------------------------------------------------------------------------------

    def _effects(self, with_faults: bool, *, leave_out: int | None = None) -> Effects:
        """The run's effects: its faults' (all but ``leave_out``'s) where ``with_faults``, else none."""
        sc, plan = self.scenario, self.plan
        n = sc.iterations
        progress = np.arange(n) / max(n - 1, 1)
        drift, comm_drift = 1.0 + sc.drift * progress, 1.0 + sc.comm_drift * progress
        compute: list[tuple[np.ndarray, np.ndarray]] = []
        launch: list[tuple[np.ndarray, np.ndarray]] = []
        network = np.ones((n, len(sc.faults)))
        seqlen = None
        for k, fault in enumerate(sc.faults if with_faults else ()):
            if k == leave_out:
                continue
            factor = self._factors[k]
            if fault.kind is FaultKind.GPU:
                compute.append((self.ranks_on(fault.device), factor))
            elif fault.kind is FaultKind.HOST:
                ranks = self.ranks_on(fault.device)
                # A contended host CPU feeds every GPU on it late: its kernels launch and run slower.
                compute.append((ranks, factor))
                launch.append((ranks, factor))
            elif fault.kind is FaultKind.LAST_STAGE:
                compute.append((plan.stages[-1].ranks, factor))
            elif fault.kind is FaultKind.SEQLEN:
                seqlen = self._seqlen(k, fault, factor) if seqlen is None else seqlen * self._seqlen(k, fault, factor)
            else:
                network[:, k] = factor
        return Effects(tuple(compute), tuple(launch), network, seqlen, drift, comm_drift)

    def _seqlen(self, k: int, fault: Fault, factor: np.ndarray) -> np.ndarray:
        """(iterations, micro-batches, replicas) factor on attention-score compute.

        Documents packed into a micro-batch take Dirichlet(alpha) shares of its tokens; the
        attention cost is ∝ Σ share², normalized so its mean over the run is 1. Outside the
        fault's profile the factor is 1 (the balanced counterfactual).
        """
        sc = self.scenario
        rng = np.random.default_rng(np.random.SeedSequence([sc.seed, 0x5E0, k]))
        shape = (sc.iterations, sc.microbatches, self.plan.n_replicas)
        shares = rng.dirichlet(np.full(_SEQLEN_DOCS, fault.alpha), size=shape)
        cost = (shares**2).sum(axis=-1)
        cost /= cost.mean()
        on = ((factor - 1.0) / (fault.slow - 1.0))[:, None, None]
        return 1.0 + (cost - 1.0) * on

    @cached_property
    def timeline(self) -> Timeline:
        return self._run(self._effects(True))

    @cached_property
    def counterfactual(self) -> Timeline:
        """The same run with every fault off (drift, jitter and hiccups kept)."""
        sc = self.scenario
        if not sc.faults:
            return self.timeline
        return self._run(self._effects(False))

    def pause_free_times(self, *, balanced: bool = False) -> np.ndarray:
        """Each iteration's time (ns) in the fault-free twin with its benign pauses at no length (the
        same draws, so the same jitter and the same split): the run without any straggler, whose
        ratio to the actual one is what What-if's stragglers' part of S measures (it puts back every
        operator beyond its peers, a garbage-collection pause too). ``balanced``: the balanced
        twin's instead (``balanced``), whose ratio is what the whole S measures."""
        effects = (self._balanced_effects() if balanced else None) or self._effects(False)
        return self._spans(self._run(effects, dataclasses.replace(self.scenario.timing, hiccup_ms=0.0)))

    @cached_property
    def balanced(self) -> Timeline:
        """The counterfactual with each iteration's pipeline compute split evenly over the stages:
        every stage's compute scaled by the mean stage's work over its own (an uneven split,
        natural or injected, is a straggler by the What-if paper's definition)."""
        effects = self._balanced_effects()
        return self.counterfactual if effects is None else self._run(effects)

    def _balanced_effects(self) -> Effects | None:
        """The fault-free effects with each stage's compute scaled as ``balanced`` says (None: the
        split is even already, and the balanced twin is the fault-free one)."""
        sc, plan = self.scenario, self.plan
        base = np.array([sum(step[1] for block in st.blocks for step in block if step[0] == COMPUTE)
                         for st in plan.stages], dtype=np.float64)[:, None] * np.ones(sc.iterations)
        work = base.copy()
        for k, fault in enumerate(sc.faults):
            if fault.kind is FaultKind.LAST_STAGE:
                work[-1] *= self._factors[k]
        # The faults are off in the run below, so each stage's factor is over its fault-free work.
        factor = work.mean(axis=0) / base
        if np.allclose(factor, 1.0):
            return None
        effects = self._effects(False)
        spread = tuple((st.ranks, factor[s]) for s, st in enumerate(plan.stages))
        return dataclasses.replace(effects, compute=effects.compute + spread)

    def _run(self, effects: Effects, timing: Timing | None = None) -> Timeline:
        """The emulator run of this scenario's plan and seed with ``effects`` (and ``timing``, else the scenario's)."""
        sc = self.scenario
        return run(self.plan, effects, timing or sc.timing, seed=sc.seed, iterations=sc.iterations, gap=sc.stride)

    # -- lookups ----------------------------------------------------------------------------

    def ranks_on(self, device: str | None) -> np.ndarray:
        """The ranks running on a gpu, host or NVSwitch, or served by a NIC or its NIC-leaf link
        (empty for other devices: a leaf or spine serves too many to name)."""
        if device is None:
            return np.empty(0, dtype=np.int64)
        topology = self.scenario.topology
        kind, index = topology.locate(device)
        gpus = self.scenario.gpu_of_rank
        if kind is DeviceKind.GPU:
            return np.flatnonzero(gpus == index)
        if kind in (DeviceKind.HOST, DeviceKind.NVSWITCH):
            return np.flatnonzero(topology.gpu_host[gpus] == index)
        if kind is DeviceKind.NIC:
            return np.flatnonzero(topology.gpu_nic[gpus] == index)
        if kind is DeviceKind.LINK:
            nics = [end for end in topology.link_ends(device) if topology.kind(end) is DeviceKind.NIC]
            return np.unique(np.concatenate([self.ranks_on(nic) for nic in nics] or [np.empty(0, np.int64)]))
        return np.empty(0, dtype=np.int64)

    def fault_factors(self, index: int) -> np.ndarray:
        """Per-iteration slowdown in force of fault ``index``."""
        return self._factors[index]

    # -- RecordSource -------------------------------------------------------------------------

    def job_spec(self) -> JobSpec:
        return self._spec

    @cached_property
    def _spec(self) -> JobSpec:
        return self.scenario.job_spec()

    def iteration_ids(self) -> np.ndarray:
        return self._ids.copy()

    def iteration_times(self) -> np.ndarray:
        """Each iteration's time (job span, ns: ``IterationTruth.time_ns``), as ``iteration_ids`` orders them."""
        return self._spans(self.timeline)

    def slowest_iterations(self, count: int = 5, *, since: int | None = None) -> list[int]:
        """The ``count`` longest iterations from ``since`` on (default: the first fault's start, or
        the first iteration), in order: what a change-point detector hands the localizer where no
        iteration is δ-irregular."""
        since = min((f.start for f in self.scenario.faults), default=0) if since is None else since
        ids, times = self._ids, self.iteration_times()
        late = ids >= since
        return sorted(ids[late][np.argsort(-times[late], kind="stable")[:count]].tolist())

    def _iteration_index(self, iterations: Iterable[int] | None) -> np.ndarray:
        if iterations is None:
            return np.arange(len(self._ids))
        wanted = np.unique(np.fromiter(iterations, dtype=np.int64))
        return np.flatnonzero(np.isin(self._ids, wanted))

    def _rank_runs(self, ranks: Iterable[int] | None) -> list[tuple[int, np.ndarray]]:
        """Requested ranks, ascending, cut into runs of consecutive ranks of one stage."""
        world = self.scenario.layout.world
        if ranks is None:
            chosen = np.arange(world)
        else:
            chosen = np.unique(np.fromiter(ranks, dtype=np.int64))
            if len(chosen) and (chosen[0] < 0 or chosen[-1] >= world):
                bad = chosen[0] if chosen[0] < 0 else chosen[-1]
                raise ConfigError(f"rank {int(bad)} is outside the world of {world}")
        if not len(chosen):
            return []
        stage = self.plan.stage_of[chosen]
        cuts = np.flatnonzero(np.diff(stage)) + 1
        return [(int(self.plan.stage_of[part[0]]), part) for part in np.split(chosen, cuts)]

    def ranks_records(
        self, ranks: Iterable[int] | None, *, iterations: Iterable[int] | None = None, comms: Iterable[str] | None = None
    ) -> RecordBatch:
        """Records of ``ranks``, ordered by rank, then iteration, then the rank's program order;
        only those on the communicators ``comms`` when it is given."""
        index = self._iteration_index(iterations)
        runs = self._rank_runs(ranks)
        if not runs:
            return RecordBatch.empty()
        # Each run's records written in place into columns sized for all of them: one write a value.
        sizes = [len(chunk) * len(index) * len(self.plan.stages[stage].slots) for stage, chunk in runs]
        columns = {f.name: np.empty(sum(sizes), f.dtype) for f in RecordBatch.FIELDS}
        at = 0
        for (stage, chunk), size in zip(runs, sizes):
            self._emit(stage, chunk, index, {name: column[at:at + size] for name, column in columns.items()})
            at += size
        batch = RecordBatch(columns, self._strings)
        return batch if comms is None else batch.take(batch.isin("comm", comms))

    def records(self, *, iterations: Iterable[int] | None = None) -> RecordBatch:
        """Every rank's records (mind the size at scale: ~65 bytes per record)."""
        return self.ranks_records(range(self.scenario.layout.world), iterations=iterations)

    def iter_records(self, *, chunk_ranks: int = 512, iterations: Iterable[int] | None = None):
        """Every rank's records in batches of ``chunk_ranks`` ranks (bounded memory)."""
        world = self.scenario.layout.world
        index_list = None if iterations is None else list(iterations)
        for first in range(0, world, chunk_ranks):
            yield self.ranks_records(range(first, min(first + chunk_ranks, world)), iterations=index_list)

    def iterations(
        self, *, ranks: Iterable[int] | None = None, iterations: Iterable[int] | None = None
    ) -> IterationBatch:
        index = self._iteration_index(iterations)
        chosen = np.arange(self.scenario.layout.world) if ranks is None else np.unique(np.fromiter(ranks, np.int64))
        t = self.timeline
        n_r, n_i = len(chosen), len(index)
        columns = {
            "job": np.zeros(n_r * n_i, np.uint32),
            "rank": np.repeat(chosen, n_i).astype(np.uint32),
            "iteration": np.tile(self._ids[index], n_r),
            "t_start_ns": t.it_start[np.ix_(index, chosen)].T.reshape(-1),
            "t_end_ns": t.it_end[np.ix_(index, chosen)].T.reshape(-1),
        }
        if self.scenario.host_clocks_ns:
            clock = np.repeat(self._clock_of_rank[chosen], n_i)
            columns["t_start_ns"] = columns["t_start_ns"] + clock
            columns["t_end_ns"] = columns["t_end_ns"] + clock
        return IterationBatch(columns, [self.scenario.job])

    @cached_property
    def _clock_of_rank(self) -> np.ndarray:
        """How far each rank's host clock runs ahead of true time (ns)."""
        layout, hosts = self.scenario.layout, self.scenario.topology.hosts
        ahead = np.array([self.scenario.host_clocks_ns.get(h, 0) for h in hosts[: layout.n_hosts]], np.int64)
        return ahead[np.arange(layout.world) // layout.gpus_per_host]

    # -- emission ---------------------------------------------------------------------------

    def _times(self, timeline: Timeline, stage: int, positions: np.ndarray, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Starts and ends as (ranks, iterations, slots) arrays."""
        # Index so that only the asked-for ranks are copied, never the whole stage.
        if positions[-1] - positions[0] + 1 == len(positions):
            sel = slice(int(positions[0]), int(positions[-1]) + 1)
            starts = timeline.starts[stage][:, :, sel][index]
            ends = timeline.ends[stage][:, :, sel][index]
        else:
            grid = np.ix_(index, np.arange(timeline.starts[stage].shape[1]), positions)
            starts, ends = timeline.starts[stage][grid], timeline.ends[stage][grid]
        return starts.transpose(2, 0, 1), ends.transpose(2, 0, 1)

    def _emit(self, stage: int, ranks: np.ndarray, index: np.ndarray, out: dict[str, np.ndarray]) -> None:
        """Write the records of ``ranks`` (one stage's, ascending) in ``index``'s iterations into the
        columns ``out`` (each as long as they are), rank, then iteration, then slot."""
        plan = self.plan
        st = plan.stages[stage]
        positions = plan.position[ranks]
        n_r, n_i, n_s = len(ranks), len(index), len(st.slots)
        shape = (n_r, n_i, n_s)
        starts, ends = self._times(self.timeline, stage, positions, index)
        meta = self._slot_meta(stage)
        comm = np.empty((n_r, n_s), np.uint32)
        peer = np.full((n_r, n_s), -1, np.int32)
        for kind, slots in meta["by_kind"].items():
            comm[:, slots] = self._code_of[kind][ranks][:, None]
        for what, slots in meta["by_peer"].items():
            peer[:, slots] = self._peer(what, ranks)[:, None]
        count, position = plan.counts[stage]
        seq = self._ids[index][:, None] * count[None, :] + position[None, :]
        issue = starts - self.timeline.launch[np.ix_(index, ranks)].T[:, :, None]
        if self.scenario.host_clocks_ns:
            clock = self._clock_of_rank[ranks][:, None, None]
            starts, ends, issue = starts + clock, ends + clock, issue + clock
        grid = {name: column.reshape(shape) for name, column in out.items()}
        grid["job"][...] = 0
        grid["rank"][...] = ranks.astype(np.uint32)[:, None, None]
        grid["comm"][...] = comm[:, None, :]
        grid["seq"][...] = seq[None].astype(np.uint64)
        grid["op"][...] = meta["op"]
        grid["peer"][...] = peer[:, None, :]
        grid["nbytes"][...] = meta["nbytes"]
        grid["iteration"][...] = self._ids[index][None, :, None]
        grid["t_issue_ns"][...] = issue
        grid["t_start_ns"][...] = starts
        grid["t_end_ns"][...] = ends

    @cached_property
    def _meta(self) -> list[dict]:
        out = []
        for st in self.plan.stages:
            by_kind: dict[str, list[int]] = {}
            by_peer: dict[str, list[int]] = {}
            for j, slot in enumerate(st.slots):
                by_kind.setdefault(slot.kind, []).append(j)
                if slot.peer:
                    by_peer.setdefault(slot.peer, []).append(j)
            out.append(
                {
                    "by_kind": {k: np.array(v) for k, v in by_kind.items()},
                    "by_peer": {k: np.array(v) for k, v in by_peer.items()},
                    "op": np.array([int(slot.op) for slot in st.slots], np.uint8),
                    "nbytes": np.array([slot.nbytes for slot in st.slots], np.uint64),
                }
            )
        return out

    def _slot_meta(self, stage: int) -> dict:
        return self._meta[stage]

    def _peer(self, what: str, ranks: np.ndarray) -> np.ndarray:
        stride = self.scenario.layout.strides["pp"]
        if what == "next":
            return ranks + stride
        if what == "prev":
            return ranks - stride
        nxt, prv = self.plan.ring_peers
        return nxt[ranks] if what == "ring_next" else prv[ranks]

    # -- ground truth -----------------------------------------------------------------------

    def abnormal(self, ranks: Iterable[int], *, iterations: Iterable[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(abnormal, counterfactual duration ns)`` aligned with ``ranks_records(ranks, iterations=...)``.

        Abnormal: the operator lasts more than ``ABNORMAL_RATIO`` x its fault-free counterfactual.
        """
        index = self._iteration_index(iterations)
        flags, bases = [], []
        for stage, chunk in self._rank_runs(ranks):
            positions = self.plan.position[chunk]
            s, e = self._times(self.timeline, stage, positions, index)
            cs, ce = self._times(self.counterfactual, stage, positions, index)
            base = (ce - cs).reshape(-1)
            flags.append((e - s).reshape(-1) > ABNORMAL_RATIO * base)
            bases.append(base)
        if not flags:
            return np.empty(0, bool), np.empty(0, np.int64)
        return np.concatenate(flags), np.concatenate(bases)

    def truth(self) -> GroundTruth:
        """The faults and every iteration's labels, with the fault-free and balanced twins' times
        (two more runs of the emulator: ``fault_truths`` and ``irregular_iterations`` need neither)."""
        sc = self.scenario
        time = self.iteration_times()
        base = self._spans(self.counterfactual)
        balanced = self._spans(self.balanced)
        irregular = set(self.irregular_iterations())
        rows = []
        for i in range(sc.iterations):
            active = tuple(k for k in range(len(sc.faults)) if self._factors[k][i] > 1.0)
            iteration = int(self._ids[i])
            rows.append(IterationTruth(iteration, int(time[i]), int(base[i]), iteration in irregular, active,
                                       int(balanced[i])))
        return GroundTruth(self.fault_truths(), tuple(rows))

    def fault_costs(self) -> tuple[float, ...]:
        """Per injected fault, what it costs the job over the iterations it is in force: the run's
        time there against the same run (the same draws) without it, the other faults kept. A fault
        beside a slower one, or on a path no transfer takes, may cost nothing; the layout's own
        uneven pipeline split is no fault's cost (unlike S's truth, the balanced twin)."""
        faults = self.scenario.faults
        time = self.iteration_times()
        costs = []
        for k in range(len(faults)):
            active = self._factors[k] > 1.0
            if not active.any():
                costs.append(1.0)
                continue
            without = self._spans(self.counterfactual if len(faults) == 1 else self._run(self._effects(True, leave_out=k)))
            costs.append(float(time[active].sum() / without[active].sum()))
        return tuple(costs)

    def forget_twins(self) -> None:
        """Drops the fault-free and balanced twins' timelines (``truth`` runs them; each holds every
        operator's times): a later use runs them again, the same."""
        for name in ("counterfactual", "balanced"):
            self.__dict__.pop(name, None)

    def fault_truths(self) -> tuple[dict, ...]:
        """Each injected fault as ``GroundTruth.faults`` lists it: its settings, index, the ranks it
        slows (GPU, host, last stage) and the iterations it is active in."""
        faults = []
        for k, fault in enumerate(self.scenario.faults):
            entry = fault.to_dict()
            entry["index"] = k
            entry["ranks"] = self.ranks_on(fault.device).tolist() if fault.kind in (FaultKind.GPU, FaultKind.HOST) else []
            if fault.kind is FaultKind.LAST_STAGE:
                entry["ranks"] = self.plan.stages[-1].ranks.tolist()
            entry["active_iterations"] = self._ids[self._factors[k] > 1.0].tolist()
            faults.append(entry)
        return tuple(faults)

    def irregular_iterations(self) -> tuple[int, ...]:
        """The δ-irregular iterations: longer than ``DELTA`` x the mean of the previous ``WINDOW``
        (``IterationTruth.irregular``), from the emulated run alone."""
        time = self.iteration_times()
        return tuple(int(self._ids[i]) for i in range(1, len(time))
                     if time[i] > DELTA * time[max(0, i - WINDOW):i].mean())

    @staticmethod
    def _spans(timeline: Timeline) -> np.ndarray:
        """Job-level iteration time: from the previous iteration's last end to this one's (as a
        trainer's step timer sees it); the first iteration from the first rank's start."""
        ends = timeline.it_end.max(axis=1)
        previous = np.concatenate(([timeline.it_start[0].min()], timeline.it_start[1:].min(axis=1)))
        # With stride > 1 the job idles between recorded iterations: count from the restart.
        if len(ends) > 1:
            previous[1:] = np.maximum(ends[:-1], previous[1:])
        return ends - previous
