"""Scenario ops of the scheduler and the prefetcher: ``context`` and ``intent`` (spec, "Ops").

``context``: args ``query`` (opt), ``task`` (opt, an addition to the spec:
the task whose projection to use instead of the agent's current one) and
``max_tokens``; results the spec's keys
``tokens``, ``iris`` (the main list), ``text``, plus ``counter``, ``sources``
(per source: items, tokens, proposed, proposed_tokens), ``path`` (what L3, L2 and L0 had),
``task``, ``frame``, ``items``. ``intent``: arg ``entities``; results
``prefetched`` (the main list: the lines loaded into L2 and the agent's
cache, best first) and ``scores``. Replay waits for the loads, so a read
after an ``intent`` step is a hit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gliding_actors.runtime import Future
from gliding_actors.scenario._model import OpStep
from gliding_actors.scenario._ops import ReplayWorld, implements

__all__: list[str] = []


@implements("context")
def _context(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    args = step.args
    return world.agent(step).submit_context(args.get("query"), args["max_tokens"], task=args.get("task"))


@implements("intent")
def _intent(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    return world.agent(step).submit_intent(step.args["entities"])
