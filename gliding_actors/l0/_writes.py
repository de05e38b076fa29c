"""L0's write path: what turns writes, deletes and annotations into LevelDB batches.

Split out of ``_store.py``: validating an entry (``_prepare``), combining it with the stored
node or tombstone by the merge and version rules of docs/L0.md (``_apply``), its index keys.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from gliding_actors.errors import ConflictError, CorruptRecord, InvalidInput, show
from gliding_actors.l0 import _keys as K
from gliding_actors.l0._base import _StoreBase
from gliding_actors.l0._canonical import JSON_ERRORS, canonical
from gliding_actors.l0._checks import (
    _check_json,
    _check_version_arg,
    _iri_bytes,
    _is_int64,
    _label,
    _labels,
    _learn,
)
from gliding_actors.l0._entry import (
    _EMPTY,
    F_ACCESS_COUNT,
    F_IMPORTANCE,
    F_LAST_ACCESSED,
    MESI_STATES,
    L0Entry,
    decode_access,
    decode_record,
    decode_tombstone,
    pack_record,
    pack_tombstone,
    packb,
)


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
_iri_match = K.iri_match
_pack_double = K._pack_double
_NODE = K.NODE
_ACCESS = K.ACCESS
_TOMB = K.TOMBSTONE
_TAG = K.TAG
_GRAPH = K.GRAPH
_TYPE = K.TYPE
_IMPORTANCE = K.IMPORTANCE
_SEP = K.SEP


class _StoreWrites(_StoreBase):
    """Deletes, annotations and the write internals the ``store`` calls share."""

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
                self._tombstones = True
                self._commit(wb, do_sync)
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
            self._tombstones = True
            self._commit(wb, do_sync)
            with self._access_lock:
                self._pending.pop(iri, None)
                self._generation += 1
        if self._listeners:
            self._announce((iri,))
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
            if gone:
                self._tombstones = True
            self._commit(wb, do_sync)
            with self._access_lock:
                for iri in gone:
                    self._pending.pop(iri, None)
                self._generation += 1
        if self._listeners:
            self._announce(gone)
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
                f"vector_id must be a 64-bit int or None, not {show(vector_id)}", path=("vector_id",)
            )
        if mesi_state is not UNSET and mesi_state not in MESI_STATES:
            raise InvalidInput(
                f"mesi_state must be one of I, S, E, M, not {show(mesi_state)}", path=("mesi_state",)
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
            wb = db.write_batch(sync=do_sync)
            wb.put(key, _pack(fields, packb(fields[_F_CONTENT])))
            self._commit(wb, do_sync)
        return self._with_pending(fields)

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
                f"invalid IRI {show(iri)}: need scheme:rest without spaces or control characters",
                path=("iri",),
            )
        if type(content) is not dict and not isinstance(content, dict):
            raise InvalidInput(
                f"content of {iri} must be a JSON object, not {type(content).__name__}",
                path=("content",),
            )
        if "@id" in content and content["@id"] != iri:
            raise InvalidInput(
                f"content @id {show(content['@id'])} differs from the entry IRI {show(iri)}",
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
                    f"importance must be a number in [0, 1], not {show(importance)}",
                    path=("importance",),
                )
            importance = float(importance)
        if not 0.0 <= importance <= 1.0:
            raise InvalidInput(
                f"importance must be in [0, 1], not {show(importance)}", path=("importance",)
            )
        importance += 0.0  # -0.0 -> 0.0, so it sorts with 0.0 in the index
        tags = _labels(tags, "tags", self._tag_keys, _TAG) if tags else []
        if graph is not None:
            graph_keys = self._graph_keys
            if type(graph) is not str or (
                graph not in graph_keys and not _learn(graph, graph_keys, _GRAPH)
            ):
                raise InvalidInput(
                    f"invalid named graph {show(graph)}: need non-empty text without control "
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
            raise InvalidInput(f"version must be an int >= 0, not {show(version)}", path=("version",))
        if vector_id is not None and not _is_int64(vector_id):
            raise InvalidInput(
                f"vector_id must be a 64-bit int or None, not {show(vector_id)}", path=("vector_id",)
            )
        if mesi not in MESI_STATES:
            raise InvalidInput(
                f"mesi_state must be one of I, S, E, M, not {show(mesi)}", path=("mesi_state",)
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
        current = 0
        if old is None:
            # No node: its version continues from its tombstone, if it has one.
            # (A second point read, skipped while the store holds no tombstone.)
            if self._tombstones:
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


def _index_keys_of(iri_b: bytes, fields: Sequence[Any]) -> list[bytes]:
    return K.index_keys(
        iri_b, fields[_F_TAGS], fields[_F_GRAPH], fields[_F_TYPES], fields[F_IMPORTANCE]
    )


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


def _pack(fields: list[Any], packed_content: bytes) -> bytes:
    try:
        return pack_record(fields, packed_content)
    except JSON_ERRORS as exc:
        raise InvalidInput(f"node {fields[0]} cannot be stored: {exc}") from exc
