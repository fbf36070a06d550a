"""A tiny discrete-event job for hand-made localizer cases (Holmes figure 12, appendix C).

Every rank runs the same list of steps each iteration, its own program: ``("compute", ns)``,
``("coll", comm, transfer_ns)``, ``("send", comm, peer, transfer_ns)``, ``("recv", comm, peer,
transfer_ns)``. A collective starts on each member when it gets there and ends on all of them
at max(start) + transfer; a send/recv pair likewise (blocking, as the contract's durations
say). ``slow(rank, iteration, step)`` multiplies a compute step, ``net(comm, iteration)`` a
transfer. Records follow the CommOps contract (per-communicator seq, per-direction P2P seq).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sleuth.jobspec import Communicator, JobSpec, RankPlacement
from sleuth.records import IterationBatch, OpKind, RecordBatch
from sleuth.sources import MemorySource
from sleuth.topology import Topology

Step = tuple


def run_job(
    programs: dict[int, list[Step]],
    groups: dict[str, tuple[int, ...]],
    *,
    iterations: int,
    slow: Callable[[int, int, int], float] = lambda rank, it, step: 1.0,
    net: Callable[[str, int], float] = lambda comm, it: 1.0,
    job: str = "toy",
    gpus_per_host: int = 2,
) -> MemorySource:
    ranks = sorted(programs)
    clock = {r: 0.0 for r in ranks}
    rows: list[dict] = []
    its: list[dict] = []
    coll_seq: dict[tuple[int, str], int] = {}
    p2p_seq: dict[tuple[str, int, int], int] = {}
    for it in range(iterations):
        begin = dict(clock)
        pos = {r: 0 for r in ranks}
        waiting: dict[tuple, dict[int, float]] = {}
        done = False
        while not done:
            progressed = False
            for r in ranks:
                program = programs[r]
                while pos[r] < len(program):
                    step = program[pos[r]]
                    if step[0] == "compute":
                        clock[r] += step[1] * slow(r, it, pos[r])
                        pos[r] += 1
                        progressed = True
                        continue
                    key = _key(r, step, it, pos[r], programs)
                    arrived = waiting.setdefault(key, {})
                    if r not in arrived:
                        arrived[r] = clock[r]
                        progressed = True
                    members = groups[step[1]] if step[0] == "coll" else (r, step[2])
                    if len(arrived) < len(members):
                        break
                    end = max(arrived.values()) + step[-1] * net(step[1], it)
                    for m in list(arrived):
                        mstep = programs[m][pos[m]]
                        rows.append(_record(job, m, mstep, arrived[m], end, it, coll_seq, p2p_seq))
                        clock[m] = end
                        pos[m] += 1
                    del waiting[key]
                    progressed = True
            done = all(pos[r] == len(programs[r]) for r in ranks)
            if not done and not progressed:
                raise RuntimeError("synthetic job deadlocks")
        for r in ranks:
            its.append({"rank": r, "iteration": it, "t_start_ns": int(begin[r]), "t_end_ns": int(clock[r])})
    records = RecordBatch.from_columns(
        job=job, **{k: [row[k] for row in rows] for k in ("rank", "comm", "seq", "op", "peer", "nbytes", "iteration", "t_issue_ns", "t_start_ns", "t_end_ns")}
    )
    iteration_batch = IterationBatch.from_columns(job=job, **{k: [row[k] for row in its] for k in ("rank", "iteration", "t_start_ns", "t_end_ns")})
    placements = tuple(RankPlacement(r, f"h{r // gpus_per_host:04d}", r % gpus_per_host) for r in ranks)
    comms = tuple(Communicator(name, name.split(".")[0], tuple(members)) for name, members in groups.items())
    spec = JobSpec(job, len(ranks), None, placements, comms)
    return MemorySource(spec, records, iteration_batch)


def _key(rank: int, step: Step, it: int, position: int, programs: dict[int, list[Step]]) -> tuple:
    kind, comm = step[0], step[1]
    if kind == "coll":
        index = sum(1 for s in programs[rank][:position] if s[0] == "coll" and s[1] == comm)
        return ("coll", comm, it, index)
    src, dst = (rank, step[2]) if kind == "send" else (step[2], rank)
    own = [s for s in programs[rank][:position] if s[0] == kind and s[1] == comm and s[2] == step[2]]
    return ("p2p", comm, src, dst, it, len(own))


def _record(job: str, rank: int, step: Step, start: float, end: float, it: int, coll_seq: dict, p2p_seq: dict) -> dict:
    kind, comm = step[0], step[1]
    if kind == "coll":
        seq = coll_seq.get((rank, comm), 0)
        coll_seq[(rank, comm)] = seq + 1
        op, peer = OpKind.ALL_REDUCE, -1
    else:
        peer = step[2]
        src, dst = (rank, peer) if kind == "send" else (peer, rank)
        seq = p2p_seq.get((comm, src, dst, kind), 0)
        p2p_seq[(comm, src, dst, kind)] = seq + 1
        op = OpKind.SEND if kind == "send" else OpKind.RECV
    return {
        "rank": rank, "comm": comm, "seq": seq, "op": int(op), "peer": peer, "nbytes": 1024, "iteration": it,
        "t_issue_ns": int(start), "t_start_ns": int(start), "t_end_ns": int(end),
    }


def one_leaf(world: int, *, gpus_per_host: int = 2) -> Topology:
    """Hosts h0000.. of ``gpus_per_host`` GPUs, one NIC per GPU, all behind leaf l0."""
    hosts = -(-world // gpus_per_host)
    n = hosts * gpus_per_host
    return Topology(
        hosts=tuple(f"h{h:04d}" for h in range(hosts)),
        host_gpus=np.full(hosts, gpus_per_host),
        host_nics=np.full(hosts, gpus_per_host),
        gpu_nic_local=np.tile(np.arange(gpus_per_host), hosts),
        leaves=("l0",),
        spines=(),
        nic_leaf=np.stack((np.arange(n), np.zeros(n, dtype=np.int64)), axis=1),
        leaf_spine=np.empty((0, 2), dtype=np.int64),
    )
