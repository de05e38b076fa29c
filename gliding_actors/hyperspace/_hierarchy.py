"""The hierarchy a Poincaré model is trained on, as ``(child, parent)`` edges.

Kept apart from :mod:`._poincare` (the model and its training): checking edges,
closing them transitively and reading them out of the L2 graph are about the
input data, not the ball.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Final

from gliding_actors.errors import InvalidInput, show
from gliding_actors.l2._jsonld import GENID_BASE

if TYPE_CHECKING:
    from gliding_actors.l2._graph import GraphStore

__all__ = ["HIERARCHY_QUERY", "hierarchy_edges", "transitive_closure"]


# --- edges ---------------------------------------------------------------------------------


def _check_edges(edges: object, *, allow_empty: bool) -> list[tuple[str, str]]:
    """The edges as a list of ``(child, parent)`` string pairs, or
    :class:`InvalidInput` — before anything is touched."""
    if isinstance(edges, (str, bytes)) or not isinstance(edges, Iterable):
        raise InvalidInput("edges must be an iterable of (child, parent) pairs", path=("edges",))
    out: list[tuple[str, str]] = []
    for i, edge in enumerate(edges):
        if not isinstance(edge, (tuple, list)) or len(edge) != 2:
            raise InvalidInput(f"edge {i} must be a (child, parent) pair", path=("edges", i))
        child, parent = edge
        if type(child) is not str or type(parent) is not str:
            raise InvalidInput(
                f"edge {i}: nodes must be strings, not {type(child).__name__} and "
                f"{type(parent).__name__}",
                path=("edges", i),
            )
        if not child or not parent:
            raise InvalidInput(f"edge {i}: node names must not be empty", path=("edges", i))
        if child == parent:
            raise InvalidInput(f"edge {i}: self-loop on {show(child)}", path=("edges", i))
        out.append((child, parent))
    if not out and not allow_empty:
        raise InvalidInput("no edges to train on", path=("edges",))
    return out


def transitive_closure(edges: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Every ``(u, a)`` with ``a`` reachable from ``u`` along ``(child,
    parent)`` edges, ``a ≠ u``; sorted. A cycle (two classes declared
    subclasses of each other) makes its members ancestors of one another,
    never of themselves."""
    checked = _check_edges(edges, allow_empty=True)
    parents: dict[str, list[str]] = {}
    for child, parent in checked:
        parents.setdefault(child, []).append(parent)
    out: list[tuple[str, str]] = []
    for start, direct in parents.items():
        seen: set[str] = set()
        stack = list(direct)
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            stack.extend(parents.get(node, ()))
        seen.discard(start)
        out.extend((start, a) for a in seen)
    out.sort()
    return out


# --- the L2 graph --------------------------------------------------------------------------

_RDFS = "http://www.w3.org/2000/01/rdf-schema#"
_RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
_OWL = "http://www.w3.org/2002/07/owl#"

#: rdfs:subClassOf between classes, rdf:type from a subject to a class. Metaclass
#: typing (``?c a rdfs:Class``) is left out: it would hang every class on one hub.
HIERARCHY_QUERY: Final = f"""
SELECT DISTINCT ?child ?parent WHERE {{
  {{ ?child <{_RDFS}subClassOf> ?parent }}
  UNION
  {{ ?child a ?parent
     FILTER(!STRSTARTS(STR(?parent), "{_RDF}")
            && !STRSTARTS(STR(?parent), "{_RDFS}")
            && !STRSTARTS(STR(?parent), "{_OWL}")) }}
  FILTER(isIRI(?child) && isIRI(?parent) && ?child != ?parent
         && !STRSTARTS(STR(?child), "{GENID_BASE}"))
}}
"""


def hierarchy_edges(
    graph: GraphStore, *, graphs: Sequence[str] | None = None
) -> list[tuple[str, str]]:
    """The hierarchy of the L2 graph as ``(child, parent)`` IRI pairs, sorted.

    * ``rdfs:subClassOf`` links between classes, and
    * ``rdf:type`` links from typed nodes to their classes: **instances are
      embedded**, as leaves under their classes. Structural search is about
      nodes (agents, tasks) not only classes: an instance's point is where
      its classes put it, so two agents of sibling classes are near each
      other even when their text differs.

    Full IRIs throughout (``@type: "Task"`` under the default context's
    ``@vocab`` is ``https://gliding-actors.dev/ns#Task``; line IRIs such as
    ``task:a`` stay as written). Left out: reflexive links, literals, types
    in the RDF/RDFS/OWL namespaces (``rdfs:Class`` would be a hub of every
    class) and skolemised nested objects (``…/genid/…``: not lines, their
    IRIs change with the value that holds them).

    ``graphs=None`` reads every named graph (system role); otherwise only
    those — e.g. the graphs the asking agent may read.
    """
    rows = graph.query(HIERARCHY_QUERY, graphs=graphs, role_is_system=graphs is None)["rows"]
    return sorted({(row["child"], row["parent"]) for row in rows})
