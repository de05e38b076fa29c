"""The home of the lines a directory shard owns: the L2 node map over L0.

A directory keeps the current data of each line it is home of here. Reads
fall back to L0 (a line nobody touched since the process started, or one
dropped for capacity, is loaded from disk); write-through stores go to L0 with
``sync`` before ``store`` returns, write-back data stays in the node map until
:meth:`LayeredHome.flush` writes down every line that is newer here than in L0.

**Capacity.** The node map holds at most ``capacity`` lines, in least
recently used order (a load or a store touches a line; :meth:`peek` does not,
inspection must not change what gets dropped). Past it, the least recently
used *clean* line (its version already in L0) is dropped: nothing is lost, its
next load reloads the same value and version from L0, so a line's version at
home never goes back. A dirty line is never dropped while dirty. When every
line but the one being touched is dirty, they are all written down to L0 in
one batch with one fsync (they become clean, and the next ``capacity - 1``
drops cost nothing) and the least recently used one is dropped. ``sync``
because :meth:`LayeredHome.flush` will not write them again: a line written
down for capacity must be as durable as one a flush wrote.

**The graph is not bounded.** Every version taken home is also put into the
Oxigraph graph, and dropping a line leaves its triples there: the graph is the
SPARQL index over every line (it is rebuilt from the whole of L0 on open), so
a query sees a dropped but durable line exactly like a resident one. Bounding
the graph too would make SPARQL answer over the resident lines only, and
"a query sees every completed write" would need a fall-back to L0 that SPARQL
cannot express. Capacity bounds the value map the directory serves from; the
graph's size is bounded by putting it on disk (``GraphStore(path)``).
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypedDict

from gliding_actors.coherence._messages import Meta, Msg, Value
from gliding_actors.coherence._states import epoch_floor
from gliding_actors.errors import GlidingError, InvalidInput, show
from gliding_actors.l0 import L0Entry, L0Store, importance_of
from gliding_actors.l2._graph import GraphStore
from gliding_actors.l2._graph_writer import GraphOutbox
from gliding_actors.l2._permissions import DEFAULT_GRAPH  # a line written without a graph is in it

__all__ = ["DEFAULT_GRAPH", "L2Stats", "LayeredHome"]


class L2Stats(TypedDict):
    """A home's node map in numbers (:meth:`LayeredHome.stats`); ``capacity`` None is unbounded."""

    capacity: int | None
    resident: int
    dirty: int
    drops: int
    reloads: int
    forced_writedowns: int
    writedown_batches: int
    writedown_failures: int


@dataclasses.dataclass
class CensusCarry:
    """What a directory's recovery must not lose when the directory dies (during a census, or in S_D)."""

    number: int = 0
    held_back: list[tuple[str, Msg]] = dataclasses.field(default_factory=list)
    #: the lines waiting in S_D (``DirectoryController.open_line`` rows), by IRI
    open_lines: dict[str, list[Any]] = dataclasses.field(default_factory=dict)


