"""Fixtures of the L3 tests: a memory holding the team's task graph."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gliding_actors.agent import Agent
from gliding_actors.system import MemorySystem
from team import build_team


@pytest.fixture
def memory() -> Iterator[MemorySystem]:
    """A fresh memory on the deterministic runtime (counter: estimate-v1, so figures are stable)."""
    with MemorySystem.open(runtime="sim", config={"l3": {"counter": "estimate-v1"}}) as mem:
        yield mem


@pytest.fixture
def team(memory: MemorySystem) -> dict[str, Agent]:
    return build_team(memory)
