"""Importance grows with use and fades with idleness: the documented formula, through search."""

from __future__ import annotations

import math

import pytest

from gliding_actors import MemorySystem, VirtualClock
from gliding_actors.config import Config
from gliding_actors.errors import ConfigError
from gliding_actors.hyperspace._importance import ImportanceRule


def test_the_formula_is_the_documented_one() -> None:
    rule = ImportanceRule(rise=0.1, half_life_s=100.0)
    assert rule.effective(0.45, 0, 0.0) == pytest.approx(0.45)
    assert rule.effective(0.45, 3, 0.0) == pytest.approx(0.45 + 0.1 * math.log(4))
    assert rule.effective(0.45, 3, 100.0) == pytest.approx((0.45 + 0.1 * math.log(4)) / 2)
    assert rule.effective(0.95, 1000, 0.0) == 1.0  # never above 1
    assert ImportanceRule(rise=0.1).effective(0.45, 3, 1e9) == pytest.approx(0.45 + 0.1 * math.log(4))  # no fading


def test_search_filters_see_importance_rise_with_use_and_fade_with_idleness() -> None:
    clock = VirtualClock()
    config = {"hyperspace": {"embedder": "hash", "importance_rise": 0.1, "importance_half_life_s": 100}}
    with MemorySystem.open(None, config, runtime="sim", clock=clock) as memory:
        pa = memory.agent("pa", "PA")
        pa.write("note:keys", {"text": "rotate the signing keys every month"}, importance=0.45)
        important = {"min_importance": 0.5}
        assert pa.search("signing keys", filters=important)["iris"] == []
        for _ in range(3):
            assert pa.search("signing keys")["iris"] == ["note:keys"]  # three uses: 0.45 + 0.1 ln 4 = 0.589
        assert pa.search("signing keys", filters=important)["iris"] == ["note:keys"]  # the fourth use
        clock.advance(100)  # one half-life idle: (0.45 + 0.1 ln 5) / 2 = 0.305
        assert pa.search("signing keys", filters=important)["iris"] == []
        assert pa.search("signing keys", filters={"max_importance": 0.31})["iris"] == ["note:keys"]
        pa.write("note:keys", {"text": "rotate the signing keys every week"})  # a write: idle from now, uses kept
        assert pa.search("signing keys", filters=important)["iris"] == ["note:keys"]
        memory.flush()
        assert memory.l0.retrieve("note:keys").importance == pytest.approx(0.45)  # type: ignore[union-attr]


def test_a_bad_half_life_or_rise_is_a_config_error() -> None:
    for bad in ({"importance_half_life_s": 0}, {"importance_half_life_s": "week"}, {"importance_rise": -0.1},
                {"importance_rise": 2}):
        with pytest.raises(ConfigError):
            Config.from_dict({"hyperspace": bad})
