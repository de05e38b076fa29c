"""L0Store: every node ever written, as full JSON-LD, addressed by IRI.

This is the plain store: no actor, no threads of its own, no wall clock (time
comes from the injected :class:`~gliding_actors.clock.Clock`). The L0 actor
hosts one instance and is the only writer; L3 projection workers call the read
methods of the *same instance* from their own threads. That is safe because

* LevelDB reads (``get``, iterators, snapshots) are thread-safe and plyvel
  releases the GIL around them;
* every write path (store, delete, annotate, access-count write-down) holds
  ``_write_lock``, so read-modify-write of a record never interleaves;
* the in-memory access counters are guarded by ``_access_lock``;
* multi-key reads (index queries) run on one LevelDB snapshot, so they see one
  point in time even while the actor writes.

Layout, merge rules, tombstones, durability and errors are documented in
``docs/L0.md``.
"""

from __future__ import annotations

import enum
import hashlib
import math
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self, cast

import msgpack
import plyvel

from gliding_actors.clock import Clock
from gliding_actors.errors import (
    ConflictError,
    CorruptRecord,
    IncompatibleFormat,
    InvalidInput,
    StorageError,
)
from gliding_actors.l0 import _keys as K
from gliding_actors.l0._config import L0Config
from gliding_actors.l0._canonical import JSON_ERRORS, canonical, check_json
from gliding_actors.l0._entry import (
    _EMPTY,
    F_ACCESS_COUNT,
    F_CREATED,
    F_IMPORTANCE,
    F_LAST_ACCESSED,
    MESI_STATES,
    RECORD_LEN,
    RECORD_VERSION,
    L0Entry,
    bad_record,
    check_record_fields,
    decode_access,
    decode_record,
    decode_tombstone,
    entry_from_fields,
    pack_access,
    pack_record,
    pack_small_access,
    pack_tombstone,
    packb,
)

__all__ = ["UNSET", "L0Store"]


class _Unset(enum.Enum):
    UNSET = 0


#: "Leave this field as it is" (for :meth:`L0Store.annotate`, where None means "clear").
UNSET = _Unset.UNSET

# Field positions in a record / entry (see _entry.py).
_FIELDS = L0Entry._fields
_F_CONTENT = _FIELDS.index("content")
_F_TAGS = _FIELDS.index("tags")
_F_GRAPH = _FIELDS.index("named_graph")
_F_TYPES = _FIELDS.index("jsonld_types")
_F_CONTEXT = _FIELDS.index("jsonld_context")
_F_METADATA = _FIELDS.index("metadata")
_F_VERSION = _FIELDS.index("version")
_F_VECTOR_ID = _FIELDS.index("vector_id")
_F_MESI = _FIELDS.index("mesi_state")
_F_CREATED = _FIELDS.index("created_at")
_F_UPDATED = _FIELDS.index("updated_at")
_F_HASH = _FIELDS.index("content_hash")
_F_SIZE = _FIELDS.index("content_size")

_sha256 = hashlib.sha256
_unpackb = msgpack.unpackb
_tuple_new = tuple.__new__
_iri_match = K.iri_match
_label_match = K.label_match
_pack_double = K._pack_double
_NODE = K.NODE
_ACCESS = K.ACCESS
_TOMB = K.TOMBSTONE
_TAG = K.TAG
_GRAPH = K.GRAPH
_TYPE = K.TYPE
_IMPORTANCE = K.IMPORTANCE
_SEP = K.SEP
#: Validated labels remembered per namespace (label -> its index-key prefix);
#: the caches are emptied when they reach this size.
_LABEL_CACHE_MAX = 4096


def leveldb_options(config: L0Config) -> dict[str, Any]:
    """The options L0 opens LevelDB with (``plyvel.DB`` keywords): checked,
    with Bloom filters, its memory bounded by ``config`` rather than left to
    LevelDB's defaults. ``bench l0`` opens its raw baseline with the same."""
    return {
        "create_if_missing": True,
        "paranoid_checks": True,
        "bloom_filter_bits": 10,
        "write_buffer_size": config.write_buffer_bytes,
        "lru_cache_size": config.block_cache_bytes,
        "max_open_files": config.max_open_files,
        "block_size": config.block_size_bytes,
    }


