"""``bench l0``: what the L0 store costs over raw plyvel + msgpack.

Every figure is measured against a baseline in the same process, on the same
nodes (~250-byte JSON-LD, two tags, a named graph and a type each), with the
same LevelDB options, in fresh temporary directories per round. Within a round
ours and the baseline run alternately in blocks of ``block`` nodes, so both
see the same machine load; rates are medians over the rounds and each ratio is
the median of the per-round ratios (ours / raw, higher is better, 1.0 = free).

* ``put_nodes_per_s`` — ``L0Store.store(entry)``, ``sync=False``: one logical
  write, i.e. one LevelDB write batch holding the node and its five index keys
  (2 tags, graph, type, importance), after validation, canonical-JSON sha256
  and point reads of the stored node (for the merge) and of its tombstone (a
  new node continues a deleted one's version). ``raw_put_nodes_per_s`` — one
  plyvel write batch holding ``msgpack(node)`` per node, no indexes.
  ``put_ratio`` (target >= 0.6).
* ``bulk_put_*`` — the same with one write batch per block
  (``store_many`` vs one raw batch): LevelDB's per-batch cost is shared, so the
  ratio shows the store's own Python work. ``bulk_put_ratio`` (target >= 0.3).
* ``get_nodes_per_s`` — ``retrieve(iri)`` of every node once in random order,
  counting each access, *including* the batched write-down of those counts
  (every ``access_flush_every`` reads, plus the final ``flush()``): it is what
  reads cost. ``raw_get_nodes_per_s`` — ``msgpack.unpackb(db.get(key))``.
  ``get_ratio`` (target >= 0.7). ``get_untouched_*`` — the same reads with
  ``touch=False`` (no access counting, no write-down): the read path alone.
* ``prefix_scan_nodes_per_s`` — ``query_by_prefix(p)`` over 50 session
  prefixes (100 nodes each at full size); ``raw_prefix_scan_nodes_per_s`` —
  ``[unpackb(v) for _, v in db.iterator(prefix=...)]``. ``prefix_scan_ratio``
  (target >= 0.7). Both databases are compacted before the reads.
* ``tag_query_nodes_per_s`` — ``query_by_tags([t])`` over every tag (no
  baseline: raw plyvel has no tag index).

Each of the four ratios also has a ``*_floor_ratio``: what LevelDB alone
costs for L0's layout, against the same raw baseline, with no Python of L0's.
The floor writes the very keys and values ``store`` writes (the record,
larger than the bare node, and its five index keys) after the point read of
the node that a merge needs; reads the record and its access key and writes
the access count down in batches of ``access_flush_every``; scans records and
access keys side by side. Floors run in rounds of their own, after the
store's, on fresh databases, so they do not change the store's figures. A
ratio cannot pass its floor; the gap between the two is L0's Python
(validation, canonical JSON and its hash, the merge and version rules,
decoding into entries).
"""

from __future__ import annotations

import gc
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import plyvel

from gliding_actors.clock import SystemClock
from gliding_actors.config import L0Config
from gliding_actors.l0 import L0Entry, L0Store
from gliding_actors.l0 import _keys as K
from gliding_actors.l0._entry import pack_access
from gliding_actors.l0._store import leveldb_options

__all__ = ["run"]

_SESSIONS = 50
_TAGS = [f"topic-{i}" for i in range(20)]
_GRAPHS = ["plan", "execution", "review", "decision", "memory"]
_TYPES = ["Memory", "Artifact", "Decision", "Task"]
TARGETS = {"put_ratio": 0.6, "bulk_put_ratio": 0.3, "get_ratio": 0.7, "prefix_scan_ratio": 0.7}


def _nodes(n: int, rng: random.Random) -> list[L0Entry]:
    """Realistic small JSON-LD nodes (~350 bytes), two tags each."""
    out = []
    for i in range(n):
        iri = f"memory:session-{i % _SESSIONS:03d}/block-{i:06d}"
        node = {
            "@id": iri,
            "@type": _TYPES[i % len(_TYPES)],
            "summary": f"Turn {i}: the agent refactored the auth middleware to verify JWT tokens "
            f"and rotate signing keys; reviewer {rng.randrange(100)} asked for tests.",
            "relatedTo": [f"task:t-{rng.randrange(40)}", f"artifact:a-{rng.randrange(90)}"],
            "confidence": round(rng.random(), 3),
            "turn": i,
        }
        out.append(
            L0Entry(
                iri=iri,
                content=node,
                importance=round(rng.random(), 3),
                tags=rng.sample(_TAGS, 2),
                named_graph=_GRAPHS[i % len(_GRAPHS)],
            )
        )
    return out


