"""The shared parameter checks: each names the setting, shows the value, refuses bools and returns a plain number."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sleuth.errors import ConfigError, TopologyError
from sleuth.validation import (
    boolean, checked, fraction, integer, is_of, non_negative_int, non_negative_number, number_above, positive_int,
    positive_number,
)


def test_integer_takes_integers_of_any_type_within_its_bounds() -> None:
    assert integer("window", 2, low=2) == 2 and type(integer("window", np.int64(7), low=2)) is int
    assert integer("loggers", 16, low=1, high=16) == 16
    assert positive_int("lag", 1) == 1 and non_negative_int("seed", 0) == 0


@pytest.mark.parametrize(("call", "message"), [
    (lambda: integer("window", 1, low=2), "window must be an integer >= 2, got 1"),
    (lambda: integer("window", True, low=1), "window must be an integer >= 1, got True"),
    (lambda: integer("window", 3.0, low=1), "window must be an integer >= 1, got 3.0"),
    (lambda: integer("window", "3", low=1), "window must be an integer >= 1, got '3'"),
    (lambda: integer("loggers", 17, low=1, high=16), "loggers must be an integer in 1..16, got 17"),
    (lambda: integer("min_history", 21, low=1, high=20, high_shown="window (20)"),
     r"min_history must be an integer in 1..window \(20\), got 21"),
    (lambda: positive_int("lag", 0), "lag must be a positive integer, got 0"),
    (lambda: positive_int("lag", False), "lag must be a positive integer, got False"),
    (lambda: non_negative_int("seed", -1), "seed must be a non-negative integer, got -1"),
    (lambda: non_negative_int("seed", None), "seed must be a non-negative integer, got None"),
])
def test_integer_checks_refuse_bools_other_types_and_values_out_of_bounds(call, message) -> None:
    with pytest.raises(ConfigError, match=f"^{message}$"):
        call()


def test_number_checks_take_finite_reals_and_return_floats() -> None:
    assert positive_number("bandwidth_gbps", 400) == 400.0 and type(positive_number("x", np.float32(0.5))) is float
    assert number_above("slow", 1.5, 1) == 1.5 and number_above("slowdown", math.inf, 1, finite=False) == math.inf
    assert non_negative_number("timing.hiccup_rate", 0) == 0.0
    assert fraction("top_workers", 1) == 1.0 and fraction("drift", 0, zero=True, one=False) == 0.0


@pytest.mark.parametrize(("call", "message"), [
    (lambda: positive_number("latency_us", 0), "latency_us must be a positive number, got 0"),
    (lambda: positive_number("latency_us", True), "latency_us must be a positive number, got True"),
    (lambda: positive_number("latency_us", math.inf), "latency_us must be a positive number, got inf"),
    (lambda: positive_number("latency_us", "1"), "latency_us must be a positive number, got '1'"),
    (lambda: number_above("slow", 1, 1), "slow must be a number above 1, got 1"),
    (lambda: number_above("slow", math.inf, 1), "slow must be a number above 1, got inf"),
    (lambda: number_above("slow", True, 0.5), "slow must be a number above 0.5, got True"),
    (lambda: number_above("slow", math.nan, 1, finite=False), "slow must be a number above 1, got nan"),
    (lambda: non_negative_number("timing.hiccup_ms", -0.1), r"timing.hiccup_ms must be a number >= 0, got -0.1"),
    (lambda: fraction("top_workers", 0), r"top_workers must be in \(0, 1\], got 0"),
    (lambda: fraction("top_workers", 1.5), r"top_workers must be in \(0, 1\], got 1.5"),
    (lambda: fraction("top_workers", True), r"top_workers must be in \(0, 1\], got True"),
    (lambda: fraction("top_workers", "0.5"), r"top_workers must be in \(0, 1\], got '0.5'"),
    (lambda: fraction("hazard", 1, one=False), r"hazard must be in \(0, 1\), got 1"),
    (lambda: fraction("drift", 1.0, zero=True, one=False), r"drift must be in \[0, 1\), got 1.0"),
    (lambda: fraction("decay_power", -0.5, zero=True), r"decay_power must be in \[0, 1\], got -0.5"),
    (lambda: fraction("cover", math.nan), r"cover must be in \(0, 1\], got nan"),
])
def test_number_checks_refuse_bools_other_types_and_values_out_of_bounds(call, message) -> None:
    with pytest.raises(ConfigError, match=f"^{message}$"):
        call()


def test_a_check_raises_the_error_its_caller_names() -> None:
    with pytest.raises(TopologyError, match="spines must be an integer >= 0, got -1"):
        integer("spines", -1, low=0, error=TopologyError)
    with pytest.raises(TopologyError, match="latency_us must be a positive number"):
        positive_number("latency_us", -1.0, error=TopologyError)


def test_a_bound_is_written_as_the_caller_shows_it() -> None:
    with pytest.raises(ConfigError, match=r"^max_run must be an integer >= lag \+ 1 \(6\), got 5$"):
        integer("max_run", 5, low=6, low_shown="lag + 1 (6)")


class _Options:
    def __init__(self, **values: object) -> None:
        self.__dict__.update(values)


def test_checked_runs_each_declared_check_on_its_attribute_in_order() -> None:
    good = _Options(window=3, share=0.5)
    assert checked(good, window=positive_int, share=fraction) is good
    with pytest.raises(ConfigError, match=r"^rules.window must be a positive integer, got 0$"):
        checked(_Options(window=0, share=2.0), prefix="rules.", window=positive_int, share=fraction)
    with pytest.raises(TopologyError, match=r"^share must be in \(0, 1\], got 2.0$"):
        checked(_Options(window=1, share=2.0), error=TopologyError, window=positive_int, share=fraction)


def test_is_of_takes_no_bool_for_a_number_unless_asked() -> None:
    assert is_of(3, int) and is_of(2.5, (int, float)) and is_of(True, (int, bool))
    assert not is_of(True, int) and not is_of(False, (int, float)) and not is_of("3", int)


def test_a_switch_is_a_bool_not_a_number_or_a_word() -> None:
    assert boolean("zero", True) is True and boolean("zero", False) is False
    for bad in (1, 0, "yes", None):
        with pytest.raises(ConfigError, match=f"^zero must be true or false, got {bad!r}$"):
            boolean("zero", bad)
