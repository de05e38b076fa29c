"""L0's diagnostics: the whole database dumped, or checked against the layout of docs/L0.md.

Split out of ``_store.py``: read-only, used to prove a store sound or unchanged.
"""

from __future__ import annotations

import msgpack

from gliding_actors.errors import CorruptRecord, IncompatibleFormat
from gliding_actors.l0 import _keys as K
from gliding_actors.l0._base import _StoreBase
from gliding_actors.l0._entry import (
    check_record_fields,
    decode_access,
    decode_record,
    decode_tombstone,
)
from gliding_actors.l0._writes import _index_keys_of

_unpackb = msgpack.unpackb
_ACCESS = K.ACCESS
_TOMB = K.TOMBSTONE


class _StoreVerify(_StoreBase):
    """The diagnostics of :class:`~gliding_actors.l0.L0Store` (read-only, from one snapshot)."""

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
