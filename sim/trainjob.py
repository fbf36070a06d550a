"""A small real torch.distributed training job (CPU, gloo) with injectable slowdowns.

8 ranks laid out tp2 × pp2 × dp2 (Megatron order tp-cp-ep-dp-pp, ``sleuth.layout``), a tiny
transformer-like MLP block per pipeline stage split tensor-parallel (column then row parallel,
Megatron's f/g all-reduces), GPipe micro-batches through the pipeline, data-parallel gradient
sync and an optimizer step. Every operator kind the logger knows is used each iteration:
broadcast (inputs within tp), send/recv and batch_isend_irecv (activations), isend/irecv
(gradients), all_reduce, all_gather(_into_tensor), reduce_scatter(_tensor), all_to_all(_single),
reduce, and barrier at the start and end.

Faults: ``--slow-rank R --slow-factor F --slow-iters A:B --slow-kind compute|send`` makes rank R's
compute (or its sends) F times slower in iterations A..B-1: the ground truth for the localizer.
``--slow-iters 0:N`` slows it from the first iteration on; ``--ramp`` grows the factor linearly
from 1 at A to F at B-1. A rank's compute is ``base_delay_s`` per micro-batch (CPU compute is
tiny), a factor F adds ``(F - 1) x base_delay_s`` of sleep to it, a third in its forward pass and
two thirds in its backward (a slow GPU slows every kernel; a backward computes twice a forward).
Two non-hardware shapes: ``--uneven-stages F`` makes every rank of the last pipeline stage compute
F times as long in every iteration (a stage partitioning imbalance, What-if §5.2);
``--seqlen-jitter F`` scales each data-parallel replica's compute, per iteration, by a factor drawn
from ``--seed`` (the same on every rank of the replica) between 1 and F, so that the slowest
replica moves between iterations as batches of long sequences do (What-if §5.3).

Run: ``python -m sleuth.sim.trainjob --iters 20`` (forks 8 processes) or under torchrun
(``python -m torch.distributed.run --nproc-per-node 8 -m sleuth.sim.trainjob``). It knows nothing
of the logger: set ``SLEUTH_LOG_DIR`` or ``SLEUTH_COLLECTOR`` to log it. Needs torch (``test`` extra).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.distributed as dist

from sleuth.cli.arguments import positive_float
from sleuth.ports import free_port
from sleuth.layout import ParallelLayout

HIDDEN = 32
FFN = 64
MICRO_BATCHES = 2
MICRO_ROWS = 4
FORWARD_SHARE = 1 / 3  # of a micro-batch's compute: its backward pass computes two products per forward one


@dataclass(frozen=True)
class SlowRank:
    """The fault the real jobs inject: ``rank``'s work ``factor`` times as long in iterations A..B-1
    of ``iters``, or with ``ramp`` growing linearly from 1 at A to ``factor`` at B-1; rank -1: none.
    Every job takes it from the same options (``add_arguments``, ``from_args``)."""

    rank: int = -1
    factor: float = 1.0
    iters: tuple[int, int] = (0, 0)
    ramp: bool = False

    def at(self, rank: int, iteration: int) -> float:
        """``rank``'s factor in ``iteration``: 1 but on the slow rank in its iterations."""
        a, b = self.iters
        if rank != self.rank or not a <= iteration < b:
            return 1.0
        if not self.ramp or b - a < 2:
            return self.factor
        return 1.0 + (self.factor - 1.0) * (iteration - a) / (b - 1 - a)

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--slow-rank", type=int, default=-1, help="the rank slowed (default: none)")
        parser.add_argument("--slow-factor", type=float, default=1.0, metavar="F", help="its work F times as long")
        parser.add_argument("--slow-iters", default="0:0", metavar="A:B",
                            help="in iterations A..B-1 (B past the last: to the end; A = 0: from the first step)")
        parser.add_argument("--ramp", action="store_true", help="grow the slowdown from 1 at A to F at B-1")

    @classmethod
    def from_args(cls, args: argparse.Namespace, parser: argparse.ArgumentParser) -> SlowRank:
        """The options ``add_arguments`` declared; ``parser.error`` names the one that is wrong."""
        try:
            a, b = (int(part) for part in args.slow_iters.split(":"))
        except ValueError:
            parser.error(f"--slow-iters: expected A:B (two integers), got {args.slow_iters!r}")
        if not 0 <= a <= b:
            parser.error(f"--slow-iters: expected 0 <= A <= B, got {args.slow_iters!r}")
        if not args.slow_factor >= 1.0:
            parser.error(f"--slow-factor must be >= 1 (a factor on the work's time), got {args.slow_factor}")
        return cls(rank=args.slow_rank, factor=args.slow_factor, iters=(a, b), ramp=args.ramp)


