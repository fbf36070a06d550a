"""A real JAX data-parallel job: one process per rank, gradients all-reduced by XLA over NCCL on GPUs.

Each process holds one device of a global mesh ``("dp",)``; the parameters are replicated and the
batch is sharded over dp, so XLA itself inserts the gradients' all-reduce (the script calls no
collective): the collectives come from the framework, as in a JAX job. It knows nothing of sleuth;
run it with ``NCCL_PROFILER_PLUGIN`` (sleuth's NCCL profiler plugin) and ``SLEUTH_LOG_DIR`` to
record it, then ``sleuth import nccl-profiler``.

Faults as ``sleuth.sim.frameworkjob``'s: ``--slow-rank R --slow-factor F --slow-iters A:B [--ramp]``
makes rank R's compute before its gradients F times longer (more matrix products on its device,
which the step waits for), so its all-reduce starts late on the device, as a slow GPU's does.

Run one rank under a launcher that sets ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``/``MASTER_PORT``
(the coordinator) and ``LOCAL_RANK`` (its GPU):
``python -m sleuth.sim.jaxjob --iters 150 --out FOLDER``. ``--platform cpu`` runs it on CPUs, the
all-reduces over gloo. Needs jax.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass

from sleuth.sim.trainjob import SlowRank, write_ground_truth, write_result

#: Hidden widths of the MLP.
WIDTHS = (256, 512, 512, 256)
ROWS = 64  # each rank's batch
PLATFORMS = ("cuda", "cpu")


@dataclass(frozen=True)
class JaxJobOptions:
    world: int = 4
    iters: int = 20
    seed: int = 0
    slow: SlowRank = SlowRank()
    base_units: int = 24  # the compute a slowdown factor multiplies, in units of burn (a few matrix products)
    burn_size: int = 1024  # a burn unit's matrix side: 1024 is tens of microseconds on a data-centre GPU

    def units(self, rank: int, iteration: int) -> int:
        """How many burn units ``rank`` computes before its gradients in ``iteration``."""
        return round(self.base_units * self.slow.at(rank, iteration))


def run_rank(rank: int, options: JaxJobOptions) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()), ("dp",))
    replicated, by_rank = NamedSharding(mesh, P()), NamedSharding(mesh, P("dp"))
    local = jax.local_devices()[0]

    keys = jax.random.split(jax.random.PRNGKey(options.seed), len(WIDTHS) - 1)
    params = [jax.device_put(jax.random.normal(k, (a, b)) * 0.05, replicated)
              for k, a, b in zip(keys, WIDTHS, WIDTHS[1:])]

    def loss_fn(params, x, y):
        for w in params[:-1]:
            x = jax.nn.relu(x @ w)
        return jnp.mean((x @ params[-1] - y) ** 2)

    @jax.jit
    def train_step(params, x, y, done):
        # The step waits for this rank's compute (``done``), as a backward waits for its forward.
        x = x + 0.0 * jnp.repeat(done, ROWS)[:, None]
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return [p - 0.01 * g for p, g in zip(params, grads)], loss

    @jax.jit
    def burn(a):
        for _ in range(4):
            a = jnp.tanh(a @ a) * 0.5
        return a

    block = jax.device_put(jnp.eye(options.burn_size, dtype=jnp.float32) * 0.5, local)
    data = np.random.default_rng(options.seed * 1000 + rank)
    step_times = []
    for iteration in range(options.iters):
        t0 = time.perf_counter()
        x_local = data.standard_normal((ROWS, WIDTHS[0]), dtype=np.float32)
        y_local = data.standard_normal((ROWS, WIDTHS[-1]), dtype=np.float32)
        x = jax.make_array_from_process_local_data(by_rank, x_local)
        y = jax.make_array_from_process_local_data(by_rank, y_local)
        out = block
        for _ in range(options.units(rank, iteration)):
            out = burn(out)
        # One element per rank, on this rank's device: no copy to the host, so no wait here.
        done = jax.make_array_from_single_device_arrays((options.world,), by_rank, [out[0, :1]])
        params, loss = train_step(params, x, y, done)
        loss.block_until_ready()  # a step ends when its device work has
        step_times.append(time.perf_counter() - t0)
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices("sleuth-jaxjob-end")
    return {"rank": rank, "step_times": step_times, "loss": float(loss), "devices": len(jax.devices())}


def _initialize(rank: int, world: int, platform: str) -> None:
    import jax

    coordinator = f"{os.environ.get('MASTER_ADDR', '127.0.0.1')}:{os.environ['MASTER_PORT']}"
    if platform == "cpu":
        jax.config.update("jax_platforms", "cpu")
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(coordinator, num_processes=world, process_id=rank)
        return
    jax.distributed.initialize(coordinator, num_processes=world, process_id=rank,
                               local_device_ids=[int(os.environ.get("LOCAL_RANK", rank))])


def parse_args(argv: list[str] | None = None) -> tuple[JaxJobOptions, str, str | None]:
    parser = argparse.ArgumentParser(prog="python -m sleuth.sim.jaxjob", description=__doc__.split("\n")[0])
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    SlowRank.add_arguments(parser)
    parser.add_argument("--base-units", type=int, default=JaxJobOptions.base_units)
    parser.add_argument("--burn-size", type=int, default=JaxJobOptions.burn_size)
    parser.add_argument("--platform", choices=PLATFORMS, default="cuda", help="cpu: all-reduce over gloo")
    parser.add_argument("--out", help="folder for per-rank results and the ground truth")
    args = parser.parse_args(argv)
    slow = SlowRank.from_args(args, parser)
    if args.iters < 1 or args.base_units < 1 or args.burn_size < 1:
        parser.error("--iters, --base-units and --burn-size must be positive")
    world = int(os.environ.get("WORLD_SIZE", "0"))
    if world < 1 or "RANK" not in os.environ or "MASTER_PORT" not in os.environ:
        parser.error("run each rank under a launcher: RANK, WORLD_SIZE and MASTER_PORT must be set")
    options = JaxJobOptions(world=world, iters=args.iters, seed=args.seed, slow=slow, base_units=args.base_units,
                            burn_size=args.burn_size)
    return options, args.platform, args.out


def main(argv: list[str] | None = None) -> None:
    options, platform, out = parse_args(argv)
    rank = int(os.environ["RANK"])
    _initialize(rank, options.world, platform)
    if out:
        os.makedirs(out, exist_ok=True)
        if rank == 0:
            write_ground_truth(out, options)
    import jax

    try:
        result = run_rank(rank, options)
    finally:
        jax.distributed.shutdown()
    write_result(out, result)


if __name__ == "__main__":
    main()