class L0Store:
    """The LevelDB-backed node store (see the module docstring for threading).

    ``access_flush_every``: reads are counted in memory and written down in one
    batch every that many reads, on :meth:`flush` and on :meth:`close` (never a
    write per read). Counts not yet written down are lost if the process dies;
    reads always see them. None (the default) takes
    ``config.access_flush_every``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Clock,
        config: L0Config | None = None,
        access_flush_every: int | None = None,
    ) -> None:
        self._config = config if config is not None else L0Config()
        if access_flush_every is None:
            access_flush_every = self._config.access_flush_every
        if (
            isinstance(access_flush_every, bool)
            or not isinstance(access_flush_every, int)
            or access_flush_every < 1
        ):
            raise InvalidInput(
                f"access_flush_every must be a positive int, not {access_flush_every!r}"
            )
        self._path = os.fspath(path)
        self._clock = clock
        self._max_bytes = self._config.max_node_bytes
        self._sync_all = self._config.sync_all_writes
        self._flush_every = access_flush_every
        self._write_lock = threading.RLock()
        self._access_lock = threading.Lock()
        # iri -> [stored access count, reads not yet written down, time of the
        # last one, access key]. The stored count is read with the first
        # pending read; it stays right until the next write-down, the only
        # writer of access keys.
        self._pending: dict[str, list[Any]] = {}
        self._reads = 0
        # Bumped (under _access_lock) after every write-down of access counts and
        # every delete; a reader that overlapped one re-reads (see retrieve()).
        self._generation = 0
        # Validated tags / graph names / types -> their index-key prefix
        # (namespace + UTF-8 + NUL): a write checks a known label with one dict
        # lookup instead of a regex, and builds its index keys with one concat.
        self._tag_keys: dict[str, bytes] = {}
        self._graph_keys: dict[str, bytes] = {}
        self._type_keys: dict[str, bytes] = {}
        self._closed = True
        try:
            self._db = plyvel.DB(self._path, **leveldb_options(self._config))
        except plyvel.CorruptionError as exc:
            raise StorageError(f"L0 database {self._path} is corrupt: {exc}") from exc
        except plyvel.Error as exc:
            raise StorageError(f"cannot open L0 database {self._path}: {exc}") from exc
        try:
            self._check_format()
        except BaseException:
            self._db.close()
            raise
        self._closed = False
        self._get = self._db.get

    # -- lifecycle -------------------------------------------------------------

    @property
    def path(self) -> str:
        return self._path

    @property
    def config(self) -> L0Config:
        return self._config

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_format(self) -> None:
        raw = self._db.get(K.META_FORMAT)
        if raw is None:
            with self._db.iterator(include_value=False) as it:
                first = next(it, None)
            if first is not None:
                raise CorruptRecord(
                    f"L0 database {self._path} has data but no format key {K.META_FORMAT!r} "
                    f"(first key {first!r}); not an L0 store, or the key was lost"
                )
            self._db.put(K.META_FORMAT, packb(K.FORMAT_VERSION), sync=True)
            return
        try:
            version = _unpackb(raw)
        except Exception as exc:
            raise CorruptRecord(f"L0 format key {K.META_FORMAT!r} does not decode: {exc}") from exc
        if type(version) is not int or version < 1:
            raise CorruptRecord(
                f"L0 format key {K.META_FORMAT!r} holds {version!r}, not a format version"
            )
        if version > K.FORMAT_VERSION:
            raise IncompatibleFormat(
                f"L0 database {self._path} has format version {version}; "
                f"this build reads format <= {K.FORMAT_VERSION}. Upgrade gliding_actors to open it."
            )
        if version < K.FORMAT_VERSION:
            # Format 1 had no tombstones; its keys are read as they are. Record
            # the new version before anything writes one, so that an older
            # build refuses the database instead of ignoring its tombstones.
            self._db.put(K.META_FORMAT, packb(K.FORMAT_VERSION), sync=True)

    def close(self) -> None:
        """Write pending access counts down (synchronously) and close. Idempotent.

        Call it only once other threads have stopped reading: LevelDB must not
        be closed under a read in flight.
        """
        with self._write_lock:
            if self._closed:
                return
            try:
                self.flush(sync=True)
            finally:
                self._closed = True
                self._db.close()

    def compact(self) -> None:
        """Compact the whole keyspace (reclaims space after many deletes/merges)."""
        with self._write_lock:
            self._live().compact_range()

    def memory_bytes(self) -> int:
        """LevelDB's own estimate of the memory it holds: memtables plus block cache.

        What the config bounds (``l0.write_buffer_bytes`` twice, plus
        ``l0.block_cache_bytes``), so a soak can show this part reached its cap
        and stopped; the open tables' index and filter blocks are not in it.
        """
        raw = self._live().get_property(b"leveldb.approximate-memory-usage")
        return int(raw) if raw else 0

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"L0Store({self._path!r}{', closed' if self._closed else ''})"

    def _live(self) -> plyvel.DB:
        if self._closed:
            raise StorageError(f"L0 store {self._path} is closed")
        return self._db

    def _sync(self, sync: bool | None) -> bool:
        if sync is None:
            return self._sync_all
        if type(sync) is not bool:
            raise InvalidInput(f"sync must be true, false or None, not {sync!r}")
        return sync or self._sync_all

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
            wb.write()
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
            wb.write()
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

    def delete(self, iri: str, *, sync: bool | None = None, version: int | None = None) -> bool:
        """Delete a node: remove it, its index entries and its access statistics,
        and leave a tombstone, in one batch. True if a node was there.

        The tombstone (key ``d:`` + IRI) records the version of the delete, so
        that versions continue across a delete and a restart: the delete is a
        write (stored version + 1, or ``version`` when given: the coherence
        layer's line version, which must be newer than the stored node's), and
        a node stored later continues from it. ``version`` on a node already
        deleted (or never written) records a tombstone at that version, if it
        is not older than the one there (equal: an idempotent re-flush);
        without ``version``, deleting an absent node changes nothing.
        """
        iri_b = _iri_bytes(iri)
        do_sync = self._sync(sync)
        _check_version_arg(version, "version")
        key = _NODE + iri_b
        tkey = _TOMB + iri_b
        with self._write_lock:
            db = self._live()
            raw = db.get(key)
            now = float(self._clock.now())
            if raw is None:
                if not version:
                    return False
                traw = db.get(tkey)
                value = pack_tombstone(version, now)
                if traw is not None:
                    current = decode_tombstone(tkey, traw)[0]
                    if version < current:
                        raise ConflictError(
                            f"{iri}: a delete at version {version} is older than "
                            f"its tombstone's version {current}"
                        )
                    if version == current:
                        value = traw  # an idempotent re-flush: written again, unchanged
                wb = db.write_batch(sync=do_sync)
                wb.put(tkey, value)
                wb.write()
                return False
            old = decode_record(key, raw, iri)
            current = old[_F_VERSION]
            if version:
                if version <= current:
                    raise ConflictError(
                        f"{iri}: a delete at version {version} is not newer than "
                        f"the stored version {current}"
                    )
            else:
                version = current + 1
            wb = db.write_batch(sync=do_sync)
            for k in _index_keys_of(iri_b, old):
                wb.delete(k)
            wb.delete(key)
            wb.delete(_ACCESS + iri_b)
            wb.put(tkey, pack_tombstone(version, now))
            wb.write()
            with self._access_lock:
                self._pending.pop(iri, None)
                self._generation += 1
        return True

    def delete_graph(self, name: str, *, sync: bool | None = None) -> int:
        """Delete every node of named graph ``name`` (one atomic batch, each node
        leaving a tombstone at its version + 1, as :meth:`delete`); the count."""
        prefix = K.label_prefix(K.GRAPH, _label(name, "named graph"))
        do_sync = self._sync(sync)
        n = len(prefix)
        with self._write_lock:
            db = self._live()
            now = float(self._clock.now())
            wb = db.write_batch(sync=do_sync)
            gone: list[str] = []
            with db.iterator(prefix=prefix, include_value=False) as it:
                for ikey in it:
                    iri_b = ikey[n:]
                    key = _NODE + iri_b
                    raw = db.get(key)
                    iri = iri_b.decode()
                    if raw is None:
                        raise CorruptRecord(
                            f"L0 index key {ikey!r} points at a missing node {key!r}"
                        )
                    old = decode_record(key, raw, iri)
                    for k in _index_keys_of(iri_b, old):
                        wb.delete(k)
                    wb.delete(key)
                    wb.delete(_ACCESS + iri_b)
                    wb.put(_TOMB + iri_b, pack_tombstone(old[_F_VERSION] + 1, now))
                    gone.append(iri)
            wb.write()
            with self._access_lock:
                for iri in gone:
                    self._pending.pop(iri, None)
                self._generation += 1
        return len(gone)

    def annotate(
        self,
        iri: str,
        *,
        vector_id: int | None | _Unset = UNSET,
        mesi_state: str | _Unset = UNSET,
        sync: bool | None = None,
    ) -> L0Entry | None:
        """Set bookkeeping fields without a new version; None if the node is absent.

        The vector engine records its ``vector_id`` and the coherence layer its
        last known ``mesi_state`` here: neither is a change of the node, so
        neither bumps ``version`` or ``updated_at``.
        """
        iri_b = _iri_bytes(iri)
        if vector_id is not UNSET and vector_id is not None and not _is_int64(vector_id):
            raise InvalidInput(
                f"vector_id must be a 64-bit int or None, not {vector_id!r}", path=("vector_id",)
            )
        if mesi_state is not UNSET and mesi_state not in MESI_STATES:
            raise InvalidInput(
                f"mesi_state must be one of I, S, E, M, not {mesi_state!r}", path=("mesi_state",)
            )
        do_sync = self._sync(sync)
        key = _NODE + iri_b
        with self._write_lock:
            db = self._live()
            raw = db.get(key)
            if raw is None:
                return None
            fields = decode_record(key, raw, iri, self._access_of(_ACCESS + iri_b))
            if vector_id is not UNSET:
                fields[_F_VECTOR_ID] = vector_id
            if mesi_state is not UNSET:
                fields[_F_MESI] = mesi_state
            db.put(key, _pack(fields, packb(fields[_F_CONTENT])), sync=do_sync)
        return self._with_pending(fields)

    def flush(self, *, sync: bool = False) -> int:
        """Write the in-memory access counts down in one batch; how many nodes.

        Each node's statistics are one small blind put of its access key: no
        read, and the node record is never rewritten. ``sync=True`` also fsyncs
        LevelDB's log, making every earlier unsynchronised write durable
        against an OS crash too.
        """
        with self._write_lock:
            db = self._live()
            with self._access_lock:
                pending, self._pending = self._pending, {}
                self._reads = 0
                try:
                    wb = db.write_batch(sync=sync)
                    put = wb.put
                    pack = pack_access
                    small = pack_small_access  # pack_access() of a count below 128
                    for stored, reads, when, akey in pending.values():
                        count = stored + reads
                        put(
                            akey,
                            small(0x92, count, 0xCB, when) if count < 128 else pack(count, when),
                        )
                    if sync and not pending:
                        # An empty batch may not reach the log; rewrite the format
                        # key so that the fsync happens.
                        put(K.META_FORMAT, packb(K.FORMAT_VERSION))
                    wb.write()
                except BaseException:
                    self._pending = pending
                    raise
                finally:
                    self._generation += 1
        return len(pending)

    def _access_of(self, key: bytes, get: Any = None) -> tuple[int, float] | None:
        """The stored ``(access_count, last_accessed)`` under access ``key``."""
        raw = (get or self._get)(key)
        return None if raw is None else decode_access(key, raw)

    # -- write internals -------------------------------------------------------

    def _prepare(self, entry: L0Entry) -> tuple[bytes, list[Any], bytes]:
        """Validate and normalise one entry: ``(iri bytes, record fields in entry
        order, the content packed with msgpack)``.

        Raises InvalidInput before anything is written. Store-owned fields are
        filled in by _apply; content_hash and content_size here, from one
        serialisation of the content that is also its JSON check.
        """
        if type(entry) is not L0Entry and not isinstance(entry, L0Entry):
            raise InvalidInput(f"expected an L0Entry, not {type(entry).__name__}")
        (iri, content, importance, tags, graph, types, context, metadata, version, vector_id,
         mesi, _created, _updated, _hash, _size, _count, _last) = entry  # fmt: skip
        if type(iri) is not str or _iri_match(iri) is None:
            raise InvalidInput(
                f"invalid IRI {iri!r}: need scheme:rest without spaces or control characters",
                path=("iri",),
            )
        if type(content) is not dict and not isinstance(content, dict):
            raise InvalidInput(
                f"content of {iri} must be a JSON object, not {type(content).__name__}",
                path=("content",),
            )
        if "@id" in content and content["@id"] != iri:
            raise InvalidInput(
                f"content @id {content['@id']!r} differs from the entry IRI {iri!r}",
                path=("content", "@id"),
            )
        try:
            text = canonical(content)
        except JSON_ERRORS as exc:
            raise InvalidInput(
                f"content of {iri} is not JSON-serialisable: {exc}", path=("content",)
            ) from exc
        size = len(text)
        if size > self._max_bytes:
            raise InvalidInput(
                f"node {iri} is {size} bytes of JSON; the limit (l0.max_node_bytes) is {self._max_bytes}",
                path=("content",),
            )
        try:
            # Packed here even when a merge will keep the stored content: what
            # JSON msgpack cannot hold (uuid.UUID, enums: orjson takes them)
            # must be refused whatever is stored.
            packed: bytes = packb(content)
        except JSON_ERRORS as exc:
            raise InvalidInput(
                f"content of {iri} is not JSON-serialisable: {exc}", path=("content",)
            ) from exc
        if type(importance) is not float:
            if isinstance(importance, bool) or not isinstance(importance, (int, float)):
                raise InvalidInput(
                    f"importance must be a number in [0, 1], not {importance!r}",
                    path=("importance",),
                )
            importance = float(importance)
        if not 0.0 <= importance <= 1.0:
            raise InvalidInput(
                f"importance must be in [0, 1], not {importance!r}", path=("importance",)
            )
        importance += 0.0  # -0.0 -> 0.0, so it sorts with 0.0 in the index
        tags = _labels(tags, "tags", self._tag_keys, _TAG) if tags else []
        if graph is not None:
            graph_keys = self._graph_keys
            if type(graph) is not str or (
                graph not in graph_keys and not _learn(graph, graph_keys, _GRAPH)
            ):
                raise InvalidInput(
                    f"invalid named graph {graph!r}: need non-empty text without control "
                    "characters",
                    path=("named_graph",),
                )
        type_keys = self._type_keys
        types = _labels(types, "jsonld_types", type_keys, _TYPE) if types else []
        content_types = content.get("@type")
        if content_types is not None:
            if type(content_types) is str and (
                content_types in type_keys or _learn(content_types, type_keys, _TYPE)
            ):
                extra = [content_types]  # the common case, without the general path
            else:
                extra = _labels(
                    content_types if type(content_types) is not str else [content_types],
                    "@type",
                    type_keys,
                    _TYPE,
                )
            types = _union(types, extra)
        if context is None:
            context = content.get("@context")
        elif context is not content.get("@context"):
            _check_json(context, iri, "jsonld_context")
        if metadata is _EMPTY:
            metadata = {}
        elif type(metadata) is not dict and not isinstance(metadata, Mapping):
            raise InvalidInput(
                f"metadata must be a JSON object, not {type(metadata).__name__}", path=("metadata",)
            )
        elif metadata:
            metadata = dict(metadata)
            _check_json(metadata, iri, "metadata")
        else:
            metadata = {}
        if type(version) is not int or version < 0:
            raise InvalidInput(f"version must be an int >= 0, not {version!r}", path=("version",))
        if vector_id is not None and not _is_int64(vector_id):
            raise InvalidInput(
                f"vector_id must be a 64-bit int or None, not {vector_id!r}", path=("vector_id",)
            )
        if mesi not in MESI_STATES:
            raise InvalidInput(
                f"mesi_state must be one of I, S, E, M, not {mesi!r}", path=("mesi_state",)
            )
        fields = [
            iri,
            content,
            importance,
            tags,
            graph,
            types,
            context,
            metadata,
            version,
            vector_id,
            mesi,
            0.0,
            0.0,
            _sha256(text).hexdigest(),
            size,
            0,
            0.0,
        ]
        return iri.encode(), fields, packed

    def _apply(
        self,
        wb: Any,
        iri_b: bytes,
        new: list[Any],
        packed: bytes,
        merge: bool,
        expect_version: int | None,
        now: float,
        overlay: dict[bytes, list[Any]] | None,
    ) -> list[Any]:
        """Combine the prepared ``new`` fields (content packed as ``packed``)
        with the stored node or tombstone and add the node and index writes to
        ``wb``; the fields as they will be stored."""
        key = _NODE + iri_b
        old: list[Any] | None
        if overlay is not None and key in overlay:
            old = overlay[key]
        else:
            get = self._get
            raw = get(key)
            if raw is None:
                old = None
            else:
                araw = get(_ACCESS + iri_b)
                old = decode_record(
                    key, raw, new[0], None if araw is None else decode_access(_ACCESS + iri_b, araw)
                )
        tkey: bytes | None = None
        if old is None:
            # No node: its version continues from its tombstone, if it has one.
            # (The merge read is one point get; a node written for the first
            # time pays a second, usually a bloom-filter miss.)
            current = 0
            tkey = _TOMB + iri_b
            traw = self._get(tkey)
            if traw is None:
                tkey = None
            else:
                current = decode_tombstone(tkey, traw)[0]
        else:
            current = old[_F_VERSION]
        if (
            expect_version is not None
            and expect_version != current
            and not (expect_version == 0 and old is None)  # "absent" matches a deleted node
        ):
            raise ConflictError(
                f"{new[0]} is at version {current}, not the expected {expect_version}"
            )
        requested = new[_F_VERSION]
        if requested:
            if requested < current:
                raise ConflictError(
                    f"{new[0]}: version {requested} is older than the stored version {current}"
                )
            if tkey is not None and requested == current:
                raise ConflictError(
                    f"{new[0]}: version {requested} is the version of its delete; "
                    "a write after it needs a newer one"
                )
            version = requested
        else:
            version = current + 1
        if old is None:
            fields = new
            fields[_F_VERSION] = version
            fields[_F_CREATED] = fields[_F_UPDATED] = fields[F_LAST_ACCESSED] = now
            fields[F_ACCESS_COUNT] = 0
        elif merge:
            fields = _merged(old, new, version, now)
        else:
            fields = _replaced(old, new, version, now)
        content = fields[_F_CONTENT]
        value = _pack(fields, packed if content is new[_F_CONTENT] else packb(content))
        if len(value) + len(key) > self._max_bytes:
            raise InvalidInput(
                f"node {new[0]} would be a {len(value) + len(key)}-byte record; "
                f"the limit (l0.max_node_bytes) is {self._max_bytes}"
            )
        put = wb.put
        new_keys = self._index_keys(
            iri_b, fields[_F_TAGS], fields[_F_GRAPH], fields[_F_TYPES], fields[F_IMPORTANCE]
        )
        if old is None:
            for k in new_keys:
                put(k, b"")
            if tkey is not None:
                wb.delete(tkey)
        else:
            old_keys = self._index_keys(
                iri_b, old[_F_TAGS], old[_F_GRAPH], old[_F_TYPES], old[F_IMPORTANCE]
            )
            if old_keys != new_keys:
                new_set = set(new_keys)
                old_set = set(old_keys)
                for k in old_set - new_set:
                    wb.delete(k)
                for k in new_set - old_set:
                    put(k, b"")
        put(key, value)
        if overlay is not None:
            overlay[key] = fields
        return fields

    def _index_keys(
        self, iri_b: bytes, tags: list[str], graph: str | None, types: list[str], importance: float
    ) -> list[bytes]:
        """``K.index_keys`` (the one definition, which verify() uses), with the
        label prefixes from the caches of validated labels."""
        cache = self._tag_keys
        keys = []
        for t in tags:
            p = cache.get(t)
            keys.append((_TAG + t.encode() + _SEP if p is None else p) + iri_b)
        if graph is not None:
            p = self._graph_keys.get(graph)
            keys.append((_GRAPH + graph.encode() + _SEP if p is None else p) + iri_b)
        cache = self._type_keys
        for t in types:
            p = cache.get(t)
            keys.append((_TYPE + t.encode() + _SEP if p is None else p) + iri_b)
        keys.append(_IMPORTANCE + _pack_double(importance) + iri_b)
        return keys

    def _with_pending(self, fields: list[Any]) -> L0Entry:
        """The entry of ``fields`` with the reads not yet written down."""
        if self._pending:
            slot = self._pending.get(fields[0])  # one atomic dict read
            if slot is not None:
                fields = list(fields)
                fields[F_ACCESS_COUNT] += slot[1]
                fields[F_LAST_ACCESSED] = max(fields[F_LAST_ACCESSED], slot[2])
        return entry_from_fields(fields)

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
            raise InvalidInput(f"invalid IRI {iri!r}", path=("iri",)) from None
        generation = self._generation
        get = self._get
        key = _NODE + iri_b
        raw = get(key)
        if raw is None:
            # Checked only on a miss: a hit proves the IRI was valid when stored.
            if _iri_match(iri) is None:
                raise InvalidInput(f"invalid IRI {iri!r}", path=("iri",))
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
            araw = get(akey)
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
            raise InvalidInput(f"invalid IRI {iri!r}", path=("iri",)) from None
        raw = self._live().get(key)
        if raw is None:
            if _iri_match(iri) is None:
                raise InvalidInput(f"invalid IRI {iri!r}", path=("iri",))
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
                raise InvalidInput(f"invalid IRI prefix {prefix!r}", path=("prefix",))
            prefix_b = prefix.encode()
        lo = _bound(lo, "min_importance")
        hi = _bound(hi, "max_importance")
        if limit is not None and (type(limit) is not int or limit < 0):
            raise InvalidInput(f"limit must be a non-negative int, not {limit!r}", path=("limit",))
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

    def _with_pending_all(self, entries: list[L0Entry]) -> list[L0Entry]:
        """``entries`` with the reads not yet written down (in place)."""
        if self._pending:
            with self._access_lock:
                pending = self._pending
                for i, e in enumerate(entries):
                    slot = pending.get(e[0])
                    if slot is not None:
                        fields = list(e)
                        fields[F_ACCESS_COUNT] += slot[1]
                        fields[F_LAST_ACCESSED] = max(fields[F_LAST_ACCESSED], slot[2])
                        entries[i] = _tuple_new(L0Entry, fields)
        return entries

    # -- diagnostics -----------------------------------------------------------

    def raw_items(self) -> list[tuple[bytes, bytes]]:
        """Every key and value in the database, in key order, from one snapshot.

        A diagnostic (and what the tests compare to prove "nothing changed").
        """
        with self._live().snapshot() as snap, snap.iterator() as it:
            return list(it)

    def verify(self) -> list[str]:
        """Check the whole database; a list of problems (empty when sound).

        Decodes and type-checks every node and access record, checks the
        format key, and checks that the index keys are exactly the ones the
        nodes imply: no index entry pointing at nothing or at a node that does
        not carry it, no node missing from an index, no access key without its
        node; and that every tombstone decodes and has no live node beside it.
        Reads one snapshot (safe while the actor writes).
        """
        problems: list[str] = []
        expected: set[bytes] = set()
        found: list[bytes] = []
        nodes: set[bytes] = set()
        accesses: list[bytes] = []
        tombstones: list[bytes] = []
        with self._live().snapshot() as snap, snap.iterator() as it:
            for key, value in it:
                if key.startswith(K.NODE):
                    iri_b = key[len(K.NODE) :]
                    try:
                        iri = iri_b.decode()
                    except UnicodeDecodeError:
                        problems.append(f"node key {key!r} is not UTF-8")
                        continue
                    if not K.is_valid_iri(iri):
                        problems.append(f"node key {key!r} is not a valid IRI")
                    try:
                        fields = decode_record(key, value, iri)
                    except (CorruptRecord, IncompatibleFormat) as exc:
                        problems.append(str(exc))
                        continue
                    nodes.add(iri_b)
                    bad = check_record_fields(fields)
                    if bad is not None:
                        problems.append(f"L0 record {key!r}: {bad}")
                        continue
                    expected.update(_index_keys_of(iri_b, fields))
                elif key.startswith(_ACCESS):
                    accesses.append(key[len(_ACCESS) :])
                    try:
                        decode_access(key, value)
                    except CorruptRecord as exc:
                        problems.append(str(exc))
                elif key.startswith(K.TOMBSTONE):
                    tombstones.append(key[len(K.TOMBSTONE) :])
                    try:
                        valid = K.is_valid_iri(key[len(K.TOMBSTONE) :].decode())
                    except UnicodeDecodeError:
                        valid = False
                    if not valid:
                        problems.append(f"tombstone key {key!r} is not a valid IRI")
                    try:
                        decode_tombstone(key, value)
                    except CorruptRecord as exc:
                        problems.append(str(exc))
                elif key.startswith((K.TAG, K.GRAPH, K.TYPE, K.IMPORTANCE)):
                    if value != b"":
                        problems.append(f"index key {key!r} has a value")
                    found.append(key)
                elif key == K.META_FORMAT:
                    try:
                        version = _unpackb(value)
                    except (ValueError, TypeError, msgpack.UnpackException):
                        version = None
                    if type(version) is not int or not 1 <= version <= K.FORMAT_VERSION:
                        problems.append(f"format key holds {value!r}")
                elif not key.startswith(K.META_PREFIX):
                    problems.append(f"unknown key {key!r}")
        for iri_b in accesses:
            if iri_b not in nodes:
                problems.append(f"access key {_ACCESS + iri_b!r} has no node")
        for iri_b in tombstones:
            if iri_b in nodes:
                problems.append(f"tombstone {_TOMB + iri_b!r} coexists with its node")
        found_set = set(found)
        for key in sorted(found_set - expected):
            problems.append(f"index key {key!r} does not match any node")
        for key in sorted(expected - found_set):
            problems.append(f"index key {key!r} is missing")
        return problems


# -- helpers ---------------------------------------------------------------------


def _index_keys_of(iri_b: bytes, fields: Sequence[Any]) -> list[bytes]:
    return K.index_keys(
        iri_b, fields[_F_TAGS], fields[_F_GRAPH], fields[_F_TYPES], fields[F_IMPORTANCE]
    )


def _index_iris(snap: Any, namespace: bytes, label: str) -> set[bytes]:
    prefix = K.label_prefix(namespace, label)
    n = len(prefix)
    with snap.iterator(prefix=prefix, include_value=False) as it:
        return {key[n:] for key in it}


def _union(a: list[str], b: list[str]) -> list[str]:
    if not b or a == b:
        return a
    if not a:
        return b
    return sorted(set(a).union(b))


def _merged(old: list[Any], new: list[Any], version: int, now: float) -> list[Any]:
    """The seed design's merge of a new write into a stored node (docs/L0.md)."""
    if new[_F_SIZE] >= old[_F_SIZE]:  # the longer content wins; a tie goes to the new one
        kept, other = new, old
    else:
        kept, other = old, new
    context = kept[_F_CONTEXT] if kept[_F_CONTEXT] is not None else other[_F_CONTEXT]
    metadata = {**old[_F_METADATA], **new[_F_METADATA]} if new[_F_METADATA] else old[_F_METADATA]
    return [
        new[0],
        kept[_F_CONTENT],
        (old[F_IMPORTANCE] + new[F_IMPORTANCE]) / 2.0,
        _union(old[_F_TAGS], new[_F_TAGS]),
        new[_F_GRAPH] if new[_F_GRAPH] is not None else old[_F_GRAPH],
        _union(old[_F_TYPES], new[_F_TYPES]),
        context,
        metadata,
        version,
        new[_F_VECTOR_ID] if new[_F_VECTOR_ID] is not None else old[_F_VECTOR_ID],
        new[_F_MESI],
        old[_F_CREATED],
        now,
        kept[_F_HASH],
        kept[_F_SIZE],
        old[F_ACCESS_COUNT],
        old[F_LAST_ACCESSED],
    ]


