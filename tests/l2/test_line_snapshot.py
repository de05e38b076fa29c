"""A clean close leaves a snapshot of the lines; the next open loads it only while L0 is as the close left it.

Whatever the open loads from, the memory it gives is the same: the same graph
(every quad), node map, line registry and expiry table as a rebuild from L0.
"""

from __future__ import annotations

import shutil
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import pytest

from gliding_actors import MemorySystem
from gliding_actors._line_snapshot import _PREFIX, LINE_SNAPSHOT, MAGIC
from gliding_actors.clock import VirtualClock
from gliding_actors.errors import InvalidInput
from gliding_actors.l0 import L0Store
from gliding_actors.l0._repair import repair_l0

HASH = {"hyperspace": {"embedder": "hash"}}
#: values whose quads take the JSON-LD parser's less common paths: nested (skolemised) nodes,
#: lists, typed and language-tagged literals, and text the N-Quads syntax has to escape
VALUES: dict[str, tuple[dict[str, Any], str]] = {
    "plan:nested": ({"goal": "ship", "steps": [{"n": 1, "do": "a"}, {"n": 2, "do": "b"}]}, "plan"),
    "plan:typed": ({"when": {"@value": "2026-12-07", "@type": "http://www.w3.org/2001/XMLSchema#date"}}, "plan"),
    "plan:lang": ({"title": {"@value": "Grüße \"quoted\"\nline two\ttab \\ back", "@language": "de-DE"}}, "plan"),
    "review:json": ({"payload": {"@value": {"a": [1, 2.5, None, True]}, "@type": "@json"}}, "review"),
    "review:ref": ({"about": {"@id": "plan:nested"}, "score": 0.75}, "review"),
    "shared:plain": ({"text": "emoji \U0001f680 and \u00e9"}, "shared"),
}


def _fill(path: Path) -> None:
    with MemorySystem.open(path, runtime="sim", config=HASH) as memory:
        pa = memory.agent("admin", "system")
        for iri, (value, graph) in VALUES.items():
            pa.write(iri, value, graph=graph, tags=["t1", "t2"] if "plan" in iri else [], importance=0.3)
        pa.write("plan:soon", {"goal": "expire"}, graph="plan", ttl_s=3600.0)
        pa.write("plan:gone", {"goal": "delete me"}, graph="plan")
        pa.delete("plan:gone")
        pa.write("plan:nested", {"goal": "ship v2", "steps": [{"n": 1, "do": "a"}]}, graph="plan")


def _state(memory: MemorySystem) -> dict[str, Any]:
    """Everything an open rebuilds from L0, comparable."""
    return {
        "quads": memory.graph.dump(),
        "nodes": memory.graph.lines(),
        "quads_of": {n.iri: sorted(map(str, memory.graph.quads_of(n.iri))) for n in memory.graph.lines()},
        "registry": dict(memory.line_graphs.graphs),
        "versions": {iri: memory.line_graphs.version_of(iri) for iri in memory.line_graphs.graphs},
        "expiry": sorted(memory.expiry.table.heap),
    }


def _without_snapshot(path: Path, where: Path) -> Path:
    """A copy of the memory at ``path`` without its snapshot (its L0 still marked)."""
    shutil.copytree(path, where)
    (where / LINE_SNAPSHOT).unlink()
    return where


def test_a_clean_close_is_reopened_from_its_snapshot_and_gives_the_memory_a_rebuild_gives(tmp_path: Path) -> None:
    path = tmp_path / "m"
    _fill(path)
    assert (path / LINE_SNAPSHOT).is_file()
    copy = _without_snapshot(path, tmp_path / "copy")
    states = {}
    for where, source in ((path, "snapshot"), (copy, "l0")):
        with MemorySystem.open(where, runtime="sim", config=HASH) as memory:
            assert memory.lines_loaded_from == source
            states[source] = _state(memory)
            held = memory.agent("da", "DA").read("plan:nested")
            assert held is not None and held["value"] == {"goal": "ship v2", "steps": [{"n": 1, "do": "a"}]}
    assert states["snapshot"] == states["l0"]
    assert len(states["l0"]["nodes"]) == len(VALUES) + 1  # a deleted line leaves L0: no node
    assert [e[1] for e in states["l0"]["expiry"]] == ["plan:soon"]


