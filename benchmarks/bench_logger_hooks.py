"""Cost of the logger's hooks per operator, paired in one process; prints JSON.

    python benchmarks/bench_logger_hooks.py [--blocks 40] [--ops 2000] [--capture native|process-group|functions]

The step-time benchmark (bench_logger_overhead.py) runs the real 8-rank job, whose step time on
a small shared machine varies by tens of percent from run to run: far more than the logger costs.
This one isolates the logger's share. It drives torch's in-process ``fake`` process group (every
operator returns at once, so the hooks' own work is not hidden behind communication) with the
real job's mix of operators, and alternates blocks of ``--ops`` operators with the hooks removed
and installed (the same process, the same tensors, interleaved), so slow drifts of the machine
hit both sides alike. The figure is the median per-operator time with hooks minus without (the
hooks' cost, host-clock path), and the ratio of the two medians. Needs torch (``test`` extra).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

import torch
import torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore

from sleuth.progress import Steps, progress


def operators(world: int) -> list:
    """One round of the real job's operator kinds (sleuth.sim.trainjob), on small tensors."""
    tensor, out = torch.zeros(64), torch.zeros(64 * 2)
    group = dist.new_group([0, 1])
    return [
        lambda: dist.all_reduce(tensor, group=group),
        lambda: dist.broadcast(tensor, src=0, group=group),
        lambda: dist.all_gather_into_tensor(out, tensor, group=group),
        lambda: dist.reduce_scatter_tensor(tensor, out, group=group),
        lambda: dist.all_reduce(tensor, group=group, async_op=True).wait(),
        lambda: dist.reduce(tensor, dst=0, group=group),
        lambda: dist.barrier(group=group),
    ]


def block(ops: list, count: int) -> float:
    """CPU nanoseconds of this thread per operator over ``count`` operators. The thread's CPU
    time, not the wall clock: on a shared machine the wall clock also counts the time other
    processes hold the core, which is noise here (the ``fake`` group does all its work, and the
    hooks all theirs, on this thread)."""
    began = time.thread_time_ns()
    for k in range(count):
        ops[k % len(ops)]()
    return (time.thread_time_ns() - began) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--blocks", type=int, default=40, help="blocks per side (default 40)")
    parser.add_argument("--ops", type=int, default=2000, help="operators per block (default 2000)")
    parser.add_argument(
        "--capture", choices=("native", "process-group", "functions"), default="process-group",
        help="the logger's way of capturing (SLEUTH_CAPTURE; default process-group)",
    )
    args = parser.parse_args()
    world = 8
    pairs = args.blocks * (2 if args.capture in FLOORS else 1)  # the hooks' pairs of blocks, then the floor's
    # The bar is drawn only as it advances, between pairs of timed blocks: never while one is timed.
    with tempfile.TemporaryDirectory() as folder, progress("logger hooks: pairs of blocks (off, on)", total=pairs,
                                                           redraw_on_timer=False) as steps:
        os.environ.update(
            SLEUTH_LOG_DIR=folder, SLEUTH_JOB="bench-hooks", SLEUTH_SPILL_DIR=folder, SLEUTH_CAPTURE=args.capture
        )
        dist.init_process_group("fake", rank=0, world_size=world, store=FakeStore())
        ops = operators(world)
        import sleuth.logger

        logger = sleuth.logger.install()
        block(ops, args.ops)  # registers the groups and warms both paths up
        logger.hooks.remove()
        block(ops, args.ops)
        times: dict[str, list[float]] = {"off": [], "on": []}
        for _ in range(args.blocks):
            times["off"].append(block(ops, args.ops))
            logger.hooks.install()
            times["on"].append(block(ops, args.ops))
            logger.hooks.remove()
            steps.advance()
        logger.hooks.install()
        sleuth.logger.uninstall()
        steps.describe("logger hooks: torch's hook floor, pairs of blocks")
        floor = FLOORS[args.capture](ops, args, steps) if args.capture in FLOORS else None
        capture = type(logger.hooks).__name__
        dist.destroy_process_group()
    off, on = statistics.median(times["off"]), statistics.median(times["on"])
    paired = [b - a for a, b in zip(times["off"], times["on"])]
    print(json.dumps({
        "benchmark": "logger_hooks_per_operator",
        "impl": sleuth.logger.core.impl.__name__ if hasattr(sleuth.logger, "core") else "?",
        "blocks": args.blocks, "ops_per_block": args.ops,
        "baseline_ns_per_op_without_hooks": round(off),
        "ns_per_op_with_hooks": round(on),
        "hooks_ns_per_op_median_paired": round(statistics.median(paired)),
        "hooks_ns_per_op_iqr_paired": [round(q) for q in statistics.quantiles(paired, n=4)[::2]],
        "ratio_with_over_without": round(on / off, 4),
        "capture": args.capture,
        "hooks": capture,
        # What any capture through torch's process-group hooks pays before doing anything: two
        # calls from C++ (into Python, or C++ for native), the arguments read, a completion callback.
        "torch_hook_floor_ns_per_op": floor,
    }, indent=1))


def torch_hook_floor(ops: list, args: argparse.Namespace, steps: Steps) -> int:
    """Median paired ns per operator of Python hooks that only read what ours read and add a callback."""

    def pre(hook_args) -> None:
        hook_args.name, hook_args.input_tensors, hook_args.root, hook_args.op_id

    def post(hook_args) -> None:
        hook_args.op_id
        hook_args.work.get_future().add_done_callback(lambda _: None)

    def register(group) -> None:
        group.register_pre_hook(1, pre)
        group.register_post_hook(1, post)

    return floor(ops, args, register, steps)


def native_hook_floor(ops: list, args: argparse.Namespace, steps: Steps) -> int:
    """The same for C++ hooks (sleuth.logger.native's ``hook_floor``): torch's price for any native capture."""
    from sleuth.logger import native

    return floor(ops, args, lambda group: native.load().hook_floor(group, 1), steps)


def floor(ops: list, args: argparse.Namespace, register, steps: Steps) -> int:
    """Median paired ns per operator of the hooks ``register(group)`` puts on every group (id 1);
    ``steps`` advanced after each pair of blocks."""
    groups = [g for g in dist.distributed_c10d._world.pg_map]
    paired = []
    for _ in range(args.blocks):
        off = block(ops, args.ops)
        for g in groups:
            register(g)
        paired.append(block(ops, args.ops) - off)
        for g in groups:
            g.unregister_pre_hook(1)
            g.unregister_post_hook(1)
        steps.advance()
    return round(statistics.median(paired))


#: Each capture's floor: what torch's hooks cost, called from C++, before the logger does anything.
FLOORS = {"process-group": torch_hook_floor, "native": native_hook_floor}


if __name__ == "__main__":
    main()
