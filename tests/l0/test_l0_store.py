"""L0Store: round trips, versions, indexes and queries, access counting,
named graphs, on-disk format, corruption, concurrency."""

from __future__ import annotations

import hashlib
import json
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

import msgpack
import orjson
import plyvel
import pytest
from l0_support import brute_force

from gliding_actors.clock import VirtualClock
from gliding_actors.errors import (
    ConflictError,
    CorruptRecord,
    IncompatibleFormat,
    InvalidInput,
    StorageError,
)
from gliding_actors.l0 import FORMAT_VERSION, L0Entry, L0Store
from gliding_actors.l0._entry import pack_access

AUTH = "task:auth-refactor"


def canonical(content: Mapping[str, object]) -> bytes:
    return orjson.dumps(content, option=orjson.OPT_SORT_KEYS)


def canonical_hash(content: Mapping[str, object]) -> str:
    return hashlib.sha256(canonical(content)).hexdigest()


# -- round trips and versions ----------------------------------------------------


def test_store_then_retrieve_returns_every_field(store: L0Store, clock: VirtualClock) -> None:
    content = {"@type": "Task", "title": "Refactor auth", "é": "ünïcode"}
    stored = store.store(
        L0Entry(
            AUTH,
            content,
            importance=0.8,
            tags=["plan", "auth"],
            named_graph="plan",
            metadata={"by": "pa"},
            vector_id=7,
            mesi_state="E",
        )
    )
    got = store.retrieve(AUTH, touch=False)
    assert got == stored
    assert got is not None
    assert got.content == content
    assert got.iri == AUTH
    assert got.importance == 0.8
    assert got.tags == ["auth", "plan"]
    assert got.named_graph == "plan"
    assert got.jsonld_types == ["Task"]
    assert got.metadata == {"by": "pa"}
    assert got.version == 1
    assert got.vector_id == 7
    assert got.mesi_state == "E"
    assert got.created_at == got.updated_at == got.last_accessed == 1_000.0
    assert got.access_count == 0
    assert got.content_hash == canonical_hash(content)
    assert got.content_size == len(canonical(content))
    # the canonical form is json.dumps(sort_keys, compact, ensure_ascii=False)'s,
    # except for the spelling of some floats
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical(content) == text.encode()


def test_the_canonical_form_is_orjsons_with_sorted_keys(store: L0Store) -> None:
    content = {
        "z": 1,
        "a": [1e-05, 5e-07, 1e16, 0.1, -0.0, 2**64 - 1],
        "é": {"b": None, "a": "\x00"},
    }
    entry = store.store(L0Entry(AUTH, content))
    assert canonical(content) == (
        b'{"a":[0.00001,5e-7,1e+16,0.1,-0.0,18446744073709551615],'
        b'"z":1,"\xc3\xa9":{"a":"\\u0000","b":null}}'
    )
    assert entry.content_hash == canonical_hash(content)
    assert entry.content_size == len(canonical(content))


def test_missing_iri_is_none(store: L0Store) -> None:
    assert store.retrieve("task:nothing") is None
    assert store.retrieve_jsonld_node("task:nothing") is None
    assert "task:nothing" not in store


def test_scenario_iris_are_valid(store: L0Store) -> None:
    for iri in (
        "task:auth-refactor",
        "artifact:jwt-middleware",
        "memory:session-042/block-017",
        "https://example.org/a/b?c=d#e",
        "urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66",
        "memory:café/ü",
    ):
        store.store(L0Entry(iri, {"v": 1}))
        assert store.retrieve(iri) is not None
    assert store.verify() == []


def test_version_grows_by_one_per_write(store: L0Store, clock: VirtualClock) -> None:
    for expected in (1, 2, 3):
        clock.advance(1)
        assert store.store(L0Entry(AUTH, {"v": expected})).version == expected
    entry = store.retrieve(AUTH)
    assert entry is not None and entry.version == 3
    assert entry.created_at == 1_001.0 and entry.updated_at == 1_003.0