class LayeredHome:
    """A directory shard's home: ``l2`` (value, version, meta) by IRI, backed by L0.

    L0 orders the writes of every shard (and of the L1 archives) itself: it
    is their one owner, so a write-down holds no lock of its own. ``graph`` is the graph written inside :meth:`store` (under
    ``graph_lock``), or a :class:`GraphOutbox` that queues the puts for the
    graph's own writer (``gliding_actors.l2._graph_writer``), or None. Only the owning directory actor calls ``load``/``store``/
    ``flush``; ``peek`` and ``stats`` may be called from outside (inspection).
    ``capacity`` bounds the node map (None: unbounded); see the module docstring.

    Counters (read them through :meth:`stats`): ``drops`` (clean lines dropped
    for capacity), ``reloads`` (loads that missed the node map and found the
    line in L0: a first touch since open, or a line dropped earlier),
    ``forced_writedowns`` / ``writedown_batches`` (dirty lines written down
    because the map was full of them, and in how many batches),
    ``writedown_failures`` (such batches L0 refused: the map then stays over
    capacity until a later batch succeeds; the error itself comes back from
    the next flush, which writes the same lines).

    ``epoch``: the epoch this memory's writes of these lines number their
    versions from (the caches' floor); None takes a new one from ``l0``.
    """

    def __init__(
        self,
        l0: L0Store,
        graph: GraphStore | GraphOutbox | None = None,
        graph_lock: threading.Lock | None = None,
        *,
        capacity: int | None = None,
        epoch: int | None = None,
    ) -> None:
        if capacity is not None and (type(capacity) is not int or capacity < 1):
            raise InvalidInput(f"the L2 node capacity must be an int >= 1, not {show(capacity)}")
        self.epoch = l0.reserve_epoch() if epoch is None else epoch
        self._l0 = l0
        self._graph = graph
        self._graph_lock = graph_lock or threading.Lock()
        self._capacity = capacity
        #: resident lines, least recently used first
        self._l2: OrderedDict[str, tuple[Value, int, Meta]] = OrderedDict()
        #: version of each resident line known to be in L0
        self._durable: dict[str, int] = {}
        #: the resident lines whose version is in L0, least recently used first
        self._clean: OrderedDict[str, None] = OrderedDict()
        self.drops = 0
        self.reloads = 0
        self.forced_writedowns = 0
        self.writedown_batches = 0
        self.writedown_failures = 0
        self.fence_failures = 0
        #: open flushes (by request id): the lines capacity wrote down meanwhile
        self._flushing: dict[int, set[str]] = {}
        #: every cache that ever sent this shard a protocol message: the only ones
        #: that can hold its lines (a grant answers a request), so the ones a
        #: rebuilt directory takes a census of. Here because it must outlive the actor.
        self.caches: set[str] = set()
        #: the protocol messages a census held back, and how many censuses this shard
        #: took: kept here, beside ``caches``, so a directory that dies during a census
        #: hands them to the next (see ``DirectoryActor``)
        self.census_carry = CensusCarry()
        #: the directory's MESI state of a line, recorded in each entry written down
        #: (``L0Entry.mesi_state``); bound by the directory hosting this home
        self.state_of: Callable[[str], str] = _nobody_holds

    @property
    def capacity(self) -> int | None:
        return self._capacity

    @property
    def graph_outbox(self) -> GraphOutbox | None:
        """The queue of graph puts when the graph has its own writer, else None (written here)."""
        return self._graph if isinstance(self._graph, GraphOutbox) else None

    def _from_l0(self, iri: str) -> tuple[Value, int, Meta]:
        entry = self._l0.retrieve(iri, touch=False)
        if entry is not None:
            return entry.content, entry.version, meta_of_entry(entry)
        return None, self._l0.retrieve_version(iri), None

    def load(self, iri: str) -> tuple[Value, int]:
        held = self._l2.get(iri)
        if held is not None:
            self._touch(iri)
            return held[0], held[1]
        value, version, meta = self._from_l0(iri)
        if version:
            self._l2[iri] = (value, version, meta)
            self._durable[iri] = version
            self._clean[iri] = None
            self.reloads += 1
            self._shrink(keep=iri)
        return value, version

    def fence(self, iri: str) -> int:
        """Hold the line's value at the first version of a new epoch, durably; return it.

        Recovery calls this when it serves the line in place of a dead cache's
        copy (see :meth:`Home.fence`). If L0 refuses, the line keeps the
        version home holds (a later write may then reuse a lost one) rather
        than the recovery failing half-way; counted in ``fence_failures``.
        """
        value, version = self.load(iri)
        try:
            fenced = max(version + 1, epoch_floor(self._l0.reserve_epoch()))
            self.store(iri, value, fenced, durable=True, meta=self.meta_of(iri))
        except GlidingError:
            self.fence_failures += 1
            return self.load(iri)[1]
        return fenced

    def meta_of(self, iri: str) -> Meta:
        """Tags and graph of the version held here (after :meth:`load`); None if unknown."""
        held = self._l2.get(iri)
        return None if held is None else held[2]

    def store(self, iri: str, value: Value, version: int, durable: bool, meta: Meta) -> None:
        self._l2[iri] = (value, version, meta)
        self._l2.move_to_end(iri)
        # Not droppable until proven clean below (the write-down may still fail).
        self._clean.pop(iri, None)
        if self._graph is not None:
            # Values were checked as JSON-LD before they entered the protocol.
            graph = (meta or {}).get("graph") or DEFAULT_GRAPH
            tags = tuple((meta or {}).get("tags") or ())
            importance = (meta or {}).get("importance")
            if isinstance(self._graph, GraphOutbox):
                self._graph.add(iri, value, graph, version, tags, importance)  # its directory ships it
            else:
                with self._graph_lock:
                    self._graph.put_node(iri, value, graph, version, tags, importance)
        if durable and self._durable.get(iri, -1) < version:
            self._write_down([iri], sync=True)
        self._touch(iri)
        self._shrink(keep=iri)

    def _touch(self, iri: str) -> None:
        """Make resident ``iri`` the most recently used line, in ``_clean`` iff clean."""
        self._l2.move_to_end(iri)
        if self._l2[iri][1] <= self._durable.get(iri, 0):
            self._clean[iri] = None
            self._clean.move_to_end(iri)
        else:
            self._clean.pop(iri, None)

    def _shrink(self, keep: str) -> None:
        """Drop least recently used clean lines until the map fits; never ``keep``."""
        capacity = self._capacity
        if capacity is None:
            return
        while len(self._l2) > capacity:
            victim = next(iter(self._clean), None)
            if victim is None or victim == keep:
                # ``keep`` was touched last, so it heads ``_clean`` only when it is
                # the only clean line: every other line is dirty.
                dirty = [i for i in self._l2 if i != keep and i not in self._clean]
                try:
                    self._write_down(dirty, sync=True)
                except GlidingError:
                    # The store or load that got here has happened; failing it now
                    # would leave the directory half-way through a message. The
                    # lines stay resident and dirty, and the next flush raises.
                    self.writedown_failures += 1
                    return
                finally:
                    self._rerank()
                self.forced_writedowns += len(dirty)
                self.writedown_batches += 1
                for written in self._flushing.values():
                    written.update(dirty)
                continue
            if self._l2[victim][1] > self._durable.get(victim, 0):
                raise AssertionError(f"L2 would drop dirty line {victim} (a bug in the clean index)")
            del self._l2[victim]
            del self._clean[victim]
            del self._durable[victim]
            self.drops += 1

    def _write_down(self, iris: list[str], *, sync: bool) -> None:
        """Write resident lines to L0: values as one batch, tombstones one by one.

        ``sync`` applies to the last write only: LevelDB's fsync of its log
        makes every earlier write durable too. Only ``_durable`` is updated
        (the caller re-ranks ``_clean``). A line counts as written once its
        write returned, so a failure half-way leaves the rest dirty (written
        again later; an equal version is an idempotent rewrite in L0).
        """
        entries: list[L0Entry] = []
        tombstones: list[tuple[str, int]] = []
        for iri in iris:
            value, version, meta = self._l2[iri]
            if value is None:
                tombstones.append((iri, version))
            else:
                entries.append(entry_of_line(iri, value, version, meta, mesi_state=self.state_of(iri)))
        for n, (iri, version) in enumerate(tombstones):
            last = not entries and n == len(tombstones) - 1
            self._l0.delete(iri, version=version, sync=sync and last)
            self._durable[iri] = version
        if entries:
            self._l0.store_many(entries, merge=False, sync=sync)
            for entry in entries:
                self._durable[entry.iri] = entry.version

    def _rerank(self) -> None:
        """Rebuild ``_clean`` from the versions, in recency order (after a batch write-down).

        O(resident lines), once per flush or capacity batch, so that lines
        written down together keep their own rank among the clean ones.
        """
        durable = self._durable
        self._clean = OrderedDict((i, None) for i, held in self._l2.items() if held[1] <= durable.get(i, 0))

    def dirty(self) -> list[str]:
        """IRIs whose version here is newer than the one in L0, sorted."""
        durable = self._durable
        return sorted(i for i, held in self._l2.items() if held[1] > durable.get(i, 0))

    def begin_flush(self, mark: int) -> None:
        """A flush starts (its recall is bringing owners' copies home): see :meth:`flush`."""
        self._flushing[mark] = set()

    def abandon_flushes(self) -> None:
        """Forget the flushes begun and not finished: their directory died, and their askers with it."""
        self._flushing.clear()

    def flush(self, iris: list[str] | None = None, *, sync: bool = True, mark: int | None = None) -> list[str]:
        """Write down every line newer here than in L0 (within ``iris``), as one batch; return them.

        With the ``mark`` of a :meth:`begin_flush`, the answer also lists the
        lines (within ``iris``) that capacity wrote down since: the flush's own
        recall brought them home and pushed them out, so they were written
        because of this flush, and its count must not depend on the capacity.
        """
        dirty = self.dirty()
        scope = dirty if iris is None else sorted(set(iris).intersection(dirty))
        if scope:
            try:
                self._write_down(scope, sync=sync)
            finally:
                self._rerank()
        if mark is None:
            return scope
        forced = self._flushing.pop(mark, set())
        if iris is not None:
            forced.intersection_update(iris)
        return sorted(forced.union(scope))

    def version_of(self, iri: str) -> int:
        """The version held here, else L0's (not loading, not touching)."""
        held = self._l2.get(iri)
        return held[1] if held is not None else self._l0.retrieve_version(iri)

    def durable_copy(self, iri: str) -> dict[str, Any] | None:
        """``{"value", "version"}`` of the live node L0 holds, or None (never written, or deleted)."""
        entry = self._l0.retrieve(iri, touch=False)
        return None if entry is None else {"value": entry.content, "version": entry.version}

    def durable_version(self, iri: str) -> int:
        """The version L0 holds (a delete's, for a tombstone; 0 if never written)."""
        return self._l0.retrieve_version(iri)

    def l0_count(self) -> int:
        """Nodes in this home's L0 (all of L0 when the shards share one)."""
        return self._l0.count()

    def peek(self, iri: str) -> dict[str, Any] | None:
        """``{"value", "version"}`` held here (not loading from L0, not touching), or None."""
        held = self._l2.get(iri)
        if held is None:
            return None
        return {"value": held[0], "version": held[1]}

    def stats(self) -> L2Stats:
        """Size and counters of the node map, for inspection and benchmarks."""
        resident = len(self._l2)
        return {
            "capacity": self._capacity,
            "resident": resident,
            "dirty": resident - len(self._clean),
            "drops": self.drops,
            "reloads": self.reloads,
            "forced_writedowns": self.forced_writedowns,
            "writedown_batches": self.writedown_batches,
            "writedown_failures": self.writedown_failures,
        }


