"""L2 graph store: JSON-LD in, quads per line, exact rewrites, confined SPARQL.

Every refusal is checked the same way as L0's bad-input tests: the full dump
of the RDF store (every quad) and the node cache are compared before/after.
"""

from __future__ import annotations

import copy
import math
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyoxigraph as ox
import pytest

from gliding_actors.errors import GlidingError, InvalidInput, PermissionDenied, StorageError
from gliding_actors.l2._graph import GraphNode, GraphStore
from gliding_actors.l2._jsonld import (
    DEFAULT_CONTEXT,
    GENID_BASE,
    GRAPH_BASE,
    VOCAB,
    graph_iri,
    to_quads,
)

IRI = "task:auth-refactor"


@pytest.fixture
def store() -> Iterator[GraphStore]:
    with GraphStore() as s:
        yield s


def snapshot(store: GraphStore) -> tuple[list[str], list[GraphNode], int]:
    return store.dump(), store.lines(), store.count()


def refused(
    store: GraphStore, call: Callable[[], Any], error: type[GlidingError] = InvalidInput
) -> GlidingError:
    """``call`` raises ``error`` and leaves quads and node cache exactly as they were."""
    before = snapshot(store)
    with pytest.raises(error) as info:
        call()
    assert snapshot(store) == before
    return info.value


def select(store: GraphStore, sparql: str, graphs: list[str], **kw: Any) -> list[dict[str, str]]:
    result = store.query(sparql, graphs=graphs, **kw)
    rows: list[dict[str, str]] = result["rows"]
    return rows


def fresh_dump(nodes: dict[str, tuple[dict[str, Any], str]]) -> list[str]:
    """What the store must hold for these live nodes: their quads, nothing else."""
    ref = ox.Store()
    for iri, (value, graph) in nodes.items():
        ref.extend(to_quads(iri, value, ox.NamedNode(graph_iri(graph))))
    return sorted(f"{q} ." for q in ref)


# --- writes and the node cache -------------------------------------------------------------


def test_plain_keys_are_queryable_under_the_default_context(store: GraphStore) -> None:
    value = {"@type": "Task", "status": "open", "priority": 2, "done": False, "ratio": 0.5}
    assert store.put_node(IRI, value, "plan", 1) is True
    rows = select(
        store,
        "SELECT ?s ?st ?p WHERE { ?s a ga:Task ; ga:status ?st ; ga:priority ?p }",
        ["plan"],
    )
    assert rows == [{"s": IRI, "st": "open", "p": "2"}]
    full = f'SELECT ?s WHERE {{ ?s <{VOCAB}status> "open" }}'
    assert select(store, full, ["plan"]) == [{"s": IRI}]
    assert store.query(f"ASK {{ <{IRI}> ga:done false ; ga:ratio 0.5e0 }}", graphs=["plan"]) == {
        "boolean": True
    }


def test_value_is_kept_as_written_and_never_modified(store: GraphStore) -> None:
    value: dict[str, Any] = {"status": "open", "sub": {"x": [1, 2]}}
    original = copy.deepcopy(value)
    store.put_node(IRI, value, "plan", 3)
    assert value == original
    node = store.node(IRI)
    assert node == GraphNode(IRI, value, "plan", 3)
    assert node is not None and node.value is value
    assert "@id" not in value and "@context" not in value


def test_own_id_and_context_are_used(store: GraphStore) -> None:
    value = {
        "@context": {"name": "http://schema.org/name", "ex": "http://example.org/"},
        "@id": "ex:thing",
        "name": "Thing",
        "status": "draft",  # not in the own context: still mapped by @vocab
    }
    store.put_node(IRI, value, "plan", 1)
    assert store.dump() == sorted(
        [
            f'<http://example.org/thing> <http://schema.org/name> "Thing" <{GRAPH_BASE}plan> .',
            f'<http://example.org/thing> <{VOCAB}status> "draft" <{GRAPH_BASE}plan> .',
        ]
    )


def test_context_list_and_null_context(store: GraphStore) -> None:
    store.put_node(IRI, {"@context": [{"a": "http://ex/a"}, {"b": "http://ex/b"}], "a": 1}, "g", 1)
    assert select(store, "SELECT ?v { ?s <http://ex/a> ?v }", ["g"]) == [{"v": "1"}]
    # "@context": null resets the default context: plain keys map to nothing.
    store.put_node("task:b", {"@context": None, "status": "x"}, "g", 1)
    assert store.node("task:b") is not None
    assert not any("task:b" in q for q in store.dump())


