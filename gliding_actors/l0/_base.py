"""L0Store's shared state: LevelDB opened, format-checked and closed, and the access counters.

Split out of ``_store.py`` (threading rules there) because both the read and the write side
need it: the reads counted in memory are written down by :meth:`_StoreBase.flush`.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, Self, TypeVar

import msgpack
import plyvel

from gliding_actors.clock import Clock
from gliding_actors.errors import (
    CorruptRecord,
    IncompatibleFormat,
    InvalidInput,
    StorageError,
    show,
)
from gliding_actors.l0 import _keys as K
from gliding_actors.l0._config import L0Config
from gliding_actors.l0._entry import (
    F_ACCESS_COUNT,
    F_LAST_ACCESSED,
    L0Entry,
    decode_access,
    entry_from_fields,
    pack_access,
    pack_small_access,
    packb,
)

_unpackb = msgpack.unpackb
P = ParamSpec("P")
R = TypeVar("R")
_tuple_new = tuple.__new__


#: a key above every key the store writes (namespaces are ASCII or NUL-led)
_PAST_EVERY_KEY = b"\xff\xff"


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


def storage_error(path: str, exc: Exception) -> StorageError:
    """The typed form of one of LevelDB's errors met while using the database at ``path``."""
    if isinstance(exc, plyvel.CorruptionError):
        return StorageError(
            f"L0 database {path} is damaged ({exc!s}); `gliding-actors repair {path}` recovers what it can,"
            " on a copy"
        )
    return StorageError(f"L0 database {path}: {type(exc).__name__}: {exc!s}")


