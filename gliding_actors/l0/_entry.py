"""The L0 entry and its on-disk record.

An :class:`L0Entry` is a ``NamedTuple`` on purpose: the stored record is a
msgpack array in exactly the entry's field order, so decoding a record is one
``unpackb`` plus one tuple construction. Reads are the hot path of L0 (every L3
projection and L1 weak-ref dereference goes through them), and a dataclass with
per-field ``__init__`` costs a measurable share of a LevelDB get.
"""

from __future__ import annotations

import struct
import threading
import types
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import msgpack

from gliding_actors.errors import CorruptRecord, IncompatibleFormat, InvalidInput, show

__all__ = ["MESI_STATES", "L0Entry"]

#: MESI states an entry may record as "last known".
MESI_STATES = frozenset({"I", "S", "E", "M"})

_EMPTY: Mapping[str, Any] = types.MappingProxyType({})


class L0Entry(NamedTuple):
    """One node of L0: the full JSON-LD node plus what L0 knows about it.

    Fields a writer sets: ``iri``, ``content``, ``importance`` (0..1), ``tags``,
    ``named_graph``, ``jsonld_types`` (indexed in addition to the content's
    ``@type``), ``jsonld_context`` (defaults to the content's ``@context``),
    ``metadata`` (free JSON object), ``version`` (0 = "next version", see
    :meth:`L0Store.store`), ``vector_id`` and ``mesi_state``.

    Fields the store owns and ignores on input: ``access_count``,
    ``created_at``, ``last_accessed``, ``updated_at``, ``content_hash`` (sha256
    hex of the canonical JSON of ``content``) and ``content_size`` (its length
    in UTF-8 bytes, which decides "the longer content" when merging).

    Read back, ``tags`` and ``jsonld_types`` are sorted lists without
    duplicates and ``metadata`` is a dict.
    """

    iri: str
    content: dict[str, Any]
    importance: float = 0.5
    tags: Sequence[str] = ()
    named_graph: str | None = None
    jsonld_types: Sequence[str] = ()
    jsonld_context: Any = None
    metadata: Mapping[str, Any] = _EMPTY
    version: int = 0
    vector_id: int | None = None
    mesi_state: str = "I"
    created_at: float = 0.0
    updated_at: float = 0.0
    content_hash: str = ""
    content_size: int = 0
    access_count: int = 0
    last_accessed: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The entry as plain msgpack/JSON-friendly data (for actor messages)."""
        d = self._asdict()
        d["tags"] = list(self.tags)
        d["jsonld_types"] = list(self.jsonld_types)
        d["metadata"] = dict(self.metadata)
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> L0Entry:
        """Build an entry from :meth:`to_dict` output (or a subset of its keys).

        ``iri`` and ``content`` are required; an unknown key is InvalidInput
        rather than silently dropped.
        """
        if not isinstance(data, Mapping):
            raise InvalidInput(f"an L0 entry must be a mapping, not {type(data).__name__}")
        unknown = sorted(str(k) for k in data if k not in cls._fields)
        if unknown:
            raise InvalidInput(
                f"unknown L0 entry field(s): {', '.join(unknown)}", path=(unknown[0],)
            )
        for required in ("iri", "content"):
            if required not in data:
                raise InvalidInput(f"an L0 entry needs {show(required)}", path=(required,))
        return cls(**data)


# --- the records ------------------------------------------------------------
#
# A node's value (key n: + IRI) is one msgpack array of the entry's fields in
# order up to content_size; slot 0 (the IRI, already in the key) holds the
# record-shape version instead. access_count and last_accessed live apart,
# under a: + IRI as msgpack [count, last_accessed], so that counting reads
# rewrites a few bytes and never the node (which may be megabytes). A deleted
# node leaves a tombstone under d: + IRI, msgpack [version, deleted_at].

RECORD_VERSION = 1
F_IMPORTANCE = L0Entry._fields.index("importance")
F_CREATED = L0Entry._fields.index("created_at")
F_ACCESS_COUNT = L0Entry._fields.index("access_count")
F_LAST_ACCESSED = L0Entry._fields.index("last_accessed")
#: fields in a node record: every entry field before the access statistics
RECORD_LEN = F_ACCESS_COUNT
assert F_LAST_ACCESSED == RECORD_LEN + 1 == len(L0Entry._fields) - 1

_unpackb = msgpack.unpackb


_local = threading.local()


def packb(value: Any) -> bytes:
    """``msgpack.packb(value)`` with the calling thread's Packer: packb builds a
    Packer per call, which costs about as much as packing a small record."""
    try:
        packer: msgpack.Packer = _local.packer
    except AttributeError:
        packer = _local.packer = msgpack.Packer()
    try:
        packed: bytes = packer.pack(value)
    except BaseException:
        packer.reset()  # a failed pack may leave bytes in the buffer
        raise
    return packed


_packb = packb
#: A record's first bytes: the array header and slot 0 (the record version).
_RECORD_HEAD = msgpack.Packer().pack_array_header(RECORD_LEN) + msgpack.packb(RECORD_VERSION)
#: Length of the array header of the fields after the content (stripped when
#: they are spliced in after it).
_TAIL_HEADER_LEN = len(msgpack.Packer().pack_array_header(RECORD_LEN - 2))


def pack_record(fields: list[Any], packed_content: bytes) -> bytes:
    """Encode entry-ordered ``fields`` as a node record: slot 0 holds the record
    version, slot 1 the content, given already packed (``packb(fields[1])``:
    the writer packs the new content anyway, to check it), then the rest up to
    ``content_size`` (the access statistics are left out).

    The bytes are exactly ``packb([RECORD_VERSION, *fields[1:RECORD_LEN]])``: a
    msgpack array is its header followed by its items.

    Raises msgpack's error (OverflowError, TypeError, ValueError) for data it
    cannot hold; the caller turns it into InvalidInput.
    """
    tail: bytes = _packb(fields[2:RECORD_LEN])
    return _RECORD_HEAD + packed_content + tail[_TAIL_HEADER_LEN:]


#: struct for msgpack ``[count, last_accessed]`` with a count below 128 (a positive fixint)
pack_small_access = struct.Struct(">BBBd").pack


def pack_access(count: int, last_accessed: float) -> bytes:
    """An access key's value: msgpack ``[count, last_accessed]`` (the same bytes
    as ``packb``; a count below 128 is a positive fixint, packed with struct)."""
    if 0 <= count < 128:
        return pack_small_access(0x92, count, 0xCB, last_accessed)
    packed: bytes = _packb([count, float(last_accessed)])
    return packed


def pack_tombstone(version: int, deleted_at: float) -> bytes:
    """A tombstone's value: msgpack ``[version, deleted_at]``."""
    packed: bytes = _packb([version, deleted_at])
    return packed