def test_lines_loaded_from_a_snapshot_are_rewritten_and_deleted_exactly(tmp_path: Path) -> None:
    """A later write replaces exactly the quads the snapshot put, as after a rebuild."""
    path = tmp_path / "m"
    _fill(path)
    copy = _without_snapshot(path, tmp_path / "copy")
    after: dict[str, dict[str, Any]] = {}
    for where, source in ((path, "snapshot"), (copy, "l0")):
        with MemorySystem.open(where, runtime="sim", config=HASH) as memory:
            assert memory.lines_loaded_from == source
            pa = memory.agent("admin", "system")
            pa.write("plan:nested", {"goal": "ship v3"}, graph="plan")
            pa.delete("review:ref")
            pa.write("plan:lang", {"title": "plain now"}, graph="plan")
            memory.flush()
            after[source] = _state(memory)
    assert after["snapshot"]["quads"] == after["l0"]["quads"]
    assert after["snapshot"]["nodes"] == after["l0"]["nodes"]
    assert not any("review:ref" in q or "ship v2" in q or "Grüße" in q for q in after["snapshot"]["quads"])
    assert any("ship v3" in q for q in after["snapshot"]["quads"])


def test_a_write_after_the_close_sends_the_open_back_to_l0(tmp_path: Path) -> None:
    """Another program wrote to L0 between the close and the open: the snapshot is out of date."""
    path = tmp_path / "m"
    _fill(path)
    with L0Store(path / "l0", clock=VirtualClock()) as l0:
        assert l0.clean_mark is not None
        l0.store_jsonld_node({"@id": "plan:added", "goal": "written elsewhere"}, named_graph="plan")
    with MemorySystem.open(path, runtime="sim", config=HASH) as memory:
        assert memory.lines_loaded_from == "l0"
        assert memory.graph.node("plan:added") is not None


def test_a_life_that_only_read_keeps_the_snapshot_and_one_that_wrote_saves_a_new_one(tmp_path: Path) -> None:
    path = tmp_path / "m"
    _fill(path)
    file = path / LINE_SNAPSHOT
    written = file.read_bytes()
    with MemorySystem.open(path, runtime="sim", config=HASH) as memory:
        da = memory.agent("da", "DA")
        assert da.read("plan:nested") is not None and da.search("ship", k=3)  # reads, access counts
    assert file.read_bytes() == written  # the same file, the same token: not written again
    with MemorySystem.open(path, runtime="sim", config=HASH) as memory:
        assert memory.lines_loaded_from == "snapshot"
        memory.agent("admin", "system").write("plan:new", {"goal": "new"}, graph="plan")
    assert file.read_bytes() != written
    with MemorySystem.open(path, runtime="sim", config=HASH) as memory:
        assert memory.lines_loaded_from == "snapshot"
        assert memory.graph.node("plan:new") is not None


def test_a_crash_sends_the_next_open_back_to_l0(tmp_path: Path) -> None:
    path = tmp_path / "m"
    _fill(path)
    memory = MemorySystem.open(path, runtime="sim", config=HASH)
    assert memory.lines_loaded_from == "snapshot"
    memory.agent("pa", "PA").write("plan:critical", {"goal": "kept"}, graph="plan", tags=["confirmed_fact"])
    reopened = memory.crash_process()
    try:
        assert reopened.lines_loaded_from == "l0"
        assert reopened.graph.node("plan:critical") is not None
    finally:
        reopened.close()


