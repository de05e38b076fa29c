"""Invariants checked after every scenario step and at the end (spec, "Invariants").

Each layer registers the invariants it can check with :func:`invariant`; a
check returns one line per violation. The engine itself enforces "every issued
op completes exactly once" (it waits with a timeout and lists pending ops;
futures refuse a second answer).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gliding_actors.scenario._ops import ReplayWorld

__all__ = ["Invariant", "invariant", "run_invariants"]

Invariant = Callable[["ReplayWorld"], list[str]]

_INVARIANTS: dict[str, Invariant] = {}


def invariant(name: str) -> Callable[[Invariant], Invariant]:
    """Register the decorated check under ``name``."""

    def register(fn: Invariant) -> Invariant:
        _INVARIANTS[name] = fn
        return fn

    return register


def run_invariants(world: ReplayWorld) -> list[str]:
    """Every violation, as ``"name: detail"`` lines, in a stable order."""
    out: list[str] = []
    for name in sorted(_INVARIANTS):
        out.extend(f"{name}: {line}" for line in _INVARIANTS[name](world))
    return out
