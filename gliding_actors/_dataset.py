"""A memory's lines as a standard RDF dataset: N-Quads or JSON-LD out, and back in.

Export writes what the L2 graph holds for every live line (after recalling
dirty copies), in a deterministic order, so two exports of the same data are
byte-identical. Import reads either format back into lines — each subject
with the fragments (``iri#x``) and skolemised blank nodes it owns is one line
— and the caller writes them through the normal write path.

What a dataset carries: each line's IRI, value and named graph. Not carried:
versions, tags, importance, access counts (memory bookkeeping, not RDF) and
L1's archived turns (not lines).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from typing import Any

import pyoxigraph as ox

from gliding_actors._checks import check_iri, check_object, check_storable
from gliding_actors.errors import InvalidInput, PermissionDenied, show
from gliding_actors.l1._archive import is_archive_iri
from gliding_actors.l2._graph import GraphNode
from gliding_actors.l2._jsonld import (
    GENID_BASE,
    VOCAB,
    graph_iri,
    graph_name_of,
    to_quads,
    triples_to_jsonld,
)
from gliding_actors.roles import ROLES

__all__ = ["FORMATS", "export_lines", "parse_dataset", "write_lines"]

#: The dataset formats ``export`` writes and ``import`` reads.
FORMATS = ("nquads", "jsonld")

Line = tuple[str, dict[str, Any], str]  # (iri, value, graph name)


def _check_format(fmt: object) -> str:
    if fmt not in FORMATS:
        raise InvalidInput(f"a dataset format is one of {', '.join(FORMATS)}, not {show(fmt)}", path=("format",))
    return str(fmt)


def export_lines(lines: Iterable[GraphNode], fmt: str, graph: str | None = None) -> str:
    """The live ``lines`` (of ``graph`` only, if given) as an N-Quads or JSON-LD document."""
    fmt = _check_format(fmt)
    if graph is not None:
        graph_iri(graph)  # checks the name
    live = sorted(
        (n for n in lines if n.value is not None and (graph is None or n.graph == graph)), key=lambda n: n.iri
    )
    if fmt == "nquads":
        quads: set[str] = set()
        for n in live:
            assert n.value is not None
            quads.update(f"{q} ." for q in to_quads(n.iri, n.value, ox.NamedNode(graph_iri(n.graph))))
        return "".join(f"{q}\n" for q in sorted(quads))
    by_graph: dict[str, list[dict[str, Any]]] = {}
    for n in live:
        assert n.value is not None
        nodes = by_graph.setdefault(n.graph, [])
        if "@graph" in n.value:  # a line that is several nodes (an N-Quads import's): its nodes, spliced
            nodes.extend(n.value["@graph"])
        else:
            nodes.append(dict(n.value) if "@id" in n.value else {"@id": n.iri, **n.value})
    document = {
        "@context": {"@vocab": VOCAB},
        "@graph": [{"@id": graph_iri(name), "@graph": nodes} for name, nodes in sorted(by_graph.items())],
    }
    return json.dumps(document, ensure_ascii=False, sort_keys=True, indent=2) + "\n"


def parse_dataset(text: str, fmt: str) -> list[Line]:
    """The lines in a dataset document, sorted by IRI; :class:`InvalidInput` saying where it is wrong.

    Nothing is written here: the caller checks and writes the lines.
    """
    fmt = _check_format(fmt)
    if not isinstance(text, str):
        raise InvalidInput(f"a dataset is text, not {type(text).__name__}")
    nodes = _nodes_of_nquads(text) if fmt == "nquads" else _nodes_of_jsonld(text)
    lines: list[Line] = []
    for (graph, owner), group in sorted(_owned(nodes).items()):
        if len(group) == 1 and group[0].get("@id") == owner:
            value = {k: v for k, v in group[0].items() if k != "@id"}
        else:
            value = {"@graph": group}
        lines.append((owner, value, graph))
    seen: dict[str, str] = {}
    for iri, _value, graph in lines:
        if seen.setdefault(iri, graph) != graph:
            raise InvalidInput(f"{iri} is in two named graphs ({seen[iri]}, {graph}); a line lives in one")
    return sorted(lines)


def _nodes_of_nquads(text: str) -> list[tuple[str, dict[str, Any]]]:
    try:
        data = text.encode("utf-8")  # pyoxigraph takes bytes; a lone surrogate is not text it can read
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"not N-Quads: not UTF-8 text ({exc.reason} at {exc.start})") from None
    try:
        quads = list(ox.parse(data, format=ox.RdfFormat.N_QUADS))
    except (SyntaxError, ValueError) as exc:
        raise InvalidInput(f"not N-Quads: {exc}") from None
    by_graph: dict[str, list[ox.Triple]] = {}
    for q in quads:
        if not isinstance(q.graph_name, ox.NamedNode):
            raise InvalidInput(f"a quad outside any named graph: {q} (each line lives in a named graph)")
        if not isinstance(q.subject, ox.NamedNode):
            raise InvalidInput(f"a blank-node subject: {q} (this memory's exports name every node)")
        by_graph.setdefault(graph_name_of(q.graph_name.value), []).append(ox.Triple(q.subject, q.predicate, q.object))
    return [(graph, node) for graph, triples in by_graph.items() for node in triples_to_jsonld(triples)]


def _nodes_of_jsonld(text: str) -> list[tuple[str, dict[str, Any]]]:
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise InvalidInput(f"not JSON: {exc}") from None
    graphs = document.get("@graph") if isinstance(document, dict) else None
    if not isinstance(graphs, list) or document.get("@context") != {"@vocab": VOCAB}:
        raise InvalidInput(
            "not a dataset as export writes it: an object with the default @context and a @graph of named graphs"
        )
    out: list[tuple[str, dict[str, Any]]] = []
    for n, named in enumerate(graphs):
        if not isinstance(named, dict) or not isinstance(named.get("@id"), str) or not isinstance(named.get("@graph"), list):
            raise InvalidInput(f"@graph[{n}] is a named graph: an object with @id and @graph", path=("@graph", n))
        name = graph_name_of(named["@id"])
        for m, node in enumerate(named["@graph"]):
            if not isinstance(node, dict) or not isinstance(node.get("@id"), str):
                raise InvalidInput(f"@graph[{n}].@graph[{m}] is a node with an @id", path=("@graph", n, "@graph", m))
            out.append((name, node))
    return out


def _owned(nodes: list[tuple[str, dict[str, Any]]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Nodes grouped by the line that owns them: itself, or the line whose fragment or blank node it is."""
    lines = {node["@id"] for _g, node in nodes if not node["@id"].startswith(GENID_BASE)}
    lines = {iri for iri in lines if "#" not in iri or iri.split("#", 1)[0] not in lines}
    by_prefix = {GENID_BASE + hashlib.sha256(iri.encode()).hexdigest()[:32] + "/": iri for iri in lines}
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for graph, node in nodes:
        iri = node["@id"]
        if iri.startswith(GENID_BASE):
            owner = by_prefix.get(iri[: len(GENID_BASE) + 33])
            if owner is None:
                raise InvalidInput(f"blank node {iri} belongs to no line in the dataset")
        else:
            owner = iri if iri in lines else iri.split("#", 1)[0]
        groups.setdefault((graph, owner), []).append(node)
    return groups


