"""The localizer's rules: declared once, checked at construction, naming the rule."""

from __future__ import annotations

import dataclasses

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
