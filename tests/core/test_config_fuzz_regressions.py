"""Regressions for what fuzzing found in Config: huge and non-finite numbers are ConfigError."""

from __future__ import annotations

import math
from typing import Any

import pytest

from gliding_actors.config import Config
from gliding_actors.errors import ConfigError


@pytest.mark.parametrize(
    ("overrides", "why"),
    [
        ({"l1": {"relevance_threshold": -(10**400)}}, "too large"),  # OverflowError escaped
        ({"l1": {"beta": math.nan}}, "finite"),  # NaN passed every range check
        ({"agents": {"heartbeat_timeout_s": math.nan}}, "finite"),
        ({"hyperspace": {"w_text": math.inf}}, "finite"),
        ({"runtime": {"ask_timeout_s": math.inf}}, "finite"),  # OverflowError when the memory opened
        ({"runtime": {"ask_timeout_s": 1e308}}, "outside"),
    ],
)
def test_numbers_a_float_field_cannot_use_are_refused(overrides: dict[str, Any], why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        Config.from_dict(overrides)
    with pytest.raises(ConfigError, match=why):
        Config().merged(overrides)


def test_large_finite_values_still_load() -> None:
    config = Config.from_dict({"runtime": {"ask_timeout_s": 1e9}, "hyperspace": {"w_text": 1e300}})
    assert config.runtime.ask_timeout_s == 1e9 and config.hyperspace.w_text == 1e300
