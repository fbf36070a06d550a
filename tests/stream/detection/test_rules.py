"""Detection's rules: checked at construction, naming the rule, and the detectors' defaults."""

from __future__ import annotations

import pytest

from sleuth.errors import ConfigError
from sleuth.stream.detection import DETECTION_RULES, DetectionRules, IterationMonitor


@pytest.mark.parametrize(("rule", "value"), [("delta", 1.0), ("window", 0), ("threshold_grid", (0.5, 1.0))])
def test_a_bad_rule_fails_naming_itself(rule, value) -> None:
    with pytest.raises(ConfigError, match=f"^rules.{rule} must be"):
        DetectionRules(**{rule: value})


def test_the_monitor_defaults_to_the_rules() -> None:
    monitor = IterationMonitor()
    assert (monitor.delta, monitor.window) == (DETECTION_RULES.delta, DETECTION_RULES.window)
