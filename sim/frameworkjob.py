"""Real torch jobs whose collectives come from the framework, not from the script (gloo or NCCL).

``--mode ddp``: ``DistributedDataParallel`` over the world, with small buckets so each backward
all-reduces several (DDP's C++ reducer issues them). ``--mode fsdp``: FSDP2 (``fully_shard`` per
layer: all-gathers before each layer, reduce-scatters after its backward). ``--mode functional``:
a tensor-parallel layer over a DeviceMesh (``mesh_dim_names=("dp", "tp")``) whose activations are
all-reduced with functional collectives and whose gradients are averaged over dp through
DTensor's redistribution. The script itself calls no ``torch.distributed`` collective except
``init_process_group`` and a barrier at the end.

Faults: ``--slow-rank R --slow-factor F --slow-iters A:B`` makes rank R's compute F times slower
in iterations A..B-1 (B past the last iteration: to the end; A = 0: from the first step);
``--ramp`` grows the factor linearly from 1 at A to F at B-1. ``--seqlen-jitter F`` (ddp, fsdp:
every rank is a data-parallel replica) scales each rank's compute in each iteration by a factor
in [1, F], F on one rank that moves per iteration (uneven batches: sequence-length imbalance,
no fault). ``--count-ops`` makes each rank
count, independently of the logger, the c10d operators torch's own profiler sees it run;
``--manual-step`` updates the weights without ``torch.optim``, so nothing marks the steps.

``--device cuda`` runs each rank on a GPU (``LOCAL_RANK`` modulo the GPUs it sees) over NCCL; a
slow rank's extra compute is then GPU work (a spin kernel on its stream), so its collectives start
late on the device, as a slow GPU's do.

Run: ``python -m sleuth.sim.frameworkjob --mode ddp --iters 20 --out FOLDER`` starts every rank;
under a launcher that sets ``RANK``, ``WORLD_SIZE`` and ``MASTER_PORT`` (torchrun) it runs that one
rank. It knows nothing of the logger: set ``SLEUTH_LOG_DIR`` or ``SLEUTH_COLLECTOR`` to log it, or
``NCCL_PROFILER_PLUGIN`` for the NCCL profiler plugin. Needs torch.
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

from sleuth.ports import free_port
from sleuth.sim.trainjob import (SlowRank, add_base_delay_argument, replica_factors, start_ranks, write_ground_truth,
                                 write_result)

MODES = ("ddp", "fsdp", "functional")
DEVICES = ("cpu", "cuda")
#: About a data-centre GPU's SM clock: a spin kernel of this many cycles a second of delay. Only the
#: ratio between ranks matters (the slow rank spins ``factor`` times longer), not the exact time.
GPU_CYCLES_PER_S = 1.5e9
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
    slow: SlowRank = SlowRank()
    seqlen_jitter: float = 1.0  # the largest per-iteration compute factor a rank (a DDP replica) draws
    base_delay_s: float = 0.004  # the compute a slowdown factor multiplies (CPU compute is tiny)
    count_ops: bool = False
    manual_step: bool = False  # update the weights by hand: no torch.optim step marks iterations
    device: str = "cpu"  # "cuda": NCCL, one GPU per rank, the slow compute on the GPU

    def factor(self, rank: int, iteration: int) -> float:
        """The slowdown of ``rank``'s compute in ``iteration`` (1: none)."""
        data = replica_factors(iteration, replicas=self.world, jitter=self.seqlen_jitter, seed=self.seed)[rank]
        return data * self.slow.at(rank, iteration)


def _model(device: str) -> torch.nn.Sequential:
    layers = [torch.nn.Linear(a, b) for a, b in zip(WIDTHS, WIDTHS[1:])]
    return torch.nn.Sequential(*[m for layer in layers for m in (layer, torch.nn.ReLU())][:-1]).to(_device(device))


def _device(device: str) -> torch.device:
    return torch.device("cuda", torch.cuda.current_device()) if device == "cuda" else torch.device("cpu")


def _ddp(rank: int, options: FrameworkJobOptions):
    model = torch.nn.parallel.DistributedDataParallel(_model(options.device), bucket_cap_mb=0.02)
    return model, list(model.parameters())


