"""Fixtures of the coherence tests; the network and invariants live in coherence_harness."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from coherence_harness import Net


@pytest.fixture
def make_net() -> Callable[..., Net]:
    """Build a :class:`Net` of real controllers: ``make_net(["a", "b"], capacity=2, ...)``."""

    def make(agents: list[str] | None = None, **kwargs: Any) -> Net:
        return Net(agents or ["a", "b", "c"], **kwargs)

    return make