def test_rewrite_replaces_exactly_the_previous_triples(store: GraphStore) -> None:
    store.put_node(IRI, {"status": "open", "owner": "pa", "tags": ["a", "b"]}, "plan", 1)
    store.put_node("task:b", {"status": "open"}, "plan", 1)
    store.put_node(IRI, {"status": "done", "tags": ["b", "c"]}, "plan", 2)
    assert store.dump() == fresh_dump(
        {
            IRI: ({"status": "done", "tags": ["b", "c"]}, "plan"),
            "task:b": ({"status": "open"}, "plan"),
        }
    )
    assert store.node(IRI) == GraphNode(IRI, {"status": "done", "tags": ["b", "c"]}, "plan", 2)


def test_rewrite_into_another_graph_moves_the_line(store: GraphStore) -> None:
    store.put_node(IRI, {"status": "open"}, "plan", 1)
    store.put_node(IRI, {"status": "open"}, "execution", 2)
    assert store.graph_of(IRI) == "execution"
    assert store.iris_in("plan") == [] and store.iris_in("execution") == [IRI]
    assert store.dump() == fresh_dump({IRI: ({"status": "open"}, "execution")})
    assert select(store, "SELECT ?s { ?s ga:status ?o }", ["plan"]) == []


def test_tombstone_removes_the_triples_and_keeps_the_version(store: GraphStore) -> None:
    store.put_node(IRI, {"status": "open", "sub": {"x": 1}}, "plan", 1)
    assert store.put_node(IRI, None, "plan", 2) is True
    assert store.dump() == []
    assert store.node(IRI) == GraphNode(IRI, None, "plan", 2)
    assert store.graph_of(IRI) is None and store.count() == 0 and store.iris_in("plan") == []
    assert store.put_node(IRI, {"status": "again"}, "plan", 3)
    assert store.count() == 1


def test_stale_version_is_ignored(store: GraphStore) -> None:
    store.put_node(IRI, {"status": "new"}, "plan", 5)
    before = snapshot(store)
    assert store.put_node(IRI, {"status": "old"}, "plan", 4) is False
    assert store.put_node(IRI, None, "plan", 4) is False
    assert snapshot(store) == before
    assert store.put_node(IRI, {"status": "same version"}, "plan", 5) is True


def test_forget_drops_line_and_tombstone(store: GraphStore) -> None:
    store.put_node(IRI, {"status": "open"}, "plan", 1)
    assert store.forget(IRI) is True
    assert store.node(IRI) is None and store.dump() == []
    assert store.forget(IRI) is False


def test_shared_triples_are_reference_counted(store: GraphStore) -> None:
    # Line IRI asserts task:b's status too; deleting one line keeps the other's triple.
    store.put_node(IRI, {"dep": {"@id": "task:b", "status": "open"}}, "plan", 1)
    store.put_node("task:b", {"status": "open"}, "plan", 1)
    shared = f'<task:b> <{VOCAB}status> "open" <{GRAPH_BASE}plan> .'
    assert store.dump().count(shared) == 1
    store.put_node(IRI, None, "plan", 2)
    assert store.dump() == [shared]
    store.put_node("task:b", None, "plan", 2)
    assert store.dump() == []


def test_nested_objects_become_deterministic_skolem_iris(store: GraphStore) -> None:
    value = {"sub": {"x": 1, "deeper": {"y": 2}}, "l": {"@list": [1, 2]}}
    store.put_node(IRI, value, "plan", 1)
    dump = store.dump()
    assert all("_:" not in line for line in dump)
    assert any(GENID_BASE in line for line in dump)
    first = to_quads(IRI, value, ox.NamedNode(graph_iri("plan")))
    assert to_quads(IRI, value, ox.NamedNode(graph_iri("plan"))) == first
    other = to_quads("task:b", value, ox.NamedNode(graph_iri("plan")))
    assert {q.object for q in first}.isdisjoint({q.subject for q in other})
    rows = select(store, "SELECT ?y { ?s ga:sub/ga:deeper/ga:y ?y }", ["plan"])
    assert rows == [{"y": "2"}]
    # Rewriting the nested part leaves no orphan skolem triples behind.
    store.put_node(IRI, {"sub": {"x": 3}}, "plan", 2)
    assert store.dump() == fresh_dump({IRI: ({"sub": {"x": 3}}, "plan")})


def test_top_level_graph_container_value(store: GraphStore) -> None:
    value = {"@graph": [{"@id": "task:x", "status": "a"}, {"@id": "task:y", "status": "b"}]}
    store.put_node(IRI, value, "plan", 1)
    rows = select(store, "SELECT ?s ?o { ?s ga:status ?o } ORDER BY ?s", ["plan"])
    assert rows == [{"s": "task:x", "o": "a"}, {"s": "task:y", "o": "b"}]


