import numpy as np
import pytest

from sleuth.logger.core import RECORD_DTYPE
from sleuth.logger.period import find_period, signatures


def test_the_period_of_a_repeated_iteration_is_found():
    iteration = [1, 2, 2, 3, 4, 1, 5, 5, 6]
    assert find_period(np.array(iteration * 5)) == 9


def test_micro_batches_repeating_inside_an_iteration_do_not_count_as_the_period():
    micro = [7, 8, 9, 7]
    iteration = micro * 4 + [1, 1, 2]
    assert find_period(np.array(iteration * 6)) == len(iteration)


def test_a_warm_up_prefix_and_a_few_odd_operators_still_give_the_period():
    rng = np.random.default_rng(3)
    iteration = list(rng.integers(0, 20, 30))
    sequence = np.array([99, 98, 97] + iteration * 40)
    noisy = sequence.copy()
    noisy[rng.choice(len(noisy), 10, replace=False)] = 55
    assert find_period(noisy) == 30


def test_too_short_or_aperiodic_sequences_give_none():
    assert find_period(np.array([1, 2, 3, 1, 2])) is None
    assert find_period(np.random.default_rng(0).integers(0, 1000, 500)) is None
    assert find_period(np.array([], dtype=int)) is None


def test_bad_parameters_fail():
    with pytest.raises(ValueError):
        find_period(np.array([1, 1]), threshold=0)
    with pytest.raises(ValueError):
        find_period(np.array([1, 1]), min_repeats=1)


def test_signatures_tell_operators_apart_by_every_identifying_field():
    records = np.zeros(5, dtype=RECORD_DTYPE)
    records["op"] = [1, 1, 1, 1, 7]
    records["comm"] = [0, 0, 1, 0, 0]
    records["nbytes"] = [8, 8, 8, 16, 8]
    records["peer"] = [-1, -1, -1, -1, 3]
    codes = signatures(records)
    assert codes[0] == codes[1]
    assert len(set(codes.tolist())) == 4
