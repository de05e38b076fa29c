"""L0Store: every node ever written, as full JSON-LD, addressed by IRI.

This is the plain store: no actor, no threads of its own, no wall clock (time
comes from the injected :class:`~gliding_actors.clock.Clock`). One instance
is the single owner of the LevelDB files: the directory shards' homes write
lines down and the L1 sessions archive turns through it, and readers (L3
workers, hyperspace, context) call its read methods from their own threads,
with no lock of their own. That is safe because

* LevelDB reads (``get``, iterators, snapshots) are thread-safe and plyvel
  releases the GIL around them;
* every write path (store, delete, annotate, access-count write-down) holds
  ``_write_lock``, so read-modify-write of a record never interleaves;
* the in-memory access counters are guarded by ``_access_lock``;
* multi-key reads (index queries) run on one LevelDB snapshot, so they see one
  point in time even while the actor writes.

Layout, merge rules, tombstones, durability and errors are documented in
``docs/L0.md``.

The class is split over private modules: ``_base`` (LevelDB handle, lifecycle, access counts),
``_writes`` (write path), ``_verify`` (diagnostics), ``_checks``; the store calls and reads are here.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from typing import Any, cast

import msgpack
import plyvel

from gliding_actors.errors import CorruptRecord, InvalidInput, StorageError, show
from gliding_actors.l0 import _keys as K
from gliding_actors.l0._base import leveldb_options, storage_error, typed_storage_errors
from gliding_actors.l0._checks import (
    _bound,
    _check_version_arg,
    _iri_bytes,
    _label,
    _labels,
    _tags_arg,
)
from gliding_actors.l0._entry import (
    F_ACCESS_COUNT,
    F_CREATED,
    F_IMPORTANCE,
    F_LAST_ACCESSED,
    RECORD_LEN,
    RECORD_VERSION,
    L0Entry,
    bad_record,
    decode_access,
    decode_record,
    decode_tombstone,
)
from gliding_actors.l0._verify import _StoreVerify
from gliding_actors.l0._writes import _F_CONTENT, _F_VERSION, UNSET, _StoreWrites

__all__ = ["UNSET", "L0Store", "leveldb_options"]

_unpackb = msgpack.unpackb
_tuple_new = tuple.__new__
_iri_match = K.iri_match
_NODE = K.NODE
_ACCESS = K.ACCESS
_TOMB = K.TOMBSTONE


class L0Store(_StoreWrites, _StoreVerify):
    """The LevelDB-backed node store (see the module docstring for threading).

    ``access_flush_every``: reads are counted in memory and written down in one
    batch every that many reads, on :meth:`flush` and on :meth:`close` (never a
    write per read). Counts not yet written down are lost if the process dies;
    reads always see them. None (the default) takes
    ``config.access_flush_every``.
    """

    # -- writes ----------------------------------------------------------------

    def store(
        self,
        entry: L0Entry,
        *,
        merge: bool = True,
        sync: bool | None = None,
        expect_version: int | None = None,
    ) -> L0Entry:
        """Write one node and its index entries in one LevelDB write batch.

        ``merge=True`` merges into a stored node with the same IRI (tags and
        types unioned, importance averaged, the longer content kept, metadata
        merged with the new value winning; see docs/L0.md). ``merge=False``
        replaces it, keeping only ``created_at`` and the access statistics: the
        write-down path of the coherence layer, where the latest value must win
        even if it is shorter.

        ``entry.version``: 0 means "current version + 1", where the current
        version is the stored node's, or its tombstone's if it was deleted (1
        for a node never written); a positive version is recorded as given (the
        coherence layer's line version) and may not be lower than the stored
        one (ConflictError; equal is an idempotent re-flush) nor lower than or
        equal to a tombstone's. ``expect_version`` makes the write a
        compare-and-set against :meth:`retrieve_version` (0 also matches a
        deleted node: "must be absent").

        ``sync=True`` fsyncs before returning; ``None`` follows
        ``config.sync_all_writes``. Returns the entry as stored.
        """
        iri_b, fields, packed = self._prepare(entry)
        do_sync = self._sync_all if sync is None else self._sync(sync)
        if expect_version is not None:
            _check_version_arg(expect_version, "expect_version")
        with self._write_lock:
            if self._closed:
                raise StorageError(f"L0 store {self._path} is closed")
            wb = self._db.write_batch(sync=do_sync)
            fields = self._apply(
                wb, iri_b, fields, packed, merge, expect_version, float(self._clock.now()), None
            )
            self._commit(wb, do_sync)
        if self._listeners:
            self._announce((iri_b.decode(),))
        if not self._pending:
            return _tuple_new(L0Entry, fields)
        return self._with_pending(fields)

    def store_many(
        self,
        entries: Iterable[L0Entry],
        *,
        merge: bool = True,
        sync: bool | None = None,
    ) -> list[L0Entry]:
        """Write many nodes as one atomic batch (all or nothing).

        Entries are applied in order, so two entries for one IRI merge (or
        replace) exactly as two :meth:`store` calls would. Any invalid entry
        refuses the whole batch before anything is written.
        """
        if isinstance(entries, (str, bytes, Mapping)):
            raise InvalidInput("store_many takes an iterable of L0Entry")
        prepare = self._prepare
        prepared = [prepare(e) for e in entries]
        do_sync = self._sync(sync)
        out: list[list[Any]] = []
        with self._write_lock:
            db = self._live()
            wb = db.write_batch(sync=do_sync)
            now = float(self._clock.now())
            overlay: dict[bytes, list[Any]] = {}
            apply = self._apply
            for iri_b, fields, packed in prepared:
                out.append(apply(wb, iri_b, fields, packed, merge, None, now, overlay))
            self._commit(wb, do_sync)
        if self._listeners:
            self._announce([iri_b.decode() for iri_b, _fields, _packed in prepared])
        return [self._with_pending(f) for f in out]

    def store_jsonld_node(
        self,
        node: Mapping[str, Any],
        *,
        importance: float = 0.5,
        tags: Iterable[str] = (),
        named_graph: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        merge: bool = True,
        sync: bool | None = None,
        expect_version: int | None = None,
    ) -> L0Entry:
        """Store a JSON-LD node addressed by its own ``@id`` (required).

        Its ``@type`` feeds the type index and its ``@context`` becomes the
        entry's ``jsonld_context``. Same rules as :meth:`store`.
        """
        if not isinstance(node, dict):
            raise InvalidInput(f"a JSON-LD node must be an object, not {type(node).__name__}")
        iri = node.get("@id")
        if iri is None:
            raise InvalidInput("a JSON-LD node needs an @id to be stored in L0", path=("@id",))
        entry = L0Entry(
            iri=iri,
            content=node,
            importance=importance,
            tags=_tags_arg(tags, "tags"),
            named_graph=named_graph,
            metadata=metadata if metadata is not None else {},
        )
        return self.store(entry, merge=merge, sync=sync, expect_version=expect_version)

    # -- reads -----------------------------------------------------------------

    def retrieve(self, iri: str, *, touch: bool = True) -> L0Entry | None:
        """The entry stored under ``iri``, or None (never written, or deleted).

        ``touch=True`` counts this read: ``access_count`` and ``last_accessed``
        in the returned entry already include it (written down in batches, see
        the class docstring). ``touch=False`` is for inspection and bookkeeping
        reads that are not uses of the node. Safe from any thread.
        """
        if type(iri) is not str:
            raise InvalidInput(f"an IRI must be a string, not {type(iri).__name__}", path=("iri",))
        if self._closed:
            raise StorageError(f"L0 store {self._path} is closed")
        try:
            iri_b = iri.encode()
        except UnicodeEncodeError:
            raise InvalidInput(f"invalid IRI {show(iri)}", path=("iri",)) from None
        generation = self._generation
        get = self._get
        key = _NODE + iri_b
        try:
            raw = get(key)
        except plyvel.Error as exc:
            raise storage_error(self._path, exc) from exc
        if raw is None:
            # Checked only on a miss: a hit proves the IRI was valid when stored.
            if _iri_match(iri) is None:
                raise InvalidInput(f"invalid IRI {show(iri)}", path=("iri",))
            return None
        # decode_record(), inlined (the hot path of L0); decoded before
        # counting: a corrupt record raises and is not counted
        try:
            fields = _unpackb(raw)
        except Exception as exc:  # msgpack raises several unrelated types
            raise CorruptRecord(
                f"L0 record {key!r} does not decode: {type(exc).__name__}: {exc}"
            ) from exc
        if (
            type(fields) is not list
            or len(fields) != RECORD_LEN
            or fields[0] != RECORD_VERSION
            or type(fields[1]) is not dict
        ):
            raise bad_record(key, fields)
        fields[0] = iri
        akey = _ACCESS + iri_b
        # A node with reads pending since the last write-down carries its stored
        # count in its slot: its access key need not be read (re-checked under
        # the lock below, with the generation).
        known = touch and iri in self._pending
        if known:
            fields.append(0)  # both set below
            fields.append(0.0)
        else:
            try:
                araw = get(akey)
            except plyvel.Error as exc:
                raise storage_error(self._path, exc) from exc
            if araw is None:  # never written down: 0 reads, last accessed when created
                fields.append(0)
                fields.append(fields[F_CREATED])
            else:
                fields.extend(decode_access(akey, araw))
            if not touch:
                if not self._pending:
                    return _tuple_new(L0Entry, fields)
                return self._with_pending(fields)
        now = self._clock.now()
        with self._access_lock:
            if generation != self._generation:
                # A write-down or a delete finished while we read: our records
                # may predate it (and its counts have left _pending).
                known = False
                raw = get(key)
                if raw is None:
                    return None
                araw = get(akey)
                fields = decode_record(
                    key, raw, iri, None if araw is None else decode_access(akey, araw)
                )
            pending = self._pending
            slot = pending.get(iri)
            if slot is None:
                if known:  # cannot happen: a slot leaves only with a generation bump
                    araw = get(akey)
                    fields[F_ACCESS_COUNT] = 0 if araw is None else decode_access(akey, araw)[0]
                pending[iri] = slot = [fields[F_ACCESS_COUNT], 1, now, akey]
            else:
                slot[1] += 1
                slot[2] = now
            self._reads += 1
            due = self._reads >= self._flush_every
            fields[F_ACCESS_COUNT] = slot[0] + slot[1]
        fields[F_LAST_ACCESSED] = now
        if due:
            self.flush()
        return _tuple_new(L0Entry, fields)

    def retrieve_jsonld_node(self, iri: str, *, touch: bool = True) -> dict[str, Any] | None:
        """The stored JSON-LD node itself (the entry's ``content``), or None.

        With ``touch=False`` only the node is read: not its access statistics,
        which the content does not need."""
        if touch:
            entry = self.retrieve(iri)
            return None if entry is None else entry.content
        if type(iri) is not str:
            raise InvalidInput(f"an IRI must be a string, not {type(iri).__name__}", path=("iri",))
        try:
            key = _NODE + iri.encode()
        except UnicodeEncodeError:
            raise InvalidInput(f"invalid IRI {show(iri)}", path=("iri",)) from None
        raw = self._live().get(key)
        if raw is None:
            if _iri_match(iri) is None:
                raise InvalidInput(f"invalid IRI {show(iri)}", path=("iri",))
            return None
        content: dict[str, Any] = decode_record(key, raw, iri)[_F_CONTENT]
        return content

    def retrieve_version(self, iri: str) -> int:
        """The current version of ``iri``: the stored node's, the version of its
        delete if it was deleted (its tombstone's), 0 if it was never written.
        Not an access. Safe from any thread."""
        iri_b = _iri_bytes(iri)
        db = self._live()
        key = _NODE + iri_b
        raw = db.get(key)
        if raw is None:
            # Node and tombstone from one snapshot: a write in between moves
            # a version from one key to the other.
            tkey = _TOMB + iri_b
            with db.snapshot() as snap:
                raw = snap.get(key)
                if raw is None:
                    traw = snap.get(tkey)
                    return 0 if traw is None else decode_tombstone(tkey, traw)[0]
        version: int = decode_record(key, raw, iri)[_F_VERSION]
        return version

    def __contains__(self, iri: object) -> bool:
        if type(iri) is not str or K.iri_match(iri) is None:
            return False
        return self._live().get(K.NODE + iri.encode()) is not None

    def count(self) -> int:
        """Number of stored nodes (a key-only scan; tombstones are not nodes)."""
        n = 0
        with self._live().iterator(prefix=K.NODE, include_value=False) as it:
            for _ in it:
                n += 1
        return n

    def list_graphs(self) -> list[str]:
        """Names of the named graphs that hold at least one node, sorted.

        Skips from graph to graph with iterator seeks: the cost grows with the
        number of graphs, not of nodes.
        """
        names: list[str] = []
        with self._live().iterator(prefix=K.GRAPH, include_value=False) as it:
            for key in it:
                end = key.index(K.SEP, len(K.GRAPH))
                name = key[len(K.GRAPH) : end]
                names.append(name.decode())
                it.seek(K.GRAPH + name + b"\x01")
        return names

    def query(
        self,
        *,
        tags: Iterable[str] | None = None,
        graph: str | None = None,
        node_type: str | None = None,
        prefix: str | None = None,
        min_importance: float | None = None,
        max_importance: float | None = None,
        limit: int | None = None,
    ) -> list[L0Entry]:
        """Entries matching every filter given, sorted by IRI (no filter: all).

        ``tags`` is an intersection (a node must carry all of them). Index
        filters are range scans of their index; ``prefix`` alone is a range
        scan of the nodes; importance alone scans the importance index. Reads
        one snapshot; does not count as accesses.
        """
        found = self._query(
            tags, graph, node_type, prefix, min_importance, max_importance, limit, True
        )
        return cast(list[L0Entry], found)

    def query_iris(
        self,
        *,
        tags: Iterable[str] | None = None,
        graph: str | None = None,
        node_type: str | None = None,
        prefix: str | None = None,
        min_importance: float | None = None,
        max_importance: float | None = None,
        limit: int | None = None,
    ) -> list[str]:
        """Like :meth:`query` but only the IRIs (cheaper: nodes are read only when
        an importance bound must be checked against them)."""
        found = self._query(
            tags, graph, node_type, prefix, min_importance, max_importance, limit, False
        )
        return cast(list[str], found)

    def query_by_tags(self, tags: Iterable[str]) -> list[L0Entry]:
        """Nodes carrying every one of ``tags``."""
        return self.query(tags=_tags_arg(tags, "tags"))

    def query_by_graph(self, graph: str) -> list[L0Entry]:
        """Nodes of one named graph."""
        return self.query(graph=_label(graph, "named graph"))

    def query_by_type(self, node_type: str) -> list[L0Entry]:
        """Nodes of one JSON-LD type (as written in ``@type``/``jsonld_types``)."""
        return self.query(node_type=_label(node_type, "type"))

    def query_by_prefix(self, prefix: str) -> list[L0Entry]:
        """Nodes whose IRI starts with ``prefix`` (one range scan)."""
        return self.query(prefix=prefix)

    def query_by_importance(self, lo: float = 0.0, hi: float = 1.0) -> list[L0Entry]:
        """Nodes with ``lo <= importance <= hi``."""
        return self.query(min_importance=lo, max_importance=hi)

    def _query(
        self,
        tags: Iterable[str] | None,
        graph: str | None,
        node_type: str | None,
        prefix: str | None,
        lo: float | None,
        hi: float | None,
        limit: int | None,
        want_entries: bool,
    ) -> list[L0Entry] | list[str]:
        tag_list = _labels(_tags_arg(tags, "tags"), "tags") if tags is not None else []
        if graph is not None:
            _label(graph, "named graph")
        if node_type is not None:
            _label(node_type, "type")
        prefix_b = b""
        if prefix is not None:
            if type(prefix) is not str or K.iri_prefix_match(prefix) is None:
                raise InvalidInput(f"invalid IRI prefix {show(prefix)}", path=("prefix",))
            prefix_b = prefix.encode()
        lo = _bound(lo, "min_importance")
        hi = _bound(hi, "max_importance")
        if limit is not None and (type(limit) is not int or limit < 0):
            raise InvalidInput(f"limit must be a non-negative int, not {show(limit)}", path=("limit",))
        has_bounds = lo is not None or hi is not None
        lo_f = 0.0 if lo is None else max(lo, 0.0)
        hi_f = 1.0 if hi is None else min(hi, 1.0)
        if has_bounds and lo_f > hi_f:
            return []

        db = self._live()
        with db.snapshot() as snap:
            sets: list[set[bytes]] = []
            for tag in tag_list:
                sets.append(_index_iris(snap, K.TAG, tag))
            if graph is not None:
                sets.append(_index_iris(snap, K.GRAPH, graph))
            if node_type is not None:
                sets.append(_index_iris(snap, K.TYPE, node_type))
            if not sets and has_bounds and not prefix_b:
                # Importance is the only filter: one range scan of its index.
                start = K.importance_bound(lo_f)
                stop = K.importance_after(hi_f)
                found = set()
                with snap.iterator(start=start, stop=stop, include_value=False) as it:
                    for key in it:
                        found.add(K.iri_of_importance_key(key))
                sets.append(found)
                has_bounds = False  # already applied
            if not sets:
                return self._scan_nodes(snap, prefix_b, lo_f, hi_f, has_bounds, limit, want_entries)
            sets.sort(key=len)
            candidates = sets[0].intersection(*sets[1:])
            if prefix_b:
                candidates = {i for i in candidates if i.startswith(prefix_b)}
            ordered = sorted(candidates)
            if not want_entries and not has_bounds:
                if limit is not None:
                    ordered = ordered[:limit]
                return [i.decode() for i in ordered]
            rows: list[list[Any]] = []
            get = snap.get
            for iri_b in ordered:
                if limit is not None and len(rows) >= limit:
                    break
                key = _NODE + iri_b
                raw = get(key)
                if raw is None:
                    raise CorruptRecord(f"L0 index points at a missing node {key!r}")
                access = self._access_of(_ACCESS + iri_b, get) if want_entries else None
                fields = decode_record(key, raw, iri_b.decode(), access)
                if has_bounds and not lo_f <= fields[F_IMPORTANCE] <= hi_f:
                    continue
                rows.append(fields)
            return self._finish(rows, want_entries)

    def _scan_nodes(
        self,
        snap: Any,
        prefix_b: bytes,
        lo: float,
        hi: float,
        has_bounds: bool,
        limit: int | None,
        want_entries: bool,
    ) -> list[L0Entry] | list[str]:
        start = _NODE + prefix_b
        n = len(_NODE)
        if not want_entries and not has_bounds:
            iris: list[str] = []
            with snap.iterator(prefix=start, include_value=False) as it:
                for key in it:
                    if limit is not None and len(iris) >= limit:
                        break
                    iris.append(key[n:].decode())
            return iris
        na = len(_ACCESS)
        rows: list[Any] = []
        append = rows.append
        unpackb = _unpackb
        new = _tuple_new
        entry = L0Entry
        stop = -1 if limit is None else limit
        with snap.iterator(prefix=start) as it, snap.iterator(prefix=_ACCESS + prefix_b) as acc:
            next_access = next(acc, None)
            for key, raw in it:
                if len(rows) == stop:
                    break
                iri_b = key[n:]
                # decode_record(), inlined: this is the loop of every scan
                try:
                    arr = unpackb(raw)
                except Exception as exc:  # msgpack raises several unrelated types
                    raise CorruptRecord(
                        f"L0 record {key!r} does not decode: {type(exc).__name__}: {exc}"
                    ) from exc
                if (
                    type(arr) is not list
                    or len(arr) != RECORD_LEN
                    or arr[0] != RECORD_VERSION
                    or type(arr[1]) is not dict
                ):
                    raise bad_record(key, arr)
                arr[0] = iri_b.decode()
                if next_access is None:
                    arr.append(0)
                    arr.append(arr[F_CREATED])
                else:
                    # Access keys sort like their nodes: walk both runs in step.
                    while next_access is not None and next_access[0][na:] < iri_b:
                        # an access key without node (verify reports it)
                        next_access = next(acc, None)
                    if next_access is not None and next_access[0][na:] == iri_b:
                        arr.extend(decode_access(*next_access))
                        next_access = next(acc, None)
                    else:
                        arr.append(0)
                        arr.append(arr[F_CREATED])
                if has_bounds and not lo <= arr[F_IMPORTANCE] <= hi:
                    continue
                append(new(entry, arr) if want_entries else arr[0])
        if want_entries:
            return self._with_pending_all(rows)
        return rows

    def _finish(self, rows: list[list[Any]], want_entries: bool) -> list[L0Entry] | list[str]:
        """Entries (with the access counts not yet written down) or their IRIs."""
        if not want_entries:
            return [fields[0] for fields in rows]
        new = _tuple_new
        return self._with_pending_all([new(L0Entry, fields) for fields in rows])


def _index_iris(snap: Any, namespace: bytes, label: str) -> set[bytes]:
    prefix = K.label_prefix(namespace, label)
    n = len(prefix)
    with snap.iterator(prefix=prefix, include_value=False) as it:
        return {key[n:] for key in it}


# LevelDB's own errors (a damaged table met by a read, a failed write) surface as StorageError naming the
# database, from every public method: retrieve() converts them inline (its path is L0's hottest), the others
# through one wrapper each.
for _name, _member in list(vars(L0Store).items()) + [
    (n, m) for base in L0Store.__mro__[1:] for n, m in vars(base).items() if n not in vars(L0Store)
]:
    if not _name.startswith("_") and _name != "retrieve" and inspect.isfunction(_member):
        setattr(L0Store, _name, typed_storage_errors(_member))
