"""The ``l0`` section of the configuration, owned by L0 (``Config.l0`` is one)."""

from __future__ import annotations

import dataclasses

from gliding_actors._config_parse import value_range

__all__ = ["L0Config"]


@dataclasses.dataclass(frozen=True)
class L0Config:
    """The LevelDB store."""

    #: Largest serialised node accepted, in bytes (larger is ``InvalidInput``).
    max_node_bytes: int = dataclasses.field(default=5 * 1024 * 1024, metadata=value_range(1))
    #: fsync every write batch (True) or only write-through ones (False).
    sync_all_writes: bool = False
    #: Reads counted in memory before their access counts are written down in
    #: one batch (read by :class:`~gliding_actors.l0.L0Store`, as the default of
    #: its ``access_flush_every``).
    access_flush_every: int = dataclasses.field(default=1000, metadata=value_range(1))
    #: LevelDB's memory, set explicitly so it has a stated bound
    #: (docs/RELIABILITY.md, "Memory over a soak"): writes gather in
    #: a memtable of ``write_buffer_bytes`` (LevelDB holds two while one is
    #: written out), read blocks stay in a block cache of ``block_cache_bytes``
    #: (0: no cache), and at most ``max_open_files`` table files are kept open,
    #: each with its index and Bloom filter in memory. Ranges are LevelDB's own.
    #: The defaults (1 MiB, 4 MiB) are a quarter and a half of LevelDB's: L0 is
    #: the cold tier under the agents' caches and L2's node map, so its own
    #: cache need not be large, and at 6 MiB in all it is full within minutes
    #: instead of still filling after ten. Measured in one process against
    #: LevelDB's 4 + 8 MiB: reads and scans as fast, writes ~5 % slower.
    write_buffer_bytes: int = dataclasses.field(default=1024 * 1024, metadata=value_range(64 * 1024, 1 << 30))
    block_cache_bytes: int = dataclasses.field(default=4 * 1024 * 1024, metadata=value_range(0, 1 << 30))
    max_open_files: int = dataclasses.field(default=1000, metadata=value_range(74, 50_000))
    #: Uncompressed bytes of data per table block (the unit the block cache holds).
    block_size_bytes: int = dataclasses.field(default=4096, metadata=value_range(1024, 4 * 1024 * 1024))
    #: Keep each directory shard's lines in a LevelDB of its own, under
    #: ``<memory>/l0-shards/``, opened by the shard where it runs (the layout a
    #: shard on another node needs, docs/SCALING.md). Implies ``l2.graph_writer``.
    #: The memory's own L0 keeps L1's archived turns. Fixed when a memory is
    #: created, as is ``coherence.directory_shards`` then (a line's shard is a
    #: hash of its IRI): reopening with another layout is refused. Each shard's
    #: LevelDB has the sizes above.
    sharded: bool = False
