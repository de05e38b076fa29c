"""Agents' SPARQL updates: confined to the role's rights, written through coherence."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gliding_actors import MemorySystem
from gliding_actors.agent import Agent
from gliding_actors.errors import ConflictError, GlidingError, InvalidInput, PermissionDenied
from gliding_actors.l2._permissions import GRAPHS
from gliding_actors.l2._update import plan_update

ROLES = {"sa": "SA", "pa": "PA", "da": "DA", "ca": "CA", "aa": "AA"}
LINE_COUNT = 2  # per graph


def seed(memory: MemorySystem) -> dict[str, Agent]:
    system = memory.agent("root", "system")
    for graph in GRAPHS:
        for n in range(LINE_COUNT):
            system.write(f"{graph}:{n}", {"@type": "Note", "status": "open", "n": n}, graph=graph, tags=[graph])
    return {agent_id: memory.agent(agent_id, role) for agent_id, role in ROLES.items()}


def everything(memory: MemorySystem) -> dict[str, tuple[str, dict[str, Any] | None]]:
    """Every line's graph and value as the system sees it, coherent (the root agent reads every graph)."""
    root = memory.agent("root", "system")
    found = {}
    for iri, graph in sorted(memory.line_graphs.graphs.items()):
        found[iri] = (graph, root.read(iri)["value"])
    return found


@pytest.fixture
def memory() -> Iterator[MemorySystem]:
    with MemorySystem.open(runtime="sim") as mem:
        yield mem


def test_an_update_changes_lines_through_coherence(memory: MemorySystem) -> None:
    team = seed(memory)
    pa, da = team["pa"], team["da"]
    assert da.read("plan:0")["value"] == {"@type": "Note", "status": "open", "n": 0}  # da holds a copy
    result = pa.update('DELETE { GRAPH gag:plan { ?s ga:status "open" } } INSERT { GRAPH gag:plan { ?s ga:status "done" } } '
                       'WHERE { GRAPH gag:plan { ?s ga:status "open" } }')
    assert result == {"created": [], "changed": ["plan:0", "plan:1"], "deleted": [], "versions": {"plan:0": 2, "plan:1": 2}}
    assert da.read("plan:0")["value"] == {"@type": "Note", "status": "done", "n": 0}
    assert memory.graph.node("plan:0").tags == ("plan",)  # type: ignore[union-attr]
    memory.flush()
    assert memory.l0.retrieve("plan:1").content["status"] == "done"  # type: ignore[union-attr]


def test_a_refused_update_writes_nothing(memory: MemorySystem) -> None:
    team = seed(memory)
    before = everything(memory)
    refused = [
        (team["da"], 'INSERT DATA { GRAPH gag:plan { <plan:9> ga:n 9 } }', PermissionDenied),  # DA may not create in plan
        (team["pa"], 'CLEAR GRAPH gag:shared', PermissionDenied),  # PA may not delete in shared
        (team["da"], 'INSERT DATA { GRAPH gag:review { <review:0> ga:n 5 } }', PermissionDenied),  # nor see review
        (team["pa"], 'LOAD <http://example.org/x.ttl>', InvalidInput),
        (team["pa"], 'INSERT { <a:b> <c:d> ?o } WHERE { SERVICE <http://example.org/sparql> { ?s ?p ?o } }', InvalidInput),
        (team["pa"], 'INSERT DATA { GRAPH <http://elsewhere/g> { <plan:0> ga:n 1 } }', InvalidInput),
        (team["pa"], 'INSERT DATA { GRAPH gag:plan { <plan:0#step> ga:n 1 } }', InvalidInput),
        (team["pa"], 'INSERT DATA { GRAPH gag:knowledge { <plan:0> ga:extra 1 } }', InvalidInput),  # not plan:0's graph
        (team["da"], 'DROP GRAPH gag:review', InvalidInput),  # DA cannot see review: no such graph for it
        (team["pa"], 'SELECT * WHERE { ?s ?p ?o }', InvalidInput),
        (team["pa"], '', InvalidInput),
    ]
    for agent, sparql, error in refused:
        with pytest.raises(error):
            agent.update(sparql)
        assert everything(memory) == before, sparql