def test_explicit_version_is_recorded_and_never_goes_back(store: L0Store) -> None:
    assert store.store(L0Entry(AUTH, {"v": 1}, version=5), merge=False).version == 5
    assert (
        store.store(L0Entry(AUTH, {"v": 2}, version=5), merge=False).version == 5
    )  # idempotent re-flush
    with pytest.raises(ConflictError):
        store.store(L0Entry(AUTH, {"v": 3}, version=4), merge=False)
    assert store.store(L0Entry(AUTH, {"v": 4})).version == 6


def test_expect_version_is_a_compare_and_set(store: L0Store) -> None:
    with pytest.raises(ConflictError):
        store.store(L0Entry(AUTH, {"v": 1}), expect_version=1)
    assert store.store(L0Entry(AUTH, {"v": 1}), expect_version=0).version == 1
    assert store.store(L0Entry(AUTH, {"v": 2}), expect_version=1).version == 2
    with pytest.raises(ConflictError):
        store.store(L0Entry(AUTH, {"v": 3}), expect_version=1)
    entry = store.retrieve(AUTH)
    assert entry is not None and entry.content == {"v": 2}


def test_jsonld_node_round_trip(store: L0Store) -> None:
    node = {
        "@context": {"@vocab": "https://gliding.example/ns#"},
        "@id": "artifact:jwt-middleware",
        "@type": ["Artifact", "Code"],
        "summary": "JWT verification middleware",
        "path": "auth/jwt.py",
    }
    entry = store.store_jsonld_node(
        node, importance=0.9, tags=["confirmed_fact"], named_graph="execution"
    )
    assert entry.jsonld_types == ["Artifact", "Code"]
    assert entry.jsonld_context == node["@context"]
    assert store.retrieve_jsonld_node("artifact:jwt-middleware") == node
    assert store.query_iris(node_type="Code") == ["artifact:jwt-middleware"]


def test_jsonld_types_are_indexed_besides_content_type(store: L0Store) -> None:
    store.store(
        L0Entry("decision:jwt", {"@type": "Decision"}, jsonld_types=["https://schema.org/Action"])
    )
    entry = store.retrieve("decision:jwt")
    assert entry is not None
    assert entry.jsonld_types == ["Decision", "https://schema.org/Action"]
    assert store.query_iris(node_type="https://schema.org/Action") == ["decision:jwt"]
    assert store.query_iris(node_type="Decision") == ["decision:jwt"]


def test_entry_dict_round_trip(store: L0Store) -> None:
    stored = store.store(L0Entry(AUTH, {"v": [1, 2]}, tags=("a",), metadata={"k": {"n": 1}}))
    data = stored.to_dict()
    assert msgpack.unpackb(msgpack.packb(data)) == data  # plain data: crosses actor boundaries
    assert L0Entry.from_dict(data) == stored
    with pytest.raises(InvalidInput):
        L0Entry.from_dict({**data, "colour": "red"})
    with pytest.raises(InvalidInput):
        L0Entry.from_dict({"iri": AUTH})


# -- delete ----------------------------------------------------------------------


def test_delete_removes_the_node_and_every_index_entry(store: L0Store) -> None:
    store.store(L0Entry(AUTH, {"@type": "Task"}, tags=["a", "b"], named_graph="plan"))
    store.store(L0Entry("task:other", {"@type": "Task"}, tags=["a"], named_graph="plan"))
    store.retrieve(AUTH)
    store.flush()  # AUTH now has an access key too
    assert store.delete(AUTH) is True
    assert store.delete(AUTH) is False
    assert store.retrieve(AUTH) is None
    assert store.query_iris(tags=["a"]) == ["task:other"]
    assert store.query_iris(tags=["b"]) == []
    assert store.query_iris(node_type="Task") == ["task:other"]
    # only its tombstone is left
    assert [key for key, _ in store.raw_items() if AUTH.encode() in key] == [b"d:" + AUTH.encode()]
    assert store.verify() == []


# -- indexes and queries ---------------------------------------------------------


