"""Small seeded emulated jobs (16 GPUs, a few hundred operators per iteration) for detection tests."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

import numpy as np
import pytest

from sleuth.layout import ParallelLayout
from sleuth.sim import Emulation, Scenario, parse_fault
from sleuth.stream.detection import DetectorModel
from sleuth.sim.training_rows import emulation_rows
from sleuth.stream.detection.training import fit_model
from sleuth.topology import generate

from tests.conftest import clear_caches
from tests.sim.conftest import SMALL

FABRIC = "fattree:hosts=4,gpus=4,pod=2,spines=2"


def scenario(*faults: str, seed: int = 0, iterations: int = 40, **options) -> Scenario:
    topology = generate(FABRIC)
    layout = ParallelLayout(16, 4, 2, 2, gpus_per_host=4)
    return Scenario(topology=topology, layout=layout, model=SMALL, microbatches=4, iterations=iterations,
                    faults=tuple(parse_fault(f) for f in faults), seed=seed, job=f"job-{seed}", **options)


@pytest.fixture(autouse=True, scope="package")
def package_caches_end_with_the_package() -> Iterator[None]:
    """The detection modules share the runs and the model below; they go when the last module is done."""
    yield
    clear_caches(globals())


@cache
def emulation(*faults: str, seed: int = 0, iterations: int = 40) -> Emulation:
    return Emulation(scenario(*faults, seed=seed, iterations=iterations))


@cache
def small_model(scale_free: bool = True) -> DetectorModel:
    """A forest trained in a second on seeds 1-3 (the tests score seed 0 and up)."""
    scenarios = [scenario(f, seed=s) for s in (1, 2, 3) for f in (
        "gpu:h0001/2,slow=1.5,start=15", "nic:h0002/0,slow=4,profile=fluctuation,start=10",
        "gpu:h0000/1,slow=2,profile=spike,rate=0.15,start=5")]
    X, y, summary = emulation_rows(scenarios, seed=0)
    return fit_model(X, y, training=summary, n_estimators=15, max_depth=12, scale_free=scale_free)


def f1(flags: np.ndarray, labels: np.ndarray) -> float:
    tp = int((flags & labels).sum())
    return 2 * tp / max(int(flags.sum()) + int(labels.sum()), 1)