def _decode_pair(key: bytes, raw: bytes, what: str, shape: str, least: int) -> tuple[int, float]:
    """``[int >= least, float]`` from a small record's value; else CorruptRecord naming ``what``."""
    try:
        value = _unpackb(raw)
    except Exception as exc:  # msgpack raises several unrelated types
        raise CorruptRecord(f"L0 {what} {key!r} does not decode: {exc}") from exc
    if (
        type(value) is not list
        or len(value) != 2
        or type(value[0]) is not int
        or value[0] < least
        or type(value[1]) is not float
    ):
        raise CorruptRecord(f"L0 {what} {key!r} is not {shape}: {value!r}")
    return value[0], value[1]


def decode_tombstone(key: bytes, raw: bytes) -> tuple[int, float]:
    """``(version, deleted_at)`` from a tombstone's value."""
    return _decode_pair(key, raw, "tombstone", "[version, deleted_at]", 1)


def decode_access(key: bytes, raw: bytes) -> tuple[int, float]:
    """``(access_count, last_accessed)`` from an access key's value."""
    return _decode_pair(key, raw, "access record", "[count, last_accessed]", 0)


def decode_record(
    key: bytes, raw: bytes, iri: str, access: tuple[int, float] | None = None
) -> list[Any]:
    """Decode a node record into the entry's fields, in order.

    Slot 0 becomes ``iri``; ``access`` is the node's ``(access_count,
    last_accessed)`` from its access key (None when it has none: never read,
    so 0 and its creation time). Raises CorruptRecord naming ``key`` when the
    bytes are not a record this build wrote, IncompatibleFormat when a newer
    build wrote it.
    """
    try:
        arr = _unpackb(raw)
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
    arr[0] = iri
    if access is None:
        arr.append(0)
        arr.append(arr[F_CREATED])
    else:
        arr.append(access[0])
        arr.append(access[1])
    return arr


