"""The coherence protocol placed across processes: sharded directories, agents beside their caches.

On one machine the system's actors share its stores; across machines they
cannot. This module builds the protocol's actors so that everything an actor
needs is made *in the process that hosts it*, from plain picklable recipes:

* :class:`ShardRecipe` builds one directory shard over its own home — its own
  L0 (a LevelDB on the disk of the node it runs on) and its own L2 graph — so
  directory shards and L0 shards are split by the same IRI hash
  (:func:`~gliding_actors.coherence._messages.directory_shard`).

It runs unchanged on the ``threads`` backend, which is how the scaling
benchmark (whose workload, an agent and its cache in one actor, is
:mod:`gliding_actors.bench._workload`) compares the two runtimes.
"""

from __future__ import annotations

import dataclasses
import os
import threading

from gliding_actors.clock import Clock, SystemClock
from gliding_actors.coherence._home import DEFAULT_GRAPH, LayeredHome
from gliding_actors.coherence._hosting import (
    DirectoryActor,
)
from gliding_actors.config import L0Config
from gliding_actors.l0 import L0Store
from gliding_actors.l2._graph import GraphStore
from gliding_actors.l2._graph_writer import GraphOutbox
from gliding_actors.metrics._counters import ActorTally

__all__ = ["ShardRecipe"]


class _Shard(DirectoryActor):
    """A directory shard that owns its home's L0 and closes it when stopped."""

    def __init__(
        self,
        name: str,
        home: LayeredHome,
        l0: L0Store,
        *,
        recover_from: tuple[str, ...] | None,
        tally: ActorTally | None,
    ) -> None:
        super().__init__(name, home, recover_from=recover_from, tally=tally)
        self._l0 = l0

    def on_stop(self) -> None:
        self._l0.close()


@dataclasses.dataclass
class ShardRecipe:
    """How to build directory shard ``name`` where it runs (a picklable factory).

    The home is made on the first build and kept by this recipe, which lives in
    the hosting process: a shard rebuilt after a crash reopens nothing and
    takes a census of ``caches`` and of every cache that talked to it before
    serving (docs/COHERENCE.md).

    Two uses. ``bench scaling`` and the distributed tests give each shard a
    private graph (``graph_writer=False``). A :class:`~gliding_actors.MemorySystem`
    with a sharded L0 (``l0.sharded``) makes its shards with
    ``graph_writer=True``: the home queues its puts for the memory's one graph
    (``l2:graph``, :mod:`gliding_actors.l2._graph_writer`), and the first build
    queues every line this shard's L0 holds, which is how the graph is
    rebuilt when the memory opens.
    """

    name: str
    #: the folder of this shard's L0, on the hosting node's disk
    root: str
    capacity: int = 4096
    caches: tuple[str, ...] = ()
    #: LevelDB sizes and write rules of the shard's L0 (None: the defaults)
    l0_config: L0Config | None = None
    #: the clock the shard's L0 stamps with; None is the hosting process's own
    #: (a clock cannot be shared between processes: on Ray it is always None)
    clock: Clock | None = None
    graph_writer: bool = False
    #: where the shard counts what it sends; None: its own (in its process)
    tally: ActorTally | None = None
    _home: LayeredHome | None = dataclasses.field(default=None, init=False, repr=False)
    _l0: L0Store | None = dataclasses.field(default=None, init=False, repr=False)
    _built: int = dataclasses.field(default=0, init=False, repr=False)

    @property
    def path(self) -> str:
        """The folder of this shard's LevelDB."""
        return os.path.join(self.root, self.name.replace(":", "-"))

    @property
    def store(self) -> L0Store | None:
        """The shard's L0 once built (in the process that built it), else None."""
        return self._l0

    def __call__(self) -> DirectoryActor:
        if self._home is None or self._l0 is None:
            os.makedirs(self.root, exist_ok=True)
            clock = self.clock if self.clock is not None else SystemClock()
            l0 = L0Store(self.path, clock=clock, config=self.l0_config)
            if self.graph_writer:
                outbox = GraphOutbox()
                for entry in l0.query():  # shipped by the first actor's on_start
                    graph = entry.named_graph or DEFAULT_GRAPH
                    outbox.add(entry.iri, entry.content, graph, entry.version, tuple(entry.tags), entry.importance)
                self._home = LayeredHome(l0, outbox, capacity=self.capacity)
            else:
                self._home = LayeredHome(l0, GraphStore(None), threading.Lock(), capacity=self.capacity)
            self._l0 = l0
            if self.tally is None:
                self.tally = ActorTally()
        self._built += 1
        recover = None if self._built == 1 else tuple(sorted(set(self.caches) | self._home.caches))
        return _Shard(self.name, self._home, self._l0, recover_from=recover, tally=self.tally)
