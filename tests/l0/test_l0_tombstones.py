"""Tombstones: a delete is a write (version + 1) that L0 remembers, so versions
continue across a delete and a process restart; tombstones are invisible to
reads and queries; verify() checks them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import msgpack
import plyvel
import pytest

from gliding_actors.clock import VirtualClock
from gliding_actors.config import Config, L0Config
from gliding_actors.errors import ConfigError, ConflictError, InvalidInput
from gliding_actors.l0 import FORMAT_VERSION, L0Entry, L0Store

IRI = "task:auth-refactor"
TOMB = b"d:" + IRI.encode()


def _raw(path: Path) -> plyvel.DB:
    return plyvel.DB(str(path))


def _unchanged(store: L0Store, call: Callable[[], object], error: type[Exception]) -> None:
    before = store.raw_items()
    with pytest.raises(error):
        call()
    assert store.raw_items() == before


# -- the rule of the issue: deleted at version 3, written again at 5 -------------


def test_a_node_deleted_at_version_3_is_written_again_at_version_5(
    open_store: Callable[..., L0Store], clock: VirtualClock
) -> None:
    store = open_store()
    for v in (1, 2, 3):
        assert store.store(L0Entry(IRI, {"v": v})).version == v
    clock.advance(7)
    assert store.delete(IRI) is True
    assert store.retrieve(IRI) is None
    assert store.retrieve_version(IRI) == 4  # 4 was the delete
    assert msgpack.unpackb(dict(store.raw_items())[TOMB]) == [4, 1_007.0]
    store.close()
    store = open_store()  # versions continue across a restart
    assert store.retrieve_version(IRI) == 4
    clock.advance(1)
    again = store.store(L0Entry(IRI, {"v": "again"}))
    assert again.version == 5
    # a new life: created now, no reads, no history from before the delete
    assert again.created_at == again.updated_at == 1_008.0 and again.access_count == 0
    assert TOMB not in dict(store.raw_items())  # the tombstone went in the same batch
    assert store.retrieve_version(IRI) == 5
    assert store.verify() == []


def test_retrieve_version(store: L0Store) -> None:
    assert store.retrieve_version(IRI) == 0  # never written
    store.store(L0Entry(IRI, {"v": 1}, version=7), merge=False)
    assert store.retrieve_version(IRI) == 7
    store.delete(IRI)
    assert store.retrieve_version(IRI) == 8
    with pytest.raises(InvalidInput):
        store.retrieve_version("not an iri")


def test_tombstones_are_invisible_to_reads_and_queries(store: L0Store) -> None:
    store.store(L0Entry(IRI, {"@type": "Task"}, tags=["plan"], named_graph="g", importance=0.9))
    store.store(L0Entry("task:other", {"@type": "Task"}, tags=["plan"], named_graph="g"))
    store.delete(IRI)
    assert store.retrieve(IRI) is None and store.retrieve_jsonld_node(IRI) is None
    assert IRI not in store
    assert store.count() == 1
    assert store.query_iris() == ["task:other"]
    assert [e.iri for e in store.query(prefix="task:")] == ["task:other"]
    assert store.query_iris(tags=["plan"]) == ["task:other"]
    assert store.query_iris(graph="g") == ["task:other"]
    assert store.query_iris(node_type="Task") == ["task:other"]
    assert store.query_iris(min_importance=0.8) == []
    assert store.list_graphs() == ["g"]
    assert store.annotate(IRI, vector_id=1) is None
    assert store.verify() == []


def test_a_delete_of_an_absent_node_without_a_version_changes_nothing(store: L0Store) -> None:
    before = store.raw_items()
    assert store.delete(IRI) is False
    assert store.raw_items() == before
    store.store(L0Entry(IRI, {"v": 1}))
    store.delete(IRI)
    before = store.raw_items()
    assert store.delete(IRI) is False  # already deleted: the tombstone stays as it is
    assert store.raw_items() == before


# -- explicit versions (the coherence layer's line versions) ----------------------


def test_a_delete_with_a_version_records_it(store: L0Store, clock: VirtualClock) -> None:
    store.store(L0Entry(IRI, {"v": 1}, version=3), merge=False)
    _unchanged(store, lambda: store.delete(IRI, version=3), ConflictError)  # not newer
    _unchanged(store, lambda: store.delete(IRI, version=2), ConflictError)
    assert store.delete(IRI, version=6) is True
    assert store.retrieve_version(IRI) == 6
    # a re-flush of the same delete is idempotent; an older one is refused
    clock.advance(5)
    before = store.raw_items()
    assert store.delete(IRI, version=6) is False
    assert store.raw_items() == before
    _unchanged(store, lambda: store.delete(IRI, version=5), ConflictError)
    # a later delete (re-created and deleted again in a cache, never written
    # down in between) moves the tombstone on
    assert store.delete(IRI, version=9) is False
    assert store.retrieve_version(IRI) == 9
    assert msgpack.unpackb(dict(store.raw_items())[TOMB]) == [9, 1_005.0]


def test_a_delete_with_a_version_of_a_node_never_written_leaves_a_tombstone(
    store: L0Store,
) -> None:
    # created and deleted in a cache before any write-down: L0 only sees the delete
    assert store.delete(IRI, version=2) is False
    assert store.retrieve(IRI) is None
    assert store.retrieve_version(IRI) == 2
    assert store.store(L0Entry(IRI, {"v": 3})).version == 3
    assert store.verify() == []


def test_a_write_over_a_tombstone_needs_a_newer_version(store: L0Store) -> None:
    store.store(L0Entry(IRI, {"v": 1}))
    store.delete(IRI)  # version 2
    _unchanged(store, lambda: store.store(L0Entry(IRI, {"v": 9}, version=1)), ConflictError)
    _unchanged(
        store, lambda: store.store(L0Entry(IRI, {"v": 9}, version=2), merge=False), ConflictError
    )
    assert store.store(L0Entry(IRI, {"v": 9}, version=4), merge=False).version == 4
    assert store.retrieve_version(IRI) == 4


def test_expect_version_over_a_tombstone(store: L0Store) -> None:
    store.store(L0Entry(IRI, {"v": 1}))
    store.delete(IRI)  # version 2
    _unchanged(store, lambda: store.store(L0Entry(IRI, {"v": 9}), expect_version=1), ConflictError)
    _unchanged(store, lambda: store.store(L0Entry(IRI, {"v": 9}), expect_version=3), ConflictError)
    # the version retrieve_version reports, or 0 ("must be absent")
    assert store.store(L0Entry(IRI, {"v": 9}), expect_version=2).version == 3
    store.delete(IRI)  # version 4
    assert store.store(L0Entry(IRI, {"v": 9}), expect_version=0).version == 5


@pytest.mark.parametrize("version", [-1, "2", 1.5, True])
def test_a_bad_delete_version_is_refused(store: L0Store, version: object) -> None:
    store.store(L0Entry(IRI, {"v": 1}))
    _unchanged(store, lambda: store.delete(IRI, version=version), InvalidInput)  # type: ignore[arg-type]


# -- merge, replace and batches over a tombstone ----------------------------------


@pytest.mark.parametrize("merge", [True, False])
def test_a_write_over_a_tombstone_starts_a_new_node(store: L0Store, merge: bool) -> None:
    store.store(L0Entry(IRI, {"long": "x" * 100}, tags=["old"], metadata={"k": 1}))
    store.retrieve(IRI)
    store.flush()
    store.delete(IRI)
    entry = store.store(L0Entry(IRI, {"s": "y"}, tags=["new"]), merge=merge)
    # nothing of the deleted node is merged back in
    assert entry.content == {"s": "y"} and entry.tags == ["new"] and entry.metadata == {}
    assert entry.version == 3 and entry.access_count == 0
    assert store.query_iris(tags=["old"]) == []
    assert store.verify() == []


def test_store_many_over_a_tombstone(store: L0Store) -> None:
    store.store(L0Entry(IRI, {"v": 1}))
    store.delete(IRI)  # version 2
    stored = store.store_many(
        [L0Entry(IRI, {"v": 3}), L0Entry("task:b", {"v": 1}), L0Entry(IRI, {"v": 44})]
    )
    assert [e.version for e in stored] == [3, 1, 4]
    assert store.retrieve_version(IRI) == 4
    assert TOMB not in dict(store.raw_items())
    assert store.verify() == []


def test_delete_graph_leaves_tombstones(store: L0Store) -> None:
    store.store(L0Entry("task:a", {"v": 1}, named_graph="plan"))
    store.store(L0Entry("task:b", {"v": 1}, named_graph="plan", version=5), merge=False)
    store.store(L0Entry("task:c", {"v": 1}, named_graph="other"))
    assert store.delete_graph("plan") == 2
    assert store.retrieve_version("task:a") == 2
    assert store.retrieve_version("task:b") == 6
    assert store.retrieve_version("task:c") == 1
    assert store.store(L0Entry("task:b", {"v": 2}, named_graph="plan")).version == 7
    assert store.verify() == []


# -- verify and format ------------------------------------------------------------


def test_verify_reports_a_tombstone_beside_its_node_and_a_bad_tombstone(
    open_store: Callable[..., L0Store], tmp_path: Path
) -> None:
    store = open_store()
    store.store(L0Entry(IRI, {"v": 1}))
    store.close()
    db = _raw(tmp_path / "l0")
    db.put(TOMB, msgpack.packb([2, 1.0]))
    db.put(b"d:task:bad", msgpack.packb(["two", 1.0]))
    db.close()
    problems = open_store().verify()
    assert f"tombstone {TOMB!r} coexists with its node" in problems
    assert any("d:task:bad" in p and "[version, deleted_at]" in p for p in problems)
    assert len(problems) == 2


def test_a_format_1_database_is_upgraded_on_open(
    open_store: Callable[..., L0Store], tmp_path: Path
) -> None:
    store = open_store()
    store.store(L0Entry(IRI, {"v": 1}, tags=["a"]))
    store.close()
    db = _raw(tmp_path / "l0")
    db.put(b"\x00meta:format", msgpack.packb(1))  # what the previous build wrote
    db.close()
    store = open_store()
    assert dict(store.raw_items())[b"\x00meta:format"] == msgpack.packb(FORMAT_VERSION) == b"\x02"
    assert store.retrieve(IRI) is not None and store.verify() == []


# -- config: access_flush_every -------------------------------------------------


def test_access_flush_every_comes_from_the_config(open_store: Callable[..., L0Store]) -> None:
    assert L0Config().access_flush_every == 1000
    store = open_store(config=L0Config(access_flush_every=2))
    store.store(L0Entry(IRI, {"v": 1}))
    store.retrieve(IRI)
    assert b"a:" + IRI.encode() not in dict(store.raw_items())
    store.retrieve(IRI)  # the second read writes the counts down
    assert msgpack.unpackb(dict(store.raw_items())[b"a:" + IRI.encode()])[0] == 2
    store.close()
    # the constructor argument wins over the config
    store = open_store(config=L0Config(access_flush_every=2), access_flush_every=100)
    store.retrieve(IRI)
    store.retrieve(IRI)
    assert msgpack.unpackb(dict(store.raw_items())[b"a:" + IRI.encode()])[0] == 2


def test_access_flush_every_is_checked() -> None:
    assert Config.from_dict({"l0": {"access_flush_every": 5}}).l0.access_flush_every == 5
    for bad in (0, -1, 1.5, "10", True):
        with pytest.raises(ConfigError):
            Config.from_dict({"l0": {"access_flush_every": bad}})
