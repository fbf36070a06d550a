"""Real torch jobs whose collectives come from the framework, not from the script (CPU, gloo).

``--mode ddp``: ``DistributedDataParallel`` over the world, with small buckets so each backward
all-reduces several (DDP's C++ reducer issues them). ``--mode fsdp``: FSDP2 (``fully_shard`` per
layer: all-gathers before each layer, reduce-scatters after its backward). ``--mode functional``:
a tensor-parallel layer over a DeviceMesh (``mesh_dim_names=("dp", "tp")``) whose activations are
all-reduced with functional collectives and whose gradients are averaged over dp through
DTensor's redistribution. The script itself calls no ``torch.distributed`` collective except
``init_process_group`` and a barrier at the end.

Faults: ``--slow-rank R --slow-factor F --slow-iters A:B`` makes rank R's compute F times slower
in iterations A..B-1 (B past the last iteration: to the end; A = 0: from the first step);
``--ramp`` grows the factor linearly from 1 at A to F at B-1. ``--count-ops`` makes each rank
count, independently of the logger, the c10d operators torch's own profiler sees it run;
``--manual-step`` updates the weights without ``torch.optim``, so nothing marks the steps.

Run: ``python -m sleuth.sim.frameworkjob --mode ddp --iters 20 --out FOLDER``. It knows nothing
of the logger: set ``SLEUTH_LOG_DIR`` or ``SLEUTH_COLLECTOR`` to log it. Needs torch.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass

import torch
import torch.distributed as dist

from sleuth.sim.trainjob import free_port, slowdown_at, write_ground_truth, write_result

MODES = ("ddp", "fsdp", "functional")
WIDTH = 64
#: Hidden widths of the MLP: unequal layers make unequal DDP buckets, as a real model's are.
WIDTHS = (64, 96, 64, 128, 64, 80, 64)
ROWS = 16


@dataclass(frozen=True)
class FrameworkJobOptions:
    mode: str = "ddp"
    world: int = 4
    iters: int = 20
    seed: int = 0
    slow_rank: int = -1
    slow_factor: float = 1.0
    slow_iters: tuple[int, int] = (0, 0)
    ramp: bool = False
    base_delay_s: float = 0.004  # the compute a slowdown factor multiplies (CPU compute is tiny)
    count_ops: bool = False
    manual_step: bool = False  # update the weights by hand: no torch.optim step marks iterations

    def factor(self, rank: int, iteration: int) -> float:
        """The slowdown of ``rank``'s compute in ``iteration`` (1: none)."""
        if rank != self.slow_rank:
            return 1.0
        return slowdown_at(iteration, slow_iters=self.slow_iters, factor=self.slow_factor, ramp=self.ramp)


def _model() -> torch.nn.Sequential:
    layers = [torch.nn.Linear(a, b) for a, b in zip(WIDTHS, WIDTHS[1:])]
    return torch.nn.Sequential(*[m for layer in layers for m in (layer, torch.nn.ReLU())][:-1])


def _ddp(rank: int, options: FrameworkJobOptions):
    model = torch.nn.parallel.DistributedDataParallel(_model(), bucket_cap_mb=0.02)
    return model, list(model.parameters())


def _fsdp(rank: int, options: FrameworkJobOptions):
    from torch.distributed.fsdp import fully_shard

    model = _model()
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    return model, list(model.parameters())


