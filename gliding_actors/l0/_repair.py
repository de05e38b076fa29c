"""Repair a damaged L0 database: LevelDB's repair, then L0's own records and indexes rebuilt.

LevelDB's ``RepairDB`` salvages what its table and log files still hold and
writes a new manifest and CURRENT; it knows nothing of L0's layout. So after
it, every node record and tombstone is decoded again: one that does not decode
(or fails its type checks) is dropped and named, every index key and access
key is rebuilt from the nodes that remain, and the result must pass
:meth:`L0Store.verify`. It works on a copy (a sibling folder) unless told to
work in place, so the damaged original stays as it was until the user has
seen the report.

What it cannot tell: a write whose bytes LevelDB could not salvage leaves no
key behind, so it is not in ``dropped``; the report counts what was found.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import msgpack
import plyvel

from gliding_actors.clock import SystemClock
from gliding_actors.errors import CorruptRecord, IncompatibleFormat, StorageError
from gliding_actors.l0 import _keys as K
from gliding_actors.l0._base import (
    MARKER,
    _holds_leveldb_files,
    _mark,
    _read_high_water,
    write_high_water,
)
from gliding_actors.l0._entry import (
    check_record_fields,
    decode_access,
    decode_record,
    decode_tombstone,
)
from gliding_actors.l0._store import L0Store
from gliding_actors.l0._writes import _index_keys_of

__all__ = ["MARKER", "repair_l0"]

_DERIVED = (K.TAG, K.GRAPH, K.TYPE, K.IMPORTANCE)


def _sibling(path: str) -> str:
    """A new folder beside ``path`` for the repaired copy: ``<path>.repaired``, ``.repaired-2``, ..."""
    base = path.rstrip(os.sep) + ".repaired"
    candidate, n = base, 1
    while os.path.exists(candidate):
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def _node_ok(key: bytes, value: bytes) -> list[Any] | None:
    """The decoded, type-checked fields of a node record, or None when it must be dropped."""
    try:
        iri = key[len(K.NODE) :].decode()
        fields = decode_record(key, value, iri)
    except (UnicodeDecodeError, CorruptRecord, IncompatibleFormat):
        return None
    if not K.is_valid_iri(iri) or check_record_fields(fields) is not None:
        return None
    return fields


def _count(raw: bytes | None) -> int:
    """A meta record's count (high-water, epoch); 0 when missing or damaged."""
    try:
        held = msgpack.unpackb(raw) if raw is not None else 0
    except Exception:  # noqa: BLE001 - any damage reads as no count
        return 0
    return held if type(held) is int and held >= 0 else 0


def _tombstone_ok(key: bytes, value: bytes) -> bool:
    try:
        valid = K.is_valid_iri(key[len(K.TOMBSTONE) :].decode())
        decode_tombstone(key, value)
    except (UnicodeDecodeError, CorruptRecord):
        return False
    return valid


def _access_ok(key: bytes, value: bytes) -> bool:
    try:
        decode_access(key, value)
    except CorruptRecord:
        return False
    return True


def repair_l0(path: str | os.PathLike[str], *, in_place: bool = False) -> dict[str, Any]:
    """Repair the L0 database at ``path``; return what was done.

    Keys: ``source``, ``repaired`` (the folder now holding the repaired
    database: a new sibling unless ``in_place``), ``nodes`` and ``tombstones``
    kept, ``dropped`` (the keys of records that did not decode, as text),
    ``index_keys`` (rebuilt), ``lost_synced_batches`` (acknowledged synced
    write batches the repaired database does not hold: writes lost with a
    damaged write-ahead log), ``problems`` (what :meth:`L0Store.verify` still
    finds: empty on success). Raises :class:`StorageError` when ``path`` holds
    no LevelDB files or LevelDB cannot repair it.
    """
    source = os.fspath(path)
    if not os.path.isdir(source) or not _holds_leveldb_files(source):
        raise StorageError(f"{source} holds no L0 database (no LevelDB table, log or manifest) to repair")
    target = source
    if not in_place:
        target = _sibling(source)
        try:
            shutil.copytree(source, target)
        except OSError as exc:
            raise StorageError(f"cannot copy {source} to {target} for repair: {exc}") from exc
        lock = os.path.join(target, "LOCK")
        if os.path.exists(lock):
            os.remove(lock)
    try:
        plyvel.repair_db(target)
        db = plyvel.DB(target, create_if_missing=False)
    except plyvel.Error as exc:
        raise StorageError(f"LevelDB cannot repair {target}: {exc}") from exc
    nodes = tombstones = index_keys = 0
    dropped: list[str] = []
    try:
        with db.snapshot() as snap, snap.iterator() as it, db.write_batch(sync=True) as batch:
            live: set[bytes] = set()
            accesses: list[tuple[bytes, bytes]] = []
            rebuilt: list[bytes] = []
            for key, value in it:
                if key.startswith(K.NODE):
                    fields = _node_ok(key, value)
                    if fields is None:
                        batch.delete(key)
                        dropped.append(key.decode("utf-8", "backslashreplace"))
                        continue
                    nodes += 1
                    iri_b = key[len(K.NODE) :]
                    live.add(iri_b)
                    rebuilt.extend(_index_keys_of(iri_b, fields))
                elif key.startswith(K.TOMBSTONE):
                    if _tombstone_ok(key, value):
                        tombstones += 1
                    else:
                        batch.delete(key)
                        dropped.append(key.decode("utf-8", "backslashreplace"))
                elif key.startswith(K.ACCESS):
                    accesses.append((key, value))
                elif key.startswith(_DERIVED):
                    batch.delete(key)  # rebuilt below from the nodes (in a batch, the later put wins)
                elif key == K.META_CLEAN_MARK:
                    batch.delete(key)  # a repaired store is not what a clean close left
                elif key == K.META_FORMAT or key.startswith(K.META_PREFIX):
                    continue
                else:
                    batch.delete(key)
                    dropped.append(key.decode("utf-8", "backslashreplace"))
            for index_key in rebuilt:
                batch.put(index_key, b"")
            index_keys = len(rebuilt)
            for key, value in accesses:  # a count of a node that is gone, or that does not decode
                if key[len(K.ACCESS) :] not in live or not _access_ok(key, value):
                    batch.delete(key)
            if db.get(K.META_FORMAT) is None:
                batch.put(K.META_FORMAT, msgpack.packb(K.FORMAT_VERSION))
        held = _count(db.get(K.META_HIGH_WATER))
        lost = max(0, _read_high_water(target) - held)
        if lost:
            # Each lost synced batch may have handed out an epoch: skip that many, so
            # that no version numbered in a lost epoch is ever numbered again.
            db.put(K.META_EPOCH, msgpack.packb(_count(db.get(K.META_EPOCH)) + lost), sync=True)
    except plyvel.Error as exc:
        raise StorageError(f"cannot rewrite the repaired L0 database {target}: {exc}") from exc
    finally:
        db.close()
    _mark(target)
    write_high_water(target, held)  # what the repaired database holds is what it now promises
    with L0Store(target, clock=SystemClock()) as store:
        problems = store.verify()
    return {
        "source": source,
        "repaired": target,
        "nodes": nodes,
        "tombstones": tombstones,
        "dropped": dropped,
        "index_keys": index_keys,
        # synced write batches acknowledged before the damage that the repaired database lacks
        "lost_synced_batches": lost,
        "problems": problems,
    }
