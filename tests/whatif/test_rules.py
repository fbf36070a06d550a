"""The what-if attribution's rules: checked at construction, naming the rule."""

from __future__ import annotations

import pytest

from sleuth.errors import ConfigError
from sleuth.whatif.rules import AttributionRules


@pytest.mark.parametrize(("rule", "value"), [("spread_k", 0), ("top_workers", 0), ("min_peers", 0), ("negligible", 1.0)])
def test_a_bad_rule_fails_naming_itself(rule, value) -> None:
    with pytest.raises(ConfigError, match=f"^rules.{rule} must be"):
        AttributionRules(**{rule: value})
