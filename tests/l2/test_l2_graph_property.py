"""Properties of the L2 graph store, checked with hypothesis.

1. Whatever sequence of writes, rewrites, graph moves, tombstones and forgets
   runs, the RDF store holds exactly the quads of the live lines' current
   values — no leftovers from earlier versions, nothing missing where two
   lines share a triple — and the node cache agrees.
2. A query confined to graphs G never returns a subject stored only in graphs
   outside G, whatever the query names (GRAPH, FROM, FROM NAMED, VALUES).
"""

from __future__ import annotations

from typing import Any

import pyoxigraph as ox
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gliding_actors.errors import InvalidInput
from gliding_actors.l2._graph import GraphStore
from gliding_actors.l2._jsonld import GRAPH_BASE, described_elsewhere, graph_iri, is_plain, to_quads

IRIS = [f"task:t{i}" for i in range(4)]
GRAPHS = ["plan", "execution", "a b"]
KEYS = ["status", "n", "title", "tags", "sub", "dep", "note", "weird key", "x:y"]

scalars = st.one_of(
    st.text(max_size=12),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)
leaf = st.one_of(scalars, st.lists(scalars, max_size=3))
nested = st.dictionaries(st.sampled_from(["x", "y", "status"]), leaf, max_size=3)
status = st.sampled_from(["open", "done"])
# Another line's IRI as a nested node: two lines then share triples.
shared = st.builds(
    lambda iri, status: {"@id": iri, "status": status},
    st.sampled_from(IRIS),
    status,
)
# Small, overlapping choices (drawn most often) so that lines often assert the
# same triple and a wrong reference count shows.
overlapping = st.fixed_dictionaries(
    {"status": status, "dep": shared}, optional={"n": st.integers(0, 2)}
)
values = st.one_of(
    overlapping,
    overlapping,
    overlapping,
    st.dictionaries(st.sampled_from(KEYS), st.one_of(leaf, nested, shared), max_size=6),
    st.builds(lambda t, s: {"@type": t, "status": s}, st.sampled_from(["Task", "Risk"]), leaf),
    st.just({"@id": 5}),  # invalid: refused, nothing changes
)

ops = st.lists(
    st.tuples(
        st.sampled_from(["put", "put", "put", "delete", "forget", "stale"]),
        st.sampled_from(IRIS),
        values,
        st.sampled_from(["plan", "plan", *GRAPHS]),
    ),
    min_size=4,
    max_size=30,
)


def expected_dump(model: dict[str, tuple[dict[str, Any], str]]) -> list[str]:
    ref = ox.Store()
    for iri, (value, graph) in model.items():
        ref.extend(to_quads(iri, value, ox.NamedNode(graph_iri(graph))))
    return sorted(f"{q} ." for q in ref)


@settings(max_examples=200)
@given(ops)
@example(  # a shared triple outlives the line that asserted it first
    [
        ("put", "task:t0", {"status": "open", "dep": {"@id": "task:t1", "status": "open"}}, "plan"),
        ("put", "task:t1", {"status": "open"}, "plan"),
        ("delete", "task:t0", {}, "plan"),
        ("put", "task:t0", {"dep": {"@id": "task:t1", "status": "open"}}, "plan"),
        ("forget", "task:t1", {}, "plan"),
    ]
)
def test_store_holds_exactly_the_quads_of_the_current_lines(
    steps: list[tuple[str, str, Any, str]],
) -> None:
    live: dict[str, tuple[dict[str, Any], str]] = {}
    versions: dict[str, int] = {}
    with GraphStore() as store:
        for op, iri, value, graph in steps:
            version = versions.get(iri, 0) + 1
            if op == "put":
                try:
                    assert store.put_node(iri, value, graph, version)
                except InvalidInput:
                    pass
                else:
                    live[iri] = (value, graph)
                    versions[iri] = version
            elif op == "delete":
                assert store.put_node(iri, None, graph, version)
                live.pop(iri, None)
                versions[iri] = version
            elif op == "forget":
                store.forget(iri)
                live.pop(iri, None)
                versions.pop(iri, None)
            elif iri in versions:  # a stale write loses
                assert not store.put_node(iri, {"status": "stale"}, graph, versions[iri] - 1)
            assert store.dump() == expected_dump(live)
            assert store.count() == len(live)
            for name in GRAPHS:
                assert store.iris_in(name) == sorted(i for i, (_, g) in live.items() if g == name)
            for line in IRIS:
                node = store.node(line)
                if line in live:
                    assert node is not None and node.value is live[line][0]
                    assert node.version == versions[line]
                else:
                    assert node is None or node.value is None


