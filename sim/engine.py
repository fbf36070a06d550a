"""The causal timing engine: walks every stage's program with one clock per rank, vectorized.

Why it is fast: all ranks of a pipeline stage run the same program, so a step is a handful of
numpy operations over the stage's ranks (1,024 at 8,192 GPUs with pp 8), never a Python loop
over ranks or records. Stages are walked in a topological order of the 1F1B blocks
(:func:`sleuth.sim.schedule.walk_order`).

Timing rules (the issue's causal model):

* every operator first pays the rank's launch overhead (``launch_us``; a ``host`` fault scales
  it); a communication operator *starts* after it, at ``t_start``; ``t_issue`` is the host time
  before the launch;
* compute advances the rank's clock by its cost x GPU (or host) slowdown x drift x jitter;
* a collective ends at ``max(member starts) + transfer(group)`` (transfers x comm drift x jitter); every member's clock moves to
  the end, and every member's record has that end;
* P2P: sends do not block the sender (isend); a receive ends at ``max(send start, recv start) +
  transfer``, and both records end then;
* context-parallel ring exchange: every rank sends to the next and receives from the previous
  rank around its ring at once, and goes on when both are done;
* after the pipeline: gradient reduction over dp (and edp), the embedding all-reduce between
  first and last stage, the optimizer step, and with ZeRO the parameter all-gather.

Randomness: each iteration draws from its own stream ``SeedSequence([seed, iteration])`` in a
fixed order that does not depend on faults, so a run with faults and its fault-free
counterfactual see the same jitter and the same hiccups.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sleuth.records import OpKind

from sleuth.sim.network import transfer_ns
from sleuth.sim.plan import COLL, COMPUTE, RECV, RING, SEND, Plan, StagePlan
from sleuth.validation import checked, non_negative_int, non_negative_number

__all__ = ["Effects", "Timeline", "Timing", "run"]


@dataclass(frozen=True, kw_only=True)
class Timing:
    """Launch overhead, jitter and benign hiccups of a fault-free run.

    ``compute_jitter`` / ``comm_jitter``: sigma of a log-normal factor on each compute step (per
    rank) and each transfer (per group or pair). ``hiccup_rate``: expected garbage-collection
    pauses per iteration, job-wide; each stalls one rank before one compute step for a
    log-normal time around ``hiccup_ms``. ``hiccups_at``: iterations that get one more such pause
    each, on a rank drawn from the seed apart from the random ones (a run with exactly the pauses
    asked for: ``hiccup_rate=0``).
    """

    launch_us: float = 5.0
    compute_jitter: float = 0.02
    comm_jitter: float = 0.05
    hiccup_rate: float = 0.02
    hiccup_ms: float = 20.0
    hiccups_at: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "hiccups_at", tuple(self.hiccups_at))
        for k, iteration in enumerate(self.hiccups_at):
            non_negative_int(f"timing.hiccups_at[{k}]", iteration)
        checked(self, prefix="timing.", launch_us=non_negative_number, compute_jitter=non_negative_number,
                comm_jitter=non_negative_number, hiccup_rate=non_negative_number, hiccup_ms=non_negative_number)

    @classmethod
    def exact(cls, *, launch_us: float = 5.0) -> Timing:
        """No jitter, no hiccups: times follow the critical-path arithmetic exactly."""
        return cls(launch_us=launch_us, compute_jitter=0.0, comm_jitter=0.0, hiccup_rate=0.0)


@dataclass(frozen=True)
class Effects:
    """What slows a run, per iteration (built from faults and drift by the scenario).

    ``compute``: (ranks, per-iteration factor) pairs multiplying compute; ``launch``: the same
    for launch overhead; ``network``: (iterations, faults) slowdown of each fault's device
    (1 where a fault is not a network fault or not in force); ``seqlen``: (iterations,
    micro-batches, replicas) factor on attention-score compute, or None; ``drift``:
    per-iteration factor on all compute; ``comm_drift``: the same on every transfer time.
    """

    compute: tuple[tuple[np.ndarray, np.ndarray], ...]
    launch: tuple[tuple[np.ndarray, np.ndarray], ...]
    network: np.ndarray
    seqlen: np.ndarray | None
    drift: np.ndarray
    comm_drift: np.ndarray


@dataclass
class Timeline:
    """Every operator's times: per stage, ``starts[s][i, j, p]`` and ``ends[s][i, j, p]`` of slot
    ``j`` on the stage's rank at local position ``p`` in iteration ``i`` (int64 ns);
    ``launch[i, r]``, ``it_start[i, r]``, ``it_end[i, r]`` per rank."""

    starts: list[np.ndarray]
    ends: list[np.ndarray]
    launch: np.ndarray
    it_start: np.ndarray
    it_end: np.ndarray


def _rint(values: np.ndarray) -> np.ndarray:
    return np.rint(values).astype(np.int64)


class _Factors:
    """``exp(sigma * z)`` for one iteration's float32 standard normals ``z``, in the order they are
    asked for, under each of ``sigmas``: drawn and exponentiated a block at a time, the same numbers
    as one draw per use (the generator hands out its normals one after the other)."""

    _BLOCK = 4096

    def __init__(self, rng: np.random.Generator, sigmas: tuple[float, ...]) -> None:
        self._rng, self._sigmas = rng, sigmas
        self._z = np.zeros(0, np.float32)  # the normals drawn; those from ``_at`` on not yet used
        self._blocks: list[np.ndarray | None] = [None for _ in sigmas]  # each sigma's, once asked for
        self._at = 0

    def take(self, which: int, n: int) -> np.ndarray:
        """The next ``n`` factors under ``sigmas[which]``."""
        if self._at + n > len(self._z):
            more = self._rng.standard_normal(max(n, self._BLOCK), dtype=np.float32)
            self._z, self._at = np.concatenate([self._z[self._at:], more]), 0
            self._blocks = [None for _ in self._sigmas]
        block = self._blocks[which]
        if block is None:
            block = self._blocks[which] = np.exp(self._sigmas[which] * self._z)
        found = block[self._at:self._at + n]
        self._at += n
        return found


def run(plan: Plan, effects: Effects, timing: Timing, *, seed: int, iterations: int, gap: int = 1) -> Timeline:
    """Emulate ``iterations`` iterations; ``gap`` > 1 idles the job between recorded iterations
    for ``gap - 1`` iteration times (sampled iterations of a long run)."""
    layout = plan.layout
    world, stages = layout.world, plan.stages
    n_it = iterations
    starts = [np.zeros((n_it, len(st.slots), len(st.ranks)), np.int64) for st in stages]
    ends = [np.zeros((n_it, len(st.slots), len(st.ranks)), np.int64) for st in stages]
    launch_all = np.zeros((n_it, world), np.int64)
    it_start = np.zeros((n_it, world), np.int64)
    it_end = np.zeros((n_it, world), np.int64)
    clocks = [np.zeros(len(st.ranks), np.int64) for st in stages]
    units = plan.units
    replica = plan.replica
    # P2P units per stage boundary b (b -> b+1), per local position.
    pp_units: list[np.ndarray] = []
    if "pp" in plan.kinds:
        for b in range(layout.pp - 1):
            pp_units.append(plan.owner["pp"][stages[b].ranks] * (layout.pp - 1) + b)
    ring: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    if "cp" in plan.kinds:
        nxt, prv = plan.ring_peers
        for st in stages:
            out_unit = plan.owner["cp"][st.ranks] * layout.cp + plan.member_index["cp"][st.ranks]
            ring[st.stage] = (plan.position[nxt[st.ranks]], plan.position[prv[st.ranks]], out_unit)
    embd_units = plan.owner["embd"][stages[0].ranks] if "embd" in plan.kinds else None
    n_compute = np.array([st.n_compute for st in stages])
    launch_ns = timing.launch_us * 1e3
    sigma_c, sigma_x = timing.compute_jitter, timing.comm_jitter
    base_cache: dict[tuple, np.ndarray] = {}

    for i in range(n_it):
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, i])))
        mult = np.full(world, float(effects.drift[i]))
        for ranks, factor in effects.compute:
            mult[ranks] *= factor[i]
        launch = np.full(world, launch_ns)
        for ranks, factor in effects.launch:
            launch[ranks] *= factor[i]
        launch = _rint(launch)
        launch_all[i] = launch
        net = effects.network[i] if effects.network.size else effects.network
        net_active = bool(effects.network.size) and bool((net != 1.0).any())
        seqlen = effects.seqlen[i] if effects.seqlen is not None else None

        hiccups: dict[tuple[int, int], list[tuple[int, int]]] = {}
        draws = [(rng, int(rng.poisson(timing.hiccup_rate)))] if timing.hiccup_rate > 0 else []
        if i in timing.hiccups_at:  # a stream of its own, so the random pauses stay where they were
            draws.append((np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, i, 0x41CC]))), 1))
        for source, count in draws:
            for _ in range(count):
                rank = int(source.integers(world))
                where = float(source.random())
                delay = timing.hiccup_ms * 1e6 * float(np.exp(0.5 * source.standard_normal()))
                s = int(plan.stage_of[rank])
                step = min(int(where * n_compute[s]), n_compute[s] - 1)
                hiccups.setdefault((s, step), []).append((int(plan.position[rank]), int(round(delay))))

        iteration_cache: dict[tuple, np.ndarray] = {}

        def transfer(kind: str, op: OpKind, nbytes: int) -> np.ndarray:
            key = (kind, op, nbytes)
            unit_set = units[kind]
            if net_active and unit_set.exposure:
                found = iteration_cache.get(key)
                if found is None:
                    bandwidth = unit_set.bandwidth_under(net)
                    found = iteration_cache[key] = transfer_ns(op, unit_set.members, nbytes, bandwidth, unit_set.latency)
                return found
            found = base_cache.get(key)
            if found is None:
                found = base_cache[key] = transfer_ns(op, unit_set.members, nbytes, unit_set.bandwidth, unit_set.latency)
            return found

        comm_drift = float(effects.comm_drift[i])

        def jitter(values: np.ndarray) -> np.ndarray:
            """A transfer time as this iteration meets it: drifted, then jittered."""
            if comm_drift != 1.0:
                values = values * comm_drift
            if sigma_x > 0:
                values = values * factors.take(1, len(values))
            return _rint(values)

        # The jitters' normals, drawn after the pauses' (which use the same generator).
        factors = _Factors(rng, (sigma_c, sigma_x))
        local = [
            (launch[st.ranks], mult[st.ranks], replica[st.ranks] if seqlen is not None else None) for st in stages
        ]
        for st in stages:
            it_start[i, st.ranks] = clocks[st.stage]
        pending: dict[tuple, tuple[np.ndarray, int]] = {}

        def execute(st: StagePlan, steps: list[tuple]) -> None:
            s = st.stage
            c = clocks[s]
            launch_s, mult_s, replica_s = local[s]
            start_rows, end_rows = starts[s][i], ends[s][i]
            for step in steps:
                code = step[0]
                if code == COMPUTE:
                    _, base, score, k, index = step
                    if seqlen is not None and score and k >= 0:
                        cost = (base + score * (seqlen[k][replica_s] - 1.0)) * mult_s
                    else:
                        cost = base * mult_s
                    if sigma_c > 0:
                        cost = cost * factors.take(0, len(c))
                    c = c + launch_s + _rint(cost)
                    pauses = hiccups.get((s, index))
                    if pauses:
                        for position, delay in pauses:
                            c[position] += delay
                elif code == COLL:
                    _, kind, op, nbytes, slot = step
                    table, rows, owner = st.groups[kind]
                    start = c + launch_s
                    group_end = start[table].max(axis=1) + jitter(transfer(kind, op, nbytes)[rows])
                    c = group_end[owner]
                    start_rows[slot] = start
                    end_rows[slot] = c
                elif code == SEND:
                    _, tag, slot = step
                    start = c + launch_s
                    start_rows[slot] = start
                    pending[(tag, s)] = (start, slot)
                    c = start
                elif code == RECV:
                    _, tag, slot, src = step
                    start = c + launch_s
                    sent, sent_slot = pending.pop((tag, src))
                    boundary = min(s, src)
                    cost = jitter(transfer("pp", OpKind.SEND, st.slots[slot].nbytes)[pp_units[boundary]])
                    c = np.maximum(start, sent) + cost
                    start_rows[slot] = start
                    end_rows[slot] = c
                    ends[src][i, sent_slot] = c
                else:  # RING
                    _, nbytes, send_slot, recv_slot = step
                    nxt_p, prv_p, out_unit = ring[s]
                    start = c + launch_s
                    cost = jitter(transfer("cp", OpKind.SEND, nbytes)[out_unit])
                    recv_end = np.maximum(start, start[prv_p]) + cost[prv_p]
                    send_end = recv_end[nxt_p]
                    start_rows[send_slot] = start
                    end_rows[send_slot] = send_end
                    start_rows[recv_slot] = start
                    end_rows[recv_slot] = recv_end
                    c = np.maximum(send_end, recv_end)
            clocks[s] = c

        for s, b in plan.walk:
            execute(stages[s], stages[s].blocks[b])
        for st in stages:
            execute(st, st.tail_reduce)
        if embd_units is not None:
            first, last = stages[0], stages[-1]
            start0 = clocks[0] + local[0][0]
            start1 = clocks[-1] + local[-1][0]
            nbytes = first.slots[first.embd_slot].nbytes
            end = np.maximum(start0, start1) + jitter(transfer("embd", OpKind.ALL_REDUCE, nbytes)[embd_units])
            starts[0][i, first.embd_slot] = start0
            starts[-1][i, last.embd_slot] = start1
            ends[0][i, first.embd_slot] = end
            ends[-1][i, last.embd_slot] = end
            clocks[0] = end
            clocks[-1] = end.copy()
        for st in stages:
            execute(st, st.tail_update)
        for st in stages:
            it_end[i, st.ranks] = clocks[st.stage]
        if gap > 1:
            # Idle until the next recorded iteration: every rank resumes together.
            resume = int(it_end[i].max()) + (gap - 1) * int(it_end[i].max() - it_start[i].min())
            clocks = [np.full(len(st.ranks), resume, np.int64) for st in stages]

    return Timeline(starts, ends, launch_all, it_start, it_end)
