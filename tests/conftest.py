"""Fixtures shared by every test folder."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from gliding_actors.clock import VirtualClock
from gliding_actors.runtime import BACKENDS, Runtime, create_runtime

REPO = Path(__file__).resolve().parent.parent

# No per-example deadline: the machines are shared and noisy. Long property runs
# are separate tests marked `slow` (deselected by default; `pytest -m slow`).
settings.register_profile("default", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("default")


@pytest.fixture
def replay_suites() -> Callable[..., None]:
    """``replay_suites(suite, overrides, seeds=3)``: every scenario of ``scenarios/<suite>``
    replayed with ``overrides`` laid over its config — ``seeds`` seeds on the simulator
    from the file's own, then once on threads — each run passing."""
    from gliding_actors.scenario import load_scenario, replay

    def run(suite: str, overrides: Mapping[str, Any], seeds: int = 3) -> None:
        files = sorted((REPO / "scenarios" / suite).glob("*.yaml"))
        assert files, f"no scenarios in {suite}"
        for path in files:
            scenario = load_scenario(path)
            scenario = dataclasses.replace(scenario, config=scenario.config.merged(overrides))
            for seed in range(scenario.seed, scenario.seed + seeds):
                failure = replay(scenario, seed=seed).failure
                assert failure is None, f"{path.name} seed {seed}: {failure}"
            failure = replay(scenario, runtime="threads").failure
            assert failure is None, f"{path.name} on threads: {failure}"

    return run


@pytest.fixture(params=BACKENDS)
def runtime(request: pytest.FixtureRequest) -> Iterator[Runtime]:
    """Each runtime backend in turn, on a virtual clock (AnyIO-style backend fixture)."""
    rt = create_runtime(request.param, clock=VirtualClock(), ask_timeout_s=5.0)
    yield rt
    rt.shutdown()
