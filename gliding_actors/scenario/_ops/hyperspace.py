"""Scenario op of the hyperspace engine: ``search`` (spec, "Ops").

Args ``text``, ``k`` and ``filters`` (opt: ``tags``, ``types``, ``graph``,
``min_importance``, ``max_importance``). Results are the spec's keys —
``iris`` (the main list) and ``scores`` — plus ``embedders`` (the vector
spaces the hits' text vectors came from).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gliding_actors.runtime import Future
from gliding_actors.scenario._model import OpStep
from gliding_actors.scenario._ops import ReplayWorld, implements

__all__: list[str] = []


@implements("search")
def _search(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    args = step.args
    return world.agent(step).submit_search(args["text"], args["k"], args.get("filters"))
