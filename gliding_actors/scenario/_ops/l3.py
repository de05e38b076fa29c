"""Scenario op of L3: ``project`` (spec, "Ops").

Args ``frame`` (required by the format), ``task`` and ``max_tokens`` (opt).
Results are the spec's keys — ``tokens``, ``iris`` (the main list),
``jsonld``, ``cached``, ``mode`` — plus ``counter`` (the token counter that
produced ``tokens``), ``frame``, ``task``, ``max_tokens``, ``full_tokens``
(what the full projection costs) and ``lines_read``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gliding_actors.runtime import Future
from gliding_actors.scenario._model import OpStep
from gliding_actors.scenario._ops import ReplayWorld, implements

__all__: list[str] = []


@implements("project")
def _project(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    args = step.args
    return world.agent(step).submit_project(args["frame"], args.get("task"), args.get("max_tokens"))