def test_graph_names_are_percent_encoded(store: GraphStore) -> None:
    assert graph_iri("plan") == GRAPH_BASE + "plan"
    assert graph_iri("a b/c>") == GRAPH_BASE + "a%20b%2Fc%3E"
    store.put_node(IRI, {"status": "x"}, "a b/c>", 1)
    assert store.graphs() == ["a b/c>"]
    assert select(store, "SELECT ?s { ?s ga:status 'x' }", ["a b/c>"]) == [{"s": IRI}]


def test_default_context_is_documented_shape() -> None:
    assert DEFAULT_CONTEXT == {"@vocab": "https://gliding-actors.dev/ns#"}


# --- bad input -----------------------------------------------------------------------------


@pytest.fixture
def seeded(store: GraphStore) -> GraphStore:
    store.put_node(IRI, {"status": "open", "sub": {"x": 1}}, "plan", 1)
    store.put_node("task:b", {"status": "done"}, "execution", 1)
    return store


BAD_VALUES: list[tuple[str, Any]] = [
    ("id not a string", {"@id": 5, "status": "x"}),
    ("id relative", {"@id": "no-scheme", "status": "x"}),
    ("id with space", {"@id": "task:a b", "status": "x"}),
    ("type not a string", {"@type": 5}),
    ("type list with a number", {"@type": ["Task", 3]}),
    ("remote context", {"@context": "https://schema.org/", "name": "x"}),
    ("remote context in a list", {"@context": [{"a": "http://ex/a"}, "http://ex/ctx"], "a": 1}),
    ("context import", {"@context": {"@import": "http://ex/ctx"}, "a": 1}),
    (
        "remote scoped context",
        {"@context": {"t": {"@id": "http://ex/t", "@context": "http://x/"}}, "t": {"y": 1}},
    ),
    ("remote context nested", {"sub": {"@context": "http://ex/ctx", "x": 1}}),
    ("context a number", {"@context": 5, "a": 1}),
    ("value object with a list", {"x": {"@value": [1]}}),
    ("language not a string", {"x": {"@value": "a", "@language": 5}}),
    ("named graph inside", {"@id": "task:x", "@graph": [{"@id": "task:y", "p": 1}]}),
    ("nested named graph", {"sub": {"@id": "task:y", "@graph": {"@id": "task:z", "p": 1}}}),
    ("graph keyword alias", {"@context": {"g": "@graph"}, "sub": {"@id": "task:y", "g": {"p": 1}}}),
    ("nan", {"x": math.nan}),
    ("infinity", {"x": math.inf}),
    ("not JSON", {"x": object()}),
    ("a list", ["status"]),
    ("a string", "status"),
]


@pytest.mark.parametrize(("why", "value"), BAD_VALUES, ids=[w for w, _ in BAD_VALUES])
def test_bad_json_ld_changes_nothing(seeded: GraphStore, why: str, value: Any) -> None:
    # A rewrite of an existing line and a first write are both refused whole.
    refused(seeded, lambda: seeded.put_node(IRI, value, "plan", 2))
    refused(seeded, lambda: seeded.put_node("task:c", value, "plan", 1))
    with pytest.raises(InvalidInput):
        seeded.check_value(IRI, value)


def test_remote_context_message_says_why(seeded: GraphStore) -> None:
    err = refused(seeded, lambda: seeded.put_node(IRI, {"@context": "https://schema.org/"}, "p", 2))
    assert "remote context" in str(err) or "LoadDocument" in str(err)


def test_circular_value_is_invalid(seeded: GraphStore) -> None:
    value: dict[str, Any] = {"a": 1}
    value["self"] = value
    refused(seeded, lambda: seeded.put_node(IRI, value, "plan", 2))


@pytest.mark.parametrize(
    ("iri", "graph", "version"),
    [
        ("no-scheme", "plan", 2),
        ("task:a b", "plan", 2),
        ("task:a>", "plan", 2),
        (5, "plan", 2),
        (IRI, "", 2),
        (IRI, "bad\ngraph", 2),
        (IRI, 7, 2),
        (IRI, "plan", -1),
        (IRI, "plan", 1.5),
        (IRI, "plan", True),
        (IRI, "plan", "2"),
    ],
)
def test_bad_iri_graph_or_version_changes_nothing(
    seeded: GraphStore, iri: Any, graph: Any, version: Any
) -> None:
    refused(seeded, lambda: seeded.put_node(iri, {"status": "x"}, graph, version))


def test_key_that_is_no_iri_is_dropped_like_json_ld_says(store: GraphStore) -> None:
    """JSON-LD's to-RDF drops a property whose IRI is not well formed; the value
    itself is kept as written in the node cache."""
    store.put_node(IRI, {"my key": "x", "ok": "y"}, "plan", 1)
    assert store.dump() == [f'<{IRI}> <{VOCAB}ok> "y" <{GRAPH_BASE}plan> .']
    node = store.node(IRI)
    assert node is not None and node.value == {"my key": "x", "ok": "y"}