def _open_raw(path: Path) -> Any:
    """Raw LevelDB opened as L0Store opens it on the default config, so the
    ratios measure L0's own work, not a difference in LevelDB's settings."""
    return plyvel.DB(str(path), **leveldb_options(L0Config()))


def _layout(entries: list[L0Entry], root: Path) -> list[list[tuple[bytes, bytes]]]:
    """The keys and values one ``store`` call per entry writes, in order (for the floors)."""
    writes: list[list[tuple[bytes, bytes]]] = []

    class _Recorded:
        def put(self, key: bytes, value: bytes) -> None:
            writes[-1].append((key, value))

        def delete(self, key: bytes) -> None:
            raise AssertionError("a new node deletes nothing")

    store = L0Store(root / "layout", clock=SystemClock())
    try:
        for entry in entries:
            writes.append([])
            iri_b, fields, packed = store._prepare(entry)
            store._apply(_Recorded(), iri_b, fields, packed, True, None, 0.0, None)
    finally:
        store.close()
    return writes


def _alternate(
    ours: Callable[[int], Any], base: Callable[[int], Any], blocks: int, base_first: bool
) -> tuple[float, float]:
    """Total seconds of ``ours(i)`` and ``base(i)`` over ``blocks`` blocks, run
    alternately block by block so that both see the same machine load."""
    gc.collect()
    clock = time.perf_counter
    t_ours = t_base = 0.0
    for i in range(blocks):
        first_base = base_first == (i % 2 == 0)
        if first_base:
            t0 = clock()
            base(i)
            t1 = clock()
            ours(i)
            t2 = clock()
            t_base += t1 - t0
            t_ours += t2 - t1
        else:
            t0 = clock()
            ours(i)
            t1 = clock()
            base(i)
            t2 = clock()
            t_ours += t1 - t0
            t_base += t2 - t1
    return t_ours, t_base


class _Raw:
    """The raw baseline of a round: plyvel + msgpack of the bare nodes, no indexes, block by block.

    One class for the store's rounds and the floors' rounds, so both ratios
    divide by exactly the same work.
    """

    def __init__(self, root: Path, entries: list[L0Entry], block: int, rng: random.Random) -> None:
        n = len(entries)
        #: the order of the round's reads, the same for both sides
        self.order = list(range(n))
        rng.shuffle(self.order)
        keys = [K.NODE + e.iri.encode() for e in entries]
        pairs = list(zip(keys, (e.content for e in entries), strict=True))
        self.pair_blocks = [pairs[i : i + block] for i in range(0, n, block)]
        self.get_key_blocks = [[keys[j] for j in self.order[i : i + block]] for i in range(0, n, block)]
        self.prefixes = [f"memory:session-{s:03d}/" for s in range(_SESSIONS)]
        #: the prefixes as node keys
        self.node_prefixes = [K.NODE + p.encode() for p in self.prefixes]
        self.db = _open_raw(root / "raw")
        self.bulk = _open_raw(root / "raw-bulk")
        self._pack = msgpack.Packer().pack

    def put(self, i: int) -> None:
        write_batch, pack = self.db.write_batch, self._pack
        for key, node in self.pair_blocks[i]:
            wb = write_batch()
            wb.put(key, pack(node))
            wb.write()

    def put_bulk(self, i: int) -> None:
        wb, pack = self.bulk.write_batch(), self._pack
        for key, node in self.pair_blocks[i]:
            wb.put(key, pack(node))
        wb.write()

    def get(self, i: int) -> None:
        get, unpackb = self.db.get, msgpack.unpackb
        for key in self.get_key_blocks[i]:
            unpackb(get(key))

    def scan(self, i: int) -> None:
        unpackb = msgpack.unpackb
        with self.db.iterator(prefix=self.node_prefixes[i]) as it:
            [unpackb(v) for _, v in it]

    def close(self) -> None:
        self.db.close()
        self.bulk.close()


