"""The L0 key layout and the checks on the strings that go into keys.

Everything the store writes lives in one LevelDB keyspace, split by a short
ASCII namespace so that each kind of key is one contiguous, range-scannable run
(see ``docs/L0.md``)::

    b"\\x00meta:format"                    -> msgpack int, the on-disk format version
    b"n:" + iri                            -> msgpack record of the node (see _entry.py)
    b"a:" + iri                            -> msgpack [access_count, last_accessed]
    b"d:" + iri                            -> msgpack [version, deleted_at]  tombstone
    b"t:" + tag   + b"\\x00" + iri          -> b""   tag index
    b"g:" + graph + b"\\x00" + iri          -> b""   named-graph index
    b"y:" + type  + b"\\x00" + iri          -> b""   JSON-LD type index
    b"i:" + 8-byte big-endian float + iri  -> b""   importance index (sorted by importance)

Strings are UTF-8. IRIs, tags, graph names and types may not contain NUL (nor any
other control character), so the ``\\x00`` separator makes every index prefix
exact: the scan for tag ``"a"`` reads ``b"t:a\\x00"`` and can never see the keys of
tag ``"ab"``. A non-negative IEEE-754 double packed big-endian sorts bytewise in
numeric order, so an importance range is one range scan.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Iterable

__all__ = [
    "ACCESS",
    "FORMAT_VERSION",
    "GRAPH",
    "IMPORTANCE",
    "META_FORMAT",
    "NODE",
    "SEP",
    "SHARDS_DIR",
    "TAG",
    "TOMBSTONE",
    "TYPE",
    "importance_bound",
    "index_keys",
    "is_valid_iri",
    "is_valid_label",
    "label_prefix",
]

#: Version of the on-disk layout written by this build. Bump it (and write a
#: migration) whenever a key or record shape changes; opening a database whose
#: format key is larger fails with IncompatibleFormat instead of misreading it.
#: 1: nodes, access keys, indexes. 2: adds tombstones (``d:``); a format-1
#: database is upgraded in place on open (only the format key changes).
FORMAT_VERSION = 2

#: The folder, under a memory's directory, of a sharded L0 (config ``l0.sharded``):
#: one LevelDB per directory shard, and the layout file.
SHARDS_DIR = "l0-shards"

META_FORMAT = b"\x00meta:format"
#: msgpack int: how many synced write batches this database holds (see _base.HIGH_WATER)
META_HIGH_WATER = b"\x00meta:high-water"
#: msgpack int: the last epoch handed out by ``reserve_epoch`` (line versions are numbered above it)
META_EPOCH = b"\x00meta:epoch"
#: msgpack str: the token of the snapshot a clean close left beside the store; the first write
#: after that (any write, by any program going through L0Store or repair) deletes it
META_CLEAN_MARK = b"\x00meta:clean-mark"
META_PREFIX = b"\x00meta:"
NODE = b"n:"
ACCESS = b"a:"
TOMBSTONE = b"d:"
TAG = b"t:"
GRAPH = b"g:"
TYPE = b"y:"
IMPORTANCE = b"i:"
SEP = b"\x00"

_IMPORTANCE_LEN = len(IMPORTANCE) + 8
_pack_double = struct.Struct(">d").pack

# RFC 3987 in shape only: a scheme, a colon, then at least one character; no
# whitespace, no control characters (C0, DEL, C1), none of <>"{}|\^` and no lone
# surrogates (they cannot be encoded as UTF-8).
_FORBIDDEN = r"\s\x00-\x1f\x7f-\x9f<>\"{}|\\^`\ud800-\udfff"
_IRI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:[^" + _FORBIDDEN + r"]+\Z")
_IRI_PREFIX = re.compile(r"[^" + _FORBIDDEN + r"]*\Z")
# Tags, graph names and type names: any non-empty text without control
# characters or lone surrogates (spaces are allowed: "user intent" is a tag).
_LABEL = re.compile(r"[^\x00-\x1f\x7f-\x9f\ud800-\udfff]+\Z")

iri_match = _IRI.match
label_match = _LABEL.match
iri_prefix_match = _IRI_PREFIX.match


def is_valid_iri(value: object) -> bool:
    """True if ``value`` is a string shaped like an absolute IRI (RFC 3987 shape)."""
    return type(value) is str and iri_match(value) is not None


def is_valid_label(value: object) -> bool:
    """True if ``value`` may be used as a tag, named-graph name or type."""
    return type(value) is str and label_match(value) is not None


def label_prefix(namespace: bytes, label: str) -> bytes:
    """The exact scan prefix of one tag / graph / type: namespace + label + NUL."""
    return namespace + label.encode() + SEP


def importance_bound(value: float) -> bytes:
    """The importance-index key prefix of ``value`` (0 <= value; -0.0 folds to 0.0)."""
    return IMPORTANCE + _pack_double(value + 0.0)


def importance_after(value: float) -> bytes:
    """The first importance-index key strictly after every key of ``value``."""
    return IMPORTANCE + _pack_double(math.nextafter(value + 0.0, math.inf))


def iri_of_importance_key(key: bytes) -> bytes:
    return key[_IMPORTANCE_LEN:]


def index_keys(
    iri: bytes,
    tags: Iterable[str],
    graph: str | None,
    types: Iterable[str],
    importance: float,
) -> list[bytes]:
    """Every secondary-index key one node owns. Kept in one place so that the
    writer, the deleter and verify() can never disagree about them."""
    keys = [TAG + t.encode() + SEP + iri for t in tags]
    if graph is not None:
        keys.append(GRAPH + graph.encode() + SEP + iri)
    for t in types:
        keys.append(TYPE + t.encode() + SEP + iri)
    keys.append(IMPORTANCE + _pack_double(importance) + iri)
    return keys