# --- queries -------------------------------------------------------------------------------


def test_rows_are_plain_strings_and_unbound_is_left_out(seeded: GraphStore) -> None:
    rows = select(
        seeded,
        "SELECT ?s ?st ?x WHERE { ?s ga:status ?st OPTIONAL { ?s ga:sub/ga:x ?x } } ORDER BY ?s",
        ["plan", "execution"],
    )
    assert rows == [{"s": IRI, "st": "open", "x": "1"}, {"s": "task:b", "st": "done"}]


def test_language_and_typed_literals_come_back_as_lexical_values(store: GraphStore) -> None:
    store.put_node(IRI, {"t": {"@value": "hi", "@language": "en"}, "n": 7, "d": 2.5}, "g", 1)
    rows = select(store, "SELECT ?t ?n ?d { ?s ga:t ?t ; ga:n ?n ; ga:d ?d }", ["g"])
    assert rows == [{"t": "hi", "n": "7", "d": "2.5"}]


def test_ask_construct_describe(seeded: GraphStore) -> None:
    assert seeded.query("ASK { ?s ga:status 'open' }", graphs=["plan"]) == {"boolean": True}
    assert seeded.query("ASK { ?s ga:status 'done' }", graphs=["plan"]) == {"boolean": False}
    out = seeded.query("CONSTRUCT { ?s ?p ?o } WHERE { ?s ga:status ?o ; ?p ?o }", graphs=["plan"])
    assert out == {"jsonld": [{"@id": IRI, "status": "open"}]}
    seeded.put_node(
        "task:c",
        {
            "@type": ["Task", "http://ex/Other"],
            "n": 3,
            "ok": True,
            "d": 0.5,
            "ref": {"@id": IRI},
            "tags": ["a", "b"],
            "t": {"@value": "x", "@language": "en"},
            "dt": {"@value": "2024-01-01", "@type": "http://www.w3.org/2001/XMLSchema#date"},
            "weird:key": 1,
        },
        "plan",
        1,
    )
    out = seeded.query("DESCRIBE <task:c>", graphs=["plan"])
    (node,) = out["jsonld"]
    assert node["@id"] == "task:c"
    assert sorted(node["@type"]) == ["Task", "http://ex/Other"]
    assert node["n"] == 3 and node["ok"] is True and node["d"] == 0.5
    assert node["ref"] == {"@id": IRI}
    assert sorted(node["tags"]) == ["a", "b"]
    assert node["t"] == {"@value": "x", "@language": "en"}
    assert node["dt"] == {"@value": "2024-01-01", "@type": "http://www.w3.org/2001/XMLSchema#date"}
    assert node["weird:key"] == 1  # an absolute IRI key stays an IRI


def test_bindings_are_rdf_terms(seeded: GraphStore) -> None:
    q = "SELECT * WHERE { ?s ga:status ?st }"
    both = ["plan", "execution"]
    assert select(seeded, q, both, bindings={"s": {"@id": "task:b"}}) == [
        {"s": "task:b", "st": "done"}
    ]
    assert select(seeded, q, both, bindings={"?st": "open"}) == [{"s": IRI, "st": "open"}]
    seeded.put_node(
        "task:c", {"n": 3, "f": 1.5, "ok": True, "t": {"@value": "x", "@language": "en"}}, "plan", 1
    )
    for name, value in [
        ("n", 3),
        ("f", 1.5),
        ("ok", True),
        ("t", {"@value": "x", "@language": "en"}),
    ]:
        rows = select(
            seeded, f"SELECT * WHERE {{ ?s ga:{name} ?v }}", ["plan"], bindings={"v": value}
        )
        assert [r["s"] for r in rows] == ["task:c"], name
    typed = {"@value": "3", "@type": "http://www.w3.org/2001/XMLSchema#integer"}
    assert select(seeded, "SELECT * { ?s ga:n ?v }", ["plan"], bindings={"v": typed})
    assert seeded.query("ASK { ?s ga:status ?st }", graphs=both, bindings={"st": "done"}) == {
        "boolean": True
    }


@pytest.mark.parametrize(
    "bindings",
    [
        {"s": {"@id": "not an iri"}},
        {"s": {"@id": 5}},
        {"s": None},
        {"s": [1]},
        {"s": {"@value": 1, "@language": "en"}},
        {"s": {"@value": "x", "@language": "en", "@type": "http://ex/t"}},
        {"bad name": "x"},
        {"s}": "x"},
        {5: "x"},
    ],
)
def test_bad_bindings_are_invalid(seeded: GraphStore, bindings: Any) -> None:
    refused(
        seeded,
        lambda: seeded.query("SELECT * { ?s ?p ?o }", graphs=["plan"], bindings=bindings),
    )