def _templates(forbidden: str) -> list[str]:
    g = GRAPH_BASE + forbidden.replace(" ", "%20")
    return [
        "SELECT ?s { ?s ?p ?o }",
        "SELECT ?s { GRAPH ?g { ?s ?p ?o } }",
        f"SELECT ?s {{ GRAPH <{g}> {{ ?s ?p ?o }} }}",
        f"SELECT ?s FROM <{g}> {{ ?s ?p ?o }}",
        f"SELECT ?s FROM NAMED <{g}> {{ GRAPH ?g {{ ?s ?p ?o }} }}",
        f"SELECT ?s {{ VALUES ?g {{ <{g}> }} GRAPH ?g {{ ?s ?p ?o }} }}",
        "SELECT ?s { { ?s ?p ?o } UNION { GRAPH ?g { ?s ?p ?o } } }",
        "CONSTRUCT { ?s ?p ?o } WHERE { GRAPH ?g { ?s ?p ?o } }",
    ]


@settings(max_examples=150)
@given(
    placement=st.dictionaries(st.sampled_from(IRIS), st.sampled_from(GRAPHS), min_size=1),
    allowed=st.sets(st.sampled_from(GRAPHS)),
    forbidden=st.sampled_from(GRAPHS),
    template=st.integers(0, 7),
)
def test_confined_query_never_returns_a_subject_stored_only_elsewhere(
    placement: dict[str, str], allowed: set[str], forbidden: str, template: int
) -> None:
    value = {"status": "x", "sub": {"y": 1}}
    with GraphStore() as store:
        for iri, graph in placement.items():
            store.put_node(iri, value, graph, 1)
        # Ground truth from the writes: every subject of a quad in an allowed graph.
        visible = {
            q.subject.value
            for iri, graph in placement.items()
            if graph in allowed
            for q in to_quads(iri, value, ox.NamedNode(graph_iri(graph)))
        }
        result = store.query(_templates(forbidden)[template], graphs=sorted(allowed))
        if "rows" in result:
            subjects = {row["s"] for row in result["rows"] if "s" in row}
        else:
            subjects = {node["@id"] for node in result["jsonld"]}
        assert subjects <= visible
        if forbidden not in allowed:
            only_there = {i for i, g in placement.items() if g == forbidden}
            assert subjects.isdisjoint(only_there)


# --- values read back from L0: encoded by orjson on open, the same quads -------------------------

# What a check at the door lets into L0: 64-bit integers, finite floats, valid UTF-8.
json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.characters(codec="utf-8"), max_size=8),
)
json_values = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from([*KEYS, "@type", "@id", "@value", "@list", "@language"]), inner, max_size=4),
    ),
    max_leaves=12,
)


def _nested(depth: int) -> dict[str, Any]:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return {"sub": value}


@settings(max_examples=300)
@given(st.dictionaries(st.sampled_from(KEYS), json_values, max_size=5))
@example({"n": 1e-05, "note": [5e-07, 1e16, 1e21, -0.0, 5e-324]})  # floats the two encoders spell differently
@example(_nested(300))  # deeper than orjson goes: the standard encoder takes over
def test_a_stored_value_gives_the_quads_the_standard_encoder_gives(value: dict[str, Any]) -> None:
    graph = ox.NamedNode(graph_iri("plan"))

    def quads(stored: bool) -> tuple[ox.Quad, ...] | str:
        try:
            return to_quads("task:t0", value, graph, stored=stored)
        except InvalidInput as exc:
            return str(exc)

    assert quads(True) == quads(False)


# Keys near the edges of what the default context makes of a key: keywords, compact and absolute
# IRIs, blank node labels, spaces, non-ASCII, and plain terms.
edge_keys = st.one_of(
    st.sampled_from([*KEYS, "@id", "@type", "@graph", "@context", "_:b0", "http://x.org/p", "a.b", "a-b", "é", ""]),
    st.text(max_size=6),
)
edge_scalars = st.one_of(
    st.text(max_size=8),  # lone surrogates included
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.booleans(),
    st.none(),
    st.sampled_from(["other:node", "_:b1", "http://x.org/n"]),
)
edge_values = st.recursive(
    edge_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(edge_keys, inner, max_size=4)),
    max_leaves=12,
)


@settings(max_examples=400)
@given(st.dictionaries(edge_keys, edge_values, max_size=5))
@example({"@id": "other:node", "status": "open"})
@example({"note": "\ud800"})
@example({"n": 2**64})
def test_a_value_passed_as_plain_parses_and_describes_only_its_own_line(value: dict[str, Any]) -> None:
    """The handle skips the JSON-LD parse for a plain value: that must never let through a value
    the home's put would refuse, or one that describes another node."""
    if not is_plain(value):
        return
    quads = to_quads("task:t0", value, ox.NamedNode(graph_iri("plan")))
    assert described_elsewhere("task:t0", quads) == []


def test_plain_is_what_agents_usually_write_and_never_a_keyword_or_an_iri_key() -> None:
    assert is_plain({"title": "Ship", "steps": [{"n": 1, "done": False}], "due_at": None, "cost.eur": 1.5})
    assert not is_plain({"@id": "task:t0", "title": "Ship"})
    assert not is_plain({"title": "Ship", "sub": {"@type": "Task"}})
    assert not is_plain({"x:y": 1})
    assert not is_plain({"n": float("nan")})
    assert not is_plain(["not", "an", "object"])
