"""The irregularity rate: how closely a root operator's delays follow the iteration times."""

import numpy as np
import pytest

from sleuth.localizer.cross_iteration import irregularity_rate


def _noise(n: int, seed: int, scale: float) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.0, scale, n)


def test_a_delay_that_makes_a_few_long_iterations_rates_high_though_its_ranks_are_noise():
    spikes = np.zeros(100)
    spikes[[41, 44, 61, 72, 91, 96]] = 105e3
    delay = 500.0 + np.abs(_noise(100, 1, 200.0)) + spikes
    times = 365e3 + _noise(100, 2, 2.5e3) + spikes
    assert irregularity_rate(delay, times) > 0.9


def test_a_tracking_delay_rates_high_beside_a_long_iteration_it_has_no_part_in():
    delay = np.linspace(1e3, 50e3, 40)
    times = 300e3 + delay
    times[0] = 20 * 300e3  # a warm-up step: no operator of the window's own makes it
    assert irregularity_rate(delay, times) > 0.8  # 39 of 40 in order


def test_a_delay_unrelated_to_the_iteration_times_rates_near_zero():
    assert irregularity_rate(1e3 + _noise(200, 3, 100.0), 300e3 + _noise(200, 4, 1e3)) < 0.2


@pytest.mark.parametrize(("delay", "times"), [
    (np.full(10, 5.0), np.arange(10.0)),  # a constant delay orders nothing
    (np.array([1.0, np.nan, 3.0, np.nan]), np.array([1.0, 2.0, np.nan, 4.0])),  # fewer than 3 columns known to both
    (np.arange(10.0), -np.arange(10.0)),  # shorter iterations when the delay is longer: clamped
])
def test_no_rate_where_the_delay_does_not_order_the_times(delay, times):
    assert irregularity_rate(delay, times) == 0.0
