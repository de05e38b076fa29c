"""L2 graph store: a line's tags ride in its node entry.

The node entry is a whole copy of the line (value, version, tags, graph), so
``MemorySystem.line_copy`` can answer from it without reading a directory's
home. Tags are not RDF: they never become quads. Refusals are checked as in
``test_l2_graph.py``: the full RDF dump and the node cache before and after.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gliding_actors.errors import InvalidInput
from gliding_actors.l2._graph import GraphNode, GraphStore

IRI = "task:auth-refactor"


@pytest.fixture
def store() -> Iterator[GraphStore]:
    with GraphStore() as s:
        yield s


def snapshot(store: GraphStore) -> tuple[list[str], list[GraphNode], int]:
    return store.dump(), store.lines(), store.count()


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
