"""Property: after any sequence of stores, merges, replaces, batches, deletes
(with and without explicit versions), re-creations, graph deletes and reads,
every index query returns exactly what a brute-force filter of the live nodes
returns, the live nodes (and their access counts) are what an independent
model of the merge rules predicts, every IRI's version (live or deleted)
continues as the model's does, and verify() finds nothing wrong."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from l0_support import brute_force

from gliding_actors.clock import VirtualClock
from gliding_actors.l0 import L0Entry, L0Store

IRIS = [
    "task:a",
    "task:ab",
    "task:b",
    "memory:s-1/x",
    "memory:s-12/x",
    "memory:s-1/y",
    "artifact:é",
    "urn:x:1",
]
TAGS = ["a", "ab", "b", "plan", "planning", "x y"]
GRAPHS = ["g", "gh", "plan"]
TYPES: list[Any] = [None, "T", "TL", ["T", "U"]]
IMPORTANCES = [0.0, 0.1, 0.25, 0.5, 0.75, 1.0]
PREFIXES = ["", "task:", "task:a", "memory:s-1", "memory:s-1/", "artifact:", "zzz:"]
RANGES = [(0.0, 0.3), (0.25, 0.75), (0.5, 1.0), (1.0, 1.0), (0.0, 0.0), (0.3, 0.2)]


def _write() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "op": st.just("store"),
            "iri": st.sampled_from(IRIS),
            "text": st.text(alphabet="xyé", max_size=12),
            "type": st.sampled_from(TYPES),
            "tags": st.lists(st.sampled_from(TAGS), max_size=3),
            "graph": st.one_of(st.none(), st.sampled_from(GRAPHS)),
            "importance": st.one_of(st.sampled_from(IMPORTANCES), st.floats(0.0, 1.0)),
            "metadata": st.dictionaries(st.sampled_from(["k", "m"]), st.integers(0, 3), max_size=2),
            "merge": st.booleans(),
            # > 0: an explicit version this much above the current one (single stores)
            "bump": st.sampled_from([0, 0, 0, 1, 3]),
        }
    )


OPS = st.lists(
    st.one_of(
        _write(),
        _write(),
        st.fixed_dictionaries(
            {
                "op": st.just("batch"),
                "writes": st.lists(_write(), min_size=1, max_size=3),
                "merge": st.booleans(),
            }
        ),
        st.fixed_dictionaries(
            {
                "op": st.just("delete"),
                "iri": st.sampled_from(IRIS),
                "bump": st.sampled_from([0, 0, 1, 2]),
            }
        ),
        st.fixed_dictionaries({"op": st.just("delete_graph"), "graph": st.sampled_from(GRAPHS)}),
        st.fixed_dictionaries({"op": st.just("read"), "iri": st.sampled_from(IRIS)}),
    ),
    max_size=30,
)


def _content(w: dict[str, Any]) -> dict[str, Any]:
    content: dict[str, Any] = {"s": w["text"]}
    if w["type"] is not None:
        content["@type"] = w["type"]
    return content


def _size(content: dict[str, Any]) -> int:
    return len(
        json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    )


def _types(content: dict[str, Any]) -> set[str]:
    t = content.get("@type")
    return set() if t is None else {t} if isinstance(t, str) else set(t)


class Model:
    """The merge rules of docs/L0.md, written independently of the store."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.reads: dict[str, int] = {}
        #: version of each deleted IRI's delete
        self.tombs: dict[str, int] = {}

    def version(self, iri: str) -> int:
        """The current version: the live node's, its delete's, or 0."""
        if iri in self.nodes:
            return int(self.nodes[iri]["version"])
        return self.tombs.get(iri, 0)

    def store(self, w: dict[str, Any], merge: bool, version: int = 0) -> None:
        content = _content(w)
        new = {
            "content": content,
            "size": _size(content),
            "importance": float(w["importance"]),
            "tags": set(w["tags"]),
            "graph": w["graph"],
            "types": _types(content),
            "metadata": dict(w["metadata"]),
            "version": version or self.version(w["iri"]) + 1,
        }
        self.tombs.pop(w["iri"], None)
        old = self.nodes.get(w["iri"])
        if old is not None and merge:
            keep_new = new["size"] >= old["size"]
            new["content"] = content if keep_new else old["content"]
            new["size"] = new["size"] if keep_new else old["size"]
            new["importance"] = (old["importance"] + new["importance"]) / 2.0
            new["tags"] |= old["tags"]
            new["types"] |= old["types"]
            new["graph"] = w["graph"] if w["graph"] is not None else old["graph"]
            new["metadata"] = {**old["metadata"], **w["metadata"]}
        self.nodes[w["iri"]] = new

    def delete(self, iri: str, version: int = 0) -> None:
        if version:
            self.tombs[iri] = version
        elif iri in self.nodes:
            self.tombs[iri] = self.nodes[iri]["version"] + 1
        self.nodes.pop(iri, None)
        self.reads.pop(iri, None)

    def delete_graph(self, graph: str) -> None:
        for iri in [i for i, n in self.nodes.items() if n["graph"] == graph]:
            self.delete(iri)

    def read(self, iri: str) -> None:
        if iri in self.nodes:
            self.reads[iri] = self.reads.get(iri, 0) + 1