@pytest.fixture
def filled(store: L0Store) -> L0Store:
    rows = [
        ("task:a", ["plan", "urgent"], "plan", "Task", 0.9),
        ("task:ab", ["plan"], "plan", "TaskList", 0.5),
        ("task:b", ["urgent", "planning"], "planning", "Task", 0.1),
        ("memory:session-04/block-1", ["plan"], None, "Memory", 0.0),
        ("memory:session-042/block-017", ["plan", "urgent"], "memory", "Memory", 1.0),
        ("memory:session-042/block-018", [], "memory", "Memory", 0.5),
    ]
    for iri, tags, graph, typ, importance in rows:
        store.store(
            L0Entry(
                iri, {"@type": typ, "n": iri}, tags=tags, named_graph=graph, importance=importance
            )
        )
    return store


def test_tag_queries_intersect(filled: L0Store) -> None:
    assert filled.query_iris(tags=["plan"]) == [
        "memory:session-04/block-1",
        "memory:session-042/block-017",
        "task:a",
        "task:ab",
    ]
    assert filled.query_iris(tags=["plan", "urgent"]) == ["memory:session-042/block-017", "task:a"]
    assert filled.query_iris(tags=["urgent", "plan", "planning"]) == []
    assert [e.iri for e in filled.query_by_tags(["urgent"])] == [
        "memory:session-042/block-017",
        "task:a",
        "task:b",
    ]


def test_index_prefixes_are_exact(filled: L0Store) -> None:
    # "plan" is a prefix of "planning", "Task" of "TaskList": neither leaks.
    assert "task:b" not in filled.query_iris(tags=["plan"])
    assert filled.query_iris(tags=["planning"]) == ["task:b"]
    assert filled.query_iris(graph="plan") == ["task:a", "task:ab"]
    assert filled.query_iris(graph="planning") == ["task:b"]
    assert filled.query_iris(node_type="Task") == ["task:a", "task:b"]
    assert filled.query_iris(node_type="TaskList") == ["task:ab"]
    assert filled.query_iris(tags=["pla"]) == []


def test_iri_prefix_queries(filled: L0Store) -> None:
    assert filled.query_iris(prefix="memory:session-042/") == [
        "memory:session-042/block-017",
        "memory:session-042/block-018",
    ]
    assert filled.query_iris(prefix="memory:session-04/") == ["memory:session-04/block-1"]
    assert filled.query_iris(prefix="task:a") == ["task:a", "task:ab"]
    assert [e.iri for e in filled.query_by_prefix("task:")] == ["task:a", "task:ab", "task:b"]
    assert filled.query_iris(prefix="nothing:") == []
    assert len(filled.query_iris(prefix="")) == 6


def test_importance_range_queries_are_inclusive(filled: L0Store) -> None:
    assert filled.query_iris(min_importance=0.5, max_importance=0.9) == [
        "memory:session-042/block-018",
        "task:a",
        "task:ab",
    ]
    assert filled.query_iris(min_importance=1.0) == ["memory:session-042/block-017"]
    assert filled.query_iris(max_importance=0.0) == ["memory:session-04/block-1"]
    assert [e.iri for e in filled.query_by_importance(0.95, 1.0)] == [
        "memory:session-042/block-017"
    ]
    assert filled.query_iris(min_importance=0.7, max_importance=0.2) == []


def test_combined_filters_match_brute_force(filled: L0Store) -> None:
    everything = filled.query()
    cases: list[dict[str, object]] = [
        {"tags": ["plan"], "graph": "plan"},
        {"tags": ["plan"], "prefix": "memory:"},
        {"tags": ["urgent"], "min_importance": 0.5},
        {"graph": "memory", "node_type": "Memory", "max_importance": 0.6},
        {"prefix": "task:", "min_importance": 0.4},
        {"node_type": "Task", "prefix": "task:b"},
    ]
    for case in cases:
        assert filled.query_iris(**case) == brute_force(everything, **case), case  # type: ignore[arg-type]
        assert [e.iri for e in filled.query(**case)] == brute_force(everything, **case)  # type: ignore[arg-type]


