"""Skills in the memory: stored, found and handed over through an :class:`Agent`.

A skill is a line like any other — written with ``agent.write`` so it goes
through coherence, the permission matrix, the L2 graph (SPARQL) and the
hyperspace index (hybrid search), and reaches L0 by the usual write-back or
flush. There is no side store: whatever an agent may not read of the memory,
it cannot find, project or use as a skill either.

Skills go to the ``knowledge`` graph by default: every role reads it, and
only AA and ``system`` write it (docs/L2.md), so a PA or DA cannot plant a
skill for the team — and even one that could would need a trusted key to get
it past :func:`use_skill`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from gliding_actors.errors import InvalidInput, show
from gliding_actors.l0 import is_valid_iri
from gliding_actors.l1._tokens import TokenCounter
from gliding_actors.skills._guard import Invocation, check_invocation
from gliding_actors.skills._model import Skill
from gliding_actors.skills._project import project_skill
from gliding_actors.skills._signing import Keyring, verify_skill

if TYPE_CHECKING:
    from gliding_actors.agent import Agent, WriteResult

__all__ = [
    "SKILL_GRAPH",
    "SKILL_TAG",
    "alternatives",
    "components",
    "invoke_skill",
    "list_skills",
    "prerequisites",
    "read_skill",
    "similar_skills",
    "skill_view",
    "store_skill",
    "use_skill",
]

SKILL_GRAPH: Final = "knowledge"
SKILL_TAG: Final = "skill"
T = TypeVar("T")

_LIST = "SELECT ?s WHERE { ?s a ga:Skill } ORDER BY ?s"
# every prerequisite edge reachable from ?s (so the answer can be ordered: prerequisites first)
_PREREQUISITE_EDGES = "SELECT ?s ?p ?q WHERE { ?s ga:prerequisite* ?p . ?p ga:prerequisite ?q }"
_COMPONENT_EDGES = "SELECT ?s ?p ?q WHERE { ?s ga:composedOf* ?p . ?p ga:composedOf ?q }"
_DIRECT = "SELECT ?s ?q WHERE { ?s ga:%s ?q }"
_ALTERNATIVES = "SELECT ?s ?a WHERE { { ?s ga:alternative ?a } UNION { ?a ga:alternative ?s } }"


def _iri(iri: object) -> str:
    if not isinstance(iri, str) or not is_valid_iri(iri):
        raise InvalidInput(f"a skill IRI is scheme:rest without spaces, not {show(iri)}")
    return iri


def store_skill(
    agent: Agent,
    node: dict[str, Any],
    *,
    graph: str = SKILL_GRAPH,
    keyring: Keyring | None = None,
    timeout: float | None = None,
) -> WriteResult:
    """Write the skill ``node`` as a line (tag ``skill``) in ``graph``, through ``agent``.

    The node is checked first (:class:`InvalidInput`), and, with a
    ``keyring``, its signature too (:class:`SignatureError`): a refused skill
    sends nothing. The agent's role needs the rights a write needs there.
    """
    skill = Skill.from_node(node)
    if keyring is not None:
        verify_skill(node, keyring)
    return agent.write(skill.iri, node, tags=[SKILL_TAG], graph=graph, timeout=timeout)


def read_skill(agent: Agent, iri: str, *, timeout: float | None = None) -> Skill:
    """The skill at ``iri`` as ``agent`` reads it (coherent, permission-checked), checked for shape."""
    value = agent.get(_iri(iri), timeout=timeout)
    if value is None:
        raise InvalidInput(f"no skill at {iri}")
    try:
        return Skill.from_node(value)
    except InvalidInput as exc:
        raise InvalidInput(f"{iri} does not hold a skill: {exc.message}", path=exc.path) from None


def list_skills(agent: Agent, *, timeout: float | None = None) -> list[str]:
    """Every skill ``agent`` may read (nodes typed ``Skill``), by IRI."""
    rows = agent.query(_LIST, timeout=timeout)["rows"]
    return [row["s"] for row in rows]


def _ordered(edges: Iterable[tuple[str, str]], root: str) -> list[str]:
    """The nodes below ``root``, each after everything it points to (ties by IRI); cycles broken by IRI."""
    out_edges: dict[str, set[str]] = {}
    for source, target in edges:
        out_edges.setdefault(source, set()).add(target)
        out_edges.setdefault(target, set())
    nodes = sorted(n for n in out_edges if n != root)
    done: list[str] = []
    placed: set[str] = set()
    while len(done) < len(nodes):
        ready = [n for n in nodes if n not in placed and out_edges[n] - {root} <= placed]
        batch = ready or [next(n for n in nodes if n not in placed)]  # a cycle: take the least IRI
        for n in batch:
            placed.add(n)
            done.append(n)
    return done


def prerequisites(agent: Agent, iri: str, *, transitive: bool = True, timeout: float | None = None) -> list[str]:
    """What must be learnt or done before ``iri``, by SPARQL over ``ga:prerequisite``.

    Transitively by default, ordered so that each skill comes after its own
    prerequisites (a valid order to work through them); ``transitive=False``:
    the direct ones, by IRI. Confined to what ``agent`` may read.
    """
    return _walk(agent, iri, "prerequisite", _PREREQUISITE_EDGES, transitive, timeout)


def components(agent: Agent, iri: str, *, transitive: bool = False, timeout: float | None = None) -> list[str]:
    """The parts of a composite skill (``ga:composedOf``), by SPARQL; ``transitive=True``: parts of parts, leaves first."""
    return _walk(agent, iri, "composedOf", _COMPONENT_EDGES, transitive, timeout)


def _walk(agent: Agent, iri: str, prop: str, edges_query: str, transitive: bool, timeout: float | None) -> list[str]:
    bound = {"s": {"@id": _iri(iri)}}
    if not transitive:
        rows = agent.query(_DIRECT % prop, bound, timeout=timeout)["rows"]
        return sorted({row["q"] for row in rows})
    rows = agent.query(edges_query, bound, timeout=timeout)["rows"]
    return _ordered(((row["p"], row["q"]) for row in rows), iri)


def alternatives(agent: Agent, iri: str, *, timeout: float | None = None) -> list[str]:
    """Skills that can stand in for ``iri``: linked by ``ga:alternative`` either way (the relation is symmetric)."""
    rows = agent.query(_ALTERNATIVES, {"s": {"@id": _iri(iri)}}, timeout=timeout)["rows"]
    return sorted({row["a"] for row in rows} - {iri})


def similar_skills(agent: Agent, iri: str, k: int = 5, *, timeout: float | None = None) -> list[str]:
    """"Skills like this": a hybrid search (text, BM25, structure) for the skill's name, what and trigger,
    restricted to ``Skill`` nodes, the skill itself left out; best first."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidInput(f"k is an integer >= 1, not {show(k)}")
    skill = read_skill(agent, iri, timeout=timeout)
    text = "\n".join((skill.name, skill.what, skill.trigger))
    hits = agent.search(text, k + 1, {"types": ["Skill"]}, timeout=timeout)["iris"]
    return [hit for hit in hits if hit != skill.iri][:k]