def test_binding_a_variable_that_is_not_projected_is_invalid(seeded: GraphStore) -> None:
    err = refused(
        seeded,
        lambda: seeded.query(
            "SELECT ?st { ?s ga:status ?st }", graphs=["plan"], bindings={"s": {"@id": IRI}}
        ),
    )
    assert "projection" in str(err)


def test_malformed_query_is_invalid_with_pyoxigraph_message(seeded: GraphStore) -> None:
    err = refused(seeded, lambda: seeded.query("SELECT ?s WHERE { ?s", graphs=["plan"]))
    assert "invalid SPARQL query" in str(err) and "error at" in str(err)
    refused(seeded, lambda: seeded.query(5, graphs=["plan"]))  # type: ignore[arg-type]
    refused(seeded, lambda: seeded.query("SELECT * {}", graphs="plan"))
    refused(seeded, lambda: seeded.query("SELECT * {}", graphs=[""]))


def test_updates_are_refused_to_agents(seeded: GraphStore) -> None:
    insert = f"INSERT DATA {{ GRAPH <{GRAPH_BASE}plan> {{ <task:x> <{VOCAB}p> 1 }} }}"
    refused(seeded, lambda: seeded.query(insert, graphs=["plan"]))
    refused(seeded, lambda: seeded.update(insert), PermissionDenied)
    refused(seeded, lambda: seeded.update("not even sparql"), PermissionDenied)
    refused(seeded, lambda: seeded.update("DELETE WHERE { ?s ?p ?o", role_is_system=True))
    seeded.update(insert, role_is_system=True)
    assert select(seeded, "SELECT ?s { ?s ga:p 1 }", ["plan"]) == [{"s": "task:x"}]
    seeded.update("DELETE WHERE { GRAPH ?g { <task:x> ?p ?o } }", role_is_system=True)
    assert select(seeded, "SELECT ?s { ?s ga:p 1 }", ["plan"]) == []


def test_network_keywords_are_refused(seeded: GraphStore) -> None:
    for q in [
        "SELECT * { SERVICE <http://127.0.0.1:9/sparql> { ?s ?p ?o } }",
        "SELECT * { ?s ?p ?o . service silent ?x { ?s ?p ?o } }",
        "SELECT * {SERVICE<http://127.0.0.1:9/>{?s ?p ?o}}",
    ]:
        err = refused(seeded, lambda q=q: seeded.query(q, graphs=["plan"]))
        assert "SERVICE" in str(err)
        refused(seeded, lambda q=q: seeded.query(q, graphs=None, role_is_system=True))
    refused(seeded, lambda: seeded.update("LOAD <http://127.0.0.1:9/x.ttl>", role_is_system=True))
    # The word as data is fine: in a string, an IRI, a comment, a variable, a local name.
    q = "SELECT ?service { BIND('SERVICE' AS ?service) ?s <http://ex/SERVICE> ?o } # SERVICE"
    assert select(seeded, q, ["plan"]) == []


def test_agents_must_name_their_graphs(seeded: GraphStore) -> None:
    refused(seeded, lambda: seeded.query("SELECT * { ?s ?p ?o }", graphs=None), PermissionDenied)
    rows = select(
        seeded,
        "SELECT ?s { ?s ga:status ?o } ORDER BY ?s",
        None,
        role_is_system=True,  # type: ignore[arg-type]
    )
    assert rows == [{"s": IRI}, {"s": "task:b"}]


def test_query_confined_to_the_allowed_graphs(seeded: GraphStore) -> None:
    seeded.put_node("task:secret", {"status": "secret"}, "secret", 1)
    secret = GRAPH_BASE + "secret"
    attempts = [
        "SELECT ?s { ?s ?p ?o }",
        "SELECT ?s { GRAPH ?g { ?s ?p ?o } }",
        f"SELECT ?s {{ GRAPH <{secret}> {{ ?s ?p ?o }} }}",
        f"SELECT ?s FROM <{secret}> {{ ?s ?p ?o }}",
        f"SELECT ?s FROM NAMED <{secret}> {{ GRAPH ?g {{ ?s ?p ?o }} }}",
        "SELECT ?s { GRAPH gag:secret { ?s ?p ?o } }",
    ]
    in_plan = {
        row["s"]
        for row in select(
            seeded,
            "SELECT ?s { GRAPH gag:plan { ?s ?p ?o } }",
            None,  # type: ignore[arg-type]
            role_is_system=True,
        )
    }
    assert IRI in in_plan and "task:secret" not in in_plan
    for q in attempts:
        subjects = {row["s"] for row in select(seeded, q, ["plan"]) if "s" in row}
        assert subjects <= in_plan, q
    assert seeded.query(f"ASK {{ GRAPH <{secret}> {{ ?s ?p ?o }} }}", graphs=["plan"]) == {
        "boolean": False
    }
    assert select(seeded, f"SELECT ?s {{ GRAPH <{secret}> {{ ?s ?p ?o }} }}", ["secret"]) == [
        {"s": "task:secret"}
    ]


