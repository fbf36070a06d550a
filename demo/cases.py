"""The demo's two jobs and what a correct answer is for each.

The real job is ``sleuth.sim.trainjob`` (8 gloo ranks on this machine, tp2 pp2 dp2) with one
rank's compute slowed for part of the run; the GPU that rank runs on is read from the job spec
the logger wrote (on CPU the logger names it by LOCAL_RANK or the rank's place on its host).
The emulated job is 4,096 GPUs on a rail-optimized fat tree with one spine switch slowed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

from sleuth.errors import ConfigError
from sleuth.jobspec import JobSpec
from sleuth.layout import ParallelLayout
from sleuth.sim import Scenario
from sleuth.sim.faults import Fault, FaultKind
from sleuth.topology import Routing, generate

__all__ = ["RealJob", "SpineJob", "gpu_of_rank"]


@dataclass(frozen=True)
class RealJob:
    """The real CPU job and its slowdown: ``rank``'s compute ``factor`` times slower in
    iterations ``first``..``last - 1`` of ``iterations``."""

    job: str = "demo-real"
    iterations: int = 40
    rank: int = 5
    factor: float = 200.0  # 0.4 s per micro-batch: above the jitter of 8 ranks on a small machine
    first: int = 15
    last: int = 32

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "sleuth.sim.trainjob", "--iters", str(self.iterations),
            "--slow-rank", str(self.rank), "--slow-factor", str(self.factor),
            "--slow-iters", f"{self.first}:{self.last}", "--slow-kind", "compute",
        ]

    def run(self, logger_env: dict[str, str], *, timeout_s: float = 900.0) -> None:
        """Launch the job with only the logger's environment variables added to ours: the job
        itself knows nothing of sleuth."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
        env.update(logger_env, SLEUTH_JOB=self.job)
        done = subprocess.run(self.command(), env=env, capture_output=True, text=True, timeout=timeout_s)
        if done.returncode != 0:
            raise ConfigError(f"the demo training job failed (exit {done.returncode}): {done.stderr[-2000:]}")


def gpu_of_rank(spec: JobSpec, rank: int) -> str:
    """The topology id of the GPU ``rank`` ran on, as the logger placed it."""
    placement = spec.placement(rank)
    return f"gpu:{placement.host}/{placement.gpu}"


@dataclass(frozen=True)
class SpineJob:
    """The emulated job: dp128 pp4 tp8 on 512 hosts of 8 GPUs, 8 spines; ``spine`` is
    ``slow`` times slower from iteration ``start`` on. The fabric's routes are static (each GPU
    pair's spine is known, ``Routing.STATIC``), as the emulator routes them."""

    job: str = "demo-spine"
    spine: str = "spine:s0"
    slow: float = 3.0
    start: int = 15
    iterations: int = 40
    seed: int = 7
    routing: Routing = Routing.STATIC

    def scenario(self) -> Scenario:
        topology = generate("fattree:hosts=512,gpus=8,pod=32,spines=8")
        layout = ParallelLayout(4096, 8, 4, 128)
        fault = Fault(kind=FaultKind.SPINE, device=self.spine, slow=self.slow, start=self.start)
        return Scenario(
            topology=topology, layout=layout, microbatches=4, iterations=self.iterations,
            faults=(fault,), seed=self.seed, name=self.job, job=self.job,
        )
