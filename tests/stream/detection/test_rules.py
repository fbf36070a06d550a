"""Detection's rules: checked at construction, naming the rule, and the detectors' defaults."""

from __future__ import annotations

import dataclasses
import importlib
import inspect

import pytest

from sleuth.errors import ConfigError
from sleuth.stream.detection import DETECTION_RULES, DetectionRules, IterationMonitor
from sleuth.stream.detection.model_file import DetectorModel


@pytest.mark.parametrize(("rule", "value"), [("delta", 1.0), ("window", 0), ("threshold_grid", (0.5, 1.0))])
def test_a_bad_rule_fails_naming_itself(rule, value) -> None:
    with pytest.raises(ConfigError, match=f"^rules.{rule} must be"):
        DetectionRules(**{rule: value})


def test_the_monitor_defaults_to_the_rules() -> None:
    monitor = IterationMonitor()
    assert (monitor.delta, monitor.window) == (DETECTION_RULES.delta, DETECTION_RULES.window)


@pytest.mark.parametrize(("rule", "value"), [
    ("min_change", 1.0), ("verify_iterations", 0), ("periodic_cv", 0), ("periodic_max_gap", 0),
    ("change_hazard", 0), ("change_mass", 1.0), ("change_lag", 0), ("change_max_run", 5), ("operator_window", 1),
    ("min_history", 21), ("transfer_cut", 1.0), ("compute_cut", True), ("slice_records", 0),
])
def test_a_bad_moved_rule_fails_naming_itself(rule, value) -> None:
    with pytest.raises(ConfigError, match=f"^rules.{rule} must be"):
        DetectionRules(**{rule: value})


# (module, callable, keyword) -> the rule its default reads.
_DEFAULTS = [
    ("iteration_monitor", "IterationMonitor", "min_change", "min_change"),
    ("iteration_monitor", "IterationMonitor", "verify", "verify_iterations"),
    ("iteration_monitor", "IterationMonitor", "periodic_cv", "periodic_cv"),
    ("iteration_monitor", "IterationMonitor", "periodic_max_gap", "periodic_max_gap"),
    ("changepoint", "BayesianChangePoint", "hazard", "change_hazard"),
    ("changepoint", "BayesianChangePoint", "threshold", "change_mass"),
    ("changepoint", "BayesianChangePoint", "lag", "change_lag"),
    ("changepoint", "BayesianChangePoint", "max_run", "change_max_run"),
    ("counterfactual", "CounterfactualReplay", "transfer_cut", "transfer_cut"),
    ("counterfactual", "CounterfactualReplay", "compute_cut", "compute_cut"),
    ("features", "OperatorWindows", "window", "operator_window"),
    ("features", "OperatorWindows", "min_history", "min_history"),
    ("offline", "training_set", "window", "operator_window"),
    ("offline", "detector_decisions", "min_history", "min_history"),
    ("training", "fit_model", "window", "operator_window"),
    ("training", "streaming_scores", "min_history", "min_history"),
]


@pytest.mark.parametrize(("module", "name", "keyword", "rule"), _DEFAULTS)
def test_the_detectors_default_to_the_rules(module, name, keyword, rule) -> None:
    found = getattr(importlib.import_module(f"sleuth.stream.detection.{module}"), name)
    assert inspect.signature(found).parameters[keyword].default == getattr(DETECTION_RULES, rule)


def test_a_model_file_without_window_options_takes_the_rules() -> None:
    fields = {f.name: f.default for f in dataclasses.fields(DetectorModel)}
    assert (fields["window"], fields["min_history"]) == (DETECTION_RULES.operator_window, DETECTION_RULES.min_history)