def test_store_default_graph_is_never_visible_to_agents(seeded: GraphStore) -> None:
    seeded.update("INSERT DATA { <task:x> <http://ex/p> 1 }", role_is_system=True)
    for graphs in ([], ["plan"]):
        assert select(seeded, "SELECT ?s { ?s <http://ex/p> ?o }", graphs) == []
    assert select(seeded, "SELECT ?s { ?s ?p ?o }", []) == []


def test_predeclared_prefixes_can_be_overridden(seeded: GraphStore) -> None:
    q = "PREFIX ga: <http://elsewhere/> SELECT ?s { ?s ga:status ?o }"
    assert select(seeded, q, ["plan"]) == []


# --- lifecycle -----------------------------------------------------------------------------


def test_on_disk_store_is_cleared_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "l2"
    with GraphStore(path) as s:
        assert s.path == str(path)
        s.put_node(IRI, {"status": "open"}, "plan", 1)
        assert s.quad_count() == 1
        assert select(s, "SELECT ?s { ?s ga:status 'open' }", ["plan"]) == [{"s": IRI}]
    assert path.is_dir()
    with GraphStore(str(path)) as s:
        assert s.quad_count() == 0 and s.count() == 0


def test_closed_store_refuses_calls() -> None:
    s = GraphStore()
    s.close()
    s.close()  # idempotent
    for call in (
        lambda: s.put_node(IRI, {"a": 1}, "plan", 1),
        lambda: s.query("ASK {}", graphs=["plan"]),
        lambda: s.update("CLEAR ALL", role_is_system=True),
        s.dump,
        lambda: s.raw,
    ):
        with pytest.raises(StorageError):
            call()


def test_concurrent_readers_see_a_rewrite_whole_or_not_at_all(store: GraphStore) -> None:
    """A rewrite is one pyoxigraph transaction: a query on another thread sees
    every triple of the old value or every triple of the new one, never a mix
    (the threading contract in docs/L2_GRAPH.md)."""

    def value(i: int) -> dict[str, Any]:
        return {"a": i, "b": i, "sub": {"c": i}}

    store.put_node(IRI, value(0), "plan", 1)
    stop = threading.Event()
    seen: list[list[dict[str, str]]] = []
    query = f"SELECT ?a ?b ?c {{ <{IRI}> ga:a ?a ; ga:b ?b ; ga:sub/ga:c ?c }}"

    def reader() -> None:
        while not stop.is_set():
            seen.append(store.query(query, graphs=["plan"])["rows"])

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for version in range(2, 400):
            store.put_node(IRI, value(version), "plan", version)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    assert seen
    for rows in seen:
        assert len(rows) == 1 and rows[0]["a"] == rows[0]["b"] == rows[0]["c"], rows


def test_the_system_graph_can_live_on_disk_and_is_rebuilt_from_l0(tmp_path: Path) -> None:
    from gliding_actors import MemorySystem

    config = {"l2": {"graph_on_disk": True}}
    query = "SELECT ?s WHERE { ?s <https://gliding-actors.dev/ns#goal> ?g }"
    with MemorySystem.open(tmp_path / "mem", config) as memory:
        assert memory.graph.path == str(tmp_path / "mem" / "l2")
        pa = memory.agent("pa", "PA")
        pa.write("plan:disk", {"goal": "persist"}, graph="plan")
        assert pa.query(query)["rows"] == [{"s": "plan:disk"}]
    assert (tmp_path / "mem" / "l2").is_dir()
    with MemorySystem.open(tmp_path / "mem", config) as memory:
        assert memory.agent("pa", "PA").query(query)["rows"] == [{"s": "plan:disk"}]


def test_an_in_memory_store_is_rebuilt_so_rewritten_literals_do_not_pile_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """pyoxigraph's memory store keeps every literal it interned; GraphStore rebuilds it
    once the dropped quads outnumber the live ones twice, and nothing else changes."""
    import gliding_actors.l2._graph as graph_module

    monkeypatch.setattr(graph_module, "COMPACT_AFTER_DROPS", 50)
    store = GraphStore()
    for n in range(1, 41):
        for i in range(20):
            store.put_node(f"urn:c{i}", {"@id": f"urn:c{i}", "n": f"round {n} of {i}"}, "plan", n)
    assert store.compactions >= 5  # 760 rewrites of 20 lines, 1 literal dropped each
    assert len(store.raw) == store.quad_count()  # the rebuilt store holds exactly the live quads
    rows = store.query("SELECT ?s ?n WHERE { ?s ga:n ?n }", graphs=["plan"])["rows"]
    assert sorted((r["s"], r["n"]) for r in rows) == sorted((f"urn:c{i}", f"round 40 of {i}") for i in range(20))
    node = store.node("urn:c3")
    assert node is not None and node.version == 40
    # a line removed after the rebuild leaves nothing behind
    store.forget("urn:c3")
    assert store.query("ASK { <urn:c3> ?p ?o }", graphs=["plan"])["boolean"] is False


