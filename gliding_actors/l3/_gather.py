"""Gathering a task's subgraph into a projection's scratch store.

A projection never runs its frame on the whole blackboard graph. It first
gathers, into a private in-memory pyoxigraph store, exactly what the frame
may read:

* **members** — the lines that lead to a root (the task, its subtasks in the
  DAG, the lines attached to it) through any chain of links: a step that names
  the task, an artifact that names the step, a review that names the artifact.
  Found with one SPARQL path query per root, the root **bound** as an RDF term
  (``substitutions``), run on the blackboard graph **confined to the graphs
  the role may read** (the dataset arguments) — so a link that only an
  unreadable line asserts leads nowhere;
* **neighbours** — the lines a member links to (a skill, an entity, a
  parameter schema's type), one hop; and the nodes that only L0 holds
  (archived, e.g. L1's session archives), read from L0 when no L2 line has
  the IRI;
* the **scope markers** ``?n a l3:Member`` / ``?n a l3:Root`` in graph
  ``l3:scope``.

A line is copied only if its graph is readable by the role (checked on the
quads' own graph, as home holds them, and on the line registry), so the
scratch store holds nothing the role may not read, and every frame —
built-in or user-written — is confined by construction.

The gathering also yields the projection's **dependencies**: every IRI whose
change could change the result — the roots, every node the path query
reached, every neighbour IRI looked up (present or not: writing a missing
neighbour later changes the projection) — and the **watch** set: nodes to
which a *new* link would add a member (roots and members).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, NamedTuple

import pyoxigraph as ox

from gliding_actors.l0 import L0Store
from gliding_actors.l2._graph import GraphStore
from gliding_actors.l2._jsonld import GENID_BASE, VOCAB, to_quads
from gliding_actors.l3._ontology import L3, SCOPE_GRAPH

__all__ = ["ANY_NODE", "Gathered", "gather", "links_of", "live_triples", "query_scratch"]

#: A dependency every change touches: a projection of the whole graph (no task) depends on it.
ANY_NODE = "*"

_RDF_TYPE = ox.NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#type")
_MEMBER = ox.NamedNode(L3 + "Member")
_ROOT = ox.NamedNode(L3 + "Root")
_SCOPE = ox.NamedNode(SCOPE_GRAPH)
_LIVE = ox.NamedNode(L3 + "live")
_TASK = ox.Variable("task")

#: Every node with a chain of links (any predicates, either kind of node) to ``?task``.
_MEMBERS_OF = "SELECT DISTINCT ?node ?task WHERE { ?node (<urn:gliding-actors:none>|!<urn:gliding-actors:none>)* ?task }"
#: Every subject of the dataset (a projection without a task).
_ALL_SUBJECTS = "SELECT DISTINCT ?node WHERE { ?node ?p ?o }"


class Gathered(NamedTuple):
    """A projection's scratch store and what it depends on."""

    store: ox.Store
    members: list[str]
    deps: frozenset[str]
    watch: frozenset[str]
    #: lines and archived nodes copied into the store
    lines_read: int
    #: the graphs whose union is the frame's default graph (the readable ones, live state)
    data_graphs: list[ox.NamedNode]

    def query(self, sparql: str, prefixes: dict[str, str]) -> Any:
        """Run a frame's query on the scratch store (:func:`query_scratch`)."""
        return query_scratch(self.store, self.data_graphs, sparql, prefixes)


def query_scratch(store: ox.Store, data_graphs: list[ox.NamedNode], sparql: str, prefixes: dict[str, str]) -> Any:
    """Run a frame's query on a scratch store: the default graph is the union of
    the copied lines' graphs, the named graphs those plus ``l3:scope`` (here, or
    in a framer that rebuilt the store from N-Quads)."""
    data: list[ox.NamedNode | ox.BlankNode | ox.DefaultGraph] = list(data_graphs)
    named: list[ox.NamedNode | ox.BlankNode] = [*data_graphs, _SCOPE]
    return store.query(sparql, prefixes=prefixes, default_graph=data, named_graphs=named)


def links_of(quads: Iterable[ox.Quad]) -> set[str]:
    """IRIs a line's quads link to (objects; not types, not its own skolems)."""
    out: set[str] = set()
    for q in quads:
        obj = q.object
        if type(obj) is ox.NamedNode and q.predicate != _RDF_TYPE and not obj.value.startswith(GENID_BASE):
            out.add(obj.value)
    return out


