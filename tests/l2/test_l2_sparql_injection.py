"""SPARQL injection: quotes, ``}``, ``GRAPH``, comments and unicode escapes, in
stored values, bindings, graph names, IRIs and raw queries aimed at a graph
the agent may not read. Every attempt is refused (a typed error) or inert (it
matches only what it literally says), and the store is unchanged."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gliding_actors.errors import InvalidInput, PermissionDenied
from gliding_actors.l2._graph import GraphStore
from gliding_actors.l2._jsonld import GRAPH_BASE, VOCAB

SECRET_GRAPH = GRAPH_BASE + "secret"
MINE = ["plan"]

PAYLOADS = [
    '"',
    "'",
    '" } GRAPH <' + SECRET_GRAPH + "> { ?s ?p ?o } #",
    "' } GRAPH ?g { ?s ?p ?o } #",
    '"""',
    "'''",
    "} } SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }",
    "# comment\n} ; DROP ALL ; #",
    "\\u0022 } GRAPH ?g { ?s ?p ?o } #",
    "\\U00000022 UNION { ?s ?p ?o }",
    "\\\\u0022",
    "\\",
    "a\\",
    "\n\r\t\x00\x7f",
    "> <" + SECRET_GRAPH + ">",
    "SERVICE <http://127.0.0.1:9/> { ?s ?p ?o }",
    "\u2028\u2029\ufeff",
    "😀 é ß",
]


@pytest.fixture
def store() -> Iterator[GraphStore]:
    with GraphStore() as s:
        s.put_node("task:mine", {"status": "open", "note": "hello"}, "plan", 1)
        s.put_node("task:secret", {"status": "open", "note": "top secret"}, "secret", 1)
        yield s


def state(store: GraphStore) -> tuple[list[str], list[Any]]:
    return store.dump(), store.lines()


def leaks(result: dict[str, Any]) -> bool:
    """Anything only the secret graph holds came back (an ASK here only ever
    asks about the secret graph)."""
    text = repr(result)
    return "task:secret" in text or "top secret" in text or result == {"boolean": True}


@pytest.mark.parametrize("payload", PAYLOADS)
def test_payload_in_a_value_is_stored_as_a_literal_and_reads_back_exactly(
    store: GraphStore, payload: str
) -> None:
    store.put_node("task:x", {"note": payload}, "plan", 1)
    rows = store.query("SELECT ?n { <task:x> ga:note ?n }", graphs=MINE)["rows"]
    assert rows == [{"n": payload}]
    # The rewrite removes that literal through DELETE DATA: nothing of it remains.
    store.put_node("task:x", {"note": "clean " + payload[::-1]}, "plan", 2)
    rows = store.query("SELECT ?n { <task:x> ga:note ?n }", graphs=MINE)["rows"]
    assert rows == [{"n": "clean " + payload[::-1]}]
    store.put_node("task:x", None, "plan", 3)
    assert not any("task:x" in line for line in store.dump())


@pytest.mark.parametrize("payload", PAYLOADS)
def test_payload_as_a_key_or_type_is_inert(store: GraphStore, payload: str) -> None:
    before = store.dump()
    try:
        store.put_node("task:x", {payload: "v", "@type": payload}, "plan", 1)
    except InvalidInput:
        assert store.dump() == before
        return
    result = store.query("SELECT ?s ?p ?o { ?s ?p ?o }", graphs=MINE)
    assert not leaks(result)


@pytest.mark.parametrize("payload", PAYLOADS)
def test_payload_as_a_literal_binding_matches_only_itself(store: GraphStore, payload: str) -> None:
    before = state(store)
    for q in [
        "SELECT * { ?s ga:note ?n }",
        "SELECT * { GRAPH ?g { ?s ga:note ?n } }",
        "ASK { ?s ga:note ?n }",
        "CONSTRUCT { ?s ga:note ?n } WHERE { ?s ga:note ?n }",
    ]:
        result = store.query(q, graphs=MINE, bindings={"n": payload})
        assert result in ({"rows": []}, {"boolean": False}, {"jsonld": []}), q
        result = store.query(q, graphs=MINE, bindings={"n": {"@value": payload, "@language": "en"}})
        assert not leaks(result)
    assert state(store) == before