#: the key of an L0 entry's ``metadata`` that holds a line's expiry (seconds on the memory's clock)
EXPIRES_AT = "expires_at"


def meta_of_entry(entry: L0Entry) -> Meta:
    """The protocol's meta of a line as L0 holds it (see :func:`entry_of_line`)."""
    meta: dict[str, Any] = {"tags": sorted(entry.tags), "graph": entry.named_graph, "importance": entry.importance}
    expires = entry.metadata.get(EXPIRES_AT)
    if isinstance(expires, (int, float)) and not isinstance(expires, bool):
        meta["expires"] = float(expires)
    return meta


def _nobody_holds(_iri: str) -> str:
    return "I"


def entry_of_line(iri: str, value: dict[str, Any], version: int, meta: Meta, *, mesi_state: str = "I") -> L0Entry:
    """The L0 entry of a line's version: tags, graph, importance and expiry from its meta."""
    meta = meta or {}
    expires = meta.get("expires")
    return L0Entry(
        iri,
        value,
        importance=meta["importance"] if meta.get("importance") is not None else importance_of(value),
        tags=tuple(meta.get("tags") or ()),
        named_graph=meta.get("graph"),
        metadata={} if expires is None else {EXPIRES_AT: expires},
        version=version,
        mesi_state=mesi_state,
    )
