"""What the memory's services may use of it: a port, not the MemorySystem class.

The services (hyperspace, L3, the context scheduler) are built by
:class:`~gliding_actors.MemorySystem` and handed the memory through
:class:`MemoryPorts`, a Protocol of exactly the stores, registries and calls
they use. They never import the façade, so they can be read, typed and tested
without it, and the façade's other methods are out of their reach. Each
service that also talks to another service extends the port with it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import threading

    from gliding_actors._progress import ProgressReporter
    from gliding_actors.coherence._hosting import SnapshotBoard
    from gliding_actors.config import Config
    from gliding_actors.l0 import L0Store
    from gliding_actors.l2._graph import GraphStore
    from gliding_actors.l2._permissions import PermissionMatrix
    from gliding_actors.l2._registry import LineGraphs
    from gliding_actors.runtime import Future, Runtime

__all__ = ["MemoryPorts"]


class MemoryPorts(Protocol):
    """The memory as its services see it."""

    @property
    def runtime(self) -> Runtime: ...
    @property
    def config(self) -> Config: ...
    @property
    def path(self) -> Path: ...
    @property
    def l0(self) -> L0Store:
        """L0, for what the services read of it (archives, L0-only nodes)."""
    @property
    def graph(self) -> GraphStore:
        """L2's graph, read under :attr:`graph_lock`."""
    @property
    def graph_lock(self) -> threading.Lock: ...
    @property
    def board(self) -> SnapshotBoard:
        """The agents' cache snapshots (a read hit is served from here)."""
    @property
    def permissions(self) -> PermissionMatrix: ...
    @property
    def line_graphs(self) -> LineGraphs:
        """The line registry: each line's graph and version, with listeners."""
    @property
    def progress(self) -> ProgressReporter:
        """Where a service reports how its long steps advance (``MemorySystem.open(progress=...)``)."""

    def spawn_supervised(self, name: str, factory: Callable[[], Any], *, placement: str | None = None) -> None:
        """Spawn one of the memory's actors under its supervisor."""

    def node_for(self, index: int) -> str | None:
        """Where the ``index``-th of a set of placed actors runs (None: here)."""

    def line_copy(self, iri: str) -> tuple[dict[str, Any] | None, int, list[str], str] | None:
        """A line's value, version, tags and graph as home or L0 hold it."""

    def may_read(self, role: str, iri: str) -> bool: ...

    def readable_graphs(self, role: str) -> list[str]: ...

    def submit_recall(self) -> Future[int]:
        """Bring every dirty line home, so the graph holds every completed write."""