def _round(
    entries: list[L0Entry], block: int, rng: random.Random, root: Path, base_first: bool
) -> dict[str, float]:
    n = len(entries)
    blocks = range(0, n, block)
    entry_blocks = [entries[i : i + block] for i in blocks]
    nb = len(entry_blocks)

    raw = _Raw(root, entries, block, rng)
    get_iri_blocks = [[entries[j].iri for j in raw.order[i : i + block]] for i in blocks]
    prefixes = raw.prefixes
    store = L0Store(root / "store", clock=SystemClock())
    store_bulk = L0Store(root / "store-bulk", clock=SystemClock())
    try:

        def store_put(i: int) -> None:
            put = store.store
            for entry in entry_blocks[i]:
                put(entry)

        def store_put_bulk(i: int) -> None:
            store_bulk.store_many(entry_blocks[i])

        def store_get_untouched(i: int) -> None:
            retrieve = store.retrieve
            for iri in get_iri_blocks[i]:
                retrieve(iri, touch=False)

        def store_get(i: int) -> None:
            retrieve = store.retrieve
            for iri in get_iri_blocks[i]:
                retrieve(iri)

        def store_scan(i: int) -> None:
            store.query_by_prefix(prefixes[i])

        t_put, t_raw_put = _alternate(store_put, raw.put, nb, base_first)
        t_bulk, t_raw_bulk = _alternate(store_put_bulk, raw.put_bulk, nb, base_first)
        # Reads run on compacted databases, so neither side pays for
        # memtable/SST merging that the other does not.
        raw.db.compact_range()
        store.compact()
        _alternate(store_scan, raw.scan, len(prefixes), base_first)  # warm the block caches
        t_scan, t_raw_scan = _alternate(store_scan, raw.scan, len(prefixes), base_first)
        gc.collect()
        start = time.perf_counter()
        hits = sum(len(store.query_by_tags([t])) for t in _TAGS)
        tag_rate = hits / (time.perf_counter() - start)
        # Gets last: counting accesses writes to the store. The write-down of
        # the counts (every access_flush_every reads, and the final flush) is
        # timed as part of the reads: it is what reads cost.
        t_untouched, t_raw_get_u = _alternate(store_get_untouched, raw.get, nb, base_first)
        t_get, t_raw_get = _alternate(store_get, raw.get, nb, base_first)
        start = time.perf_counter()
        store.flush()
        t_writedown = time.perf_counter() - start
    finally:
        store.close()
        store_bulk.close()
        raw.close()
    return {
        "put": n / t_put,
        "raw_put": n / t_raw_put,
        "bulk_put": n / t_bulk,
        "raw_bulk_put": n / t_raw_bulk,
        "get": n / (t_get + t_writedown),
        "get_untouched": n / t_untouched,
        "raw_get_u": n / t_raw_get_u,
        "raw_get": n / t_raw_get,
        "scan": n / t_scan,
        "raw_scan": n / t_raw_scan,
        "tag": tag_rate,
    }


def _floor_round(
    entries: list[L0Entry],
    layout: list[list[tuple[bytes, bytes]]],
    block: int,
    rng: random.Random,
    root: Path,
    base_first: bool,
) -> dict[str, float]:
    """One round of the floors: L0's layout written and read by raw plyvel, against the raw baseline."""
    layout_blocks = [layout[i : i + block] for i in range(0, len(layout), block)]
    nb = len(layout_blocks)
    flush_every = L0Config().access_flush_every

    raw = _Raw(root, entries, block, rng)
    prefixes = raw.node_prefixes
    floor = _open_raw(root / "floor")
    floor_bulk = _open_raw(root / "floor-bulk")
    unpackb = msgpack.unpackb
    access = pack_access(1, 0.0)
    reads = [0]
    try:

        def floor_put(i: int) -> None:
            write_batch = floor.write_batch
            get = floor.get
            for writes in layout_blocks[i]:
                get(writes[-1][0])  # the node's key: the merge's read
                wb = write_batch()
                for key, value in writes:
                    wb.put(key, value)
                wb.write()

        def floor_put_bulk(i: int) -> None:
            get = floor_bulk.get
            wb = floor_bulk.write_batch()
            for writes in layout_blocks[i]:
                get(writes[-1][0])
                for key, value in writes:
                    wb.put(key, value)
            wb.write()

        def floor_get(i: int) -> None:
            get = floor.get
            counts = floor.write_batch()
            for key in raw.get_key_blocks[i]:
                unpackb(get(key))
                akey = K.ACCESS + key[len(K.NODE) :]
                get(akey)
                counts.put(akey, access)
                reads[0] += 1
                if reads[0] % flush_every == 0:
                    counts.write()
                    counts = floor.write_batch()
            counts.write()

        def floor_scan(i: int) -> None:
            accesses = K.ACCESS + prefixes[i][len(K.NODE) :]
            with floor.iterator(prefix=prefixes[i]) as it, floor.iterator(prefix=accesses) as acc:
                next(acc, None)
                [unpackb(v) for _, v in it]

        t_put, t_raw_put = _alternate(floor_put, raw.put, nb, base_first)
        t_bulk, t_raw_bulk = _alternate(floor_put_bulk, raw.put_bulk, nb, base_first)
        raw.db.compact_range()
        floor.compact_range()
        _alternate(floor_scan, raw.scan, len(prefixes), base_first)  # warm the block caches
        t_scan, t_raw_scan = _alternate(floor_scan, raw.scan, len(prefixes), base_first)
        _alternate(floor_get, raw.get, nb, base_first)  # as the store's: read once untouched first
        t_get, t_raw_get = _alternate(floor_get, raw.get, nb, base_first)
    finally:
        raw.close()
        floor.close()
        floor_bulk.close()
    return {
        "put": t_raw_put / t_put,
        "bulk_put": t_raw_bulk / t_bulk,
        "get": t_raw_get / t_get,
        "scan": t_raw_scan / t_scan,
    }