def test_limit_keeps_iri_order(filled: L0Store) -> None:
    assert filled.query_iris(tags=["plan"], limit=2) == [
        "memory:session-04/block-1",
        "memory:session-042/block-017",
    ]
    assert filled.query_iris(prefix="task:", limit=1) == ["task:a"]
    assert [e.iri for e in filled.query(limit=3)] == sorted(filled.query_iris())[:3]
    assert filled.query_iris(limit=0) == []


def test_graphs_are_listed_and_deleted(filled: L0Store) -> None:
    assert filled.list_graphs() == ["memory", "plan", "planning"]
    assert filled.delete_graph("plan") == 2
    assert filled.list_graphs() == ["memory", "planning"]
    assert filled.retrieve("task:a") is None and filled.retrieve("task:ab") is None
    assert filled.query_iris(tags=["plan"]) == [
        "memory:session-04/block-1",
        "memory:session-042/block-017",
    ]
    assert filled.delete_graph("plan") == 0
    assert filled.count() == 4
    assert filled.verify() == []


def test_queries_do_not_count_accesses(filled: L0Store) -> None:
    filled.query(tags=["plan"])
    filled.query(prefix="task:")
    assert all(e.access_count == 0 for e in filled.query())


# -- access counting -------------------------------------------------------------


def test_reads_count_accesses_in_memory_then_in_batches(
    open_store: Callable[..., L0Store], clock: VirtualClock
) -> None:
    store = open_store(access_flush_every=3)
    store.store(L0Entry(AUTH, {"v": 1}))
    before = store.raw_items()
    clock.advance(5)
    first = store.retrieve(AUTH)
    assert first is not None and first.access_count == 1 and first.last_accessed == 1_005.0
    second = store.retrieve(AUTH)
    assert second is not None and second.access_count == 2
    assert store.raw_items() == before, "a read must not write"
    assert store.retrieve(AUTH, touch=False).access_count == 2  # type: ignore[union-attr]
    assert store.query()[0].access_count == 2  # queries see the counts not yet written down
    clock.advance(5)
    third = store.retrieve(AUTH)  # the third read triggers the write-down
    assert third is not None and third.access_count == 3 and third.last_accessed == 1_010.0
    assert store.raw_items() != before
    assert store.flush() == 0  # nothing left to write


def test_access_counts_survive_reopen_after_flush_or_close(
    open_store: Callable[..., L0Store], tmp_path: Path
) -> None:
    store = open_store()
    store.store(L0Entry(AUTH, {"v": 1}))
    for _ in range(4):
        store.retrieve(AUTH)
    assert store.flush() == 1
    store.retrieve(AUTH)
    store.close()
    reopened = open_store()
    entry = reopened.retrieve(AUTH, touch=False)
    assert entry is not None and entry.access_count == 5


def test_counting_reads_never_rewrites_the_node(store: L0Store) -> None:
    store.store(L0Entry(AUTH, {"big": "x" * 10_000}))
    node_value = dict(store.raw_items())[b"n:" + AUTH.encode()]
    for _ in range(3):
        store.retrieve(AUTH)
    store.flush()
    items = dict(store.raw_items())
    assert items[b"n:" + AUTH.encode()] == node_value
    assert msgpack.unpackb(items[b"a:" + AUTH.encode()]) == [3, 1_000.0]


def test_writes_keep_the_access_count(store: L0Store) -> None:
    store.store(L0Entry(AUTH, {"v": 1}))
    store.retrieve(AUTH)
    store.flush()
    store.retrieve(AUTH)
    assert store.store(L0Entry(AUTH, {"v": 22})).access_count == 2
    assert store.store(L0Entry(AUTH, {"v": 3}), merge=False).access_count == 2
    store.flush()
    assert store.retrieve(AUTH, touch=False).access_count == 2  # type: ignore[union-attr]