@pytest.mark.parametrize("payload", PAYLOADS)
def test_payload_as_an_iri_binding_is_refused_or_inert(store: GraphStore, payload: str) -> None:
    """A payload that makes an invalid IRI is refused; one that is a valid IRI
    (``'`` and U+2028 are legal IRI characters) names just that IRI."""
    before = state(store)
    for bindings in (
        {"s": {"@id": "task:" + payload}},
        {"n": {"@value": "x", "@type": "http://ex/" + payload}},
    ):
        try:
            result = store.query("SELECT * { ?s ga:note ?n }", graphs=MINE, bindings=bindings)
        except InvalidInput:
            continue
        assert result == {"rows": []}
    assert state(store) == before


@pytest.mark.parametrize("payload", PAYLOADS)
def test_payload_as_a_variable_name_is_refused(store: GraphStore, payload: str) -> None:
    before = state(store)
    with pytest.raises(InvalidInput):
        store.query("SELECT * { ?s ga:note ?n }", graphs=MINE, bindings={"n" + payload: "x"})
    assert state(store) == before


@pytest.mark.parametrize("payload", PAYLOADS)
def test_payload_in_an_iri_is_refused_or_inert(store: GraphStore, payload: str) -> None:
    before = state(store)
    iri = "task:" + payload
    for line, value in ((iri, {"note": "x"}), ("task:x", {"@id": iri, "note": "x"})):
        try:
            store.put_node(line, value, "plan", 1)
        except InvalidInput:
            assert state(store) == before
            continue
        rows = store.query("SELECT ?s ?n { ?s ga:note ?n }", graphs=MINE)["rows"]
        assert {"s": iri, "n": "x"} in rows and not leaks({"rows": rows})
        store.forget(line)
        assert state(store) == before


@pytest.mark.parametrize("payload", [p for p in PAYLOADS if p.strip("\n\r\t\x00\x7f")])
def test_payload_in_a_graph_name_stays_inside_its_own_graph(
    store: GraphStore, payload: str
) -> None:
    name = "g" + payload.replace("\x00", "").replace("\x7f", "").replace("\n", "")
    name = name.replace("\r", "").replace("\t", "")
    store.put_node("task:x", {"note": "in g"}, name, 1)
    assert store.graph_of("task:x") == name
    rows = store.query("SELECT ?s ?g { GRAPH ?g { ?s ga:note ?n } }", graphs=[name])["rows"]
    assert [r["s"] for r in rows] == ["task:x"]
    assert rows[0]["g"].startswith(GRAPH_BASE) and " " not in rows[0]["g"]
    everything = store.query("SELECT ?s { GRAPH ?g { ?s ?p ?o } }", graphs=[name])["rows"]
    assert everything == [{"s": "task:x"}]


SECRET_IRI_ESCAPED = "".join(f"\\u{ord(c):04X}" for c in SECRET_GRAPH)

