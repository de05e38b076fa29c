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
from typing import TYPE_CHECKING, Any

from gliding_actors.errors import ConfigError
from gliding_actors.roles import ROLES

if TYPE_CHECKING:
    from gliding_actors.config import L1Config

__all__ = ["POLICY_KEYS", "EvictionPolicy", "cosine", "parse_role_overrides"]

#: the ``l1`` keys a role may override (everything but ``counter`` and ``roles``)
POLICY_KEYS: tuple[str, ...] = (
    "token_budget",
    "relevance_threshold",
    "safe_window_s",
    "beta",
    "w_recency",
    "w_cost",
)


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


def parse_role_overrides(
    raw: Any, path: tuple[str, ...], base: Mapping[str, Mapping[str, Any]] | None
) -> dict[str, dict[str, Any]]:
    """Validate ``l1.roles`` (``{role: {policy key: value}}``) and lay it over ``base``'s.

    Each value is checked exactly as the same key of the ``l1`` section is
    (type and range), so ``roles: {DA: {beta: 2}}`` is a ConfigError naming
    ``l1.roles.DA.beta``.
    """
    from gliding_actors.config import L1Config, _coerce  # config imports this module lazily

    if not isinstance(raw, Mapping):
        raise ConfigError(f"{'.'.join(path)} must be a mapping of role to overrides", path=path)
    fields = {f.name: f for f in dataclasses.fields(L1Config)}
    merged: dict[str, dict[str, Any]] = {role: dict(values) for role, values in (base or {}).items()}
    for role, overrides in raw.items():
        where = (*path, str(role))
        if role not in ROLES:
            raise ConfigError(f"{'.'.join(where)}: unknown role {role!r}; roles are {', '.join(ROLES)}", path=where)
        if not isinstance(overrides, Mapping):
            raise ConfigError(f"{'.'.join(where)} must be a mapping of l1 keys", path=where)
        checked: dict[str, Any] = {}
        for key, value in overrides.items():
            if key not in POLICY_KEYS:
                raise ConfigError(
                    f"unknown key {'.'.join((*where, str(key)))!r} (a role may set {', '.join(POLICY_KEYS)})",
                    path=(*where, str(key)),
                )
            field = fields[key]
            hint = type(getattr(L1Config(), key))
            checked[key] = _coerce(hint, value, (*where, key), field.metadata.get("range"))
        merged.setdefault(role, {}).update(checked)
    return {role: dict(sorted(merged[role].items())) for role in sorted(merged)}
