"""The eviction policy: the numbers of the two phases, per agent role, and the score.

The policy is the ``l1`` section of the configuration (scenario spec, "Top
level"), optionally overridden per agent role under ``l1.roles``::

    l1:
      token_budget: 2000
      roles: {DA: {token_budget: 4000}, AA: {relevance_threshold: 0.5}}

A DA that reads code needs a longer chain than an SA that only schedules; the
formula is the same for everyone, only its numbers change.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from gliding_actors.config import POLICY_KEYS, L1Config

__all__ = ["POLICY_KEYS", "EvictionPolicy", "cosine"]


@dataclasses.dataclass(frozen=True)
class EvictionPolicy:
    """The numbers the two phases use (defaults: the seed design's)."""

    token_budget: int = 2000
    relevance_threshold: float = 0.3
    safe_window_s: float = 300.0
    beta: float = 0.6
    w_recency: float = 0.5
    w_cost: float = 0.5

    @classmethod
    def from_config(cls, config: L1Config, role: str | None = None) -> EvictionPolicy:
        """The policy of agents with ``role``: the ``l1`` section with that role's overrides laid over it."""
        values: dict[str, Any] = {key: getattr(config, key) for key in POLICY_KEYS}
        roles: Mapping[str, Mapping[str, Any]] = getattr(config, "roles", {}) or {}
        if role is not None:
            values.update(roles.get(role, {}))
        return cls(**values)

    def score(self, relevance: float, age_s: float, tokens: int) -> float:
        """Phase 2's score; the **lowest** goes first, so relevant, recent, cheap turns stay.

        ``beta·rel + (1−beta)·(w_recency/(1+age_s) + w_cost/(1+tokens))``.
        """
        recency = 1.0 / (1.0 + max(0.0, age_s))
        cost = 1.0 / (1.0 + max(0, tokens))
        return self.beta * relevance + (1.0 - self.beta) * (recency * self.w_recency + cost * self.w_cost)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity; 0.0 when either vector is zero (nothing to compare)."""
    if len(a) != len(b):
        raise ValueError(f"vectors of different lengths ({len(a)} and {len(b)})")
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return dot / (na * nb)
