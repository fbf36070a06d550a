"""Small emulated jobs shared by the emulator tests."""

from __future__ import annotations

from sleuth.layout import ParallelLayout
from sleuth.sim import Emulation, ModelSpec, Scenario, Timing, parse_fault
from sleuth.topology import generate

#: A model small enough that an emulated iteration takes milliseconds to compute.
SMALL = ModelSpec(layers=4, hidden=1024, seq_len=1024, vocab=4096, gpu_tflops=100.0)


def emulate(*, tp: int, pp: int, dp: int, fabric: str, faults=(), exact: bool = True, **options) -> Emulation:
    topology = generate(fabric)
    gph = topology.gpus_per_host
    cp, ep = options.pop("cp", 1), options.pop("ep", 1)
    layout = ParallelLayout(tp * pp * dp * cp * ep, tp, pp, dp, cp=cp, ep=ep, gpus_per_host=gph)
    options.setdefault("model", SMALL)
    options.setdefault("timing", Timing.exact() if exact else Timing())
    return Emulation(Scenario(topology=topology, layout=layout, faults=tuple(faults), **options))


def paused_emulation(*faults: str, seed: int, iterations: int = 12) -> Emulation:
    """32 GPUs (tp4 pp2 dp4), two pauses per iteration of about a tenth of it each (What-if §5.4:
    garbage collection stopping one process at a time), each on a rank the seed draws."""
    layout = ParallelLayout(32, 4, 2, 4, gpus_per_host=4)
    return Emulation(Scenario(topology=generate("fattree:hosts=8,gpus=4,pod=4,spines=2"), layout=layout, model=SMALL,
                              microbatches=4, iterations=iterations, faults=tuple(parse_fault(f) for f in faults),
                              seed=seed, job="paused", timing=Timing(hiccup_rate=2.0, hiccup_ms=0.5)))