def test_delete_drops_pending_reads(store: L0Store) -> None:
    store.store(L0Entry(AUTH, {"v": 1}))
    store.retrieve(AUTH)
    store.delete(AUTH)
    store.store(L0Entry(AUTH, {"v": 1}))
    assert store.retrieve(AUTH, touch=False).access_count == 0  # type: ignore[union-attr]


def test_annotate_sets_bookkeeping_without_a_new_version(store: L0Store) -> None:
    store.store(L0Entry(AUTH, {"v": 1}))
    entry = store.annotate(AUTH, vector_id=42, mesi_state="M")
    assert (
        entry is not None
        and entry.vector_id == 42
        and entry.mesi_state == "M"
        and entry.version == 1
    )
    assert store.annotate(AUTH, vector_id=None).vector_id is None  # type: ignore[union-attr]
    assert store.annotate("task:absent", vector_id=1) is None
    # a later write without a vector id keeps the one recorded
    store.annotate(AUTH, vector_id=9)
    assert store.store(L0Entry(AUTH, {"v": 2})).vector_id == 9


def test_store_many_is_one_atomic_ordered_batch(store: L0Store) -> None:
    stored = store.store_many(
        [
            L0Entry(AUTH, {"v": 1}, tags=["a"]),
            L0Entry("task:b", {"v": 1}),
            L0Entry(AUTH, {"v": 22}, tags=["b"]),
        ]
    )
    assert [e.version for e in stored] == [1, 1, 2]
    entry = store.retrieve(AUTH)
    assert entry is not None and entry.tags == ["a", "b"] and entry.content == {"v": 22}
    assert store.verify() == []


# -- format, corruption, lifecycle -----------------------------------------------


def _raw_put(path: Path, key: bytes, value: bytes) -> None:
    db = plyvel.DB(str(path))
    try:
        db.put(key, value)
    finally:
        db.close()


def _raw_delete(path: Path, key: bytes) -> None:
    db = plyvel.DB(str(path))
    try:
        db.delete(key)
    finally:
        db.close()


def test_records_are_one_msgpack_array_with_the_content_spliced_in(store: L0Store) -> None:
    stored = store.store(
        L0Entry(AUTH, {"@type": "Task", "l": [1, 2.5, None]}, tags=["a"], metadata={"m": 1})
    )
    raw = dict(store.raw_items())[b"n:" + AUTH.encode()]
    assert raw == msgpack.packb([1, *stored[1:15]])  # one packb of the record, byte for byte
    for count in (0, 127, 128, 70_000):
        for when in (0.0, 1_000.5):
            assert pack_access(count, when) == msgpack.packb([count, when])


def test_a_new_database_records_its_format(store: L0Store) -> None:
    assert dict(store.raw_items())[b"\x00meta:format"] == msgpack.packb(FORMAT_VERSION)


def test_a_newer_format_refuses_to_open(open_store: Callable[..., L0Store], tmp_path: Path) -> None:
    open_store().close()
    _raw_put(tmp_path / "l0", b"\x00meta:format", msgpack.packb(FORMAT_VERSION + 1))
    with pytest.raises(IncompatibleFormat, match=f"format version {FORMAT_VERSION + 1}"):
        open_store()


def test_a_corrupt_format_key_refuses_to_open(
    open_store: Callable[..., L0Store], tmp_path: Path
) -> None:
    open_store().close()
    _raw_put(tmp_path / "l0", b"\x00meta:format", b"\xc1")
    with pytest.raises(CorruptRecord, match="format"):
        open_store()


def test_data_without_a_format_key_refuses_to_open(
    open_store: Callable[..., L0Store], tmp_path: Path
) -> None:
    store = open_store()
    store.store(L0Entry(AUTH, {"v": 1}))
    store.close()
    _raw_delete(tmp_path / "l0", b"\x00meta:format")
    with pytest.raises(CorruptRecord, match="no format key"):
        open_store()


