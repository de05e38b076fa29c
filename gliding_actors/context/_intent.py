"""Noticing that the team's intent changed: the rule, as plain code.

An *intent* is a line written with the intent tag (``prefetch.intent_tag``,
``user_intent`` by default: what the user asked for, as an agent recorded
it). The watcher compares each intent's text embedding with the previous
intent's: when their cosine is below ``prefetch.intent_change_below`` (or
there was none before), the intent **changed**, and the memory prefetches
around the new intent for every agent (docs/CONTEXT.md). Consecutive
intents are compared, so a slow drift counts only once it is a real step.

No clock, no actor: :class:`~gliding_actors.context._service.ContextService`
keeps one watcher and feeds it on the prefetcher actor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["IntentVerdict", "IntentWatcher"]


@dataclass(frozen=True)
class IntentVerdict:
    """What one intent was: a change or not, and its cosine to the previous one (None: the first)."""

    changed: bool
    similarity: float | None


class IntentWatcher:
    """The previous intent's vector and the threshold below which the next one is a change."""

    def __init__(self, change_below: float) -> None:
        self.change_below = change_below
        self._previous: np.ndarray | None = None
        #: intents observed and changes found (stats)
        self.observed = 0
        self.changes = 0

    def observe(self, vector: Sequence[float]) -> IntentVerdict:
        """Judge the intent embedded as ``vector`` (unit length) against the previous one, then keep it."""
        row = np.asarray(vector, dtype=np.float64)
        previous, self._previous = self._previous, row
        self.observed += 1
        if previous is None or previous.shape != row.shape:
            similarity = None
            changed = True
        else:
            similarity = float(np.clip(previous @ row, -1.0, 1.0))
            changed = similarity < self.change_below
        if changed:
            self.changes += 1
        return IntentVerdict(changed, None if similarity is None else round(similarity, 6))
