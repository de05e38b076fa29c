"""Materialized views: projections kept until a node they depend on changes.

Plain code with one lock (principle 1): the view actor feeds it the bus's
``line.changed`` events, the line registry feeds it every completed write as
it is recorded, workers insert views, and agents' handles look views up
without a message (a hit is a dict lookup and a few integer comparisons).

**Keys** are ``(task, frame, scope, budget)``; the scope is the asking role
(the permission matrix is fixed for a memory's life, so a role names one set
of readable graphs).

**Invalidation is O(1) per changed node, whatever the number of views.** The
cache keeps one global counter, the *epoch*, and per node IRI the epoch of its
last change (``changed``) and of the last time a line came to link to it
(``linked``). A change bumps the epoch and stores it for the node — one dict
write; no view is visited. A view remembers the epoch at which its
computation began (its *stamp*), the nodes it read (``deps``) and the nodes a
new link would add members to (``watch``); it is valid while no dep changed
and no watched node gained a link after its stamp. The check is made when the
view is looked up, in O(|deps|) — the size of one projection, not of the
cache — and a stale view is dropped then. The reverse index node → views is
kept for introspection (:meth:`dependents`) and for dropping a view's entries
when it is evicted; invalidation never walks it.

**A change is known twice**: from the line registry, synchronously, before
the writer's caller sees its write complete (so a projection that begins after
a write can never be served a view older than it), and from the bus event.
Whichever comes first bumps the node; the other is a no-op (versions are
compared). Which nodes a changed line *now links to* needs its new value:
the registry call only queues the line (``pending``); the queue is drained —
the value found in the writer's cache snapshot or at home, its links bumped as
``linked`` — by the next look-up or stamp, or by a bus event while any view
is kept (with none, nothing can go stale, and the queue waits for the next
stamp). A queued line whose new
value cannot be found yet (in flight between a cache and home) makes every
look-up a miss until it can: correctness over hit rate.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Any, NamedTuple

import msgpack

from gliding_actors.l3._gather import ANY_NODE

__all__ = ["LinkResolver", "ViewCache", "ViewKey"]

#: ``(task or "", frame, scope, budget or 0)``
ViewKey = tuple[str, str, str, int]
#: ``resolver(iri, version, agent_hint)`` → the IRIs the line's value at
#: ``version`` or newer links to, or None while no such value can be found.
LinkResolver = Callable[[str, int, "str | None"], "set[str] | None"]


class _View(NamedTuple):
    packed: bytes
    stamp: int
    deps: tuple[str, ...]
    watch: tuple[str, ...]


class ViewCache:
    """Views by key, with per-node epochs (see the module docstring)."""

    def __init__(self, capacity: int = 10_000, resolver: LinkResolver | None = None) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity is an integer >= 1, not {capacity!r}")
        self.capacity = capacity
        self._resolver = resolver
        self._lock = threading.Lock()
        self._views: OrderedDict[Hashable, _View] = OrderedDict()
        self._rev: dict[str, set[Hashable]] = {}
        self._epoch = 0
        self._changed: dict[str, int] = {}
        self._linked: dict[str, int] = {}
        #: newest version each node was bumped for
        self._seen: dict[str, int] = {}
        #: lines whose new links are still to be found: iri -> (version, agent hint, epoch of the change)
        self._pending: dict[str, tuple[int, str | None, int]] = {}
        self.hits = 0
        self.misses = 0
        self.stale = 0
        self.unverified = 0
        self.evicted = 0
        self.changes = 0

    # -- changes --------------------------------------------------------------------------
    def changed(self, iri: str, version: int, agent: str | None = None, *, forced: bool = False) -> bool:
        """Node ``iri`` is now at ``version`` (a completed write, delete or crash reset).

        O(1): bumps the node's epoch and queues the line for link analysis.
        A version already seen is ignored (the registry and the bus both
        report each write) unless ``forced`` (a crash reset may go back).
        Returns whether anything changed.
        """
        with self._lock:
            if not forced and version <= self._seen.get(iri, -1):
                queued = self._pending.get(iri)
                if queued is not None and queued[1] is None and agent is not None:
                    self._pending[iri] = (queued[0], agent, queued[2])  # the bus names the writer
                return False
            self._epoch += 1
            epoch = self._epoch
            self._changed[iri] = epoch
            self._changed[ANY_NODE] = epoch
            self._seen[iri] = version
            self._pending[iri] = (version, agent, epoch)
            self.changes += 1
            return True

    def _bump_links(self, iris: Iterable[str], epoch: int) -> None:
        """Mark ``iris`` as linked to as of ``epoch`` — the epoch of the change
        that made the link, not of the moment it was found: a view stamped
        after the change read the new value (its recall brought it home)."""
        linked = self._linked
        for iri in iris:
            if linked.get(iri, 0) < epoch:
                linked[iri] = epoch

    def _drain(self) -> bool:
        """Find the links of queued lines; True when nothing is left queued (lock held)."""
        pending = self._pending
        if not pending:
            return True
        resolver = self._resolver
        if resolver is None:
            pending.clear()
            return True
        for iri, (version, agent, epoch) in list(pending.items()):
            links = resolver(iri, version, agent)
            if links is None:
                continue
            del pending[iri]
            if links:
                self._bump_links(links, epoch)
        return not pending

    def drain(self) -> int:
        """Analyse queued lines now, so a look-up finds the work done (the view actor does this on
        each bus event); how many are left queued.

        With no view kept there is nothing a new link could make stale: the
        lines stay queued (one entry per line, its newest change) for the next
        stamp or look-up, and a team that never projects pays nothing for them.
        """
        with self._lock:
            if self._views:
                self._drain()
            return len(self._pending)

    # -- views ----------------------------------------------------------------------------
    def stamp(self) -> int:
        """The epoch a projection starting now is stamped with (queued lines analysed first)."""
        with self._lock:
            self._drain()
            return self._epoch

    def _valid(self, view: _View) -> bool:
        stamp = view.stamp
        changed = self._changed
        linked = self._linked
        for iri in view.deps:
            if changed.get(iri, 0) > stamp:
                return False
        for iri in view.watch:
            if linked.get(iri, 0) > stamp:
                return False
        return True

    def lookup(self, key: Hashable) -> dict[str, Any] | None:
        """A private copy of the view's result if it is still valid, else None."""
        with self._lock:
            view = self._views.get(key)
            if view is None:
                self.misses += 1
                return None
            if not self._drain():
                self.unverified += 1
                self.misses += 1
                return None
            if not self._valid(view):
                self._remove(key, view)
                self.stale += 1
                self.misses += 1
                return None
            self._views.move_to_end(key)
            self.hits += 1
            packed = view.packed
        result: dict[str, Any] = msgpack.unpackb(packed, raw=False)
        return result

    def is_valid(self, key: Hashable) -> bool:
        """Is there a view for ``key`` that a look-up would serve? (no counters move)"""
        with self._lock:
            view = self._views.get(key)
            return view is not None and self._valid(view)

    def insert(
        self, key: Hashable, result: dict[str, Any], *, stamp: int, deps: Iterable[str], watch: Iterable[str]
    ) -> bool:
        """Keep ``result`` for ``key``; False (nothing kept) if it is already stale.

        ``stamp`` is :meth:`stamp` taken before the projection's reads began:
        a change after it makes the view stale at once, even one that landed
        while the projection was being computed.
        """
        view = _View(msgpack.packb(result, use_bin_type=True), stamp, tuple(deps), tuple(watch))
        with self._lock:
            if not self._valid(view):
                return False
            old = self._views.get(key)
            if old is not None:
                self._remove(key, old)
            self._views[key] = view
            rev = self._rev
            for iri in view.deps:
                holders = rev.get(iri)
                if holders is None:
                    rev[iri] = {key}
                else:
                    holders.add(key)
            while len(self._views) > self.capacity:
                oldest, dropped = next(iter(self._views.items()))
                self._remove(oldest, dropped)
                self.evicted += 1
            return True

    def _remove(self, key: Hashable, view: _View) -> None:
        del self._views[key]
        rev = self._rev
        for iri in view.deps:
            holders = rev.get(iri)
            if holders is not None:
                holders.discard(key)
                if not holders:
                    del rev[iri]

    def dependents(self, iri: str) -> set[Hashable]:
        """Keys of the cached views that read ``iri`` (valid or not yet found stale)."""
        with self._lock:
            return set(self._rev.get(iri, ()))

    def clear(self) -> None:
        """Drop every view (epochs are kept, so stamps stay meaningful)."""
        with self._lock:
            self._views.clear()
            self._rev.clear()

    def __len__(self) -> int:
        return len(self._views)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "views": len(self._views),
                "capacity": self.capacity,
                "hits": self.hits,
                "misses": self.misses,
                "stale": self.stale,
                "unverified": self.unverified,
                "evicted": self.evicted,
                "changes": self.changes,
                "pending": len(self._pending),
                "epoch": self._epoch,
            }