def test_an_update_that_raced_a_write_stops_with_a_conflict(memory: MemorySystem) -> None:
    """The plan is made on one version; another agent writes before the update's cas."""
    team = seed(memory)
    pa = team["pa"]

    def value_of(iri: str) -> tuple[dict[str, Any] | None, str | None]:
        return pa.read(iri)["value"], memory.line_graphs.known(iri)

    changes = plan_update('INSERT DATA { GRAPH gag:plan { <plan:0> ga:extra 1 } }', memory.graph, ["plan"], value_of, "shared")
    assert [(c.iri, c.value) for c in changes] == [("plan:0", {"@type": "Note", "status": "open", "n": 0, "extra": 1})]
    memory.agent("root", "system").write("plan:0", {"@type": "Note", "status": "moved on", "n": 0})
    with pytest.raises(ConflictError):
        pa.cas("plan:0", 1, changes[0].value or {})


# -- the property: confined and coherent -------------------------------------------------------

TEMPLATES = (
    'INSERT DATA {{ GRAPH gag:{g} {{ <{g}:{n}> ga:{p} "{v}" }} }}',
    'DELETE DATA {{ GRAPH gag:{g} {{ <{g}:{n}> ga:status "open" }} }}',
    (
        'DELETE {{ GRAPH gag:{g} {{ ?s ga:status ?o }} }} INSERT {{ GRAPH gag:{g} {{ ?s ga:status "{v}" }} }} '
        'WHERE {{ GRAPH gag:{g} {{ ?s ga:status ?o }} }}'
    ),
    'INSERT DATA {{ <{g}:{n}> ga:{p} "{v}" }}',
    'DELETE WHERE {{ ?s ga:{p} ?o }}',
    'CLEAR SILENT GRAPH gag:{g}',
    'DELETE WHERE {{ GRAPH gag:{g} {{ <{g}:{n}> ?p ?o }} }}',
)

updates = st.lists(
    st.tuples(
        st.sampled_from(sorted(ROLES)),
        st.sampled_from(TEMPLATES),
        st.sampled_from(GRAPHS),
        st.integers(0, LINE_COUNT + 1),  # LINE_COUNT and above: lines nobody wrote yet
        st.sampled_from(("status", "note", "n")),
        st.sampled_from(("open", "done", "x")),
    ),
    min_size=1,
    max_size=6,
)


def check_updates(steps: list[tuple[str, str, str, int, str, str]]) -> None:
    with MemorySystem.open(runtime="sim") as memory:
        team = seed(memory)
        allowed = memory.permissions.allowed
        for agent_id, template, g, n, p, v in steps:
            agent = team[agent_id]
            sparql = template.format(g=g, n=n, p=p, v=v)
            before = everything(memory)
            try:
                result = agent.update(sparql)
            except (PermissionDenied, InvalidInput):
                assert everything(memory) == before, (agent.role, sparql)  # a refused update writes nothing
                continue
            after = everything(memory)
            for iri in set(before) | set(after):
                old, new = before.get(iri, (None, None)), after.get(iri, (None, None))
                if old == new:
                    continue
                graph = new[0] or old[0]
                action = "create" if old[1] is None else "delete" if new[1] is None else "update"
                # never a change in a graph the role may not write that way
                assert allowed(agent.role, graph, action), (agent.role, sparql, iri, action, graph)
                assert iri in result["versions"], (sparql, iri)
            # every change is seen at once by every other agent's read, query and projection
            for other in team.values():
                rows = other.query("SELECT ?s ?st WHERE { ?s ga:status ?st }")["rows"]
                statuses = {(row["s"], row["st"]) for row in rows}
                projected = set(other.project("reference_only")["iris"])
                for iri, (graph, value) in after.items():
                    readable = allowed(other.role, graph, "read")
                    got = other.read(iri)["value"]
                    assert got == (value if readable else None), (other.role, iri)
                    status = (value or {}).get("status")
                    if readable and isinstance(status, str):
                        assert (iri, status) in statuses, (other.role, iri, status)
                    if not readable or value is None:
                        assert iri not in projected, (other.role, iri)
                    assert not any(s == iri for s, _ in statuses) or readable and value is not None


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(updates)
def test_random_updates_by_random_roles_stay_confined_and_coherent(steps: list[tuple[str, str, str, int, str, str]]) -> None:
    check_updates(steps)


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(updates)
def test_random_updates_by_random_roles_stay_confined_and_coherent_long(
    steps: list[tuple[str, str, str, int, str, str]],
) -> None:
    check_updates(steps)


def test_glidingerror_is_the_root_of_what_update_raises(memory: MemorySystem) -> None:
    team = seed(memory)
    with pytest.raises(GlidingError):
        team["da"].update("INSERT DATA { GRAPH gag:decision { <decision:9> ga:n 1 } }")