def test_a_store_on_disk_is_never_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gliding_actors.l2._graph as graph_module

    monkeypatch.setattr(graph_module, "COMPACT_AFTER_DROPS", 5)
    store = GraphStore(tmp_path / "graph")
    try:
        for n in range(1, 30):
            store.put_node("urn:d", {"@id": "urn:d", "n": f"v{n}"}, "plan", n)
        assert store.compactions == 0
    finally:
        store.close()


# -- tags: a line's tags ride in its node entry (not RDF: they never become quads), so
# MemorySystem.line_copy can answer from the node map without reading a directory's home.


def test_tags_are_kept_and_read_back_by_node_and_lines(store: GraphStore) -> None:
    assert store.put_node(IRI, {"status": "open"}, "plan", 1, ("confirmed_fact", "auth"))
    store.put_node("task:b", {"status": "open"}, "plan", 1, ["draft"])  # a list is kept as a tuple
    assert store.node(IRI) == GraphNode(IRI, {"status": "open"}, "plan", 1, ("confirmed_fact", "auth"))
    b = store.node("task:b")
    assert b is not None and b.tags == ("draft",)
    assert [(n.iri, n.tags) for n in store.lines()] == [("task:auth-refactor", ("confirmed_fact", "auth")), ("task:b", ("draft",))]


def test_a_node_built_without_tags_has_none_and_equals_a_tagless_line(store: GraphStore) -> None:
    """Four-field GraphNode constructions (older callers, older tests) keep working."""
    store.put_node(IRI, {"status": "open"}, "plan", 1)
    node = GraphNode(IRI, {"status": "open"}, "plan", 1)
    assert node.tags == ()
    assert store.node(IRI) == node
    store.put_node(IRI, {"status": "open"}, "plan", 2, ("x",))
    assert store.node(IRI) != GraphNode(IRI, {"status": "open"}, "plan", 2)


def test_a_rewrite_replaces_the_tags(store: GraphStore) -> None:
    store.put_node(IRI, {"status": "open"}, "plan", 1, ("a", "b"))
    store.put_node(IRI, {"status": "done"}, "plan", 2, ("c",))
    assert store.node(IRI) == GraphNode(IRI, {"status": "done"}, "plan", 2, ("c",))
    store.put_node(IRI, {"status": "done"}, "plan", 3)  # no tags given: the line has none now
    assert store.node(IRI) == GraphNode(IRI, {"status": "done"}, "plan", 3, ())


def test_tags_are_not_rdf(store: GraphStore) -> None:
    """The same value with and without tags puts exactly the same quads."""
    store.put_node(IRI, {"status": "open", "owner": "pa"}, "plan", 1)
    bare = store.dump()
    store.put_node(IRI, {"status": "open", "owner": "pa"}, "plan", 2, ("confirmed_fact", "secret-ish"))
    assert store.dump() == bare
    assert not any("confirmed_fact" in q for q in store.dump())


def test_a_tombstone_keeps_its_version_graph_and_tags(store: GraphStore) -> None:
    """A deleted line stays known at the delete's version (so a reader never
    falls back to an older copy in L0), with the tags the delete carried."""
    store.put_node(IRI, {"status": "open"}, "review", 4, ("confirmed_fact",))
    assert store.put_node(IRI, None, "review", 5, ("confirmed_fact",)) is True
    assert store.node(IRI) == GraphNode(IRI, None, "review", 5, ("confirmed_fact",))
    assert store.dump() == [] and store.count() == 0 and store.graph_of(IRI) is None
    assert store.lines() == [GraphNode(IRI, None, "review", 5, ("confirmed_fact",))]


def test_a_stale_write_does_not_change_the_tags(store: GraphStore) -> None:
    store.put_node(IRI, {"status": "new"}, "plan", 5, ("keep",))
    before = snapshot(store)
    assert store.put_node(IRI, {"status": "old"}, "plan", 4, ("lose",)) is False
    assert store.put_node(IRI, None, "plan", 4, ("lose",)) is False
    assert snapshot(store) == before
    node = store.node(IRI)
    assert node is not None and node.tags == ("keep",)


