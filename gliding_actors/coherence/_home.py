"""The home of the lines a directory shard owns: the L2 node map over L0.

A directory keeps the current data of each line it is home of here. Reads
fall back to L0 (a line nobody touched since the process started is loaded
from disk); write-through stores go to L0 with ``sync`` before ``store``
returns, write-back data stays in the node map until :meth:`flush` writes down
every line that is newer here than in L0.

The L2 blackboard (Oxigraph graph, indexes, capacity) grows from this node
map; until then it is the whole of L2.
"""

from __future__ import annotations

import threading
from typing import Any

from gliding_actors.coherence._messages import Meta, Value
from gliding_actors.l0 import L0Entry, L0Store
from gliding_actors.l2._graph import GraphStore

#: Named graph of a line written without one (everyone may create and update there).
DEFAULT_GRAPH = "shared"

__all__ = ["LayeredHome"]


class LayeredHome:
    """A directory shard's home: ``l2`` (value, version, meta) by IRI, backed by L0.

    ``l0_lock`` serialises writes to the shared L0 store across shards (reads
    need no lock). Only the owning directory actor calls ``load``/``store``/
    ``flush``; ``peek`` may be called from outside (inspection).
    """

    def __init__(
        self, l0: L0Store, l0_lock: threading.Lock, graph: GraphStore | None = None, graph_lock: threading.Lock | None = None
    ) -> None:
        self._l0 = l0
        self._l0_lock = l0_lock
        self._graph = graph
        self._graph_lock = graph_lock or threading.Lock()
        self._l2: dict[str, tuple[Value, int, Meta]] = {}
        #: version of each line known to be in L0
        self._durable: dict[str, int] = {}

    def _from_l0(self, iri: str) -> tuple[Value, int]:
        entry = self._l0.retrieve(iri, touch=False)
        if entry is not None:
            return entry.content, entry.version
        return None, self._l0.retrieve_version(iri)

    def load(self, iri: str) -> tuple[Value, int]:
        held = self._l2.get(iri)
        if held is not None:
            return held[0], held[1]
        value, version = self._from_l0(iri)
        if version:
            self._l2[iri] = (value, version, None)
            self._durable[iri] = version
        return value, version

    def store(self, iri: str, value: Value, version: int, durable: bool, meta: Meta) -> None:
        self._l2[iri] = (value, version, meta)
        if self._graph is not None:
            # Values were checked as JSON-LD before they entered the protocol.
            graph = (meta or {}).get("graph") or DEFAULT_GRAPH
            with self._graph_lock:
                self._graph.put_node(iri, value, graph, version)
        if durable and self._durable.get(iri, -1) < version:
            self._write_down(iri, value, version, meta, sync=True)

    def _write_down(self, iri: str, value: Value, version: int, meta: Meta, *, sync: bool) -> None:
        with self._l0_lock:
            if value is None:
                self._l0.delete(iri, version=version, sync=sync)
            else:
                tags = tuple((meta or {}).get("tags") or ())
                graph = (meta or {}).get("graph")
                entry = L0Entry(iri, value, tags=tags, named_graph=graph, version=version)
                self._l0.store(entry, merge=False, sync=sync)
        self._durable[iri] = version

    def dirty(self) -> list[str]:
        """IRIs whose version here is newer than the one in L0, sorted."""
        return sorted(i for i, (_v, n, _m) in self._l2.items() if n > self._durable.get(i, 0))

    def flush(self, iris: list[str] | None = None, *, sync: bool = True) -> list[str]:
        """Write down every line newer here than in L0 (within ``iris``); return them."""
        scope = self.dirty() if iris is None else [i for i in sorted(set(iris)) if i in self.dirty()]
        for iri in scope:
            value, version, meta = self._l2[iri]
            self._write_down(iri, value, version, meta, sync=sync)
        return scope

    def peek(self, iri: str) -> dict[str, Any] | None:
        """``{"value", "version"}`` held here (not loading from L0), or None."""
        held = self._l2.get(iri)
        if held is None:
            return None
        return {"value": held[0], "version": held[1]}