def _replaced(old: list[Any], new: list[Any], version: int, now: float) -> list[Any]:
    """A replacing write: the new node as given, with the stored history kept."""
    fields = list(new)
    fields[_F_VERSION] = version
    if fields[_F_VECTOR_ID] is None:
        fields[_F_VECTOR_ID] = old[_F_VECTOR_ID]
    fields[_F_CREATED] = old[_F_CREATED]
    fields[_F_UPDATED] = now
    fields[F_ACCESS_COUNT] = old[F_ACCESS_COUNT]
    fields[F_LAST_ACCESSED] = old[F_LAST_ACCESSED]
    return fields


def _iri_bytes(iri: object) -> bytes:
    if type(iri) is not str or K.iri_match(iri) is None:
        raise InvalidInput(f"invalid IRI {iri!r}", path=("iri",))
    return iri.encode()


def _label(value: object, what: str) -> str:
    if type(value) is not str or K.label_match(value) is None:
        raise InvalidInput(
            f"invalid {what} {value!r}: need non-empty text without control characters",
            path=(what,),
        )
    return value


def _tags_arg(tags: Any, what: str) -> Any:
    if isinstance(tags, (str, bytes, Mapping)):
        raise InvalidInput(
            f"{what} must be a list of strings, not {type(tags).__name__} {tags!r}", path=(what,)
        )
    return tags


