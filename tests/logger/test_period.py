import numpy as np
import pytest

from sleuth.logger.core import RECORD_DTYPE
from sleuth.logger.period import PeriodicSteps, find_period, signatures


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


def _job(steps: int, *, every: int = 0, dropped: tuple[int, ...] = (), warm_up: int = 0
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A rank's codes, each one's true step and whether it is outside the pattern: a 60-operator
    step, an extra operator (99) after every ``every``-th, operators at ``dropped`` positions lost."""
    step = np.random.default_rng(0).integers(0, 20, 60)
    codes, truth, extra = [98] * warm_up, [0] * warm_up, [True] * warm_up
    for i in range(steps):
        codes += step.tolist()
        truth += [i] * len(step)
        extra += [False] * len(step)
        if every and i % every == every - 1:
            codes.append(99)
            truth.append(i)
            extra.append(True)
    kept = np.ones(len(codes), bool)
    kept[list(dropped)] = False
    return np.array(codes)[kept], np.array(truth)[kept], np.array(extra)[kept]


def test_an_operator_outside_the_pattern_every_20_steps_does_not_shift_the_later_steps():
    codes, truth, extra = _job(300, every=20)
    steps = PeriodicSteps.find(codes)
    assert steps is not None and steps.period == 60
    numbered = steps.number(codes)
    assert (numbered[~extra] == truth[~extra]).all()
    # counting by position would be 14 operators off by the last step
    assert ((np.arange(len(codes)) // 60)[~extra] != truth[~extra]).sum() > 1000


def test_lost_operators_and_a_warm_up_do_not_shift_the_steps():
    codes, truth, extra = _job(300, every=50, dropped=(100, 6_000, 6_001, 12_345), warm_up=3)
    steps = PeriodicSteps.find(codes)
    assert steps is not None
    numbered = steps.number(codes)
    assert (numbered[~extra] == truth[~extra]).all()  # step 0 starts at the pattern's first operator


def test_numbering_in_batches_is_numbering_at_once():
    codes, _, _ = _job(200, every=30, dropped=(500,))
    whole = PeriodicSteps.find(codes).number(codes)
    steps = PeriodicSteps.find(codes)
    assert (np.concatenate([steps.number(part) for part in np.array_split(codes, 37)]) == whole).all()


def test_an_extra_operator_inside_a_run_of_alike_ones_is_absorbed_where_the_run_ends():
    step = [5] * 20 + [6, 1, 2] + [5] * 20 + [7, 3, 4]
    codes = step * 30
    codes = codes[:300] + [5] + codes[300:]  # one more 5 inside the run at 299-318
    numbered = PeriodicSteps.find(np.array(codes)).number(np.array(codes))
    truth = np.r_[np.arange(300) // 46, [6], np.arange(300, len(codes) - 1) // 46]
    assert (numbered == truth).all()


def test_a_stream_that_starts_within_the_job_counts_from_the_job_s_first_operator():
    codes, truth, _ = _job(100)
    steps = PeriodicSteps.find(codes[130:], first=130)  # a buffer that kept the operators from 130 on
    assert (steps.number(codes[130:]) == truth[130:]).all()