@pytest.mark.parametrize("damage", ["flipped byte", "cut short", "empty", "another close's"])
def test_a_damaged_or_foreign_snapshot_is_ignored(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "m"
    _fill(path)
    file = path / LINE_SNAPSHOT
    data = file.read_bytes()
    if damage == "flipped byte":
        at = len(data) - 40
        file.write_bytes(data[:at] + bytes([data[at] ^ 0x20]) + data[at + 1 :])
    elif damage == "cut short":
        file.write_bytes(data[: len(data) // 2])
    elif damage == "empty":
        file.write_bytes(b"")
    else:
        with MemorySystem.open(path, runtime="sim", config=HASH) as memory:  # another clean close
            memory.agent("pa", "PA").write("plan:later", {"goal": "later"}, graph="plan")
        file.write_bytes(data)  # the older close's snapshot, with its own token
    with MemorySystem.open(path, runtime="sim", config=HASH) as memory:
        assert memory.lines_loaded_from == "l0"
        assert memory.graph.node("plan:nested") is not None
        if damage == "another close's":
            assert memory.graph.node("plan:later") is not None


def _rewritten(file: Path, change: Callable[[list[list[Any]]], None]) -> None:
    """Rewrite the snapshot's rows with ``change``, as a whole file (same token, a CRC that matches)."""
    data = file.read_bytes()
    start = len(MAGIC) + _PREFIX.size
    _format, head_len = _PREFIX.unpack_from(data, len(MAGIC))
    head = msgpack.unpackb(data[start : start + head_len])
    body = start + head_len
    rows = msgpack.unpackb(data[body : body + head["rows"]])
    quads = data[body + head["rows"] :]
    change(rows)
    packed = msgpack.packb(rows)
    head.update(rows=len(packed), crc=zlib.crc32(quads, zlib.crc32(packed)))
    new_head = msgpack.packb(head)
    file.write_bytes(MAGIC + _PREFIX.pack(_format, len(new_head)) + new_head + packed + quads)


def _set(field: int, value: Any) -> Callable[[list[list[Any]]], None]:
    def change(rows: list[list[Any]]) -> None:
        rows[-1][field] = value

    return change


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(_set(3, -1), id="bad version"),
        pytest.param(_set(3, "7"), id="version not a number"),
        pytest.param(_set(0, "not an iri"), id="bad iri"),
        pytest.param(_set(2, "bad\x00graph"), id="bad graph"),
        pytest.param(_set(1, ["not", "an", "object"]), id="value not an object"),
        pytest.param(_set(4, [3]), id="tag not a string"),
        pytest.param(_set(5, 7.5), id="importance out of range"),
        pytest.param(_set(6, "soon"), id="expiry not a time"),
        pytest.param(_set(7, -1), id="negative quad count"),
        pytest.param(_set(7, 10**6), id="more quads than the file holds"),
    ],
)
def test_a_snapshot_made_to_look_whole_with_a_bad_line_is_not_used(
    tmp_path: Path, change: Callable[[list[list[Any]]], None]
) -> None:
    path = tmp_path / "m"
    _fill(path)
    copy = _without_snapshot(path, tmp_path / "copy")
    with MemorySystem.open(copy, runtime="sim", config=HASH) as memory:
        rebuilt = _state(memory)
    _rewritten(path / LINE_SNAPSHOT, change)
    with MemorySystem.open(path, runtime="sim", config=HASH) as memory:
        assert memory.lines_loaded_from == "l0"
        assert _state(memory) == rebuilt  # nothing of the refused snapshot was kept


def test_a_repaired_l0_is_not_what_the_close_left(tmp_path: Path) -> None:
    path = tmp_path / "m"
    _fill(path)
    repair_l0(path / "l0", in_place=True)
    with L0Store(path / "l0", clock=VirtualClock()) as l0:
        assert l0.clean_mark is None


def test_a_close_that_did_not_flush_leaves_no_mark(tmp_path: Path) -> None:
    path = tmp_path / "m"
    _fill(path)
    memory = MemorySystem.open(path, runtime="sim", config=HASH)
    memory.close(flush=False)
    with MemorySystem.open(path, runtime="sim", config=HASH) as again:
        assert again.lines_loaded_from == "l0"


def test_a_snapshot_that_cannot_be_written_leaves_no_mark_and_no_half_file(tmp_path: Path) -> None:
    path = tmp_path / "m"
    (path / LINE_SNAPSHOT / "in the way").mkdir(parents=True)  # the file cannot replace a directory
    with MemorySystem.open(path, runtime="sim", config=HASH) as memory:
        memory.agent("admin", "system").write("plan:a", {"goal": "g"}, graph="plan")
    assert not (path / (LINE_SNAPSHOT + ".tmp")).exists()
    with L0Store(path / "l0", clock=VirtualClock()) as l0:
        assert l0.clean_mark is None


def test_a_sharded_l0_writes_no_snapshot(tmp_path: Path) -> None:
    config = {**HASH, "l0": {"sharded": True}, "coherence": {"directory_shards": 2}}
    path = tmp_path / "m"
    with MemorySystem.open(path, runtime="sim", config=config) as memory:
        memory.agent("pa", "PA").write("plan:a", {"goal": "g"}, graph="plan")
    assert not (path / LINE_SNAPSHOT).exists()
    with MemorySystem.open(path, runtime="sim", config=config) as memory:
        assert memory.lines_loaded_from == "l0"
        assert memory.graph.node("plan:a") is not None


# -- the mark in L0 ------------------------------------------------------------------------


def test_the_clean_mark_lasts_until_the_first_write(tmp_path: Path) -> None:
    where = tmp_path / "l0"
    with L0Store(where, clock=VirtualClock()) as l0:
        assert l0.clean_mark is None
        l0.store_jsonld_node({"@id": "note:a", "text": "a"})
    L0Store(where, clock=VirtualClock()).close(clean_mark="token-1")
    with L0Store(where, clock=VirtualClock()) as l0:
        assert l0.clean_mark == "token-1"
        l0.store_jsonld_node({"@id": "note:b", "text": "b"})  # the first write deletes it
        assert l0.clean_mark == "token-1"  # what the open found
    with L0Store(where, clock=VirtualClock()) as l0:
        assert l0.clean_mark is None
    L0Store(where, clock=VirtualClock()).close(clean_mark="token-2")
    with L0Store(where, clock=VirtualClock()) as l0:
        assert l0.clean_mark == "token-2"
    # a close writes (access counts, an fsync), so even a life that only read leaves no mark
    with L0Store(where, clock=VirtualClock()) as l0:
        assert l0.clean_mark is None


def test_nodes_written_counts_every_write_but_the_epoch_and_access_counts(tmp_path: Path) -> None:
    where = tmp_path / "l0"
    with L0Store(where, clock=VirtualClock()) as l0:
        l0.store_jsonld_node({"@id": "note:a", "text": "a"})
    with L0Store(where, clock=VirtualClock()) as l0:
        l0.reserve_epoch()
        assert l0.retrieve("note:a") is not None
        l0.flush(sync=True)  # the read's access count
        assert not l0.nodes_written
        l0.annotate("note:a", mesi_state="S")
        assert l0.nodes_written
    with L0Store(where, clock=VirtualClock()) as l0:
        l0.delete("note:a")
        assert l0.nodes_written


@pytest.mark.parametrize("bad", ["", 7, b"token"])
def test_a_bad_clean_mark_is_refused_and_the_store_stays_open(tmp_path: Path, bad: Any) -> None:
    l0 = L0Store(tmp_path / "l0", clock=VirtualClock())
    with pytest.raises(InvalidInput):
        l0.close(clean_mark=bad)
    assert not l0.closed
    l0.store_jsonld_node({"@id": "note:a", "text": "a"})
    l0.close()
    with L0Store(tmp_path / "l0", clock=VirtualClock()) as again:
        assert again.clean_mark is None and again.retrieve("note:a") is not None
