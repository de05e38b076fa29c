"""L0Actor: the store hosted on every runtime backend, plain-data messages in
and out, refusals as typed errors that leave the actor running and the store
unchanged."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from gliding_actors.errors import ConflictError, InvalidInput
from gliding_actors.l0 import L0Actor, L0Entry, L0Store
from gliding_actors.runtime import ActorRef, Runtime

IRI = "artifact:jwt-middleware"
NODE = {
    "@id": IRI,
    "@type": "Artifact",
    "summary": "JWT verification middleware",
    "path": "auth/jwt.py",
}


@pytest.fixture
def l0(runtime: Runtime, store: L0Store) -> ActorRef[Any]:
    return runtime.spawn("l0", lambda: L0Actor(store))


def ask(ref: ActorRef[Any], message: dict[str, Any]) -> Any:
    reply = ref.ask(message).get(5.0)
    # replies are plain data: they survive msgpack (the Ray backend's wire format)
    assert msgpack.unpackb(msgpack.packb(reply)) == reply
    return reply


def test_put_get_delete_round_trip(l0: ActorRef[Any]) -> None:
    stored = ask(
        l0,
        {
            "type": "l0.put_node",
            "node": NODE,
            "tags": ["confirmed_fact"],
            "graph": "execution",
            "importance": 0.9,
            "sync": True,
        },
    )
    assert stored["version"] == 1 and stored["tags"] == ["confirmed_fact"]
    got = ask(l0, {"type": "l0.get", "iri": IRI})
    assert got["content"] == NODE and got["version"] == 1 and got["access_count"] == 1
    assert ask(l0, {"type": "l0.get_node", "iri": IRI, "touch": False}) == NODE
    assert ask(l0, {"type": "l0.get", "iri": "artifact:none"}) is None
    assert ask(l0, {"type": "l0.delete", "iri": IRI}) is True
    assert ask(l0, {"type": "l0.delete", "iri": IRI}) is False
    assert ask(l0, {"type": "l0.count"}) == 0


def test_put_entry_with_an_explicit_version_is_a_write_down(l0: ActorRef[Any]) -> None:
    entry = L0Entry(
        "decision:jwt", {"decision": "ship"}, tags=["confirmed_fact"], version=3
    ).to_dict()
    assert ask(l0, {"type": "l0.put", "entry": entry, "merge": False, "sync": True})["version"] == 3
    shorter = {**entry, "content": {"d": "no"}, "version": 4}
    assert ask(l0, {"type": "l0.put", "entry": shorter, "merge": False})["content"] == {"d": "no"}
    with pytest.raises(ConflictError):
        ask(l0, {"type": "l0.put", "entry": {**entry, "version": 2}, "merge": False})
    with pytest.raises(ConflictError):
        ask(
            l0,
            {
                "type": "l0.put",
                "entry": {"iri": "decision:jwt", "content": {}},
                "expect_version": 1,
            },
        )


def test_queries_graphs_and_bookkeeping(l0: ActorRef[Any]) -> None:
    entries = [
        L0Entry(
            "task:a", {"@type": "Task"}, tags=["plan", "x"], named_graph="plan", importance=0.2
        ).to_dict(),
        L0Entry(
            "task:b", {"@type": "Task"}, tags=["plan"], named_graph="plan", importance=0.8
        ).to_dict(),
        L0Entry("review:1", {"@type": "Review"}, tags=["x"], named_graph="review").to_dict(),
    ]
    assert [e["iri"] for e in ask(l0, {"type": "l0.put_many", "entries": entries})] == [
        "task:a",
        "task:b",
        "review:1",
    ]
    assert ask(l0, {"type": "l0.query", "tags": ["plan"], "iris_only": True}) == [
        "task:a",
        "task:b",
    ]
    assert [e["iri"] for e in ask(l0, {"type": "l0.query", "tags": ["x"]})] == [
        "review:1",
        "task:a",
    ]
    assert ask(
        l0, {"type": "l0.query", "node_type": "Task", "min_importance": 0.5, "iris_only": True}
    ) == ["task:b"]
    assert ask(l0, {"type": "l0.query", "prefix": "task:", "limit": 1, "iris_only": True}) == [
        "task:a"
    ]
    assert ask(l0, {"type": "l0.query", "graph": "review", "iris_only": True}) == ["review:1"]
    assert ask(l0, {"type": "l0.graphs"}) == ["plan", "review"]
    annotated = ask(
        l0, {"type": "l0.annotate", "iri": "task:a", "vector_id": 12, "mesi_state": "S"}
    )
    assert (
        annotated["vector_id"] == 12
        and annotated["mesi_state"] == "S"
        and annotated["version"] == 1
    )
    ask(l0, {"type": "l0.get", "iri": "task:b"})
    assert ask(l0, {"type": "l0.flush", "sync": True}) == 1
    assert ask(l0, {"type": "l0.delete_graph", "graph": "plan"}) == 2
    assert ask(l0, {"type": "l0.count"}) == 1
    assert ask(l0, {"type": "l0.verify"}) == []


@pytest.mark.parametrize(
    "message",
    [
        "not a mapping",
        {"iri": IRI},
        {"type": "l0.nope"},
        {"type": 5},
        {"type": "l0.get"},
        {"type": "l0.get", "iri": 5},
        {"type": "l0.get", "iri": IRI, "colour": "red"},
        {"type": "l0.get", "iri": "no scheme"},
        {"type": "l0.put", "entry": "x"},
        {"type": "l0.put", "entry": {"iri": IRI}},
        {"type": "l0.put", "entry": {"iri": IRI, "content": {}, "colour": 1}},
        {"type": "l0.put", "entry": {"iri": IRI, "content": {}}, "merge": "yes"},
        {"type": "l0.put", "entry": {"iri": IRI, "content": {}}, "sync": 1},
        {"type": "l0.put_node", "node": {"title": "no id"}},
        {"type": "l0.put_node", "node": NODE, "tags": "plan"},
        {"type": "l0.put_node", "node": NODE, "importance": 2},
        {
            "type": "l0.put_many",
            "entries": [{"iri": IRI, "content": {}}, {"iri": "bad", "content": {}}],
        },
        {"type": "l0.query", "tags": "plan"},
        {"type": "l0.query", "limit": True},
        {"type": "l0.delete_graph"},
        {"type": "l0.annotate", "iri": IRI, "mesi_state": "Q"},
    ],
    ids=repr,
)
def test_malformed_messages_are_refused_and_change_nothing(
    l0: ActorRef[Any], store: L0Store, message: Any
) -> None:
    ask(l0, {"type": "l0.put_node", "node": NODE})
    before = store.raw_items()
    with pytest.raises(InvalidInput):
        l0.ask(message).get(5.0)
    assert l0.is_alive()
    assert store.raw_items() == before
    assert ask(l0, {"type": "l0.get", "iri": IRI, "touch": False})["version"] == 1


def test_stopping_the_actor_writes_access_counts_down(runtime: Runtime, store: L0Store) -> None:
    ref = runtime.spawn("l0", lambda: L0Actor(store))
    ask(ref, {"type": "l0.put_node", "node": NODE})
    ask(ref, {"type": "l0.get", "iri": IRI})
    before = store.raw_items()
    runtime.stop("l0")
    assert not store.closed
    assert store.raw_items() != before  # the count reached the disk
    assert store.retrieve(IRI, touch=False).access_count == 1  # type: ignore[union-attr]


def test_an_owning_actor_closes_its_store(runtime: Runtime, store: L0Store) -> None:
    runtime.spawn("l0", lambda: L0Actor(store, close_on_stop=True))
    runtime.stop("l0")
    assert store.closed