def add_base_delay_argument(parser: argparse.ArgumentParser, *, default_ms: float, per: str) -> None:
    """``--base-delay-ms``: the compute time ``per`` (a micro-batch, a step) that every job's factors multiply."""
    parser.add_argument("--base-delay-ms", type=positive_float("--base-delay-ms"), default=default_ms, metavar="MS",
                        help=f"the compute time per {per} that the factors above multiply (default {default_ms:g})")


@dataclass(frozen=True)
class JobOptions:
    iters: int = 20
    tp: int = 2
    pp: int = 2
    dp: int = 2
    seed: int = 0
    slow: SlowRank = SlowRank()
    slow_kind: str = "compute"  # or "send": what of the slow rank's work ``slow`` lengthens
    uneven_stages: float = 1.0  # the last pipeline stage's compute over the others'
    seqlen_jitter: float = 1.0  # the largest per-iteration compute factor a replica draws
    base_delay_s: float = 0.002  # the time a slowdown factor multiplies (compute is tiny on CPU)
    progress: bool = False  # rank 0 prints "iteration K done" after each step

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.dp

    def factor(self, iteration: int) -> float:
        """The slowed rank's compute (or send) factor in ``iteration``: 1 outside A..B-1."""
        return self.slow.at(self.slow.rank, iteration)

    def work_factor(self, iteration: int, *, stage: int, replica: int) -> float:
        """The job's own uneven work on a rank of ``stage`` and data-parallel ``replica`` (no fault):
        the last stage's extra layers (``uneven_stages``) times its replica's batch (``seqlen_jitter``)."""
        last = self.uneven_stages if self.pp > 1 and stage == self.pp - 1 else 1.0
        return last * self.replica_factors(iteration)[replica]

    def replica_factors(self, iteration: int) -> list[float]:
        return replica_factors(iteration, replicas=self.dp, jitter=self.seqlen_jitter, seed=self.seed)


def replica_factors(iteration: int, *, replicas: int, jitter: float, seed: int) -> list[float]:
    """Each data-parallel replica's compute factor in ``iteration`` (``jitter`` F): drawn from a
    long tail, 1 + (F - 1) u^4 with u uniform (most batches are short, attention cost grows with
    the square of a document's length), and one replica computes F: each batch has its one long
    document. Which replica holds it follows a fresh shuffle every ``replicas`` iterations, as a
    distributed sampler gives every replica the same share of a shuffled dataset in each epoch."""
    if jitter <= 1.0:
        return [1.0] * replicas
    epoch, turn = divmod(iteration, replicas)
    holders = torch.randperm(replicas, generator=torch.Generator().manual_seed(_draw_seed(seed, "epoch", epoch)))
    draw = torch.Generator().manual_seed(_draw_seed(seed, "batch", iteration))
    factors = 1.0 + (jitter - 1.0) * torch.rand(replicas, generator=draw) ** 4
    factors[int(holders[turn])] = jitter
    return [float(f) for f in factors]


def _draw_seed(seed: int, stream: str, index: int) -> int:
    """A generator seed of its own for each (job seed, stream, index): no two draws share one."""
    return int.from_bytes(hashlib.blake2b(f"{seed}/{stream}/{index}".encode(), digest_size=7).digest(), "little")


