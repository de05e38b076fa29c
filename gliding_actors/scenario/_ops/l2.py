"""Scenario ops of the blackboard: heartbeat, agents, lock, unlock, task.*."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gliding_actors.runtime import Future, MappedFuture
from gliding_actors.scenario._model import OpStep
from gliding_actors.scenario._ops import ReplayWorld, implements

__all__: list[str] = []


@implements("heartbeat")
def _heartbeat(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    return world.agent(step).submit_heartbeat(step.args.get("status"), step.args.get("operation"))


@implements("agents")
def _agents(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    return world.system.submit_team()


@implements("lock")
def _lock(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    args = step.args
    future = world.agent(step).submit_lock(args["resource"], args["mode"], float(args.get("timeout_s", 0.0)))
    return MappedFuture(future, lambda r: {"granted": r["granted"], **({"token": r["token"]} if "token" in r else {})})


@implements("unlock")
def _unlock(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    return world.agent(step).submit_unlock(step.args["resource"])


@implements("task.create")
def _task_create(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    args = step.args
    request = {"t": "task.create", "task": args["task"], "parent": args.get("parent"), "depends_on": args.get("depends_on") or []}
    return world.agent(step).submit_task(request)


@implements("task.depend")
def _task_depend(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    return world.agent(step).submit_task({"t": "task.depend", "task": step.args["task"], "on": step.args["on"]})


@implements("task.layers")
def _task_layers(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    return world.agent(step).submit_task({"t": "task.layers", "task": step.args["task"]})


@implements("task.complete")
def _task_complete(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    request = {"t": "task.complete", "task": step.args["task"], "status": step.args.get("status", "completed")}
    return MappedFuture(world.agent(step).submit_task(request), lambda r: {"flushed": r["flushed"]})


@implements("task.release")
def _task_release(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    return world.agent(step).submit_task({"t": "task.release", "task": step.args["task"]})


@implements("query")
def _query(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    return world.agent(step).submit_query(step.args["sparql"])