def test_a_corrupt_record_is_a_clear_error_naming_its_key(
    open_store: Callable[..., L0Store], tmp_path: Path
) -> None:
    store = open_store()
    store.store(L0Entry(AUTH, {"v": 1}, tags=["a"]))
    store.store(L0Entry("task:ok", {"v": 1}, tags=["a"]))
    store.close()
    _raw_put(tmp_path / "l0", b"n:" + AUTH.encode(), b"\x93\x01\x02")  # valid msgpack, wrong shape
    store = open_store()
    with pytest.raises(CorruptRecord, match="n:task:auth-refactor"):
        store.retrieve(AUTH)
    with pytest.raises(CorruptRecord, match="n:task:auth-refactor"):
        store.query(tags=["a"])
    with pytest.raises(CorruptRecord):
        store.query(prefix="task:")
    assert store.retrieve("task:ok") is not None
    problems = store.verify()
    assert any("n:task:auth-refactor" in p for p in problems)
    store.close()
    _raw_put(tmp_path / "l0", b"n:" + AUTH.encode(), b"\xc1garbage")  # not msgpack at all
    store = open_store()
    with pytest.raises(CorruptRecord, match="does not decode"):
        store.retrieve(AUTH)


def test_a_corrupt_access_record_is_a_clear_error(
    open_store: Callable[..., L0Store], tmp_path: Path
) -> None:
    store = open_store()
    store.store(L0Entry(AUTH, {"v": 1}))
    store.close()
    _raw_put(tmp_path / "l0", b"a:" + AUTH.encode(), msgpack.packb(["three", 1.0]))
    store = open_store()
    with pytest.raises(CorruptRecord, match="a:task:auth-refactor"):
        store.retrieve(AUTH)
    with pytest.raises(CorruptRecord, match="a:task:auth-refactor"):
        store.query(prefix="task:")
    assert any("a:task:auth-refactor" in p for p in store.verify())


def test_an_access_key_without_its_node_is_reported(
    open_store: Callable[..., L0Store], tmp_path: Path
) -> None:
    open_store().close()
    _raw_put(tmp_path / "l0", b"a:task:ghost", msgpack.packb([1, 1.0]))
    store = open_store()
    assert store.query() == []
    assert store.verify() == ["access key b'a:task:ghost' has no node"]


def test_a_record_from_a_newer_build_is_incompatible(
    open_store: Callable[..., L0Store], tmp_path: Path
) -> None:
    open_store().close()
    _raw_put(tmp_path / "l0", b"n:" + AUTH.encode(), msgpack.packb([2] + [None] * 14))
    with pytest.raises(IncompatibleFormat, match="record version 2"):
        open_store().retrieve(AUTH)


def test_an_index_pointing_at_nothing_is_reported(
    open_store: Callable[..., L0Store], tmp_path: Path
) -> None:
    store = open_store()
    store.store(L0Entry(AUTH, {"v": 1}, tags=["a"]))
    store.close()
    _raw_put(tmp_path / "l0", b"t:a\x00task:ghost", b"")
    _raw_delete(tmp_path / "l0", b"t:a\x00" + AUTH.encode())
    store = open_store()
    with pytest.raises(CorruptRecord, match="task:ghost"):
        store.query(tags=["a"])
    problems = store.verify()
    assert any("task:ghost" in p and "does not match any node" in p for p in problems)
    assert any("is missing" in p and AUTH in p for p in problems)


def test_a_second_open_of_the_same_database_is_a_storage_error(
    store: L0Store, open_store: Callable[..., L0Store]
) -> None:
    with pytest.raises(StorageError, match="cannot open"):
        open_store()


def test_a_closed_store_refuses_work(store: L0Store) -> None:
    store.store(L0Entry(AUTH, {"v": 1}))
    store.close()
    store.close()  # idempotent
    assert store.closed
    for call in (
        lambda: store.retrieve(AUTH),
        lambda: store.store(L0Entry(AUTH, {"v": 1})),
        lambda: store.query(),
        lambda: store.delete(AUTH),
        lambda: store.flush(),
    ):
        with pytest.raises(StorageError, match="closed"):
            call()