def _labels(
    values: Any, what: str, cache: dict[str, bytes] | None = None, ns: bytes = b""
) -> list[str]:
    """Validate a collection of labels; sorted without duplicates. With a
    ``cache`` (of the labels of namespace ``ns``), known labels skip the regex
    and new valid ones are remembered."""
    if type(values) is not list and type(values) is not tuple:
        if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
            raise InvalidInput(
                f"{what} must be a list of strings, not {type(values).__name__} {values!r}",
                path=(what,),
            )
        values = list(values)
    for v in values:
        if type(v) is not str or (
            (cache is None or v not in cache)
            and (_label_match(v) is None if cache is None else not _learn(v, cache, ns))
        ):
            raise InvalidInput(
                f"invalid entry {v!r} in {what}: need non-empty text without control characters",
                path=(what,),
            )
    n = len(values)
    if n == 2:
        a, b = values
        return [a, b] if a < b else [b, a] if b < a else [a]
    if n == 1:
        return list(values)
    return sorted(set(values))


def _learn(label: str, cache: dict[str, bytes], ns: bytes) -> bool:
    """Check a label not in ``cache``; remember it (with its index-key prefix)
    if it is valid."""
    if _label_match(label) is None:
        return False
    if len(cache) >= _LABEL_CACHE_MAX:
        cache.clear()
    cache[label] = ns + label.encode() + _SEP
    return True


def _pack(fields: list[Any], packed_content: bytes) -> bytes:
    try:
        return pack_record(fields, packed_content)
    except JSON_ERRORS as exc:
        raise InvalidInput(f"node {fields[0]} cannot be stored: {exc}") from exc


def _check_json(value: Any, iri: str, what: str) -> None:
    try:
        check_json(value)
    except JSON_ERRORS as exc:
        raise InvalidInput(
            f"{what} of {iri} is not JSON-serialisable: {exc}", path=(what,)
        ) from exc


def _check_version_arg(value: object, what: str) -> None:
    if value is None:
        return
    if type(value) is not int or value < 0:
        raise InvalidInput(f"{what} must be a non-negative int, not {value!r}", path=(what,))


def _bound(value: object, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise InvalidInput(f"{what} must be a number, not {value!r}", path=(what,))
    return float(value)


def _is_int64(value: object) -> bool:
    return type(value) is int and -(2**63) <= value < 2**64
