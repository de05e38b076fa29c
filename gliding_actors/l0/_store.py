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

Layout, merge rules, durability and errors are documented in ``docs/L0.md``.
"""

from __future__ import annotations

import enum
import hashlib
import json
import math
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self, cast

import msgpack
import plyvel

from gliding_actors.clock import Clock
from gliding_actors.config import L0Config
from gliding_actors.errors import (
    ConflictError,
    CorruptRecord,
    IncompatibleFormat,
    InvalidInput,
    StorageError,
)
from gliding_actors.l0 import _keys as K
from gliding_actors.l0._entry import (
    F_ACCESS_COUNT,
    F_IMPORTANCE,
    F_LAST_ACCESSED,
    MESI_STATES,
    L0Entry,
    check_record_fields,
    decode_access,
    decode_record,
    entry_from_fields,
    pack_record,
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

# The canonical form hashed into content_hash; the same text json.dumps(content,
# sort_keys=True, separators=(",", ":"), ensure_ascii=False) gives, from one
# reusable encoder (allow_nan=False: NaN/Infinity are not JSON).
_canonical = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode
_sha256 = hashlib.sha256
_JSON_ERRORS = (TypeError, ValueError, RecursionError, UnicodeEncodeError, OverflowError)
_DEFAULT_ACCESS_FLUSH_EVERY = 1000
_iri_match = K.iri_match
_label_match = K.label_match
_NODE = K.NODE
_ACCESS = K.ACCESS


class L0Store:
    """The LevelDB-backed node store (see the module docstring for threading).

    ``access_flush_every``: reads are counted in memory and written down in one
    batch every that many reads, on :meth:`flush` and on :meth:`close` (never a
    write per read). Counts not yet written down are lost if the process dies;
    reads always see them.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Clock,
        config: L0Config | None = None,
        access_flush_every: int = _DEFAULT_ACCESS_FLUSH_EVERY,
    ) -> None:
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
        self._config = config if config is not None else L0Config()
        self._max_bytes = self._config.max_node_bytes
        self._sync_all = self._config.sync_all_writes
        self._flush_every = access_flush_every
        self._write_lock = threading.RLock()
        self._access_lock = threading.Lock()
        # iri -> [stored access count, reads not yet written down, time of the
        # last one]. The stored count is read with the first pending read; it
        # stays right until the next write-down, the only writer of access keys.
        self._pending: dict[str, list[Any]] = {}
        self._reads = 0
        # Bumped (under _access_lock) after every write-down of access counts and
        # every delete; a reader that overlapped one re-reads (see retrieve()).
        self._generation = 0
        self._packer = msgpack.Packer()
        self._closed = True
        try:
            self._db = plyvel.DB(
                self._path,
                create_if_missing=True,
                paranoid_checks=True,
                bloom_filter_bits=10,
            )
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
            self._db.put(K.META_FORMAT, msgpack.packb(K.FORMAT_VERSION), sync=True)
            return
        try:
            version = msgpack.unpackb(raw)
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

        ``entry.version``: 0 means "stored version + 1" (1 for a new node); a
        positive version is recorded as given (the coherence layer's line
        version) and may not be lower than the stored one (ConflictError).
        ``expect_version`` (0 = absent) makes the write a compare-and-set.

        ``sync=True`` fsyncs before returning; ``None`` follows
        ``config.sync_all_writes``. Returns the entry as stored.
        """
        iri_b, fields = self._prepare(entry)
        do_sync = self._sync_all if sync is None else self._sync(sync)
        if expect_version is not None:
            _check_version_arg(expect_version, "expect_version")
        with self._write_lock:
            if self._closed:
                raise StorageError(f"L0 store {self._path} is closed")
            wb = self._db.write_batch(sync=do_sync)
            fields = self._apply(
                wb, iri_b, fields, merge, expect_version, float(self._clock.now()), None
            )
            wb.write()
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
        prepared = [self._prepare(e) for e in entries]
        do_sync = self._sync(sync)
        out: list[list[Any]] = []
        with self._write_lock:
            db = self._live()
            wb = db.write_batch(sync=do_sync)
            now = float(self._clock.now())
            overlay: dict[bytes, list[Any]] = {}
            for iri_b, fields in prepared:
                out.append(self._apply(wb, iri_b, fields, merge, None, now, overlay))
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

    def delete(self, iri: str, *, sync: bool | None = None) -> bool:
        """Remove a node and all its index entries in one batch; False if absent."""
        iri_b = _iri_bytes(iri)
        do_sync = self._sync(sync)
        key = K.NODE + iri_b
        with self._write_lock:
            db = self._live()
            raw = db.get(key)
            if raw is None:
                return False
            old = decode_record(key, raw, iri)
            wb = db.write_batch(sync=do_sync)
            for k in _index_keys_of(iri_b, old):
                wb.delete(k)
            wb.delete(key)
            wb.delete(_ACCESS + iri_b)
            wb.write()
            with self._access_lock:
                self._pending.pop(iri, None)
                self._generation += 1
        return True

    def delete_graph(self, name: str, *, sync: bool | None = None) -> int:
        """Delete every node of named graph ``name`` (one atomic batch); the count."""
        prefix = K.label_prefix(K.GRAPH, _label(name, "named graph"))
        do_sync = self._sync(sync)
        n = len(prefix)
        with self._write_lock:
            db = self._live()
            wb = db.write_batch(sync=do_sync)
            gone: list[str] = []
            with db.iterator(prefix=prefix, include_value=False) as it:
                for ikey in it:
                    iri_b = ikey[n:]
                    key = K.NODE + iri_b
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
        key = K.NODE + iri_b
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
            db.put(key, self._pack(fields), sync=do_sync)
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
                    pack = self._packer.pack
                    for iri, (stored, reads, when) in pending.items():
                        put(_ACCESS + iri.encode(), pack([stored + reads, float(when)]))
                    if sync and not pending:
                        # An empty batch may not reach the log; rewrite the format
                        # key so that the fsync happens.
                        put(K.META_FORMAT, msgpack.packb(K.FORMAT_VERSION))
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

    def _prepare(self, entry: L0Entry) -> tuple[bytes, list[Any]]:
        """Validate and normalise one entry into record fields (entry order).

        Raises InvalidInput before anything is written. Store-owned fields are
        filled in by _apply; content_hash and content_size here.
        """
        if not isinstance(entry, L0Entry):
            raise InvalidInput(f"expected an L0Entry, not {type(entry).__name__}")
        fields = list(entry)
        iri = fields[0]
        if type(iri) is not str or _iri_match(iri) is None:
            raise InvalidInput(
                f"invalid IRI {iri!r}: need scheme:rest without spaces or control characters",
                path=("iri",),
            )
        content = fields[1]
        if not isinstance(content, dict):
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
            canonical = _canonical(content).encode()
        except _JSON_ERRORS as exc:
            raise InvalidInput(
                f"content of {iri} is not JSON-serialisable: {exc}", path=("content",)
            ) from exc
        size = len(canonical)
        if size > self._max_bytes:
            raise InvalidInput(
                f"node {iri} is {size} bytes of JSON; the limit (l0.max_node_bytes) is {self._max_bytes}",
                path=("content",),
            )
        _check_keys(content, iri, "content")
        importance = fields[2]
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
        fields[2] = importance + 0.0  # -0.0 -> 0.0, so it sorts with 0.0 in the index
        tags = fields[_F_TAGS]
        fields[_F_TAGS] = _labels(tags, "tags") if tags else []
        graph = fields[_F_GRAPH]
        if graph is not None and (type(graph) is not str or _label_match(graph) is None):
            raise InvalidInput(
                f"invalid named graph {graph!r}: need non-empty text without control characters",
                path=("named_graph",),
            )
        types = fields[_F_TYPES]
        type_list = _labels(types, "jsonld_types") if types else []
        content_types = content.get("@type")
        if content_types is not None:
            if type(content_types) is str and _label_match(content_types) is not None:
                extra = [content_types]  # the common case, without the general path
            else:
                extra = _labels(
                    content_types if type(content_types) is not str else [content_types], "@type"
                )
            type_list = _union(type_list, extra)
        fields[_F_TYPES] = type_list
        context = fields[_F_CONTEXT]
        if context is None:
            fields[_F_CONTEXT] = content.get("@context")
        elif context is not content.get("@context"):
            _check_json(context, iri, "jsonld_context")
        metadata = fields[_F_METADATA]
        if type(metadata) is not dict and not isinstance(metadata, Mapping):
            raise InvalidInput(
                f"metadata must be a JSON object, not {type(metadata).__name__}", path=("metadata",)
            )
        if metadata:
            metadata = dict(metadata)
            _check_json(metadata, iri, "metadata")
            fields[_F_METADATA] = metadata
        else:
            fields[_F_METADATA] = {}
        version = fields[_F_VERSION]
        if type(version) is not int or version < 0:
            raise InvalidInput(f"version must be an int >= 0, not {version!r}", path=("version",))
        vector_id = fields[_F_VECTOR_ID]
        if vector_id is not None and not _is_int64(vector_id):
            raise InvalidInput(
                f"vector_id must be a 64-bit int or None, not {vector_id!r}", path=("vector_id",)
            )
        if fields[_F_MESI] not in MESI_STATES:
            raise InvalidInput(
                f"mesi_state must be one of I, S, E, M, not {fields[_F_MESI]!r}",
                path=("mesi_state",),
            )
        fields[_F_HASH] = _sha256(canonical).hexdigest()
        fields[_F_SIZE] = size
        return iri.encode(), fields

    def _apply(
        self,
        wb: Any,
        iri_b: bytes,
        new: list[Any],
        merge: bool,
        expect_version: int | None,
        now: float,
        overlay: dict[bytes, list[Any]] | None,
    ) -> list[Any]:
        """Combine the prepared ``new`` fields with the stored node and add the
        node and index writes to ``wb``; the fields as they will be stored."""
        key = _NODE + iri_b
        old: list[Any] | None
        if overlay is not None and key in overlay:
            old = overlay[key]
        else:
            raw = self._get(key)
            old = (
                None
                if raw is None
                else decode_record(key, raw, new[0], self._access_of(_ACCESS + iri_b))
            )
        current = 0 if old is None else old[_F_VERSION]
        if expect_version is not None and expect_version != current:
            raise ConflictError(
                f"{new[0]} is at version {current}, not the expected {expect_version}"
            )
        requested = new[_F_VERSION]
        if requested:
            if requested < current:
                raise ConflictError(
                    f"{new[0]}: version {requested} is older than the stored version {current}"
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
        value = self._pack(fields)
        if len(value) + len(key) > self._max_bytes:
            raise InvalidInput(
                f"node {new[0]} would be a {len(value) + len(key)}-byte record; "
                f"the limit (l0.max_node_bytes) is {self._max_bytes}"
            )
        put = wb.put
        new_keys = K.index_keys(
            iri_b, fields[_F_TAGS], fields[_F_GRAPH], fields[_F_TYPES], fields[F_IMPORTANCE]
        )
        if old is None:
            for k in new_keys:
                put(k, b"")
        else:
            old_keys = _index_keys_of(iri_b, old)
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

    def _pack(self, fields: list[Any]) -> bytes:
        try:
            return pack_record(self._packer, fields)
        except (OverflowError, TypeError, ValueError) as exc:
            self._packer.reset()
            raise InvalidInput(f"node {fields[0]} cannot be stored: {exc}") from exc

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
        """The entry stored under ``iri``, or None.

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
            key = _NODE + iri.encode()
        except UnicodeEncodeError:
            raise InvalidInput(f"invalid IRI {iri!r}", path=("iri",)) from None
        generation = self._generation
        get = self._get
        raw = get(key)
        if raw is None:
            # Checked only on a miss: a hit proves the IRI was valid when stored.
            if _iri_match(iri) is None:
                raise InvalidInput(f"invalid IRI {iri!r}", path=("iri",))
            return None
        akey = _ACCESS + key[2:]
        araw = get(akey)
        access = None if araw is None else decode_access(akey, araw)
        # decoded before counting: a corrupt record raises and is not counted
        fields = decode_record(key, raw, iri, access)
        if not touch:
            return self._with_pending(fields)
        now = self._clock.now()
        with self._access_lock:
            if generation != self._generation:
                # A write-down or a delete finished while we read: our records
                # may predate it (and its counts have left _pending).
                raw = get(key)
                if raw is None:
                    return None
                araw = get(akey)
                access = None if araw is None else decode_access(akey, araw)
                fields = decode_record(key, raw, iri, access)
            slot = self._pending.get(iri)
            if slot is None:
                stored = fields[F_ACCESS_COUNT]
                self._pending[iri] = [stored, 1, now]
                reads = 1
            else:
                reads = slot[1] = slot[1] + 1
                slot[2] = now
            self._reads += 1
            due = self._reads >= self._flush_every
        fields[F_ACCESS_COUNT] += reads
        fields[F_LAST_ACCESSED] = now
        if due:
            self.flush()
        return entry_from_fields(fields)

    def retrieve_jsonld_node(self, iri: str, *, touch: bool = True) -> dict[str, Any] | None:
        """The stored JSON-LD node itself (the entry's ``content``), or None."""
        entry = self.retrieve(iri, touch=touch)
        return None if entry is None else entry.content

    def __contains__(self, iri: object) -> bool:
        if type(iri) is not str or K.iri_match(iri) is None:
            return False
        return self._live().get(K.NODE + iri.encode()) is not None

    def count(self) -> int:
        """Number of stored nodes (a key-only scan)."""
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
        start = K.NODE + prefix_b
        n = len(K.NODE)
        if not want_entries and not has_bounds:
            iris: list[str] = []
            with snap.iterator(prefix=start, include_value=False) as it:
                for key in it:
                    if limit is not None and len(iris) >= limit:
                        break
                    iris.append(key[n:].decode())
            return iris
        na = len(_ACCESS)
        rows: list[list[Any]] = []
        with snap.iterator(prefix=start) as it, snap.iterator(prefix=_ACCESS + prefix_b) as acc:
            # Access keys sort like their nodes: walk both runs in step.
            next_access = next(acc, None)
            for key, raw in it:
                if limit is not None and len(rows) >= limit:
                    break
                access = None
                if next_access is not None:
                    iri_b = key[n:]
                    while next_access is not None and next_access[0][na:] < iri_b:
                        next_access = next(
                            acc, None
                        )  # an access key without node (verify reports it)
                    if next_access is not None and next_access[0][na:] == iri_b:
                        access = decode_access(*next_access)
                        next_access = next(acc, None)
                fields = decode_record(key, raw, key[n:].decode(), access)
                if has_bounds and not lo <= fields[F_IMPORTANCE] <= hi:
                    continue
                rows.append(fields)
        return self._finish(rows, want_entries)

    def _finish(self, rows: list[list[Any]], want_entries: bool) -> list[L0Entry] | list[str]:
        """Entries (with the access counts not yet written down) or their IRIs."""
        if not want_entries:
            return [fields[0] for fields in rows]
        if self._pending:
            with self._access_lock:
                pending = self._pending
                for fields in rows:
                    slot = pending.get(fields[0])
                    if slot is not None:
                        fields[F_ACCESS_COUNT] += slot[1]
                        fields[F_LAST_ACCESSED] = max(fields[F_LAST_ACCESSED], slot[2])
        make = entry_from_fields
        return [make(fields) for fields in rows]

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
        node. Reads one snapshot (safe while the actor writes).
        """
        problems: list[str] = []
        expected: set[bytes] = set()
        found: list[bytes] = []
        nodes: set[bytes] = set()
        accesses: list[bytes] = []
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
                elif key.startswith((K.TAG, K.GRAPH, K.TYPE, K.IMPORTANCE)):
                    if value != b"":
                        problems.append(f"index key {key!r} has a value")
                    found.append(key)
                elif key == K.META_FORMAT:
                    try:
                        version = msgpack.unpackb(value)
                    except (ValueError, TypeError, msgpack.UnpackException):
                        version = None
                    if type(version) is not int or not 1 <= version <= K.FORMAT_VERSION:
                        problems.append(f"format key holds {value!r}")
                elif not key.startswith(K.META_PREFIX):
                    problems.append(f"unknown key {key!r}")
        for iri_b in accesses:
            if iri_b not in nodes:
                problems.append(f"access key {_ACCESS + iri_b!r} has no node")
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


def _labels(values: Any, what: str) -> list[str]:
    """Validate a collection of labels; sorted without duplicates."""
    if type(values) is not list and type(values) is not tuple:
        if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
            raise InvalidInput(
                f"{what} must be a list of strings, not {type(values).__name__} {values!r}",
                path=(what,),
            )
        values = list(values)
    for v in values:
        if type(v) is not str or _label_match(v) is None:
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


def _check_json(value: Any, iri: str, what: str) -> None:
    try:
        _canonical(value)
    except _JSON_ERRORS as exc:
        raise InvalidInput(
            f"{what} of {iri} is not JSON-serialisable: {exc}", path=(what,)
        ) from exc
    _check_keys(value, iri, what)


def _check_keys(value: Any, iri: str, what: str) -> None:
    """Refuse what json.dumps accepts but msgpack cannot hold as JSON: object
    keys that are not strings (json.dumps quietly turns them into strings,
    msgpack would store them as they are and then refuse to read them back)
    and integers outside the 64-bit range. Checked here, not when packing,
    because a merge may keep the stored content and never pack the new one:
    whether a write is valid must not depend on what is stored.

    Runs after json.dumps accepted ``value``, so it is acyclic and bounded.
    """
    try:
        if isinstance(value, dict):
            _keys_in_dict(value)
        else:
            _keys_in_seq(value)
    except _BadKey as exc:
        raise InvalidInput(
            f"{what} of {iri} has a non-string key {exc.args[0]!r}", path=(what,)
        ) from None
    except _BadInt as exc:
        raise InvalidInput(
            f"{what} of {iri} has an integer outside 64 bits: {exc.args[0]}", path=(what,)
        ) from None
    except RecursionError:
        raise InvalidInput(f"{what} of {iri} is nested too deeply", path=(what,)) from None


class _BadKey(Exception):
    pass


class _BadInt(Exception):
    pass


_INT_MIN = -(2**63)
_INT_END = 2**64


def _keys_in_dict(d: dict[Any, Any]) -> None:
    for k, v in d.items():
        if type(k) is not str:
            raise _BadKey(k)
        t = type(v)
        if t is str or t is float or t is bool or v is None:
            continue
        if t is int:
            if not _INT_MIN <= v < _INT_END:
                raise _BadInt(v)
        elif t is dict:
            _keys_in_dict(v)
        elif t is list or t is tuple:
            _keys_in_seq(v)
        elif isinstance(v, dict):
            _keys_in_dict(v)
        elif isinstance(v, (list, tuple)):
            _keys_in_seq(v)
        elif isinstance(v, int) and not _INT_MIN <= v < _INT_END:
            raise _BadInt(v)


def _keys_in_seq(s: Sequence[Any]) -> None:
    for v in s:
        t = type(v)
        if t is str or t is float or t is bool or v is None:
            continue
        if t is int:
            if not _INT_MIN <= v < _INT_END:
                raise _BadInt(v)
        elif t is dict:
            _keys_in_dict(v)
        elif t is list or t is tuple:
            _keys_in_seq(v)
        elif isinstance(v, dict):
            _keys_in_dict(v)
        elif isinstance(v, (list, tuple)):
            _keys_in_seq(v)
        elif isinstance(v, int) and not _INT_MIN <= v < _INT_END:
            raise _BadInt(v)


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
