"""Op implementations for scenario replay, registered by name.

The loader knows every op of format v1 (see ``_opspecs``); this registry knows
which of them this build can *run*. The ops of each layer are adapted in a
module of this package named after it (``coherence``, ``l1``, ``l2``, ...),
listed in :data:`_PROVIDERS` and registered with :func:`implements`: the
layers themselves know nothing of scenarios, and adding a layer's ops does not
touch the engine. An op's implementation issues the operation through the
agent's public API and returns a future of its result mapping (the format's
result keys); it must not wait, so parallel blocks really interleave.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from gliding_actors.runtime import Future

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
    #: readers of the simulator's protocol log (e.g. an invariant) -> the position, counted from the
    #: start of the record, from which each still needs it; the replay forgets what precedes them all
    log_readers: dict[str, int] = dataclasses.field(default_factory=dict)

    def agent(self, step: OpStep) -> Agent:
        assert step.agent is not None, "the loader guarantees agent ops name an agent"
        return self.agents[step.agent]


OpImpl = Callable[[ReplayWorld, "OpStep"], Future[Mapping[str, Any]]]

_IMPLS: dict[str, OpImpl] = {}

#: modules whose import registers op implementations
_PROVIDERS: tuple[str, ...] = tuple(
    f"gliding_actors.scenario._ops.{layer}"
    for layer in ("bus", "coherence", "l2", "l1", "l3", "hyperspace", "context")
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
