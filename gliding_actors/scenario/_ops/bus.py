"""Scenario ops of the MemoryBus: subscribe, unsubscribe, publish, inbox."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gliding_actors.runtime import Future, MappedFuture
from gliding_actors.scenario._model import OpStep
from gliding_actors.scenario._ops import ReplayWorld, implements

# -- MemoryBus ops -------------------------------------------------------------


@implements("subscribe")
def _subscribe(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    return MappedFuture(world.agent(step).submit_subscribe(step.args["topic"]), lambda _none: {})


@implements("unsubscribe")
def _unsubscribe(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    return MappedFuture(world.agent(step).submit_unsubscribe(step.args["topic"]), lambda _none: {})


@implements("publish")
def _publish(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    future = world.agent(step).submit_publish(step.args["topic"], step.args["message"])
    return MappedFuture(future, lambda r: {"seq": r["seq"], "delivered": r["delivered"]})


@implements("inbox")
def _inbox(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    # ``messages`` are the published objects as written, so a file can expect
    # exactly what its publisher sent; ``events`` adds topic, seq and publisher.
    return MappedFuture(
        world.agent(step).submit_inbox(),
        lambda events: {"messages": [e["message"] for e in events], "events": events},
    )
