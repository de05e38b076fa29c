"""Which named graph each line is in, known before any message is sent.

Permissions are per named graph, but an agent's read, delete or update names
only an IRI: the line's graph lives with its data, at home or in the cache
that owns it. Asking home would cost a round trip on every read (and break the
message-free hit path), and checking after the protocol ran would be too late:
a refused op must change nothing, not even the refusing agent's cache. So
:class:`LineGraphs` keeps the answer where the agent handle can read it for
the price of one dict lookup.

How it stays right:

* **Filled from L0 on open** (every stored node with its named graph), in the
  same pass that rebuilds the Oxigraph graph.
* **Moved only by completed ops.** The agent handle records a write, cas or
  delete when its future completes with a version; a refused or failed op never
  reaches it.
* **The newest version wins.** Completions of different agents' writes can be
  reported in any order (each writer's callback runs on its own thread), so
  each record carries the line's version and an older one never overwrites a
  newer one. An equal version does overwrite: the protocol gives each version
  to one write only, unless a crash lost a write-back version and the next
  write reuses its number, and then the later record is the true one.
* **A delete keeps the line's graph.** A tombstone is in the graph the line was
  in (the coherence protocol keeps a deleted line's graph too), so later reads
  and re-writes of the IRI stay confined to that graph's rights. A tombstone is
  not in L0's node list, so after a restart a deleted line is unknown again,
  which is safe: it holds no data.
* **An IRI never written is in the default graph** (``shared``), where a write
  without a graph would put it.

Reads (:meth:`graph_of`, :attr:`graphs`) take no lock: each update is a single
dict assignment, which CPython makes atomic, so a reader sees the old graph or
the new one. Updates take a lock, because "is this version newer" and the
assignment must happen together.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping

from gliding_actors.errors import InvalidInput, show

__all__ = ["LineGraphs"]


class LineGraphs:
    """A thread-safe map from line IRI to ``(named graph, version)``."""

    __slots__ = ("_default_graph", "_graphs", "_listeners", "_lock", "_versions")

    def __init__(self, default_graph: str) -> None:
        if not isinstance(default_graph, str) or not default_graph:
            raise InvalidInput(f"the default graph is a non-empty string, not {show(default_graph)}")
        self._default_graph = default_graph
        self._graphs: dict[str, str] = {}
        self._versions: dict[str, int] = {}
        self._lock = threading.Lock()
        #: called ``(iri, version, forced)`` after each accepted record or reset (L3's views)
        self._listeners: tuple[Callable[[str, int, bool], None], ...] = ()

    @property
    def default_graph(self) -> str:
        """The graph of an IRI nobody wrote."""
        return self._default_graph

    @property
    def graphs(self) -> Mapping[str, str]:
        """The live IRI → graph map, for a hot path that wants one ``dict.get`` and no call.

        Read it only; IRIs missing from it are in :attr:`default_graph`.
        """
        return self._graphs

    def graph_of(self, iri: str) -> str:
        """The named graph ``iri`` is in (:attr:`default_graph` when unknown)."""
        return self._graphs.get(iri, self._default_graph)

    def known(self, iri: str) -> str | None:
        """The graph of a line written at least once (tombstones included), else None."""
        return self._graphs.get(iri)

    def version_of(self, iri: str) -> int:
        """The newest version recorded for ``iri`` (0 when unknown)."""
        return self._versions.get(iri, 0)

    def record(self, iri: str, graph: str | None, version: int) -> bool:
        """Note that ``iri`` is in ``graph`` (None: the default) as of ``version``.

        Ignored (False) when a newer version is already recorded, so
        completions reported out of order leave the newest graph in place.
        """
        target = self._default_graph if graph is None else graph
        with self._lock:
            if version < self._versions.get(iri, -1):
                return False
            self._versions[iri] = version
            self._graphs[iri] = target
        for listener in self._listeners:
            listener(iri, version, False)
        return True

    def record_many(self, lines: Iterable[tuple[str, str, int]]) -> None:
        """:meth:`record` of each ``(iri, graph, version)``, under one hold of the lock (a memory
        opening records every line it holds)."""
        accepted: list[tuple[str, int]] = []
        with self._lock:
            graphs, versions = self._graphs, self._versions
            for iri, graph, version in lines:
                if version < versions.get(iri, -1):
                    continue
                versions[iri] = version
                graphs[iri] = graph
                accepted.append((iri, version))
        for listener in self._listeners:
            for iri, version in accepted:
                listener(iri, version, False)

    def reset(self, iri: str, graph: str | None, version: int) -> None:
        """Set ``iri``'s entry whatever it held (None graph: forget the line).

        For recovery code that knows better than the completed ops did, e.g. a
        crash that lost a write-back version the registry had recorded.
        """
        with self._lock:
            if graph is None:
                self._graphs.pop(iri, None)
                self._versions.pop(iri, None)
            else:
                self._versions[iri] = version
                self._graphs[iri] = graph
        for listener in self._listeners:
            listener(iri, version, True)

    def add_listener(self, listener: Callable[[str, int, bool], None]) -> None:
        """Call ``listener(iri, version, forced)`` after every accepted :meth:`record`
        (``forced=False``) and every :meth:`reset` (``True``), on the recording thread.

        Why: a completed write is recorded here before its writer's caller sees
        the result, so a listener learns of it before any later operation can
        begin — the L3 view cache uses this to never serve a projection older
        than a completed write. A listener must be quick and must not block.
        """
        with self._lock:
            self._listeners = (*self._listeners, listener)

    def snapshot(self) -> dict[str, tuple[str, int]]:
        """Every recorded line as ``{iri: (graph, version)}``, sorted by IRI."""
        with self._lock:
            return {iri: (self._graphs[iri], self._versions[iri]) for iri in sorted(self._graphs)}

    def __len__(self) -> int:
        return len(self._graphs)

    def __repr__(self) -> str:
        return f"<LineGraphs {len(self._graphs)} lines, default {self._default_graph!r}>"