def _fsdp(rank: int, options: FrameworkJobOptions):
    from torch.distributed.fsdp import fully_shard

    model = _model(options.device)
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
    device = _device(options.device)
    mesh = init_device_mesh(device.type, (options.world // tp, tp), mesh_dim_names=("dp", "tp"))
    tp_group = mesh.get_group("tp")
    torch.manual_seed(options.seed + mesh.get_local_rank("tp"))
    w1 = torch.nn.Parameter((torch.randn(WIDTH, WIDTH // tp) * 0.1).to(device))
    w2 = torch.nn.Parameter((torch.randn(WIDTH // tp, WIDTH) * 0.1).to(device))

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
        device = _device(options.device)
        step_times = []
        for iteration in range(options.iters):
            t0 = time.perf_counter()
            optimizer.zero_grad()
            x = torch.randn(ROWS, WIDTH, generator=data).to(device)
            loss = model(x).pow(2).mean()
            # The compute a slow GPU stretches: base time, times the fault's factor.
            _compute(options.base_delay_s * options.factor(rank, iteration), options.device)
            loss.backward()
            sync = getattr(model, "sync_gradients", None)
            if sync is not None:
                sync()
            optimizer.step()
            if options.device == "cuda":
                torch.cuda.synchronize()  # a step ends when its GPU work has (the step time is the GPU's)
            step_times.append(time.perf_counter() - t0)
        dist.barrier()
    result = {"rank": rank, "step_times": step_times}
    if counter is not None:
        result["c10d_ops"] = dict(counter.counts)
    return result


def _compute(seconds: float, device: str) -> None:
    """``seconds`` of compute: on a GPU a spin kernel on the current stream, on a CPU a sleep."""
    if device == "cuda":
        torch.cuda._sleep(int(seconds * GPU_CYCLES_PER_S))
    else:
        time.sleep(seconds)


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
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.update(MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(options.world))
    backend = "gloo"
    if options.device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
        backend = "nccl"
    dist.init_process_group(backend, rank=rank, world_size=options.world)
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
    SlowRank.add_arguments(parser)
    parser.add_argument("--seqlen-jitter", type=float, default=1.0, metavar="F",
                        help="each iteration, each rank's compute is scaled by a factor in [1, F] drawn from --seed "
                             "(every rank is a data-parallel replica: uneven batches)")
    add_base_delay_argument(parser, default_ms=4.0, per="step")
    parser.add_argument("--count-ops", action="store_true", help="count c10d operators with torch's profiler")
    parser.add_argument("--manual-step", action="store_true", help="update weights without torch.optim")
    parser.add_argument("--device", choices=DEVICES, default="cpu", help="cuda: NCCL, one GPU per rank")
    parser.add_argument("--out", help="folder for per-rank results and the ground truth")
    args = parser.parse_args(argv)
    options = FrameworkJobOptions(
        mode=args.mode, world=args.world, iters=args.iters, seed=args.seed, slow=SlowRank.from_args(args, parser),
        seqlen_jitter=args.seqlen_jitter, base_delay_s=args.base_delay_ms / 1000.0, count_ops=args.count_ops,
        manual_step=args.manual_step, device=args.device,
    )
    if options.mode == "functional" and options.world % 2:
        parser.error("--mode functional needs an even --world (tp = 2)")
    if options.mode == "functional" and options.seqlen_jitter > 1.0:
        parser.error("--seqlen-jitter needs every rank to be a data-parallel replica: --mode ddp or fsdp")
    if options.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA GPU")
    return options, args.out


def main(argv: list[str] | None = None) -> int:
    options, out = parse_args(argv)
    launched = _launched_rank(options)
    if launched is not None:  # a launcher started this one rank
        if launched == 0:
            write_ground_truth(out, options)
        _worker(launched, options, int(os.environ["MASTER_PORT"]), out)
        return 0
    write_ground_truth(out, options)
    start_ranks(_worker, (options, free_port(), out), options.world, cuda=options.device == "cuda")
    return 0


def _launched_rank(options: FrameworkJobOptions) -> int | None:
    """This process's rank when a launcher (torchrun) set ``RANK``, ``WORLD_SIZE`` and ``MASTER_PORT``."""
    if not all(os.environ.get(name) for name in ("RANK", "WORLD_SIZE", "MASTER_PORT")):
        return None
    if int(os.environ["WORLD_SIZE"]) != options.world:
        raise SystemExit(f"WORLD_SIZE={os.environ['WORLD_SIZE']} but --world {options.world}: they must agree")
    return int(os.environ["RANK"])


if __name__ == "__main__":
    sys.exit(main())
