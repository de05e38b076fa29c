"""Op implementations for scenario replay, registered by name.

The loader knows every op of format v1 (see ``_opspecs``); this registry knows
which of them this build can *run*. Each layer registers its ops with
:func:`implements` in its own module, listed in :data:`_PROVIDERS`, so adding
a layer adds its ops without touching the engine. An op's implementation
issues the operation and returns a future of its result mapping (the spec's
result keys); it must not wait, so parallel blocks really interleave.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from gliding_actors.runtime import Future, MappedFuture

if TYPE_CHECKING:
    from gliding_actors.agent import Agent
    from gliding_actors.scenario._model import OpStep, Scenario
    from gliding_actors.system import MemorySystem

__all__ = ["OpImpl", "ReplayWorld", "implementation", "implemented_ops", "implements"]


@dataclasses.dataclass
class ReplayWorld:
    """What an op implementation may use: the system, the agents, earlier results."""

    scenario: Scenario
    system: MemorySystem
    seed: int
    agents: dict[str, Agent]
    #: results of ops that carried ``as: LABEL``
    labels: dict[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    #: per-layer bookkeeping of this run (e.g. the coherence layer's record of
    #: completed writes, which its invariants compare against)
    state: dict[str, Any] = dataclasses.field(default_factory=dict)

    def agent(self, step: OpStep) -> Agent:
        assert step.agent is not None, "the loader guarantees agent ops name an agent"
        return self.agents[step.agent]


OpImpl = Callable[[ReplayWorld, "OpStep"], Future[Mapping[str, Any]]]

_IMPLS: dict[str, OpImpl] = {}

#: modules whose import registers op implementations
_PROVIDERS: tuple[str, ...] = (
    "gliding_actors.scenario._ops",
    "gliding_actors.coherence._scenario",
    "gliding_actors.l2._scenario",
    "gliding_actors.l1._scenario",
    "gliding_actors.l3._scenario",
    "gliding_actors.hyperspace._scenario",
    "gliding_actors.context._scenario",
)
_loaded = False


def implements(name: str) -> Callable[[OpImpl], OpImpl]:
    """Register the decorated function as the implementation of op ``name``."""

    def register(fn: OpImpl) -> OpImpl:
        _IMPLS[name] = fn
        return fn

    return register


def _load_providers() -> None:
    global _loaded
    if not _loaded:
        for module in _PROVIDERS:
            importlib.import_module(module)
        _loaded = True


def implementation(name: str) -> OpImpl | None:
    """The implementation of op ``name``, or None when this build lacks one."""
    _load_providers()
    return _IMPLS.get(name)


def implemented_ops() -> list[str]:
    _load_providers()
    return sorted(_IMPLS)


def _result(keys: Callable[[Any], Mapping[str, Any]], future: Future[Any]) -> Future[Mapping[str, Any]]:
    return MappedFuture(future, keys)


# -- MemoryBus ops -------------------------------------------------------------


@implements("subscribe")
def _subscribe(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    return _result(lambda _none: {}, world.agent(step).submit_subscribe(step.args["topic"]))


@implements("unsubscribe")
def _unsubscribe(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    return _result(lambda _none: {}, world.agent(step).submit_unsubscribe(step.args["topic"]))


@implements("publish")
def _publish(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    future = world.agent(step).submit_publish(step.args["topic"], step.args["message"])
    return _result(lambda r: {"seq": r["seq"], "delivered": r["delivered"]}, future)


@implements("inbox")
def _inbox(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    # ``messages`` are the published objects as written, so a file can expect
    # exactly what its publisher sent; ``events`` adds topic, seq and publisher.
    return _result(
        lambda events: {"messages": [e["message"] for e in events], "events": events},
        world.agent(step).submit_inbox(),
    )
