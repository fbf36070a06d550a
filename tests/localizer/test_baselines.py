"""The benchmark's baselines are working methods: on a plain slow GPU each names it, and the
straggler rule names nobody on a clean run."""

from __future__ import annotations

from functools import lru_cache

import pytest

from sleuth.errors import ConfigError
from sleuth.layout import ParallelLayout
from sleuth.localizer.baselines import AllRanks, earliest_abnormal, random_walk, read_all, relative_median
from sleuth.sim import Emulation, Fault, FaultKind, Scenario
from sleuth.topology import generate

_SLOW = "gpu:h0003/5"


@lru_cache(maxsize=None)
def _every(faulty: bool) -> AllRanks:
    # Tensor and data parallel only: the first abnormal operator of an irregular iteration is a
    # TP all-reduce the slow GPU launched last, the case the naive rule gets right.
    faults = (Fault(kind=FaultKind.GPU, device=_SLOW, slow=1.6, start=15),) if faulty else ()
    scenario = Scenario(
        topology=generate("fattree:hosts=8,gpus=8,pod=4,spines=2"), layout=ParallelLayout(64, 8, 1, 8),
        faults=faults, iterations=30, seed=5,
    )
    emulation = Emulation(scenario)
    irregular = list(emulation.irregular_iterations()) or [20, 21]
    return read_all(emulation, irregular_iterations=irregular, window=30)


@pytest.mark.parametrize("method", [earliest_abnormal, random_walk, relative_median])
def test_each_baseline_names_a_slow_gpu_first(method):
    assert method(_every(True))[0] == _SLOW


def test_the_random_walk_is_not_anchored_at_a_pivot_rank():
    # It used to restart only at rank 0, ranking rank 0's neighbours whatever the evidence.
    assert "gpu:h0000/1" not in random_walk(_every(True))


def test_a_clean_run_has_no_straggler():
    assert relative_median(_every(False)) == []


def test_no_irregular_iterations_is_an_error():
    with pytest.raises(ConfigError, match="no irregular"):
        read_all(None, irregular_iterations=[], window=30)  # type: ignore[arg-type]