RAW_ATTEMPTS = [
    f"SELECT * {{ GRAPH <{SECRET_GRAPH}> {{ ?s ?p ?o }} }}",
    f"SELECT * FROM <{SECRET_GRAPH}> {{ ?s ?p ?o }}",
    f"SELECT * FROM NAMED <{SECRET_GRAPH}> {{ GRAPH ?g {{ ?s ?p ?o }} }}",
    f"SELECT * FROM <{SECRET_GRAPH}> FROM NAMED <{SECRET_GRAPH}> {{ {{ ?s ?p ?o }} UNION {{ GRAPH ?g {{ ?s ?p ?o }} }} }}",
    f"SELECT * {{ GRAPH <{SECRET_IRI_ESCAPED}> {{ ?s ?p ?o }} }}",
    "SELECT * { GRAPH gag:secret { ?s ?p ?o } }",
    "SELECT * { GRAPH gag:secre\\u0074 { ?s ?p ?o } }",
    "SELECT * { GRAPH ?g { ?s ?p ?o } FILTER(CONTAINS(STR(?g), 'secret')) }",
    "SELECT * { ?s ?p 'top secret' }",
    "SELECT * { ?s ?p ?o } # } GRAPH ?g { ?x ?y ?z }",
    'SELECT * { BIND("x\\u0022 } GRAPH ?g { ?s ?p ?o } #" AS ?y) }',
    "SELECT * { BIND('x\\u0027 } GRAPH ?g { ?s ?p ?o } #' AS ?y) }",
    'SELECT * { BIND("""x\\u0022\\u0022\\u0022 } GRAPH ?g { ?s ?p ?o } #""" AS ?y) }',
    "SELECT * { ?s ?p ?o \\u007d GRAPH ?g { ?s ?p ?o } }",
    "SELECT * { \\u0047RAPH ?g { ?s ?p ?o } }",
    f"SELECT * {{ BIND(<http://a/\\u003E> AS ?x) GRAPH <{SECRET_GRAPH}> {{ ?s ?p ?o }} }}",
    "SELECT * { SERV\\u0049CE <http://127.0.0.1:9/> { ?s ?p ?o } }",
    "SELECT * { SERVICE <http://127.0.0.1:9/> { ?s ?p ?o } }",
    "SELECT * { BIND('x' AS ?y) SERVICE ?y { ?s ?p ?o } }",
    f"ASK {{ GRAPH <{SECRET_GRAPH}> {{ ?s ?p ?o }} }}",
    f"CONSTRUCT {{ ?s ?p ?o }} WHERE {{ GRAPH <{SECRET_GRAPH}> {{ ?s ?p ?o }} }}",
    "DESCRIBE <task:secret>",
    f"CONSTRUCT {{ ?s ?p ?o }} FROM <{SECRET_GRAPH}> WHERE {{ ?s ?p ?o }}",
    f"INSERT DATA {{ GRAPH <{GRAPH_BASE}plan> {{ <task:z> <{VOCAB}p> 1 }} }}",
    f"DROP GRAPH <{SECRET_GRAPH}>",
    "SELECT * { ?s ?p ?o } ; DROP ALL",
    f"SELECT * {{ ?s ?p ?o }} VALUES ?g {{ <{SECRET_GRAPH}> }}",
    f"SELECT * {{ VALUES ?g {{ <{SECRET_GRAPH}> }} GRAPH ?g {{ ?s ?p ?o }} }}",
    "SELECT * { GRAPH ?g { ?s ?p ?o } FILTER(?g = IRI(CONCAT(STR(gag:), 'secret'))) }",
]


@pytest.mark.parametrize("sparql", RAW_ATTEMPTS)
def test_raw_query_against_a_forbidden_graph_is_refused_or_inert(
    store: GraphStore, sparql: str
) -> None:
    before = state(store)
    try:
        result = store.query(sparql, graphs=MINE)
    except InvalidInput:
        pass
    else:
        assert not leaks(result), result
    assert state(store) == before


@pytest.mark.parametrize("sparql", RAW_ATTEMPTS)
def test_raw_text_as_an_update_is_refused_to_agents(store: GraphStore, sparql: str) -> None:
    before = state(store)
    with pytest.raises(PermissionDenied):
        store.update(sparql)
    assert state(store) == before


def test_escaped_iri_reaches_its_graph_when_allowed(store: GraphStore) -> None:
    """The escaped spelling really names the secret graph: it is the dataset
    restriction, not a parse failure, that keeps it out above."""
    q = f"SELECT ?s {{ GRAPH <{SECRET_IRI_ESCAPED}> {{ ?s ?p ?o }} }}"
    assert store.query(q, graphs=["secret"])["rows"] == [{"s": "task:secret"}] * 2


@given(text=st.text(max_size=40))
def test_any_text_round_trips_through_write_rewrite_and_binding(text: str) -> None:
    with GraphStore() as store:
        store.put_node("task:x", {"note": text, "keep": 1}, "plan", 1)
        assert store.query("SELECT ?n { <task:x> ga:note ?n }", graphs=MINE)["rows"] == [
            {"n": text}
        ]
        bound = store.query("SELECT * { ?s ga:note ?n }", graphs=MINE, bindings={"n": text})
        assert bound["rows"] == [{"s": "task:x", "n": text}]
        store.put_node("task:x", {"note": text + "!", "keep": 1}, "plan", 2)
        assert store.query("SELECT ?n { <task:x> ga:note ?n }", graphs=MINE)["rows"] == [
            {"n": text + "!"}
        ]
        assert len(store.dump()) == 2