def _functional(rank: int, options: FrameworkJobOptions):
    """Column-parallel then row-parallel linear over tp (Megatron's MLP), gradients over dp."""
    import torch.distributed._functional_collectives as funcol
    from torch.distributed.device_mesh import init_device_mesh

    tp = 2
    mesh = init_device_mesh("cpu", (options.world // tp, tp), mesh_dim_names=("dp", "tp"))
    tp_group = mesh.get_group("tp")
    torch.manual_seed(options.seed + mesh.get_local_rank("tp"))
    w1 = torch.nn.Parameter(torch.randn(WIDTH, WIDTH // tp) * 0.1)
    w2 = torch.nn.Parameter(torch.randn(WIDTH // tp, WIDTH) * 0.1)

    class _AllReduceTP(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return funcol.all_reduce(x, "sum", tp_group)

        @staticmethod
        def backward(ctx, grad):
            return grad

    def model(x: torch.Tensor) -> torch.Tensor:
        return _AllReduceTP.apply(torch.relu(x @ w1) @ w2)

    def sync_gradients() -> None:
        from torch.distributed.tensor import DTensor, Partial, Replicate

        for p in (w1, w2):
            summed = DTensor.from_local(p.grad, mesh["dp"], [Partial()]).redistribute(mesh["dp"], [Replicate()])  # type: ignore[arg-type]  # backward has filled the gradients
            p.grad.copy_(summed.to_local() / mesh.size(0))  # type: ignore[union-attr]  # backward has filled the gradients

    model.sync_gradients = sync_gradients  # type: ignore[attr-defined]
    return model, [w1, w2]


_BUILD = {"ddp": _ddp, "fsdp": _fsdp, "functional": _functional}


class _ManualSGD:
    """Plain SGD without torch.optim (as some jobs write it): no optimizer hook sees its steps."""

    def __init__(self, params: list, lr: float = 0.01) -> None:
        self.params, self.lr = params, lr

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        for p in self.params:
            if p.grad is not None:
                p.add_(p.grad, alpha=-self.lr)


def run_rank(rank: int, options: FrameworkJobOptions) -> dict:
    counting = _op_counter() if options.count_ops else contextlib.nullcontext()
    with counting as counter:
        model, params = _BUILD[options.mode](rank, options)
        optimizer = _ManualSGD(params) if options.manual_step else torch.optim.SGD(params, lr=0.01)
        data = torch.Generator().manual_seed(options.seed * 1000 + rank)
        step_times = []
        for iteration in range(options.iters):
            t0 = time.perf_counter()
            optimizer.zero_grad()
            x = torch.randn(ROWS, WIDTH, generator=data)
            loss = model(x).pow(2).mean()
            # The compute a slow GPU stretches: base time, times the fault's factor.
            time.sleep(options.base_delay_s * options.factor(rank, iteration))
            loss.backward()
            sync = getattr(model, "sync_gradients", None)
            if sync is not None:
                sync()
            optimizer.step()
            step_times.append(time.perf_counter() - t0)
        dist.barrier()
    result = {"rank": rank, "step_times": step_times}
    if counter is not None:
        result["c10d_ops"] = dict(counter.counts)
    return result


class _Counts:
    counts: Counter


@contextlib.contextmanager
def _op_counter():
    """Counts the c10d operators torch's profiler sees this process run (one event each)."""
    from torch.profiler import ProfilerActivity, profile

    holder = _Counts()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        yield holder
    holder.counts = Counter(event.name for event in prof.events() if event.name.startswith("c10d::"))


def _worker(rank: int, options: FrameworkJobOptions, port: int, out: str | None) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(options.world))
    dist.init_process_group("gloo", rank=rank, world_size=options.world)
    try:
        result = run_rank(rank, options)
    finally:
        dist.destroy_process_group()
    write_result(out, result)


def parse_args(argv: list[str] | None = None) -> tuple[FrameworkJobOptions, str | None]:
    parser = argparse.ArgumentParser(prog="python -m sleuth.sim.frameworkjob", description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=MODES, default="ddp")
    parser.add_argument("--world", type=int, default=4)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--slow-rank", type=int, default=-1)
    parser.add_argument("--slow-factor", type=float, default=1.0)
    parser.add_argument("--slow-iters", default="0:0", help="A:B, iterations A..B-1")
    parser.add_argument("--ramp", action="store_true", help="grow the slowdown from 1 at A to F at B-1")
    parser.add_argument("--count-ops", action="store_true", help="count c10d operators with torch's profiler")
    parser.add_argument("--manual-step", action="store_true", help="update weights without torch.optim")
    parser.add_argument("--out", help="folder for per-rank results and the ground truth")
    args = parser.parse_args(argv)
    a, _, b = args.slow_iters.partition(":")
    options = FrameworkJobOptions(
        mode=args.mode, world=args.world, iters=args.iters, seed=args.seed, slow_rank=args.slow_rank,
        slow_factor=args.slow_factor, slow_iters=(int(a), int(b or a)), ramp=args.ramp, count_ops=args.count_ops,
        manual_step=args.manual_step,
    )
    if options.mode == "functional" and options.world % 2:
        parser.error("--mode functional needs an even --world (tp = 2)")
    return options, args.out


def main(argv: list[str] | None = None) -> int:
    options, out = parse_args(argv)
    write_ground_truth(out, options)
    import torch.multiprocessing as mp

    mp.spawn(_worker, args=(options, free_port(), out), nprocs=options.world, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
