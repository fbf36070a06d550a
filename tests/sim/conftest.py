"""Small emulated jobs shared by the emulator tests."""

from __future__ import annotations

from sleuth.layout import ParallelLayout
from sleuth.sim import Emulation, ModelSpec, Scenario, Timing
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
