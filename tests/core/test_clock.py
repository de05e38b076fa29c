from __future__ import annotations

import time

import pytest

from gliding_actors import Clock, SystemClock, VirtualClock


def test_virtual_clock_moves_only_when_told() -> None:
    clock = VirtualClock(100.0)
    seen: list[float] = []
    clock.on_change(seen.append)
    assert clock.now() == 100.0
    assert clock.advance(2.5) == 102.5
    clock.set(110.0)
    assert seen == [102.5, 110.0]
    with pytest.raises(ValueError):
        clock.advance(-1)
    with pytest.raises(ValueError):
        clock.set(50.0)
    assert clock.now() == 110.0


def test_system_clock_is_wall_time() -> None:
    assert abs(SystemClock().now() - time.time()) < 1.0
    assert isinstance(SystemClock(), Clock)
    assert isinstance(VirtualClock(), Clock)