def skill_view(
    agent: Agent,
    iri: str,
    *,
    max_tokens: int | None = None,
    level: str | None = None,
    step: int | None = None,
    counter: TokenCounter | None = None,
    timeout: float | None = None,
) -> dict[str, Any]:
    """The projection of skill ``iri`` for ``agent``'s role (:func:`project_skill`), read through the agent."""
    skill = read_skill(agent, iri, timeout=timeout)
    return project_skill(skill.node, agent.role, max_tokens=max_tokens, level=level, step=step, counter=counter)


def use_skill(agent: Agent, iri: str, inputs: object, keyring: Keyring, *, timeout: float | None = None) -> Invocation:
    """Read skill ``iri`` through ``agent`` and clear it for use with ``inputs`` (the invocation guard).

    Raises :class:`SignatureError` (unsigned, untrusted key, changed content)
    or :class:`InvalidInput` (not a skill; input not fitting the schema, with
    its JSON path); nothing is written either way.
    """
    if not isinstance(keyring, Keyring):
        raise InvalidInput(f"use_skill needs a Keyring of trusted keys, not {type(keyring).__name__}")
    value = agent.get(_iri(iri), timeout=timeout)
    if value is None:
        raise InvalidInput(f"no skill at {iri}")
    return check_invocation(value, inputs, keyring)


def invoke_skill(
    agent: Agent,
    iri: str,
    inputs: object,
    keyring: Keyring,
    run: Callable[[Invocation], T],
    *,
    timeout: float | None = None,
) -> T:
    """:func:`use_skill`, then ``run(invocation)``; ``run`` is never called when the guard refuses."""
    invocation = use_skill(agent, iri, inputs, keyring, timeout=timeout)
    return run(invocation)
