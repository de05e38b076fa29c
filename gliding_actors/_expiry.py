"""Lines with a time to live: when each expires, and the sweep that deletes them.

A write may carry ``ttl_s``: the line expires ``ttl_s`` seconds (on the
memory's injected clock) after the write. The expiry travels with the
version through the coherence protocol (the meta) into L0 (the entry's
``metadata["expires_at"]``), so it survives eviction, flush and reopen.

This table is the one place that knows which lines are due: a heap of
``(expires_at, iri, version)``, fed by the agents' completed writes and, on
open, by what L0 holds. :class:`ExpirySweeper` deletes a due line through
coherence, as a ``system`` agent, with a tombstone conditional on the very
version that carried the expiry: a line written again since (with or
without a time to live) is not touched, and its stale heap entry is dropped.
Every agent operation that reads (read, query, search, project, context)
sweeps what is due first, so an expired line reads as absent everywhere;
:meth:`MemorySystem.sweep_expired` sweeps on demand.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from gliding_actors.errors import ConflictError

if TYPE_CHECKING:
    from gliding_actors.clock import Clock
    from gliding_actors.runtime import Future

__all__ = ["SWEEPER_AGENT", "Deleter", "ExpirySweeper", "ExpiryTable"]

#: the ``system`` agent whose tombstones remove expired lines
SWEEPER_AGENT = "ttl-sweeper"


class Deleter(Protocol):
    """What the sweep uses of its ``system`` agent (an :class:`~gliding_actors.Agent`)."""

    def submit_delete(self, iri: str, *, version: int | None = None) -> Future[Any]: ...


class ExpiryTable:
    """``(expires_at, iri, version)`` of every version written with a time to live, soonest first."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        #: the heap itself, never replaced: a hit path may test it for emptiness without a call
        self.heap: list[tuple[float, str, int]] = []
        self._lock = threading.Lock()

    def note(self, iri: str, version: int, expires_at: float) -> None:
        """Version ``version`` of ``iri`` expires at ``expires_at`` (seconds on the clock)."""
        with self._lock:
            heapq.heappush(self.heap, (expires_at, iri, version))

    def due(self) -> bool:
        """Whether some noted version has expired (O(1): the read paths ask on every call)."""
        heap = self.heap
        return bool(heap) and heap[0][0] <= self._clock.now()

    def take_due(self) -> list[tuple[float, str, int]]:
        """``(expires_at, iri, version)`` of every expired version, taken out of the table."""
        now = self._clock.now()
        taken = []
        with self._lock:
            heap = self.heap
            while heap and heap[0][0] <= now:
                taken.append(heapq.heappop(heap))
        return taken

    def __len__(self) -> int:
        return len(self.heap)


class ExpirySweeper:
    """Deletes the due lines of an :class:`ExpiryTable` through coherence (see the module docstring).

    ``agent`` gives the sweeping ``system`` agent, made on first use. One sweep
    at a time: a caller that finds another sweeping waits for it, so no read
    overtakes the deletion of a line it would find expired.
    """

    #: the id of the sweeping agent
    agent_id = SWEEPER_AGENT

    def __init__(
        self, table: ExpiryTable, agent: Callable[[], Deleter], version_of: Callable[[str], int], timeout_s: float
    ) -> None:
        self.table = table
        self._agent = agent
        #: the latest completed version of a line (the line registry): an entry of an older one is dropped unsent
        self._version_of = version_of
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        #: expired lines deleted so far (stats)
        self.swept = 0
        #: told ``(iri, version of the tombstone)`` of each deletion (a scenario's record of writes)
        self.listeners: list[Callable[[str, int], None]] = []

    def sweep_if_due(self) -> int:
        """:meth:`sweep` when something is due (the read paths' O(1) check), else 0."""
        return self.sweep() if self.table.due() else 0

    def sweep(self) -> int:
        """Delete every line whose version expired and was not written since; returns how many."""
        with self._lock:
            version_of = self._version_of
            due = [(at, iri, version) for at, iri, version in self.table.take_due() if version_of(iri) == version]
            if not due:
                return 0
            deleted = 0
            settled = 0
            try:
                sweeper = self._agent()
                sent = [sweeper.submit_delete(iri, version=version) for _at, iri, version in due]
                for (_at, iri, _version), future in zip(due, sent, strict=True):
                    try:
                        version = int(future.get(self._timeout_s)["version"])
                    except ConflictError:
                        settled += 1
                        continue  # written again since: that version decides its own expiry
                    settled += 1
                    deleted += 1
                    for listener in self.listeners:
                        listener(iri, version)
            finally:
                self.swept += deleted
                for at, iri, version in due[settled:]:  # not known deleted (a timeout, a closed memory):
                    self.table.note(iri, version, at)  # due again, so the next sweep tries again
            return deleted