def bad_record(key: bytes, arr: object) -> CorruptRecord | IncompatibleFormat:
    if type(arr) is list and arr and type(arr[0]) is int and arr[0] > RECORD_VERSION:
        return IncompatibleFormat(
            f"L0 record {key!r} has record version {arr[0]}; this build reads <= {RECORD_VERSION}"
        )
    shape = f"list of {len(arr)}" if type(arr) is list else type(arr).__name__
    return CorruptRecord(f"L0 record {key!r} is not a node record (got a {shape})")


_tuple_new = tuple.__new__


def entry_from_fields(arr: list[Any]) -> L0Entry:
    """The entry of decoded fields (their count was checked by decode_record)."""
    return _tuple_new(L0Entry, arr)


def check_record_fields(arr: list[Any]) -> str | None:
    """Full type check of decoded fields; the problem, or None. Used by verify()
    (reads check only the shape, to stay cheap)."""
    e = L0Entry._make(arr)
    if type(e.content) is not dict:
        return "content is not an object"
    if type(e.importance) is not float or not 0.0 <= e.importance <= 1.0:
        return f"importance {e.importance!r} is not a float in [0, 1]"
    if type(e.tags) is not list or any(type(t) is not str for t in e.tags):
        return "tags is not a list of strings"
    if e.named_graph is not None and type(e.named_graph) is not str:
        return "named_graph is not a string"
    if type(e.jsonld_types) is not list or any(type(t) is not str for t in e.jsonld_types):
        return "jsonld_types is not a list of strings"
    if type(e.metadata) is not dict:
        return "metadata is not an object"
    if type(e.version) is not int or e.version < 1:
        return f"version {e.version!r} is not a positive int"
    if e.vector_id is not None and type(e.vector_id) is not int:
        return "vector_id is not an int"
    if e.mesi_state not in MESI_STATES:
        return f"mesi_state {e.mesi_state!r} is not one of I, S, E, M"
    for name, value in (("created_at", e.created_at), ("updated_at", e.updated_at)):
        if type(value) is not float:
            return f"{name} is not a float"
    if type(e.content_hash) is not str or len(e.content_hash) != 64:
        return "content_hash is not a sha256 hex digest"
    if type(e.content_size) is not int or e.content_size < 0:
        return "content_size is not a non-negative int"
    return None


def is_importance(raw: object) -> bool:
    """Whether ``raw`` is an importance: a number (not a boolean) in [0, 1]; NaN is not."""
    return isinstance(raw, (int, float)) and not isinstance(raw, bool) and 0.0 <= raw <= 1.0


def importance_of(value: Mapping[str, Any] | None, default: float = 0.5) -> float:
    """A node's importance when no writer gave one: its own ``importance`` key when a number in
    [0, 1], else ``default`` (what L0, the graph and search agree a line's importance is)."""
    raw = None if value is None else value.get("importance")
    return float(raw) if is_importance(raw) else default  # type: ignore[arg-type]
