"""Scenario ops of L1: ``turn`` and ``session`` (spec, "Ops").

``turn`` takes the spec's args plus ``cites`` (a list of line IRIs the turn
relied on; a later write to one marks the turn stale). Results are the spec's
keys plus ``counter`` (which counter produced ``tokens``), ``turn_tokens``
(this turn's own cost) and ``seq``; ``session``'s ``turns`` items are
``{summary, archive_iri, tokens}`` plus ``seq``, ``role``, ``relevance``,
``supplement``, ``created_at``, ``cites``, ``stale`` and ``stale_lines``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gliding_actors.runtime import CompletedFuture, Future
from gliding_actors.scenario._model import OpStep
from gliding_actors.scenario._ops import ReplayWorld, implements

__all__: list[str] = []


@implements("turn")
def _turn(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    args = step.args
    return world.agent(step).submit_turn(
        args["summary"],
        thought=args["thought"],
        content=args["content"],
        role=args["role"],
        supplement=args.get("supplement", False),
        relevance=args.get("relevance"),
        tokens=args.get("tokens"),
        cites=args.get("cites"),
    )


@implements("consolidate")
def _consolidate(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    return CompletedFuture(world.agent(step).consolidate(step.args.get("keep", 4)))


@implements("fold")
def _fold(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    args = step.args
    return world.agent(step).submit_fold(
        args["iris"], args["summary"], thought=args.get("thought", ""), content=args.get("content", "")
    )


@implements("session")
def _session(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    return world.agent(step).submit_session()