def test_context_manager_closes(tmp_path: Path, clock: VirtualClock) -> None:
    with L0Store(tmp_path / "cm", clock=clock) as store:
        store.store(L0Entry(AUTH, {"v": 1}))
        store.retrieve(AUTH)
    assert store.closed
    with L0Store(tmp_path / "cm", clock=clock) as again:
        assert again.retrieve(AUTH, touch=False).access_count == 1  # type: ignore[union-attr]


def test_a_close_leaves_no_write_ahead_log_for_the_next_open_to_replay(tmp_path: Path, clock: VirtualClock) -> None:
    path = tmp_path / "logged"
    store = L0Store(path, clock=clock)
    # ~300 KB of nodes: under the 1 MB memtable, so LevelDB holds them in its log and memtable only
    for i in range(300):
        store.store(L0Entry(f"memory:block-{i:03d}", {"text": "x" * 1000, "n": i}))
    assert sum(f.stat().st_size for f in path.glob("*.log")) > 300_000
    store.close()
    # the memtable was written down as a table: the next open has no log to replay
    assert sum(f.stat().st_size for f in path.glob("*.log")) < 4_096
    assert list(path.glob("*.ldb"))
    with L0Store(path, clock=clock) as again:
        assert [again.retrieve(f"memory:block-{i:03d}", touch=False).content["n"] for i in (0, 299)] == [0, 299]  # type: ignore[union-attr]


# -- concurrency -----------------------------------------------------------------


def test_readers_in_threads_while_one_writer_writes(open_store: Callable[..., L0Store]) -> None:
    """L3 workers read the same store from their threads while the actor writes:
    no errors, consistent query results, and every touching read counted once."""
    store = open_store(access_flush_every=50)
    iris = [f"memory:session-{i % 5:03d}/block-{i:03d}" for i in range(60)]
    for iri in iris:
        store.store(L0Entry(iri, {"n": iri}, tags=["seed"], named_graph="g0"))
    stop = threading.Event()
    errors: list[BaseException] = []
    reads = [0] * 4

    def writer() -> None:
        try:
            n = 0
            while not stop.is_set():
                iri = iris[n % len(iris)]
                store.store(
                    L0Entry(
                        iri,
                        {"n": iri, "pad": "x" * (n % 50)},
                        tags=[f"t{n % 3}"],
                        named_graph=f"g{n % 2}",
                        importance=(n % 10) / 10,
                    )
                )
                n += 1
        except BaseException as exc:  # noqa: BLE001 - collected, asserted empty below
            errors.append(exc)

    def reader(slot: int) -> None:
        try:
            for n in range(400):
                iri = iris[(n * 7 + slot) % len(iris)]
                if store.retrieve(iri) is not None:
                    reads[slot] += 1
                if n % 20 == 0:
                    for e in store.query(tags=["seed"]):
                        assert "seed" in e.tags
                    for e in store.query(graph="g1"):
                        assert e.named_graph == "g1"
                    assert len(store.query_iris(prefix="memory:session-001/")) == 12
        except BaseException as exc:  # noqa: BLE001 - collected, asserted empty below
            errors.append(exc)

    threads = [threading.Thread(target=writer)] + [
        threading.Thread(target=reader, args=(i,)) for i in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads[1:]:
        t.join(60)
    stop.set()
    threads[0].join(60)
    assert errors == []
    store.flush()
    assert store.verify() == []
    assert sum(e.access_count for e in store.query()) == sum(reads)


def test_concurrent_touching_reads_each_see_their_own_count(
    open_store: Callable[..., L0Store],
) -> None:
    """Each touching read of a node returns a distinct access count: across four
    reader threads (a writer storing, write-downs every 7 reads) the counts one
    node returned are exactly 1..N, whether the read found the node's pending
    slot (no access-key read) or not."""
    store = open_store(access_flush_every=7)
    iris = [f"task:t{i}" for i in range(10)]
    for iri in iris:
        store.store(L0Entry(iri, {"v": 0}))
    seen: dict[str, list[int]] = {iri: [] for iri in iris}
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[BaseException] = []
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)

    def reader(slot: int) -> None:
        try:
            got = []
            for n in range(1500):
                iri = iris[(n * 3 + slot) % len(iris)]
                entry = store.retrieve(iri)
                assert entry is not None
                got.append((iri, entry.access_count))
            with lock:
                for iri, count in got:
                    seen[iri].append(count)
        except BaseException as exc:  # noqa: BLE001 - collected, asserted empty below
            errors.append(exc)

    def writer() -> None:
        n = 0
        try:
            while not stop.is_set():
                store.store(L0Entry(iris[n % len(iris)], {"v": n}))
                n += 1
        except BaseException as exc:  # noqa: BLE001 - collected, asserted empty below
            errors.append(exc)

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(4)]
    w = threading.Thread(target=writer)
    try:
        w.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        stop.set()
        w.join(60)
        sys.setswitchinterval(old_interval)
    assert errors == []
    for iri, counts in seen.items():
        assert sorted(counts) == list(range(1, len(counts) + 1)), iri
    store.flush()
    assert sum(e.access_count for e in store.query()) == 4 * 1500


