"""LevelDB's memory has the bound the config states (``l0.write_buffer_bytes``, ``l0.block_cache_bytes``).

A ten-minute soak found L0 among what kept growing for minutes: LevelDB's
memtable and block cache fill up to sizes that were LevelDB's unstated
defaults. They are now set from the config, so the bound is the config's
and it is checked here on a real store: with small sizes, a workload several
times larger than both stays under ``2 x write buffer + block cache``
(LevelDB's own estimate, :meth:`L0Store.memory_bytes`), while the same
workload on the default sizes goes well past that figure: the options reach
LevelDB, the check can fail.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from gliding_actors.config import Config, L0Config
from gliding_actors.errors import ConfigError
from gliding_actors.l0 import L0Entry, L0Store

KIB = 1024
SMALL = L0Config(write_buffer_bytes=64 * KIB, block_cache_bytes=128 * KIB, block_size_bytes=1024)
#: LevelDB switches memtables only once one is past its size, and the estimate counts whole arena blocks
SLACK = 64 * KIB
NODES = 1_500


def _workload(store: L0Store) -> list[int]:
    """Write ~1.5 MB of distinct nodes, rewrite a third, read them all back at random; sample the memory."""
    seen = [store.memory_bytes()]
    for n in range(NODES):
        store.store(L0Entry(f"urn:t:mem-{n}", {"n": n, "text": f"node {n} " + "x" * 900}, tags=("soak",)))
        if n % 100 == 0:
            seen.append(store.memory_bytes())
    for n in range(0, NODES, 3):
        store.store(L0Entry(f"urn:t:mem-{n}", {"n": n, "text": "rewritten " + "y" * 900}), merge=False)
    order = list(range(NODES)) * 2
    random.Random(11).shuffle(order)
    for i, n in enumerate(order):
        assert store.retrieve(f"urn:t:mem-{n}", touch=False) is not None
        if i % 100 == 0:
            seen.append(store.memory_bytes())
    seen.append(store.memory_bytes())
    return seen


def test_leveldb_memory_stays_under_the_configured_bound(open_store: Callable[..., L0Store], tmp_path: Path) -> None:
    bound = 2 * SMALL.write_buffer_bytes + SMALL.block_cache_bytes + SLACK
    small = _workload(open_store(tmp_path / "small", config=SMALL))
    assert max(small) <= bound, (max(small), bound)
    assert max(small) >= SMALL.block_cache_bytes // 2  # the reads did fill the cache: the figure is live
    default = _workload(open_store(tmp_path / "default", config=L0Config()))
    assert max(default) > 2 * bound  # the defaults hold far more of the same workload


def test_the_defaults_are_stated_in_the_config() -> None:
    """L0's memtable and block cache are a quarter and a half of LevelDB's own
    4 + 8 MiB (docs/RELIABILITY.md, "Memory over a soak"); open files and
    block size stay LevelDB's."""
    config = L0Config()
    assert (config.write_buffer_bytes, config.block_cache_bytes) == (1024 * KIB, 4 * 1024 * KIB)
    assert (config.max_open_files, config.block_size_bytes) == (1000, 4 * KIB)


def test_a_block_cache_of_zero_turns_it_off(open_store: Callable[..., L0Store], tmp_path: Path) -> None:
    store = open_store(tmp_path / "nocache", config=L0Config(write_buffer_bytes=64 * KIB, block_cache_bytes=0))
    assert max(_workload(store)) <= 2 * 64 * KIB + SLACK


@pytest.mark.parametrize(
    "key, bad",
    [
        ("write_buffer_bytes", 64 * KIB - 1),
        ("write_buffer_bytes", (1 << 30) + 1),
        ("block_cache_bytes", -1),
        ("block_cache_bytes", 1.5),
        ("max_open_files", 73),
        ("block_size_bytes", 512),
        ("block_size_bytes", "4096"),
        ("max_open_files", True),
    ],
)
def test_leveldb_sizes_out_of_range_are_refused_and_open_nothing(key: str, bad: object, tmp_path: Path) -> None:
    from gliding_actors.system import MemorySystem

    where = tmp_path / "memory"
    with pytest.raises(ConfigError) as refused:
        MemorySystem.open(str(where), config={"l0": {key: bad}})
    assert refused.value.path == ("l0", key)
    assert not where.exists()  # refused before a memory (or its LevelDB) was created
    assert Config.from_dict({"l0": {key: getattr(L0Config(), key)}}).l0 == L0Config()
