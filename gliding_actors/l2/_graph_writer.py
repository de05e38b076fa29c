"""The L2 graph written by its own actor: what lets a directory shard live in another process.

On one machine a directory's home writes each version it takes home into the
Oxigraph graph inside the directory's handler (``LayeredHome.store``), under
the graph's lock. A shard on another node cannot: the graph is one service, in
the process that opened the memory, and no actor may block on another. So with
``l2.graph_writer`` on, the home *queues* each put in a :class:`GraphOutbox`
instead, its directory ships the queue to :class:`GraphWriter` (``l2:graph``)
at the end of each handler, and the writer applies it under the same lock.

**The barrier.** Every coherent read of the graph (a SPARQL query, a search,
a projection, a task's completion) first recalls or flushes dirty lines and
reads once that is answered. With the writes in flight, the answer alone no
longer means the graph holds them: FIFO holds per pair only, so a query could
overtake the puts. A directory therefore answers a recall or a flush only
after a fence: it sends ``graph.fence`` behind its puts, the writer (which
receives the shard's messages in order) has applied every one of them when it
sees the fence, and answers ``graph.fenced``; then the directory answers. A
reader that waited for the recall sees every completed write, as before.

What the writer cannot do is refuse a put the home already took: values were
checked as JSON-LD before they entered the protocol, so a failure here is the
store's (``StorageError``). The writer applies the rest of the batch, then
crashes so the supervisor records it; the line is still at home and in L0, and
the graph has it again when the memory reopens (it is rebuilt from L0).
"""

from __future__ import annotations

import threading
from typing import Any

from gliding_actors.errors import GlidingError, InvalidInput, show
from gliding_actors.l0 import is_importance
from gliding_actors.l2._graph import GraphStore
from gliding_actors.runtime import Context

__all__ = ["FENCE", "FENCED", "GRAPH_ACTOR", "PUTS", "GraphOutbox", "GraphPut", "GraphWriter"]

#: The name the graph writer is registered under.
GRAPH_ACTOR = "l2:graph"
#: shard -> writer: ``{"t": PUTS, "nodes": [[iri, value, graph, version, tags], ...]}``
PUTS = "graph.puts"
#: shard -> writer: ``{"t": FENCE, "id": n}``; writer -> shard: ``{"t": FENCED, "id": n}``
FENCE = "graph.fence"
FENCED = "graph.fenced"

#: One put as it crosses: ``[iri, value or None, graph, version, tags]`` (msgpack-plain).
GraphPut = list[Any]


class GraphOutbox:
    """The puts a home took and its directory has not shipped yet, in order.

    Kept by the home, so puts queued by a handler that then crashed are not
    lost with the actor: the rebuilt directory ships them first.
    """

    __slots__ = ("_puts",)

    def __init__(self) -> None:
        self._puts: list[GraphPut] = []

    def add(
        self,
        iri: str,
        value: dict[str, Any] | None,
        graph: str,
        version: int,
        tags: tuple[str, ...],
        importance: float | None = None,
    ) -> None:
        self._puts.append([iri, value, graph, version, list(tags), importance])

    def take(self) -> list[GraphPut]:
        """Everything queued, oldest first; the outbox is empty after."""
        puts, self._puts = self._puts, []
        return puts

    def __len__(self) -> int:
        return len(self._puts)


class GraphWriter:
    """Applies the directories' puts to the one graph; answers fences in order.

    Requests from outside: ``{"t": "graph.applied"}`` → how many puts it has
    applied and how many the store refused (for tests and inspection).
    """

    def __init__(self, graph: GraphStore, lock: threading.Lock, tally: dict[str, int] | None = None) -> None:
        self._graph = graph
        self._lock = lock
        #: outlives the actor (the system keeps it): applied / refused puts
        self._tally = tally if tally is not None else {"applied": 0, "refused": 0}

    def receive(self, message: Any, ctx: Context) -> Any:
        kind = message.get("t") if isinstance(message, dict) else None
        if kind == PUTS:
            self._apply(_checked(message.get("nodes")))
            return None
        if kind == FENCE and ctx.sender is not None:
            ctx.send(ctx.sender, {"t": FENCED, "id": message.get("id")})
            return None
        if kind == "graph.applied":
            return dict(self._tally)
        raise InvalidInput(f"the graph writer takes {show(PUTS)}, {show(FENCE)} (from an actor) and 'graph.applied', not {show(kind)}")

    def _apply(self, nodes: list[GraphPut]) -> None:
        failure: GlidingError | None = None
        with self._lock:
            for iri, value, graph, version, tags, importance in nodes:
                try:
                    self._graph.put_node(iri, value, graph, version, tuple(tags), importance)
                except GlidingError as exc:
                    self._tally["refused"] += 1
                    failure = exc
                else:
                    self._tally["applied"] += 1
        if failure is not None:
            # Not a refusal of the sender's request (it has none): the store failed.
            raise RuntimeError(f"the L2 graph refused a put: {failure}") from failure


def _checked(nodes: Any) -> list[GraphPut]:
    """The batch, if every put has the shape a home queues; else InvalidInput (nothing applied)."""
    if not isinstance(nodes, list):
        raise InvalidInput(f"{PUTS}: nodes is a list of puts, not {type(nodes).__name__}", path=("nodes",))
    for n, put in enumerate(nodes):
        ok = (
            isinstance(put, list)
            and len(put) == 6
            and isinstance(put[0], str)
            and (put[1] is None or isinstance(put[1], dict))
            and isinstance(put[2], str)
            and type(put[3]) is int
            and isinstance(put[4], list)
            and all(isinstance(tag, str) for tag in put[4])
            and (put[5] is None or is_importance(put[5]))
        )
        if not ok:
            raise InvalidInput(
                f"{PUTS}: put {n} is not [iri, value|None, graph, version, tags, importance|None]: {show(put)}",
                path=("nodes", n),
            )
    return nodes