def write_lines(
    lines: list[Line],
    writer: Callable[[], Any],
    *,
    role: str,
    allowed: Callable[[str, str, str], bool],
    known: Callable[[str], str | None],
    check_value: Callable[[str, dict[str, Any]], None],
    max_node_bytes: int,
    timeout: float | None = None,
) -> dict[str, Any]:
    """Write ``lines`` through the agent ``writer()`` gives, after checking all of them.

    Every line is checked first — as an agent's write checks it (the IRI,
    JSON L0 can store, ``check_value``: the graph's JSON-LD), not an L1
    archive, and ``role`` allowed (``allowed(role, graph, action)``) to
    ``create`` (a line ``known`` does not hold yet) or ``update`` in its
    graph — and only then is the writing agent asked for, so a dataset
    refused for any line changes nothing at all. Answers ``{lines, graphs}``
    (lines written per graph).
    """
    if not isinstance(role, str) or role not in ROLES:
        raise InvalidInput(f"unknown role {show(role)}; roles are {', '.join(ROLES)}")
    for iri, value, graph in lines:
        if is_archive_iri(iri):
            raise InvalidInput(f"{iri} is an L1 archive IRI; a dataset holds lines only")
        check_iri(iri)
        check_storable(iri, check_object(value, "a line's value"), max_node_bytes)
        check_value(iri, value)
        action = "update" if known(iri) is not None else "create"
        if not allowed(role, graph, action):
            raise PermissionDenied(f"role {role} may not {action} in graph {graph!r} ({iri})")
    agent = writer()
    graphs: dict[str, int] = {}
    for iri, value, graph in lines:
        agent.write(iri, value, graph=graph, timeout=timeout)
        graphs[graph] = graphs.get(graph, 0) + 1
    return {"lines": len(lines), "graphs": dict(sorted(graphs.items()))}
