"""Training rows for the abnormal-operator forest from emulated scenarios.

The emulator's side of training (``scripts/train_default_model.py``, the detection benchmark and
tests): each scenario is emulated, its operators labelled against the fault-free run
(``Emulation.abnormal``), featurized as a worker featurizes them
(``sleuth.stream.detection.offline.training_set``) and sampled (``training.sample_rows``). It lives
here, not in ``sleuth.stream.detection.training``, so that the service never imports the emulator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from typing import Any

import numpy as np

from sleuth.errors import ConfigError
from sleuth.progress import track
from sleuth.sim.scenario import Emulation, Scenario
from sleuth.stream.detection.offline import training_set
from sleuth.stream.detection.rules import DETECTION_RULES
from sleuth.stream.detection.training import sample_rows
from sleuth.validation import integer

__all__ = ["emulation_rows", "sample_ranks"]

def sample_ranks(emulation: Emulation, groups: int) -> np.ndarray:
    """``groups`` whole tensor groups spread over the job, plus the groups of its faulty GPUs,
    hosts and NICs (``Emulation.ranks_on``).

    Whole groups, because an operator's blocking and transfer need its peers' records; spread,
    so that a sample of a large job sees every pipeline stage.
    """
    if groups < 1:
        raise ConfigError(f"groups must be >= 1, got {groups!r}")
    tp = emulation.scenario.layout.tp
    world = emulation.scenario.layout.world
    starts = set((np.linspace(0, world - tp, groups).astype(int) // tp * tp).tolist())
    for fault in emulation.scenario.faults:
        # NICs too: without them a slow NIC's own ranks enter a sample only by chance, and training
        # would see only the operators of its peers that waited for it, not the NIC's slow transfers.
        starts.update((emulation.ranks_on(fault.device) // tp * tp).tolist())
    return np.unique(np.concatenate([np.arange(s, s + tp) for s in sorted(starts)]))


def emulation_rows(scenarios: Iterable[Scenario], *, groups: int | None = None, max_rows: int | None = None,
                   abnormal_share: float | Callable[[Scenario], float] = 0.5,
                   window: int = DETECTION_RULES.operator_window, min_history: int = DETECTION_RULES.min_history,
                   seed: int = 0, jobs: int = 1, progress: str | None = None) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Sampled training rows of each scenario and a summary.

    ``groups``: tensor groups per scenario (``sample_ranks``); None takes every rank. Sampling
    groups rather than a share of ranks lets one set mix 128 GPUs with 8,192 at a similar cost.
    ``max_rows``: rows kept per scenario, of which the abnormal ones take at most
    ``abnormal_share`` (``training.sample_rows``): a number, or a function of the scenario.
    ``jobs``: scenarios emulated at once, each in a process of its own; the rows are the same
    whatever the number (scenario k's draw is seeded ``seed + k``). ``progress``: the
    description of a bar counting the scenarios done (``sleuth.progress``: on stderr, when it is a
    terminal), for scripts and benchmarks; None draws none.
    """
    integer("jobs", jobs, low=1)
    scenarios = list(scenarios)
    rows = partial(_scenario_rows, groups=groups, max_rows=max_rows, abnormal_share=abnormal_share, window=window,
                   min_history=min_history)
    seeds = [seed + k for k in range(len(scenarios))]
    shown = (lambda parts: track(parts, progress, total=len(scenarios))) if progress is not None else iter
    if jobs == 1 or len(scenarios) < 2:
        parts = list(shown(map(rows, scenarios, seeds)))
    else:
        # Processes, not threads: the emulator and the feature pass are Python and numpy on many
        # small arrays, which threads would take turns at under the GIL. Each process holds one
        # scenario at a time (a whole 8,192-GPU job takes about 10 GB while its rows are built).
        with ProcessPoolExecutor(min(jobs, len(scenarios))) as pool:
            parts = list(shown(pool.map(rows, scenarios, seeds)))
    summary = {"scenarios": [scenario.name for scenario in scenarios],
               "operators_seen": sum(part[2] for part in parts), "abnormal_seen": sum(part[3] for part in parts)}
    return np.vstack([part[0] for part in parts]), np.concatenate([part[1] for part in parts]), summary


def _scenario_rows(scenario: Scenario, seed: int, *, groups: int | None, max_rows: int | None,
                   abnormal_share: float | Callable[[Scenario], float], window: int,
                   min_history: int) -> tuple[np.ndarray, np.ndarray, int, int]:
    """One scenario's kept rows, and how many operators and abnormal ones it had before the draw."""
    emulation = Emulation(scenario)
    ranks = np.arange(scenario.layout.world) if groups is None else sample_ranks(emulation, groups)
    labels, _ = emulation.abnormal(ranks)
    X, y = training_set(emulation.ranks_records(ranks), emulation.iterations(ranks=ranks), labels, window=window,
                        min_history=min_history)
    share = abnormal_share(scenario) if callable(abnormal_share) else abnormal_share
    kept_X, kept_y = sample_rows(X, y, seed=seed, max_rows=max_rows, abnormal_share=share)
    return kept_X, kept_y, len(y), int(y.sum())