def _entry(w: dict[str, Any], version: int = 0) -> L0Entry:
    return L0Entry(
        w["iri"],
        _content(w),
        importance=w["importance"],
        tags=w["tags"],
        named_graph=w["graph"],
        metadata=w["metadata"],
        version=version,
    )


def _check(store: L0Store, model: Model) -> None:
    live = store.query()  # a range scan of every node: no index involved
    assert [e.iri for e in live] == sorted(model.nodes)
    for e in live:
        m = model.nodes[e.iri]
        assert e.content == m["content"]
        assert e.importance == m["importance"]
        assert set(e.tags) == m["tags"] and e.tags == sorted(e.tags)
        assert set(e.jsonld_types) == m["types"]
        assert e.named_graph == m["graph"]
        assert e.metadata == m["metadata"]
        assert e.version == m["version"]
        assert e.access_count == model.reads.get(e.iri, 0)

    def same(**q: Any) -> None:
        expected = brute_force(live, **q)
        assert store.query_iris(**q) == expected, q
        assert [e.iri for e in store.query(**q)] == expected, q

    for tag in TAGS:
        same(tags=[tag])
    for a, b in [("a", "ab"), ("plan", "planning"), ("a", "b"), ("x y", "a")]:
        same(tags=[a, b])
    same(tags=["a", "b", "plan"])
    for graph in GRAPHS:
        same(graph=graph)
    for typ in ("T", "TL", "U"):
        same(node_type=typ)
    for prefix in PREFIXES:
        same(prefix=prefix)
    for lo, hi in RANGES:
        same(min_importance=lo, max_importance=hi)
    same(min_importance=0.5)
    same(max_importance=0.5)
    same(tags=["a"], graph="g")
    same(tags=["plan"], prefix="task:", min_importance=0.25)
    same(graph="plan", node_type="T", max_importance=0.75)
    same(prefix="memory:s-1", min_importance=0.1, max_importance=0.9)
    assert store.list_graphs() == sorted({e.named_graph for e in live if e.named_graph is not None})
    assert store.count() == len(live)
    for iri in IRIS:
        assert store.retrieve_version(iri) == model.version(iri), iri
    tombstones = {k[2:].decode() for k, _ in store.raw_items() if k.startswith(b"d:")}
    assert tombstones == set(model.tombs)
    assert store.verify() == []


@settings(max_examples=100, deadline=None)
@given(ops=OPS)
def test_index_queries_equal_a_brute_force_scan(ops: list[dict[str, Any]]) -> None:
    model = Model()
    with tempfile.TemporaryDirectory() as tmp:
        store = L0Store(Path(tmp) / "l0", clock=VirtualClock(0.0), access_flush_every=4)
        try:
            for n, op in enumerate(ops):
                kind = op["op"]
                if kind == "store":
                    version = model.version(op["iri"]) + op["bump"] if op["bump"] else 0
                    stored = store.store(_entry(op, version), merge=op["merge"])
                    model.store(op, op["merge"], version)
                    assert stored.version == model.version(op["iri"])
                elif kind == "batch":
                    store.store_many([_entry(w) for w in op["writes"]], merge=op["merge"])
                    for w in op["writes"]:
                        model.store(w, op["merge"])
                elif kind == "delete":
                    version = model.version(op["iri"]) + op["bump"] if op["bump"] else 0
                    assert store.delete(op["iri"], version=version) == (op["iri"] in model.nodes)
                    model.delete(op["iri"], version)
                elif kind == "delete_graph":
                    expected = sum(1 for m in model.nodes.values() if m["graph"] == op["graph"])
                    assert store.delete_graph(op["graph"]) == expected
                    model.delete_graph(op["graph"])
                else:
                    assert (store.retrieve(op["iri"]) is not None) == (op["iri"] in model.nodes)
                    model.read(op["iri"])
                if n % 7 == 6:
                    _check(store, model)
            _check(store, model)
        finally:
            store.close()
