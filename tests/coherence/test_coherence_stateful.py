"""Hypothesis stateful test of the coherence controllers (see coherence_machine)."""

from __future__ import annotations

import pytest
from coherence_machine import CoherenceMachine
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

FAST = settings(
    max_examples=300,
    stateful_step_count=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

#: The long profile documented in docs/COHERENCE.md: ``pytest -m slow tests/coherence``.
LONG = settings(
    max_examples=2500,
    stateful_step_count=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_coherence_state_machine() -> None:
    run_state_machine_as_test(CoherenceMachine, settings=FAST)


@pytest.mark.slow
def test_coherence_state_machine_long() -> None:
    run_state_machine_as_test(CoherenceMachine, settings=LONG)
