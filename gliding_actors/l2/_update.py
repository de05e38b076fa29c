"""An agent's SPARQL update, turned into writes of whole lines.

A line is one JSON-LD node whose quads the graph store derives from its value;
nothing may change the quads behind the value's back, or caches, L0 and the
graph would disagree. So an agent's update is never run on the graph store.
It runs on a scratch copy of the graphs the role may read (each as itself, and
their union as the default graph, as a query sees them); the quads it removed
and added are mapped back onto the JSON values of the lines they belong to,
and :func:`plan_update` returns the new value of every line it changed. The
caller writes those values through coherence, with each line's own rights.

What an update may do: add and remove the properties of lines (a subject that
is a line's IRI), create lines, and empty lines (which deletes them), in any
graph the role may create in, update in or delete from. It may not touch a
nested node (a fragment or blank node of a line; write the line instead), a
line whose value has its own ``@context`` (its keys are not the vocabulary's),
or put a line's statements in a graph other than the line's own. Each refusal
is :class:`InvalidInput` before anything is written. The plan is checked
exactly: the quads of each new value must be the old quads minus the removed
plus the added ones, or the update is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, NamedTuple

import pyoxigraph as ox

from gliding_actors.errors import InvalidInput, show
from gliding_actors.l2._graph import GraphStore, prefixes_for, refuse_network
from gliding_actors.l2._jsonld import (
    GENID_BASE,
    compact_vocab,
    graph_iri,
    graph_name_of,
    json_object_of,
    to_quads,
)

__all__ = ["LineChange", "check_update", "plan_update"]

_RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
_DEFAULT = ox.DefaultGraph()


class LineChange(NamedTuple):
    """One line an update changes: its new value (None: deleted) in ``graph``; ``existed``
    tells a create (needs ``create``) from a change (``update``) or an emptying (``delete``)."""

    iri: str
    graph: str
    value: dict[str, Any] | None
    existed: bool


def check_update(sparql: object) -> str:
    """The update text, or InvalidInput: not a string, ``LOAD``/``SERVICE`` (the network), or
    not SPARQL update syntax (parsed by running it on an empty store, nothing read or written;
    an error of evaluation there, such as dropping a graph the empty store lacks, is left to the
    real run on the role's graphs)."""
    if type(sparql) is not str or not sparql.strip():
        raise InvalidInput("a SPARQL update is a non-empty string", path=("sparql",))
    refuse_network(sparql, ("SERVICE", "LOAD"))
    try:
        ox.Store().update(sparql, prefixes=prefixes_for(sparql))
    except SyntaxError as exc:
        raise InvalidInput(f"invalid SPARQL update: {exc}", path=("sparql",)) from None
    except (RuntimeError, ValueError, TypeError):
        pass
    return sparql


def _graph_name(node: ox.NamedNode | ox.BlankNode | ox.DefaultGraph) -> str:
    """The memory's name of named graph ``node`` (InvalidInput for an IRI that names none)."""
    if type(node) is ox.NamedNode:
        try:
            name = graph_name_of(node.value)
            if graph_iri(name) == node.value:
                return name
        except InvalidInput:
            pass
    raise InvalidInput(f"an update may only write the memory's named graphs (gag:NAME), not {show(str(node))}")


def plan_update(
    sparql: str,
    graphs: GraphStore,
    readable: Collection[str],
    value_of: Callable[[str], tuple[dict[str, Any] | None, str | None]],
    default_graph: str,
) -> list[LineChange]:
    """The lines ``sparql`` changes, with their new values, sorted by IRI (see the module docstring).

    ``readable``: the graphs the role may read (the update sees only them).
    ``value_of(iri)``: the line's current value and graph as the caller reads
    it (None, None for a line nobody wrote; None, graph for a deleted one).
    ``default_graph``: where a new line whose statements went to the default
    graph is created. Call it after :func:`check_update` (before the recall, so a refused text
    moves nothing), with every dirty line recalled, under no lock: it copies what it needs from
    the graph store first.
    """
    refuse_network(sparql, ("SERVICE", "LOAD"))  # the scratch store never reaches the network
    before: set[ox.Quad] = set()
    owner: dict[ox.Quad, str] = {}
    for name in readable:
        for iri in graphs.iris_in(name):
            for quad in graphs.quads_of(iri):
                before.add(quad)
                owner[quad] = iri
    scratch = ox.Store()
    scratch.extend(before)
    scratch.extend(ox.Quad(q.subject, q.predicate, q.object, _DEFAULT) for q in before)
    try:
        scratch.update(sparql, prefixes=prefixes_for(sparql))
    except (SyntaxError, RuntimeError, ValueError, TypeError) as exc:
        raise InvalidInput(f"SPARQL update refused: {exc}", path=("sparql",)) from None
    after = set(scratch)
    named_after = {q for q in after if type(q.graph_name) is not ox.DefaultGraph}
    default_after = {ox.Triple(q.subject, q.predicate, q.object) for q in after if type(q.graph_name) is ox.DefaultGraph}
    by_triple = {ox.Triple(q.subject, q.predicate, q.object): q for q in before}
    removed = {q for q in before if q not in named_after}
    removed |= {by_triple[t] for t in by_triple if t not in default_after}
    added_named = named_after - before
    added_default = {t for t in default_after if t not in by_triple}
    return _changes(removed, added_named, added_default, owner, graphs, value_of, default_graph)


def _changes(
    removed: set[ox.Quad],
    added_named: set[ox.Quad],
    added_default: set[ox.Triple],
    owner: dict[ox.Quad, str],
    graphs: GraphStore,
    value_of: Callable[[str], tuple[dict[str, Any] | None, str | None]],
    default_graph: str,
) -> list[LineChange]:
    touched: dict[str, tuple[list[ox.Quad], list[tuple[ox.Triple, str | None]]]] = {}
    for quad in removed:
        touched.setdefault(owner[quad], ([], []))[0].append(quad)
    for quad in added_named:
        iri = _line_subject(quad.subject)
        touched.setdefault(iri, ([], []))[1].append(
            (ox.Triple(quad.subject, quad.predicate, quad.object), _graph_name(quad.graph_name))
        )
    for triple in added_default:
        iri = _line_subject(triple.subject)
        touched.setdefault(iri, ([], []))[1].append((triple, None))
    changes = []
    for iri in sorted(touched):
        gone, new = touched[iri]
        changes.append(_change(iri, gone, new, graphs, value_of, default_graph))
    return [c for c in changes if c is not None]


def _line_subject(subject: Any) -> str:
    if type(subject) is not ox.NamedNode:
        raise InvalidInput("an update may state things only about lines (a subject IRI), not blank nodes")
    if subject.value.startswith(GENID_BASE) or "#" in subject.value:
        raise InvalidInput(
            f"an update may change a line's own properties, not a node nested in it ({show(subject.value)}): "
            "write the line instead"
        )
    return subject.value


def _key_and_item(triple: ox.Triple | ox.Quad) -> tuple[str, Any]:
    obj = triple.object
    if type(obj) is ox.NamedNode and obj.value.startswith(GENID_BASE):
        raise InvalidInput("an update may not add or remove a nested node of a line: write the line instead")
    if triple.predicate.value == _RDF_TYPE and type(obj) is ox.NamedNode:
        return "@type", compact_vocab(obj.value)
    return compact_vocab(triple.predicate.value), json_object_of(obj)


def _change(
    iri: str,
    gone: list[ox.Quad],
    new: list[tuple[ox.Triple, str | None]],
    graphs: GraphStore,
    value_of: Callable[[str], tuple[dict[str, Any] | None, str | None]],
    default_graph: str,
) -> LineChange | None:
    value, graph = value_of(iri)
    existed = value is not None
    named = {g for _t, g in new if g is not None}
    if existed:
        assert graph is not None
        if named - {graph}:
            raise InvalidInput(
                f"line {iri} is in graph {graph!r}: an update may not put its statements in {min(named - {graph})!r} "
                "(move a line by writing it with graph=)"
            )
        old_quads = set(graphs.quads_of(iri))
        if not new and set(gone) == old_quads:
            return LineChange(iri, graph, None, True)  # emptied: deleted
        if "@context" in value:  # type: ignore[operator]
            raise InvalidInput(f"line {iri} has its own @context: change it by writing the line")
        target = graph
        current: dict[str, Any] = dict(value)  # type: ignore[arg-type]
    else:
        if len(named) > 1:
            raise InvalidInput(f"an update puts the new line {iri}'s statements in several graphs: {sorted(named)}")
        target = next(iter(named)) if named else (graph or default_graph)
        old_quads = set()
        current = {}
    for quad in gone:
        key, item = _key_and_item(quad)
        items = _as_list(current.get(key))
        if item not in items:
            raise InvalidInput(f"line {iri}: the removed statement about {key!r} is not a value of its JSON")
        items.remove(item)
        _put(current, key, items)
    for triple, _graph in new:
        key, item = _key_and_item(triple)
        items = _as_list(current.get(key))
        if item not in items:
            items.append(item)
        _put(current, key, items)
    node = graphs.graph_node(target)
    want = (old_quads - set(gone)) | {ox.Quad(t.subject, t.predicate, t.object, node) for t, _g in new}
    if set(to_quads(iri, current, node)) != want:
        raise InvalidInput(f"line {iri}: this update cannot be written as a change of the line's JSON value")
    if existed and current == value:
        return None
    return LineChange(iri, target, current, existed)


def _as_list(held: Any) -> list[Any]:
    if held is None:
        return []
    return list(held) if type(held) is list else [held]


def _put(node: dict[str, Any], key: str, items: list[Any]) -> None:
    if not items:
        node.pop(key, None)
    else:
        node[key] = items[0] if len(items) == 1 else items