@pytest.mark.parametrize(
    "tags",
    [
        (1,),
        ("ok", None),
        ["ok", b"bytes"],
        (("nested",),),
        "confirmed_fact",  # a bare string would become one-letter tags
        {"a"},  # a set has no order to keep
        None,
        {"a": 1},
    ],
    ids=repr,
)
def test_a_bad_tag_is_invalid_input_and_changes_nothing(store: GraphStore, tags: Any) -> None:
    store.put_node(IRI, {"status": "open"}, "plan", 1, ("before",))
    store.put_node("task:b", {"status": "open"}, "plan", 1)
    before = snapshot(store)
    for iri, value, version in ((IRI, {"status": "done"}, 2), (IRI, None, 2), ("task:new", {"a": 1}, 1)):
        with pytest.raises(InvalidInput) as info:
            store.put_node(iri, value, "plan", version, tags)
        assert info.value.path[0] == "tags"
        assert snapshot(store) == before
    assert store.node(IRI) == GraphNode(IRI, {"status": "open"}, "plan", 1, ("before",))
    assert store.node("task:new") is None


def test_a_bad_tag_is_refused_even_when_the_write_is_stale(store: GraphStore) -> None:
    """Bad input is an error whatever the versions say, not a silent ``False``."""
    store.put_node(IRI, {"status": "open"}, "plan", 3)
    before = snapshot(store)
    bad: Any = (7,)
    with pytest.raises(InvalidInput):
        store.put_node(IRI, {"status": "old"}, "plan", 1, bad)
    assert snapshot(store) == before


# --- load_nodes: the many lines of a memory opening, in one transaction ----------------------


LOADED = [
    # describes task:c's status as task:c's own line does: the shared triple is counted twice
    GraphNode("task:a", {"title": "A", "dep": {"@id": "task:c", "status": "open"}}, "plan", 3, ("x",), 0.5),
    GraphNode("task:b", {"title": "B", "sub": {"note": "nested"}}, "review", 1),
    GraphNode("task:gone", None, "plan", 7, ("t",)),
    GraphNode("task:c", {"status": "open"}, "plan", 2),
]


@pytest.mark.parametrize("stored", [False, True], ids=["given", "read back from L0"])
def test_load_nodes_leaves_what_put_node_leaves(stored: bool) -> None:
    with GraphStore() as one_by_one, GraphStore() as loaded:
        for node in LOADED:
            assert one_by_one.put_node(*node)
        assert loaded.load_nodes(iter(LOADED), stored=stored) == len(LOADED)
        assert snapshot(loaded) == snapshot(one_by_one)
        assert loaded.graphs() == one_by_one.graphs() == ["plan", "review"]
        assert [loaded.quads_of(n.iri) for n in LOADED] == [one_by_one.quads_of(n.iri) for n in LOADED]
        # the bookkeeping goes on as after put_node: a rewrite replaces exactly the loaded quads,
        # and the triple task:c shares with task:a outlives task:a's rewrite
        for store in (loaded, one_by_one):
            store.put_node("task:a", {"title": "A2"}, "plan", 4)
            store.forget("task:b")
        assert snapshot(loaded) == snapshot(one_by_one)
        assert f'<task:c> <{VOCAB}status> "open" <{GRAPH_BASE}plan> .' in loaded.dump()


@pytest.mark.parametrize(
    "nodes",
    [
        pytest.param([*LOADED, GraphNode("task:a", {"title": "again"}, "plan", 9)], id="given twice"),
        pytest.param([LOADED[0], GraphNode("task:held", {"title": "T"}, "plan", 1)], id="held already"),
        pytest.param([LOADED[0], GraphNode("task:d", {"@context": "http://example.org/c"}, "plan", 1)], id="bad JSON-LD"),
        pytest.param([LOADED[0], GraphNode("task:d", {"t": 1}, "plan", -1)], id="bad version"),
        pytest.param([LOADED[0], GraphNode("task:d", {"t": 1}, "plan", 1, (3,))], id="bad tag"),  # type: ignore[arg-type]
        pytest.param([LOADED[0], GraphNode("not an iri", {"t": 1}, "plan", 1)], id="bad iri"),
    ],
)
def test_load_nodes_refusing_one_line_puts_none(store: GraphStore, nodes: list[GraphNode]) -> None:
    store.put_node("task:held", {"title": "held"}, "plan", 1)
    refused(store, lambda: store.load_nodes(nodes))


def test_live_versions_are_the_live_lines_of_the_node_map(store: GraphStore) -> None:
    store.put_node("task:a", {"title": "A"}, "plan", 3)
    store.put_node("task:b", {"title": "B"}, "review", 1)
    store.put_node("task:b", None, "review", 2)  # a tombstone is not live
    store.put_node("task:c", {"title": "C"}, "plan", 5)
    store.put_node("task:a", {"title": "A2"}, "plan", 4)
    assert sorted(store.live_versions()) == [("task:a", 4), ("task:c", 5)]
    assert sorted(store.live_versions()) == [(n.iri, n.version) for n in store.lines() if n.value is not None]