def test_every_writer_of_the_memory_shares_one_store_without_a_lock_of_its_own(
    open_store: Callable[..., L0Store],
) -> None:
    """L0 is the one owner of its files: two shards' homes writing lines down (tombstones and
    batches) and two L1 archives writing turns, all at once on one store and holding no lock
    of their own, lose nothing and leave a store that verifies."""
    from gliding_actors.coherence._home import LayeredHome
    from gliding_actors.l1._archive import SessionArchive

    store = open_store()
    homes = [LayeredHome(store) for _ in range(2)]
    archives = [SessionArchive(store, f"agent{i}") for i in range(2)]
    errors: list[BaseException] = []
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)

    def home_writer(shard: int) -> None:
        try:
            home = homes[shard]
            for n in range(1, 151):
                iri = f"task:s{shard}-{n % 25}"
                home.store(iri, None if n % 7 == 0 else {"n": n}, n, False, {"tags": ["t"], "graph": "shared"})
                if n % 10 == 0:
                    home.flush(None)
        except BaseException as exc:  # noqa: BLE001 - collected, asserted empty below
            errors.append(exc)

    def archive_writer(i: int) -> None:
        try:
            for n in range(150):
                archives[i].write_block({"summary": f"turn {n}"})
        except BaseException as exc:  # noqa: BLE001 - collected, asserted empty below
            errors.append(exc)

    threads = [threading.Thread(target=home_writer, args=(s,)) for s in range(2)]
    threads += [threading.Thread(target=archive_writer, args=(i,)) for i in range(2)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        sys.setswitchinterval(old_interval)
    assert errors == []
    for home in homes:
        home.flush(None)
        assert home.dirty() == []
    for shard in range(2):
        for k in range(25):
            iri = f"task:s{shard}-{k}"
            newest = max(n for n in range(1, 151) if n % 25 == k)
            assert store.retrieve_version(iri) == newest, iri
    for i in range(2):
        assert len(store.query_iris(prefix=f"memory:session-agent{i}/block-")) == 150
    assert store.verify() == []


def test_listeners_hear_of_every_write_and_delete_under_their_prefix(store: L0Store) -> None:
    heard: list[tuple[str, bool]] = []
    store.add_listener("memory:session-", lambda iri: heard.append((iri, store.retrieve(iri, touch=False) is not None)))
    store.store(L0Entry("memory:session-a/1", {"text": "one"}))
    store.store(L0Entry("task:a", {"text": "not archived"}))
    store.store_many([L0Entry("memory:session-a/2", {"text": "two"}), L0Entry("task:b", {"text": "x"}),
                      L0Entry("memory:session-b/1", {"text": "three"}, named_graph="sessions")])
    store.delete("memory:session-a/1")
    store.delete("task:a")
    store.delete_graph("sessions")
    # each once, after the write is in the store (a delete: once it is gone)
    assert heard == [("memory:session-a/1", True), ("memory:session-a/2", True), ("memory:session-b/1", True),
                     ("memory:session-a/1", False), ("memory:session-b/1", False)]
