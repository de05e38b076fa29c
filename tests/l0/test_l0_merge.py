"""Merging a write into a stored node with the same @id (the seed design's rules,
documented in docs/L0.md), and replacing writes (merge=False)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gliding_actors.clock import VirtualClock
from gliding_actors.l0 import L0Entry, L0Store

IRI = "artifact:jwt-middleware"
SHORT = {"@type": "Artifact", "summary": "JWT middleware"}
LONG = {
    "@type": "Code",
    "summary": "JWT verification middleware with key rotation",
    "path": "auth/jwt.py",
}


def test_tags_and_types_are_unioned(store: L0Store) -> None:
    store.store(L0Entry(IRI, SHORT, tags=["a", "b"], jsonld_types=["X"]))
    merged = store.store(L0Entry(IRI, LONG, tags=["b", "c"]))
    assert merged.tags == ["a", "b", "c"]
    assert merged.jsonld_types == ["Artifact", "Code", "X"]
    for tag in "abc":
        assert store.query_iris(tags=[tag]) == [IRI]
    for typ in ("Artifact", "Code", "X"):
        assert store.query_iris(node_type=typ) == [IRI]
    assert store.verify() == []


def test_importance_is_averaged(store: L0Store) -> None:
    store.store(L0Entry(IRI, SHORT, importance=0.2))
    assert store.store(L0Entry(IRI, SHORT, importance=0.8)).importance == 0.5
    assert store.store(L0Entry(IRI, SHORT, importance=1.0)).importance == 0.75
    assert store.query_iris(min_importance=0.75, max_importance=0.75) == [IRI]
    assert store.query_iris(max_importance=0.6) == []
    assert store.verify() == []


def test_the_longer_content_is_kept_with_its_hash(store: L0Store) -> None:
    long_entry = store.store(L0Entry(IRI, LONG))
    merged = store.store(L0Entry(IRI, SHORT))
    assert merged.content == LONG
    assert merged.content_hash == long_entry.content_hash
    assert merged.content_size == long_entry.content_size
    assert merged.version == 2  # still a write
    longer = {**LONG, "notes": "reviewed"}
    again = store.store(L0Entry(IRI, longer))
    assert again.content == longer and again.content_hash != long_entry.content_hash


def test_a_tie_in_length_goes_to_the_new_content(store: L0Store) -> None:
    store.store(L0Entry(IRI, {"verdict": "approve"}))
    assert store.store(L0Entry(IRI, {"verdict": "rejects"})).content == {"verdict": "rejects"}


def test_metadata_is_merged_with_the_new_value_winning(store: L0Store) -> None:
    store.store(L0Entry(IRI, SHORT, metadata={"by": "da", "step": 1}))
    merged = store.store(L0Entry(IRI, SHORT, metadata={"step": 2, "reviewed": True}))
    assert merged.metadata == {"by": "da", "step": 2, "reviewed": True}
    assert store.store(L0Entry(IRI, SHORT)).metadata == {"by": "da", "step": 2, "reviewed": True}


def test_named_graph_moves_only_when_given(store: L0Store) -> None:
    store.store(L0Entry(IRI, SHORT, named_graph="execution"))
    assert store.store(L0Entry(IRI, SHORT)).named_graph == "execution"
    moved = store.store(L0Entry(IRI, SHORT, named_graph="review"))
    assert moved.named_graph == "review"
    assert store.query_iris(graph="execution") == []
    assert store.query_iris(graph="review") == [IRI]
    assert store.list_graphs() == ["review"]
    assert store.verify() == []


def test_context_travels_with_the_kept_content(store: L0Store) -> None:
    ctx_long = {"@vocab": "https://long.example/#"}
    store.store(L0Entry(IRI, {**LONG, "@context": ctx_long}))
    merged = store.store(L0Entry(IRI, {**SHORT, "@context": "https://short.example/ctx"}))
    assert merged.jsonld_context == ctx_long
    other = "memory:x"
    store.store(L0Entry(other, {"a": 1}))  # no context
    assert store.store(
        L0Entry(other, {"a": 1, "b": 2}, jsonld_context="https://c.example/")
    ).jsonld_context == ("https://c.example/")
    assert store.store(L0Entry(other, {"a": 1})).jsonld_context == "https://c.example/"


def test_history_fields_survive_merges(store: L0Store, clock: VirtualClock) -> None:
    store.store(L0Entry(IRI, SHORT, vector_id=3, mesi_state="S"))
    store.retrieve(IRI)
    clock.advance(10)
    merged = store.store(L0Entry(IRI, LONG, mesi_state="M"))
    assert merged.created_at == 1_000.0 and merged.updated_at == 1_010.0
    assert merged.vector_id == 3  # kept: the new write named none
    assert merged.mesi_state == "M"  # last known state wins
    assert merged.access_count == 1


def test_replace_takes_the_new_node_as_given(store: L0Store, clock: VirtualClock) -> None:
    store.store(
        L0Entry(
            IRI,
            LONG,
            tags=["a", "b"],
            named_graph="execution",
            importance=1.0,
            metadata={"k": 1},
            vector_id=5,
        )
    )
    clock.advance(1)
    replaced = store.store(L0Entry(IRI, SHORT, tags=["c"], importance=0.1), merge=False)
    assert replaced.content == SHORT  # shorter, but the latest write wins
    assert replaced.tags == ["c"]
    assert replaced.jsonld_types == ["Artifact"]
    assert replaced.named_graph is None
    assert replaced.importance == 0.1
    assert replaced.metadata == {}
    assert replaced.vector_id == 5
    assert (
        replaced.version == 2 and replaced.created_at == 1_000.0 and replaced.updated_at == 1_001.0
    )
    assert store.query_iris(tags=["a"]) == []
    assert store.query_iris(graph="execution") == []
    assert store.query_iris(node_type="Code") == []
    assert store.query_iris(tags=["c"], node_type="Artifact", max_importance=0.1) == [IRI]
    assert store.verify() == []


def test_merges_inside_one_batch_match_one_by_one(
    open_store: Callable[..., L0Store], tmp_path: Path
) -> None:
    writes = [
        L0Entry(IRI, SHORT, tags=["a"], importance=0.2, metadata={"x": 1}),
        L0Entry(IRI, LONG, tags=["b"], importance=0.6, named_graph="g"),
        L0Entry(IRI, SHORT, tags=["c"], importance=1.0, metadata={"x": 2}),
    ]
    one = open_store(tmp_path / "one")
    for w in writes:
        one.store(w)
    many = open_store(tmp_path / "many")
    many.store_many(writes)
    assert one.retrieve(IRI, touch=False) == many.retrieve(IRI, touch=False)
    assert one.raw_items() == many.raw_items()
