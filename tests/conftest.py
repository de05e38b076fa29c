"""Fixtures shared by every test folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from gliding_actors.clock import VirtualClock
from gliding_actors.runtime import BACKENDS, Runtime, create_runtime

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"

# No per-example deadline: the machines are shared and noisy. Long property runs
# are separate tests marked `slow` (deselected by default; `pytest -m slow`).
settings.register_profile("default", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("default")


@pytest.fixture(params=BACKENDS)
def runtime(request: pytest.FixtureRequest) -> Iterator[Runtime]:
    """Each runtime backend in turn, on a virtual clock (AnyIO-style backend fixture)."""
    rt = create_runtime(request.param, clock=VirtualClock(), ask_timeout_s=5.0)
    yield rt
    rt.shutdown()
