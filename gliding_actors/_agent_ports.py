"""What an agent's handle uses of the memory: the port :class:`~gliding_actors.agent.Agent` is given."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from gliding_actors._ports import MemoryPorts
from gliding_actors.runtime import Future

if TYPE_CHECKING:
    from gliding_actors._expiry import ExpirySweeper
    from gliding_actors.clock import Clock
    from gliding_actors.coherence._hosting import ModifyFunctions
    from gliding_actors.context._service import ContextService
    from gliding_actors.hyperspace._service import HyperspaceService
    from gliding_actors.l3._service import ProjectionService
    from gliding_actors.metrics._counters import SystemCounters

__all__ = ["AgentPorts"]


class AgentPorts(MemoryPorts, Protocol):
    """What an agent's handle uses of the memory (a :class:`~gliding_actors.MemorySystem` is one)."""

    @property
    def clock(self) -> Clock: ...
    @property
    def counters(self) -> SystemCounters: ...
    @property
    def l3(self) -> ProjectionService: ...
    @property
    def hyperspace(self) -> HyperspaceService: ...
    @property
    def context(self) -> ContextService: ...
    @property
    def modify_functions(self) -> ModifyFunctions:
        """The functions of this process's modifies in flight, which their caches find by token."""
    @property
    def expiry(self) -> ExpirySweeper:
        """The lines written with a time to live, and the sweep that deletes them when due."""

    def submit_flush(self, iris: Iterable[str] | None = None) -> Future[int]:
        """Write down to L0 every line newer in a cache or in L2 than in L0."""