def gather(
    graph: GraphStore,
    l0: L0Store,
    *,
    graphs: Collection[str],
    graph_of: Callable[[str], str],
    roots: list[str] | None,
    extra: Iterable[ox.Triple] = (),
    extra_members: Iterable[str] = (),
) -> Gathered:
    """Build the scratch store for ``roots`` (None: every line the role may read).

    ``graphs`` are the named graphs the role may read; ``graph_of(iri)`` is
    the line registry's graph of a line (``LineGraphs.graph_of``): a line is
    copied only when both it and the graph its quads are in are readable.
    ``extra`` are triples of live state (health_check), put in graph
    ``l3:live``, and ``extra_members`` are marked members. Reads only: the
    graph's query and node entries and L0's retrieve are safe from any thread.

    The lines' quads are copied as they are, in their own named graphs (no
    per-quad conversion); :func:`frame_dataset` makes their union the
    default graph the frame queries.
    """
    names = set(graphs)
    readable = {graph.graph_node(g) for g in names}
    dataset = list(readable)
    raw = graph.raw
    reached: set[str] = set()
    queries: list[tuple[str, dict[ox.Variable, ox.NamedNode | ox.BlankNode | ox.Literal | ox.Triple] | None]]
    if roots is None:
        queries = [(_ALL_SUBJECTS, None)]
    else:
        queries = [(_MEMBERS_OF, {_TASK: ox.NamedNode(root)}) for root in roots]
    if dataset:
        for sparql, bound in queries:
            solutions = raw.query(sparql, default_graph=list(dataset), named_graphs=list(dataset), substitutions=bound)
            assert isinstance(solutions, ox.QuerySolutions)
            for solution in solutions:
                node = solution[0]
                if type(node) is ox.NamedNode and not node.value.startswith(GENID_BASE):
                    reached.add(node.value)
    if roots is not None:
        reached.update(roots)

    def readable_quads(iri: str) -> tuple[ox.Quad, ...]:
        quads = graph.quads_of(iri)
        if quads and quads[0].graph_name in readable and graph_of(iri) in names:
            return quads
        return ()

    store = ox.Store()
    batch: list[ox.Quad] = []
    members: list[str] = []
    linked: set[str] = set()
    for iri in sorted(reached):
        quads = readable_quads(iri)
        if not quads:
            continue
        members.append(iri)
        batch.extend(quads)
        batch.append(ox.Quad(ox.NamedNode(iri), _RDF_TYPE, _MEMBER, _SCOPE))
        linked |= links_of(quads)
    lines_read = len(members)
    neighbours = linked - reached
    for iri in sorted(neighbours):
        quads = readable_quads(iri)
        if not quads and graph.node(iri) is None:
            quads = _archived(l0, graph, iri, readable)
        if quads:
            lines_read += 1
            batch.extend(quads)
    for root in roots or ():
        batch.append(ox.Quad(ox.NamedNode(root), _RDF_TYPE, _ROOT, _SCOPE))
    for iri in extra_members:
        batch.append(ox.Quad(ox.NamedNode(iri), _RDF_TYPE, _MEMBER, _SCOPE))
        members.append(iri)
    batch.extend(ox.Quad(t.subject, t.predicate, t.object, _LIVE) for t in extra)
    store.extend(batch)
    deps = set(reached) | neighbours
    if roots is None:
        deps.add(ANY_NODE)
    dataset = [*sorted(readable, key=str), _LIVE]
    return Gathered(store, members, frozenset(deps), frozenset(reached), lines_read, dataset)


def _archived(
    l0: L0Store, graph: GraphStore, iri: str, readable: set[ox.NamedNode]
) -> tuple[ox.Quad, ...]:
    """The quads of a node only L0 holds (an archive), if the role may read its graph."""
    try:
        entry = l0.retrieve(iri, touch=False)
    except Exception:  # noqa: BLE001 - an IRI L0 refuses is simply not there
        return ()
    if entry is None or entry.content is None or not entry.named_graph:
        return ()
    try:
        graph_node = graph.graph_node(entry.named_graph)
    except Exception:  # noqa: BLE001 - a label the graph cannot name is not readable
        return ()
    if graph_node not in readable:  # an archive is no line: its L0 graph decides
        return ()
    try:
        return to_quads(iri, entry.content, graph_node)
    except Exception:  # noqa: BLE001 - a node L0 holds that is not JSON-LD shows nothing
        return ()


def live_triples(team: Mapping[str, Mapping[str, Any]] | None, statuses: Mapping[str, str]) -> tuple[list[ox.Triple], list[str]]:
    """The blackboard's live state as triples: one ``AgentStatus`` node per agent
    (``urn:gliding-actors:agent:<id>``: agent, role, status, stale) and each DAG
    task's ``taskStatus``. Returns the triples and the agent nodes (members)."""
    triples: list[ox.Triple] = []
    agents: list[str] = []

    def p(name: str) -> ox.NamedNode:
        return ox.NamedNode(VOCAB + name)

    for agent_id, info in sorted((team or {}).items()):
        try:
            node = ox.NamedNode("urn:gliding-actors:agent:" + agent_id)
        except ValueError:
            continue
        agents.append(node.value)
        triples.append(ox.Triple(node, _RDF_TYPE, p("AgentStatus")))
        triples.append(ox.Triple(node, p("agent"), ox.Literal(agent_id)))
        for key in ("role", "status"):
            if isinstance(info.get(key), str):
                triples.append(ox.Triple(node, p(key), ox.Literal(info[key])))
        if isinstance(info.get("stale"), bool):
            triples.append(ox.Triple(node, p("stale"), ox.Literal(info["stale"])))
    for task, status in sorted(statuses.items()):
        try:
            node = ox.NamedNode(task)
        except ValueError:
            continue
        triples.append(ox.Triple(node, _RDF_TYPE, p("Task")))
        triples.append(ox.Triple(node, p("taskStatus"), ox.Literal(status)))
    return triples, agents