class _CopyToTP(torch.autograd.Function):
    """Megatron's f: identity forward, all-reduce of the gradient within tp backward."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class _ReduceFromTP(torch.autograd.Function):
    """Megatron's g: all-reduce within tp forward, identity backward."""

    @staticmethod
    def forward(ctx, x, group):
        x = x.clone()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def _new_groups(layout: ParallelLayout, rank: int) -> dict[str, tuple[Any, list[int]]]:
    """Every group of every kind is created on every rank (new_group is collective)."""
    mine = {}
    for group in layout.groups():
        if group.kind not in ("tp", "pp", "dp"):
            continue
        handle = dist.new_group(list(group.ranks))
        if rank in group.ranks:
            mine[group.kind] = (handle, list(group.ranks))
    return mine


def run_rank(rank: int, world: int, options: JobOptions) -> dict:
    layout = ParallelLayout(world=world, tp=options.tp, pp=options.pp, dp=options.dp, gpus_per_host=world)
    groups = _new_groups(layout, rank)
    tp_group, tp_ranks = groups["tp"]
    dp_group, dp_ranks = groups["dp"]
    coords = layout.coordinates(rank)
    stage, last = coords.pp, options.pp - 1
    prev_rank = layout.rank_of(tp=coords.tp, dp=coords.dp, pp=stage - 1) if stage > 0 else -1
    next_rank = layout.rank_of(tp=coords.tp, dp=coords.dp, pp=stage + 1) if stage < last else -1

    torch.manual_seed(options.seed + 1000 * stage + coords.tp)  # same weights across dp
    w1 = torch.nn.Parameter(torch.randn(HIDDEN, FFN // options.tp) * 0.1)
    w2 = torch.nn.Parameter(torch.randn(FFN // options.tp, HIDDEN) * 0.1)
    params = [w1, w2]
    for p in params:  # data-parallel replicas start equal
        dist.broadcast(p.data, src=dp_ranks[0], group=dp_group)
    optimizer = torch.optim.SGD(params, lr=0.01)
    dist.barrier()

    def slow(iteration: int, kind: str, share: float = 1.0) -> None:
        extra = share * options.base_delay_s * (options.factor(iteration) - 1)
        # sleep(0) yields the core: on a busy machine the slowed rank would lose its turn outside its window too.
        if rank == options.slow.rank and options.slow_kind == kind and extra > 0:
            time.sleep(extra)

    def own_work(iteration: int) -> None:  # the micro-batch's forward: the base work, times the job's own factor
        time.sleep(options.base_delay_s * options.work_factor(iteration, stage=stage, replica=coords.dp))

    # Wall time per step, and the process's CPU time per step (all its threads: the logger's
    # drainer and writer too), which other processes on a shared machine do not inflate.
    step_times, step_cpu_times = [], []
    for iteration in range(options.iters):
        t0, cpu0 = time.perf_counter(), time.process_time()
        optimizer.zero_grad()
        inputs, outputs, losses = [], [], []
        data_gen = torch.Generator().manual_seed(options.seed + iteration * 100 + coords.dp)
        for micro in range(MICRO_BATCHES):
            x = torch.empty(MICRO_ROWS, HIDDEN)
            if stage == 0:
                x = torch.randn(MICRO_ROWS, HIDDEN, generator=data_gen)
                dist.broadcast(x, src=tp_ranks[0], group=tp_group)  # Megatron broadcasts data in tp
            elif micro % 2 == 0:
                dist.recv(x, src=prev_rank)
            else:
                (work,) = dist.batch_isend_irecv([dist.P2POp(dist.irecv, x, prev_rank)])
                work.wait()
            x.requires_grad_(stage > 0)
            h = torch.relu(_CopyToTP.apply(x, tp_group) @ w1)
            y = _ReduceFromTP.apply(h @ w2, tp_group)
            own_work(iteration)
            slow(iteration, "compute", FORWARD_SHARE)
            if stage < last:
                slow(iteration, "send")
                if micro % 2 == 0:
                    dist.send(y.detach().contiguous(), dst=next_rank)
                else:
                    for work in dist.batch_isend_irecv([dist.P2POp(dist.isend, y.detach().contiguous(), next_rank)]):
                        work.wait()
            else:
                piece = (y**2).mean().reshape(1)
                gathered = torch.empty(options.tp)
                dist.all_gather_into_tensor(gathered, piece.detach(), group=tp_group)
                losses.append(gathered.mean())
            inputs.append(x)
            outputs.append(y if stage < last else (y**2).mean())
        for micro in reversed(range(MICRO_BATCHES)):
            if stage == last:
                outputs[micro].backward()
            else:
                grad = torch.empty(MICRO_ROWS, HIDDEN)
                dist.irecv(grad, src=next_rank).wait()
                outputs[micro].backward(grad)
            slow(iteration, "compute", 1 - FORWARD_SHARE)
            if stage > 0:
                slow(iteration, "send")
                dist.isend(inputs[micro].grad.contiguous(), dst=prev_rank).wait()
        # Data-parallel gradient sync: ZeRO-style reduce-scatter + all-gather for w1, all-reduce for w2.
        flat = w1.grad.reshape(-1).contiguous()
        shard = torch.empty(flat.numel() // options.dp)
        dist.reduce_scatter_tensor(shard, flat, group=dp_group)
        dist.all_gather_into_tensor(flat, shard, group=dp_group)
        w1.grad.copy_(flat.reshape(w1.grad.shape) / options.dp)
        work = dist.all_reduce(w2.grad, group=dp_group, async_op=True)
        work.wait()
        w2.grad /= options.dp
        # Book-keeping collectives of a real job: token routing, metrics, loss reporting.
        routed = torch.empty(options.dp * 2)
        dist.all_to_all_single(routed, torch.arange(options.dp * 2, dtype=torch.float32), group=dp_group)
        chunks = [torch.empty(2) for _ in dp_ranks]
        dist.all_to_all(chunks, [torch.full((2,), float(rank)) for _ in dp_ranks], group=dp_group)
        norms = [torch.empty(1) for _ in tp_ranks]
        dist.all_gather(norms, w1.grad.norm().reshape(1), group=tp_group)
        scattered = torch.empty(1)
        dist.reduce_scatter(scattered, [torch.ones(1) for _ in tp_ranks], group=tp_group)
        loss = torch.stack(losses).sum().reshape(1) if losses else torch.zeros(1)
        dist.reduce(loss, dst=dp_ranks[0], group=dp_group)
        optimizer.step()
        step_times.append(time.perf_counter() - t0)
        step_cpu_times.append(time.process_time() - cpu0)
        if options.progress and rank == 0:
            print(f"iteration {iteration} done in {step_times[-1] * 1000:.1f} ms", flush=True)
    dist.barrier()
    return {"rank": rank, "step_times": step_times, "step_cpu_times": step_cpu_times, "loss": float(loss)}


def _worker(rank: int, world: int, options: JobOptions, port: int, out: str | None) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        result = run_rank(rank, world, options)
    finally:
        dist.destroy_process_group()
    write_result(out, result)


def write_result(out: str | None, result: dict) -> None:
    """One rank's results (step times...) as ``result-<rank>.json`` in ``out``, when given, with
    the logger's hooks that recorded it (``capture``)."""
    if out:
        with open(os.path.join(out, f"result-{result['rank']}.json"), "w") as handle:
            json.dump({**result, "capture": logger_hooks()}, handle)


def logger_hooks() -> str | None:
    """The class of the logger's hooks in this process; None while the logger is off."""
    import sleuth.logger

    logger = sleuth.logger.installed()
    return type(logger.hooks).__name__ if logger is not None else None


def write_ground_truth(out: str | None, options: object) -> None:
    """The job's options (its faults: the localizer's ground truth) as ``ground_truth.json``."""
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "ground_truth.json"), "w") as handle:
            json.dump(asdict(options), handle)  # type: ignore[call-overload]


def start_ranks(worker: Callable[..., None], args: tuple, ranks: int, *, cuda: bool = False) -> None:
    """Run ``worker(rank, *args)`` in one process per rank and wait for them all.

    Forked, the ranks share this process's imported torch, and the ``torch._dynamo`` that an
    optimizer imports on first use: about 4 s of CPU a rank that each spawned rank pays again.
    CUDA cannot start in a child forked from a parent that may have touched it: spawned then.
    Each rank computes on one thread unless ``OMP_NUM_THREADS`` says otherwise, as torchrun starts
    several processes on a node: a thread per core in every rank would oversubscribe the cores.
    """
    import torch.multiprocessing as mp

    if not cuda:
        import torch._dynamo  # noqa: F401
    threads = 1 if ranks > 1 and "OMP_NUM_THREADS" not in os.environ else None
    mp.start_processes(_rank_on_threads, args=(worker, threads, *args), nprocs=ranks, join=True,
                       start_method="spawn" if cuda else "fork")


def _rank_on_threads(rank: int, worker: Callable[..., None], threads: int | None, *args: Any) -> None:
    """``worker(rank, *args)`` with ``threads`` intra-op threads (None: torch's own choice)."""
    if threads is not None:
        torch.set_num_threads(threads)
    worker(rank, *args)


def launch(options: JobOptions, *, out: str | None = None) -> None:
    """Run the job on this machine: one process per rank (``start_ranks``)."""
    start_ranks(_worker, (options.world, options, free_port(), out), options.world)


def parse_args(argv: list[str] | None = None) -> tuple[JobOptions, str | None]:
    parser = argparse.ArgumentParser(prog="python -m sleuth.sim.trainjob", description=__doc__.split("\n")[0])
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--tp", type=int, default=2)
    parser.add_argument("--pp", type=int, default=2)
    parser.add_argument("--dp", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    SlowRank.add_arguments(parser)
    parser.add_argument("--slow-kind", choices=("compute", "send"), default="compute")
    parser.add_argument("--uneven-stages", type=float, default=1.0, metavar="F",
                        help="the last pipeline stage computes F times as long as the others (every iteration)")
    parser.add_argument("--seqlen-jitter", type=float, default=1.0, metavar="F",
                        help="each iteration, each dp replica's compute is scaled by a factor in [1, F] drawn from --seed")
    add_base_delay_argument(parser, default_ms=2.0, per="micro-batch")
    parser.add_argument("--progress", action="store_true", help='rank 0 prints "iteration K done" per step')
    parser.add_argument("--out", help="folder for per-rank results (step times) and the ground truth")
    args = parser.parse_args(argv)
    options = JobOptions(
        iters=args.iters, tp=args.tp, pp=args.pp, dp=args.dp, seed=args.seed, slow=SlowRank.from_args(args, parser),
        slow_kind=args.slow_kind, uneven_stages=args.uneven_stages, seqlen_jitter=args.seqlen_jitter,
        progress=args.progress, base_delay_s=args.base_delay_ms / 1000.0,
    )
    if options.pp != 2 and options.pp != 1:
        parser.error("--pp must be 1 or 2")
    for name, value in (("--tp", options.tp), ("--dp", options.dp)):
        if value < 2:  # the job's tensor-parallel reductions and data-parallel sync need a group of each
            parser.error(f"{name} must be 2 or more (the job runs its {name[2:]} group's collectives), got {value}")
    for name, value in (("--uneven-stages", options.uneven_stages), ("--seqlen-jitter", options.seqlen_jitter)):
        if value < 1.0:
            parser.error(f"{name} must be >= 1 (a factor on the compute time), got {value}")
    return options, args.out


def main(argv: list[str] | None = None) -> int:
    options, out = parse_args(argv)
    write_ground_truth(out, options)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # under torchrun
        dist.init_process_group("gloo")
        try:
            result = run_rank(dist.get_rank(), dist.get_world_size(), options)
        finally:
            dist.destroy_process_group()
        write_result(out, result)
        return 0
    launch(options, out=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