def run(quick: bool) -> dict[str, Any]:
    """Run the suite; returns one JSON-able dict (prints nothing)."""
    n, rounds, block = (1000, 3, 250) if quick else (5000, 5, 500)
    rng = random.Random(20240501)
    entries = _nodes(n, rng)
    results: list[dict[str, float]] = []
    for r in range(rounds):
        root = Path(tempfile.mkdtemp(prefix="ga-bench-l0-"))
        try:
            results.append(_round(entries, block, rng, root, base_first=r % 2 == 0))
        finally:
            shutil.rmtree(root, ignore_errors=True)
    floors: list[dict[str, float]] = []
    root = Path(tempfile.mkdtemp(prefix="ga-bench-l0-"))
    try:
        layout = _layout(entries, root)
        for r in range(rounds):
            (root / f"floor-{r}").mkdir()
            floors.append(_floor_round(entries, layout, block, rng, root / f"floor-{r}", base_first=r % 2 == 0))
    finally:
        shutil.rmtree(root, ignore_errors=True)

    def floor(key: str) -> float:
        return round(statistics.median(f[key] for f in floors), 3)

    def med(key: str) -> float:
        return statistics.median(r[key] for r in results)

    def ratio(ours: str, base: str) -> float:
        return round(statistics.median(r[ours] / r[base] for r in results), 3)

    avg_bytes = statistics.mean(len(msgpack.packb(e.content)) for e in entries[: min(n, 500)])
    return {
        "suite": "l0",
        "nodes": n,
        "rounds": rounds,
        "block": block,
        "tags_per_node": 2,
        "index_keys_per_node": 5,
        "avg_node_msgpack_bytes": round(avg_bytes, 1),
        "put_nodes_per_s": round(med("put")),
        "raw_put_nodes_per_s": round(med("raw_put")),
        "put_ratio": ratio("put", "raw_put"),
        "bulk_put_nodes_per_s": round(med("bulk_put")),
        "raw_bulk_put_nodes_per_s": round(med("raw_bulk_put")),
        "bulk_put_ratio": ratio("bulk_put", "raw_bulk_put"),
        "get_nodes_per_s": round(med("get")),
        "raw_get_nodes_per_s": round(med("raw_get")),
        "get_ratio": ratio("get", "raw_get"),
        "get_untouched_nodes_per_s": round(med("get_untouched")),
        "get_untouched_ratio": ratio("get_untouched", "raw_get_u"),
        "prefix_scan_nodes_per_s": round(med("scan")),
        "raw_prefix_scan_nodes_per_s": round(med("raw_scan")),
        "prefix_scan_ratio": ratio("scan", "raw_scan"),
        "tag_query_nodes_per_s": round(med("tag")),
        "put_floor_ratio": floor("put"),
        "bulk_put_floor_ratio": floor("bulk_put"),
        "get_floor_ratio": floor("get"),
        "prefix_scan_floor_ratio": floor("scan"),
        "targets": dict(TARGETS),
        "met": {
            "put_ratio": ratio("put", "raw_put") >= TARGETS["put_ratio"],
            "bulk_put_ratio": ratio("bulk_put", "raw_bulk_put") >= TARGETS["bulk_put_ratio"],
            "get_ratio": ratio("get", "raw_get") >= TARGETS["get_ratio"],
            "prefix_scan_ratio": ratio("scan", "raw_scan") >= TARGETS["prefix_scan_ratio"],
        },
    }
