"""A sharded L0 (``l0.sharded``): each directory shard keeps its lines in a LevelDB of its own.

The layout a shard on another node needs (docs/SCALING.md): the shard opens
its L0 where it runs, ships its lines to the graph writer when the memory
opens, and answers for its L0 (inspect, stats, the crash report) by message.
Real LevelDB (read back with a second ``L0Store`` after close), real
pyoxigraph, both in-process runtimes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gliding_actors import InvalidInput, MemorySystem
from gliding_actors.clock import SystemClock, VirtualClock
from gliding_actors.coherence._messages import directory_shard
from gliding_actors.l0 import L0Store
from gliding_actors.runtime import BACKENDS

SHARDED: dict[str, Any] = {
    "l0": {"sharded": True},
    "coherence": {"directory_shards": 2, "critical_tags": ["confirmed_fact"]},
}
SHARDS = ("dir:0", "dir:1")


def _open(path: Path, runtime: str, config: dict[str, Any] | None = None) -> MemorySystem:
    return MemorySystem.open(path, config=SHARDED if config is None else config, runtime=runtime, clock=VirtualClock())


def _stored(folder: Path) -> dict[str, tuple[Any, int]]:
    """What one LevelDB holds, read with a store of its own (the memory is closed)."""
    store = L0Store(str(folder), clock=SystemClock())
    try:
        return {e.iri: (e.content, e.version) for e in store.query()}
    finally:
        store.close()


def _tree(path: Path) -> dict[str, Any]:
    """Every file's size, and what each LevelDB holds (opening one rewrites its own log files)."""
    stores = [path / "l0", *sorted((path / "l0-shards").glob("dir-*"))]
    held: dict[str, Any] = {str(folder.relative_to(path)): _stored(folder) for folder in stores if folder.exists()}
    for root, _dirs, files in os.walk(path):
        for name in files:
            full = Path(root) / name
            if not any(folder in full.parents for folder in stores):
                held[str(full.relative_to(path))] = full.stat().st_size
    return held


@pytest.fixture(params=BACKENDS)
def runtime(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _lines(n: int) -> list[str]:
    return [f"plan:{i}" for i in range(n)]


def test_each_line_is_in_its_own_shards_leveldb_and_only_there(tmp_path: Path, runtime: str) -> None:
    with _open(tmp_path, runtime) as memory:
        pa = memory.agent("pa", "PA")
        for iri in _lines(8):
            pa.write(iri, {"v": iri}, tags=["confirmed_fact"])
    per_shard = {shard: _stored(tmp_path / "l0-shards" / shard.replace(":", "-")) for shard in SHARDS}
    for iri in _lines(8):
        home = directory_shard(iri, SHARDS)
        assert per_shard[home][iri] == ({"v": iri}, 1)
        assert all(iri not in held for shard, held in per_shard.items() if shard != home)
    assert {home for home in (directory_shard(i, SHARDS) for i in _lines(8))} == set(SHARDS)  # both used
    assert not any(iri.startswith("plan:") for iri in _stored(tmp_path / "l0"))  # the memory's L0: no lines


def test_reopening_rebuilds_the_graph_and_the_line_registry_from_the_shards(tmp_path: Path, runtime: str) -> None:
    with _open(tmp_path, runtime) as memory:
        pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
        for iri in _lines(6):
            pa.write(iri, {"@id": iri, "status": "planned"}, tags=["t"])
        da.write("exec:secret", {"@id": "exec:secret", "status": "done"}, graph="execution")
        da.write("exec:gone", {"v": 1}, graph="execution")
        da.delete("exec:gone")
    with _open(tmp_path, runtime) as memory:
        assert memory.graph.count() == 7
        assert memory.line_copy("plan:3") == ({"@id": "plan:3", "status": "planned"}, 1, ["t"], "shared")
        assert memory.line_copy("exec:gone") is None  # deleted: not a node in its shard's L0
        # the registry knows each line's graph again: permissions hold after reopen
        assert memory.line_graphs.graph_of("exec:secret") == "execution"
        qa = memory.agent("qa", "CA")
        rows = qa.query("SELECT ?s WHERE { ?x ga:status ?s }")["rows"]
        assert sorted(r["s"] for r in rows).count("planned") == 6
        assert memory.stats()["l0"]["records"] == 7
        inspected = memory.inspect("plan:3")
        assert inspected["l0"] == {"value": {"@id": "plan:3", "status": "planned"}, "version": 1}


def test_a_crashed_shard_keeps_its_leveldb_open_and_recovers(tmp_path: Path, runtime: str) -> None:
    with _open(tmp_path, runtime) as memory:
        pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
        for iri in _lines(6):
            pa.write(iri, {"v": 1})
        assert memory.crash("dir:1", timeout=5.0)["lost"] == []
        for iri in _lines(6):
            assert memory.inspect(iri, timeout=5.0)["owner"] == "pa"
            assert da.read(iri)["value"] == {"v": 1}
        assert memory.flush(timeout=5.0) == 6
        assert memory.stats()["l0"]["records"] == 6


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"coherence": {"directory_shards": 2}}, "sharded L0"),
        ({"l0": {"sharded": True}, "coherence": {"directory_shards": 3}}, "2 L0 shards, not 3"),
    ],
)
def test_reopening_in_another_layout_is_refused_and_changes_nothing(
    tmp_path: Path, config: dict[str, Any], message: str
) -> None:
    with _open(tmp_path, "sim") as memory:
        memory.agent("pa", "PA").write("plan:0", {"v": 1}, tags=["confirmed_fact"])
    before = _tree(tmp_path)
    with pytest.raises(InvalidInput, match=message):
        _open(tmp_path, "sim", config)
    assert _tree(tmp_path) == before
    with _open(tmp_path, "sim") as memory:
        assert memory.agent("qa", "CA").read("plan:0")["value"] == {"v": 1}


def test_a_memory_with_one_l0_is_not_opened_sharded(tmp_path: Path) -> None:
    with _open(tmp_path, "sim", {}) as memory:
        memory.agent("pa", "PA").write("plan:0", {"v": 1}, tags=["user_intent"])
    before = _tree(tmp_path)
    with pytest.raises(InvalidInput, match="one L0"):
        _open(tmp_path, "sim")
    assert _tree(tmp_path) == before and not (tmp_path / "l0-shards").exists()


@pytest.mark.parametrize("suite", ["coherence", "blackboard", "projection", "search", "context"])
def test_the_scenario_suites_pass_on_a_sharded_l0(suite: str, replay_suites: Callable[..., None]) -> None:
    # two shards (the suites' own count when they set one): lines on both
    replay_suites(suite, {"l0": {"sharded": True}, "coherence": {"directory_shards": 2}}, seeds=2)