def typed_storage_errors(method: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[Any, P], R]:
    """``method`` of an L0 store, with LevelDB's errors raised as :class:`StorageError`."""

    def typed(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(self, *args, **kwargs)
        except plyvel.Error as exc:
            raise storage_error(self._path, exc) from exc

    functools.update_wrapper(typed, method)  # name, docstring and signature for help()
    return typed


#: Written into an L0 directory when L0 creates its database there: from then on the
#: directory is opened only as an existing database, never created over.
MARKER = "GLIDING-L0"


def _decoded_mark(raw: bytes | None) -> str | None:
    """The token a clean-mark key holds; a damaged mark marks nothing."""
    if raw is None:
        return None
    try:
        token = _unpackb(raw)
    except (ValueError, msgpack.UnpackException):
        return None
    return token if type(token) is str else None


def _holds_leveldb_files(path: str) -> bool:
    """Whether ``path`` holds a LevelDB table, write-ahead log or manifest (data to keep)."""
    try:
        names = os.listdir(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise StorageError(f"cannot list the L0 directory {path}: {exc}") from exc
    return any(
        name.endswith((".ldb", ".sst")) or name.startswith("MANIFEST-") or (name.endswith(".log") and name[0].isdigit())
        for name in names
    )


def _may_hold(db: plyvel.DB, prefix: bytes) -> bool:
    """Whether ``db`` may hold a key starting with ``prefix`` (one seek).

    A damaged table met on the way answers yes: opening a damaged database
    still works, and the reads that meet the damage report it."""
    try:
        with db.iterator(prefix=prefix, include_value=False) as it:
            return next(it, None) is not None
    except plyvel.Error:
        return True


def _is_new(path: str) -> bool:
    """Whether L0 may create its database at ``path``: only where there is none yet.

    LevelDB's ``create_if_missing`` would make a fresh, empty database over
    tables whose CURRENT file is lost, and then delete them as obsolete. So a
    directory that L0 marked, or that holds LevelDB files, is opened as an
    existing database, and a missing CURRENT is a :class:`StorageError`.
    """
    existing = os.path.exists(os.path.join(path, MARKER)) or _holds_leveldb_files(path)
    if existing and not os.path.exists(os.path.join(path, "CURRENT")):
        raise StorageError(
            f"L0 database {path} has lost its CURRENT file (the pointer to its manifest), so it cannot be"
            f" opened; its tables are untouched. Recover what they hold with `gliding-actors repair {path}`"
            " (it works on a copy unless given --in-place)"
        )
    return not existing


def _mark(path: str) -> None:
    """Write the marker (durably) once the database is open; kept if already there."""
    marker = os.path.join(path, MARKER)
    if os.path.exists(marker):
        return
    try:
        with open(marker, "w", encoding="utf-8") as handle:
            handle.write("an L0 database of gliding-actors: never created over\n")
            handle.flush()
            os.fsync(handle.fileno())
        directory = os.open(path, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    except OSError as exc:
        raise StorageError(f"cannot write the marker of the L0 database {path}: {exc}") from exc


#: Beside the database: the count of synced write batches L0 acknowledged, fsync'd after each.
HIGH_WATER = "GLIDING-L0-HIGH-WATER"


def _read_high_water(path: str) -> int:
    """The acknowledged count the side file holds (0 when there is none yet)."""
    try:
        with open(os.path.join(path, HIGH_WATER), "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        return 0
    except OSError as exc:
        raise StorageError(f"cannot read {HIGH_WATER} of the L0 database {path}: {exc}") from exc
    try:
        return int(raw.decode("ascii").strip() or 0)
    except (UnicodeDecodeError, ValueError):
        raise StorageError(f"{HIGH_WATER} of the L0 database {path} does not hold a count: {raw[:40]!r}") from None


def write_high_water(path: str, count: int) -> None:
    """Record durably that ``count`` synced batches were acknowledged (written, then fsync'd)."""
    fd = os.open(os.path.join(path, HIGH_WATER), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        text = f"{count:020d}\n".encode("ascii")  # fixed width: one write over the old one
        os.pwrite(fd, text, 0)
        os.fdatasync(fd)
    finally:
        os.close(fd)


class _StoreBase:
    """State and lifecycle of an L0 store; :class:`~gliding_actors.l0.L0Store` documents the arguments."""

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
                f"access_flush_every must be a positive int, not {show(access_flush_every)}"
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
        #: (IRI prefix, callback) told of every node written or deleted under that prefix
        self._listeners: list[tuple[str, Callable[[str], None]]] = []
        self._closed = True
        new = self._created = _is_new(self._path)
        try:
            self._db = plyvel.DB(self._path, **{**leveldb_options(self._config), "create_if_missing": new})
        except plyvel.CorruptionError as exc:
            raise StorageError(f"L0 database {self._path} is corrupt: {exc}") from exc
        except plyvel.Error as exc:
            raise StorageError(f"cannot open L0 database {self._path}: {exc}") from exc
        try:
            self._check_format()
            _mark(self._path)
            self._high_water = self._check_high_water()
            raw_mark = self._db.get(K.META_CLEAN_MARK)
            self._clean_mark = _decoded_mark(raw_mark)
            #: whether the database holds a clean mark the next write must delete
            self._mark_held = raw_mark is not None
            self._nodes_written = False
            # Whether any tombstone may exist: while none does, a node written
            # for the first time skips the tombstone read. Set (before its
            # batch is written) by every write that leaves one.
            self._tombstones = _may_hold(self._db, K.TOMBSTONE)
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

    def _check_high_water(self) -> int:
        """The synced batches the database holds; refuse it if it holds fewer than were acknowledged.

        Every synced batch also bumps ``\\x00meta:high-water`` inside the batch, and once
        LevelDB has fsync'd it the same count is fsync'd to a side file. A write-ahead log
        damaged or cut short after that (a lost log file, a torn sector) would open as a
        database missing acknowledged writes; the two counts tell.
        """
        raw = self._db.get(K.META_HIGH_WATER)
        held = 0 if raw is None else _unpackb(raw)
        if type(held) is not int or held < 0:
            raise CorruptRecord(f"L0 key {K.META_HIGH_WATER!r} holds {held!r}, not a count")
        acknowledged = _read_high_water(self._path)
        if held < acknowledged:
            raise StorageError(
                f"L0 database {self._path} lost acknowledged writes: it holds {held} synced write batches,"
                f" {acknowledged} were acknowledged (its write-ahead log was damaged or cut short)."
                f" `gliding-actors repair {self._path}` recovers what is left, on a copy"
            )
        if held > acknowledged:  # the side file lags by the batch a crash interrupted, or is new
            write_high_water(self._path, held)
        return held

    def reserve_epoch(self) -> int:
        """Hand out this database's next epoch, durably: no later call, in any life, returns it again.

        Line versions are numbered per epoch (an epoch's versions start at ``epoch << 32``,
        see docs/COHERENCE.md), so whatever versions a crash lost were below
        the next epoch's first version, and a write after the crash can never
        reuse one. A new database's first epoch is 0; one that holds data but
        no epoch record starts at 1, above whatever its earlier lives numbered.
        """
        with self._write_lock:
            raw = self._db.get(K.META_EPOCH)
            if raw is None:
                epoch = 0 if self._created else 1
            else:
                try:
                    held = _unpackb(raw)
                except Exception as exc:
                    raise CorruptRecord(f"L0 key {K.META_EPOCH!r} does not decode: {exc}") from exc
                if type(held) is not int or held < 0:
                    raise CorruptRecord(f"L0 key {K.META_EPOCH!r} holds {held!r}, not an epoch")
                epoch = held + 1
            wb = self._db.write_batch()
            wb.put(K.META_EPOCH, packb(epoch))
            self._commit(wb, sync=True, nodes=False)
        return epoch

    def add_listener(self, prefix: str, listener: Callable[[str], None]) -> None:
        """Call ``listener(iri)`` after every write or delete of a node whose IRI starts with ``prefix``.

        For an index kept beside the store (the search index of archived
        turns): it learns what changed instead of listing what exists. Called
        on the writer's thread once the write is in the database, outside the
        store's locks; it must be quick and must not raise (an exception is
        the writer's: its write has happened).
        """
        self._listeners.append((prefix, listener))

    def _announce(self, iris: Iterable[str]) -> None:
        """Tell the listeners of the IRIs a write just committed."""
        for prefix, listener in self._listeners:
            for iri in iris:
                if iri.startswith(prefix):
                    listener(iri)

    @property
    def clean_mark(self) -> str | None:
        """The token a clean close left (``close(clean_mark=...)``) if nothing was written since.

        Read when the store opened; the first write of this life deletes it
        from the database, so a later open sees it only if this life ends
        in another clean close."""
        return self._clean_mark

    @property
    def nodes_written(self) -> bool:
        """Whether this life wrote anything but its epoch and access counts (nodes, tombstones,
        annotations: every other write counts, so a new kind of write counts too)."""
        return self._nodes_written

    def _commit(self, wb: Any, sync: bool, *, nodes: bool = True) -> None:
        """Write batch ``wb`` (deleting the clean mark, if one is held); a synced one also advances
        the high-water count (caller holds the write lock). ``nodes=False``: the batch holds only
        the epoch or access counts (see :attr:`nodes_written`)."""
        if nodes:
            self._nodes_written = True
        if self._mark_held:
            wb.delete(K.META_CLEAN_MARK)
            self._mark_held = False
        if not sync:
            wb.write()
            return
        count = self._high_water + 1
        wb.put(K.META_HIGH_WATER, packb(count))
        wb.write()
        self._high_water = count
        try:
            write_high_water(self._path, count)
        except OSError as exc:
            raise StorageError(f"cannot record the high-water count of the L0 database {self._path}: {exc}") from exc

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

    def close(self, *, clean_mark: str | None = None) -> None:
        """Write pending access counts down (synchronously) and close. Idempotent.

        ``clean_mark``: the token of a snapshot of what the database holds,
        written beside it; recorded (durably) after the last write, so that
        the next life finds it as :attr:`clean_mark`, unless something wrote
        to the database in between (the first write deletes it).

        Call it only once other threads have stopped reading: LevelDB must not
        be closed under a read in flight.
        """
        if clean_mark is not None and (type(clean_mark) is not str or not clean_mark):
            raise InvalidInput(f"a clean mark is a non-empty string, not {show(clean_mark)}")
        with self._write_lock:
            if self._closed:
                return
            try:
                self.flush(sync=True)
                if clean_mark is not None:
                    self._db.put(K.META_CLEAN_MARK, packb(clean_mark), sync=True)
                self._write_memtable_down()
            finally:
                self._closed = True
                self._db.close()

    def _write_memtable_down(self) -> None:
        """Have LevelDB write its memtable to a table before it closes.

        LevelDB writes a full memtable down in the background and drops that
        work when the database closes under it; the next open then replays the
        whole write-ahead log (0.44 s for the 22 MB a 50,000-line fill left).
        ``compact_range`` writes the memtable down and waits for it; its range
        lies past every key (all start with ASCII or NUL), so no table is
        compacted. The log is synced already: if this fails, the next open
        replays it, as it would have.
        """
        try:
            self._db.compact_range(start=_PAST_EVERY_KEY, stop=_PAST_EVERY_KEY + b"\xff")
        except plyvel.Error:
            pass

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
            raise InvalidInput(f"sync must be true, false or None, not {show(sync)}")
        return sync or self._sync_all

    # -- access counters -------------------------------------------------------

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
                    self._commit(wb, sync, nodes=False)
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

    def _with_pending(self, fields: list[Any]) -> L0Entry:
        """The entry of ``fields`` with the reads not yet written down."""
        if self._pending:
            slot = self._pending.get(fields[0])  # one atomic dict read
            if slot is not None:
                fields = list(fields)
                fields[F_ACCESS_COUNT] += slot[1]
                fields[F_LAST_ACCESSED] = max(fields[F_LAST_ACCESSED], slot[2])
        return entry_from_fields(fields)

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
