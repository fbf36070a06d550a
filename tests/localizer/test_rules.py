"""The localizer's rules: declared once, checked at construction, naming the rule."""

from __future__ import annotations

import dataclasses
import importlib
import inspect

import pytest

from sleuth.errors import ConfigError
from sleuth.localizer import LOCALIZER_RULES, LocalizerRules


def test_the_default_rules_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        LOCALIZER_RULES.shift_probe = 5  # type: ignore[misc]


@pytest.mark.parametrize(("rule", "value"), [("shift_probe", 0), ("member_share", 1.5), ("moves", 1), ("minor", True)])
def test_a_bad_rule_fails_naming_itself(rule, value) -> None:
    with pytest.raises(ConfigError, match=f"^rules.{rule} must be"):
        LocalizerRules(**{rule: value})


@pytest.mark.parametrize(("rule", "value"), [
    ("min_support", 0), ("pivot_ops", 0), ("member_rings", -1), ("member_fanout", 0), ("min_reference", 0),
    ("shift_min_len", 0), ("shift_t_min", 0), ("lasting_t_min", float("nan")), ("shift_min_step", 1.0),
    ("peer_sample", 0), ("peer_quantile", 0), ("steady_share", 1.5), ("steady_min_run", 0), ("stands_out_spreads", -1),
    ("imbalance_cover", 0), ("diffuse_ranks", 1), ("peers_moving_share", 2), ("stage_together", 0),
    ("max_faults", 0), ("second_fault_share", 0), ("dominant_below", 1.1),
])
def test_a_bad_moved_rule_fails_naming_itself(rule, value) -> None:
    with pytest.raises(ConfigError, match=f"^rules.{rule} must be"):
        LocalizerRules(**{rule: value})


# (module, function, keyword) -> the rule its default reads: the steps keep their keywords for
# callers and tests, and a changed rule changes every step that decides by it.
_DEFAULTS = [
    ("explain", "separate", "max_faults", "max_faults"),
    ("explain", "separate", "min_share", "second_fault_share"),
    ("explain", "separate", "dominant", "dominant_below"),
    ("nonhardware", "classify", "cover", "imbalance_cover"),
    ("nonhardware", "classify", "diffuse_ranks", "diffuse_ranks"),
    ("nonhardware", "classify", "shared_min", "peers_moving_share"),
    ("nonhardware", "classify", "stage_together", "stage_together"),
    ("shifts", "level_shifts", "min_len", "shift_min_len"),
    ("shifts", "level_shifts", "t_min", "shift_t_min"),
    ("shifts", "level_shifts", "min_step", "shift_min_step"),
    ("shifts", "persists", "min_len", "shift_min_len"),
    ("shifts", "persists", "t_min", "lasting_t_min"),
    ("shifts", "persists", "min_step", "shift_min_step"),
    ("peers", "peer_share", "sample", "peer_sample"),
    ("peers", "peer_share", "quantile", "peer_quantile"),
    ("peers", "is_steady", "share", "steady_share"),
    ("peers", "is_steady", "min_run", "steady_min_run"),
    ("peers", "stands_out", "spreads", "stands_out_spreads"),
    ("localize", "localize", "min_support", "min_support"),
    ("localize", "localize", "pivot_ops", "pivot_ops"),
    ("search", "search", "pivot_ops", "pivot_ops"),
    ("search", "search", "member_rings", "member_rings"),
    ("search", "search", "member_fanout", "member_fanout"),
    ("operators", "make_window", "min_reference", "min_reference"),
]


@pytest.mark.parametrize(("module", "function", "keyword", "rule"), _DEFAULTS)
def test_the_steps_default_to_the_rules(module, function, keyword, rule) -> None:
    step = getattr(importlib.import_module(f"sleuth.localizer.{module}"), function)
    assert inspect.signature(step).parameters[keyword].default == getattr(LOCALIZER_RULES, rule)
