"""The iteration monitor on seeded emulated jobs: every slowed iteration found, typed, nothing on clean runs."""

from __future__ import annotations

import numpy as np
import pytest

from sleuth.errors import ConfigError
from sleuth.records import IterationBatch
from sleuth.stream.detection import IrregularityKind, IterationMonitor, irregular_iterations
from sleuth.stream.detection.baselines import median_rule, unverified_change_points
from sleuth.stream.detection.changepoint import BayesianChangePoint
from sleuth.stream.detection.iteration_monitor import job_iteration_times, last_judgements

from .conftest import emulation

PERSISTENT = "gpu:h0001/2,slow=1.5,start=15"
FLUCTUATION = "gpu:h0000/1,slow=1.6,profile=fluctuation,period=7,duty=2,start=5"
SPIKE = "gpu:h0002/3,slow=2,profile=spike,rate=0.08,start=5"


def delta_irregular(em) -> set[int]:
    """The emulator's own δ-irregularity labels (δ = 1.1 over the previous 10 iterations)."""
    return set(em.irregular_iterations())


def slowed(em) -> set[int]:
    """Iterations the faults made more than δ = 1.1 times longer than their fault-free twin."""
    return {t.iteration for t in em.truth().iterations if t.time_ns > 1.1 * t.counterfactual_ns}


def test_job_iteration_time_is_the_emulators() -> None:
    em = emulation(PERSISTENT)
    _, times = job_iteration_times(em.iterations())[em.scenario.job]
    assert times.tolist() == em.iteration_times().tolist()


def test_persistent_degradation_is_a_confirmed_change_point_and_every_slow_iteration_after_it() -> None:
    em = emulation(PERSISTENT, iterations=60)
    found = irregular_iterations(em.iterations())
    # Every iteration slowed by the fault, and none before it (one more may pass δ × the healthy
    # baseline while its own fault-free twin had a hiccup too).
    assert slowed(em) <= {i.iteration for i in found} <= set(range(15, 60))
    assert len(slowed(em)) >= 40
    change = [i for i in found if i.change_point]
    assert [(c.iteration, c.kind) for c in change] == [(15, IrregularityKind.PERSISTENT)]
    # Before the change is confirmed (10 iterations of evidence) the first ones look like spikes.
    assert all(i.kind is IrregularityKind.PERSISTENT for i in found if i.iteration >= 25)
    assert change[0].ratio > 1.1


def test_fluctuation_is_typed_once_its_period_shows() -> None:
    em = emulation(FLUCTUATION, iterations=60)
    found = irregular_iterations(em.iterations())
    assert {i.iteration for i in found} == delta_irregular(em)
    kinds = [i.kind for i in found]
    assert IrregularityKind.PERSISTENT not in kinds
    # Four episodes (two iterations each) give three regular gaps; from then on: fluctuation.
    assert all(k is IrregularityKind.FLUCTUATION for k in kinds[6:])
    assert kinds[:6] == [IrregularityKind.SPIKE] * 6


def test_spikes_are_found_and_typed_spike() -> None:
    em = emulation(SPIKE, iterations=60)
    found = irregular_iterations(em.iterations())
    assert {i.iteration for i in found} == delta_irregular(em)
    assert slowed(em) <= delta_irregular(em)
    assert len(found) >= 3
    # Typing is a heuristic on few events: random spikes three or four iterations apart can
    # look periodic for a while (here 2 of 7).
    kinds = [i.kind for i in found]
    assert kinds.count(IrregularityKind.SPIKE) == 5 and IrregularityKind.PERSISTENT not in kinds


def test_a_clean_run_has_only_its_hiccups() -> None:
    # A 20 ms garbage-collection pause is a spike in a 4.6 ms iteration: δ-irregular by definition.
    em = emulation(iterations=60)
    found = irregular_iterations(em.iterations())
    assert [(i.iteration, i.kind) for i in found] == [(28, IrregularityKind.SPIKE)]
    assert {i.iteration for i in found} == delta_irregular(em)


def test_streaming_in_pieces_equals_the_offline_result() -> None:
    em = emulation(PERSISTENT, iterations=60)
    iterations = em.iterations()
    monitor = IterationMonitor()
    order = np.argsort(iterations["iteration"], kind="stable")
    streamed = []
    for part in np.array_split(order, 37):  # pieces cut across ranks and iterations
        streamed += monitor.update(iterations.take(part))
    streamed += monitor.flush()
    assert last_judgements(streamed) == irregular_iterations(iterations)


def test_an_offline_batch_names_each_irregular_iteration_once_in_order() -> None:
    # The fault's first slow iteration goes out as a spike, then again as the confirmed change point.
    em = emulation(PERSISTENT, iterations=60)
    monitor = IterationMonitor()
    streamed = monitor.update(em.iterations()) + monitor.flush()
    assert len(streamed) > len({i.iteration for i in streamed})
    found = irregular_iterations(em.iterations())
    assert [i.iteration for i in found] == sorted({i.iteration for i in streamed})
    change = next(i for i in found if i.change_point)
    assert change.kind is IrregularityKind.PERSISTENT and change.iteration == min(i.iteration for i in found)


def test_late_records_of_a_finished_iteration_are_counted_not_judged() -> None:
    batch = IterationBatch.from_columns(job="j", rank=[0, 0, 0], iteration=[0, 1, 0],
                                        t_start_ns=[0, 10, 0], t_end_ns=[10, 20, 10])
    monitor = IterationMonitor()
    monitor.update(batch.take(slice(0, 2)))
    monitor.update(batch.take(slice(2, 3)))
    assert monitor.late == 1


def test_change_point_detector_dates_a_step() -> None:
    rng = np.random.default_rng(0)
    series = np.r_[rng.normal(1.0, 0.01, 40), rng.normal(1.3, 0.01, 40)]
    detector = BayesianChangePoint()
    changes = []
    for x in np.log(series):
        detector.update(float(x))
        if detector.drift_detected:
            changes.append(detector.change_at)
    assert changes == [40]


def test_iteration_baselines() -> None:
    times = np.r_[np.full(20, 100.0), 150.0, np.full(10, 100.0), np.full(20, 130.0)]
    assert np.flatnonzero(median_rule(times)).tolist() == [20] + list(range(31, 37))
    flagged = unverified_change_points(times)
    assert flagged[31:].all() and not flagged[:20].any()


@pytest.mark.parametrize(("option", "value"), [("delta", 1.0), ("window", 0), ("min_change", 1.5)])
def test_bad_options_name_themselves(option, value) -> None:
    with pytest.raises(ConfigError, match=option):
        IterationMonitor(**{option: value})
