"""Who may create, read, update and delete in which named graph of the blackboard.

The blackboard is split into named graphs, one per concern of the PDCA loop
(``plan``, ``execution``, ``review``, ``decision``, ``knowledge``) plus a
``shared`` scratch space. A :class:`PermissionMatrix` is a role × graph table
of CRUD rights that every blackboard path consults *before* it changes
anything, so a refusal (:class:`~gliding_actors.errors.PermissionDenied`) never
leaves a half-done write behind.

Why these rules:

* **The table is data, not code.** It is built from the same shape a config
  file holds — ``{role: {graph: "crud letters"}}`` — so a team can widen or
  narrow it without touching the library.
* **The most specific entry wins.** A role's rights in a graph are its entry
  for that graph if it has one, else its ``"*"`` entry, else nothing. That makes
  "read everything except ``decision``" expressible (``{"*": "r",
  "decision": ""}``); a union of both entries could only ever add rights.
* **No graph means the shared graph.** A node written without a graph is
  visible to the whole team, so it is checked as if it were in
  :data:`DEFAULT_GRAPH` (``"shared"``), where every role may create, read and
  update and only SA (and ``system``) may delete. Treating it as the writer's
  home graph instead would hide it from roles that cannot read that graph,
  which is the opposite of what an unlabelled write usually means.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gliding_actors.errors import ConfigError, InvalidInput, PermissionDenied, show
from gliding_actors.l0 import is_valid_label
from gliding_actors.roles import ROLES

__all__ = [
    "ACTIONS",
    "ANY_GRAPH",
    "DEFAULT_GRAPH",
    "DEFAULT_PERMISSIONS",
    "GRAPHS",
    "ROLES",
    "PermissionMatrix",
]


#: The named graphs of the default table.
GRAPHS: tuple[str, ...] = ("plan", "execution", "review", "decision", "knowledge", "shared")

#: The actions a permission check names, in CRUD order; each is one letter of ``"crud"``.
ACTIONS: tuple[str, ...] = ("create", "read", "update", "delete")

#: The graph a check uses when none is given (see the module docstring).
DEFAULT_GRAPH = "shared"

#: The graph key meaning "any graph without an entry of its own".
ANY_GRAPH = "*"

_LETTER = {"create": "c", "read": "r", "update": "u", "delete": "d"}

#: The default table: PA full on plan; DA full on
#: execution; CA full on review; AA full on decision and knowledge; SA full on
#: shared; everyone reads plan, knowledge and shared; DA, CA and AA read
#: execution; CA and AA read review; AA reads everything; everyone may create
#: and update in shared; system may do anything.
DEFAULT_PERMISSIONS: Mapping[str, Mapping[str, str]] = {
    "SA": {"plan": "r", "knowledge": "r", "shared": "crud"},
    "PA": {"plan": "crud", "knowledge": "r", "shared": "cru"},
    "DA": {"plan": "r", "execution": "crud", "knowledge": "r", "shared": "cru"},
    "CA": {"plan": "r", "execution": "r", "review": "crud", "knowledge": "r", "shared": "cru"},
    "AA": {
        "*": "r",
        "plan": "r",
        "execution": "r",
        "review": "r",
        "decision": "crud",
        "knowledge": "crud",
        "shared": "cru",
    },
    "system": {"*": "crud"},
}


def _parse_rights(raw: Any, path: tuple[str, str]) -> frozenset[str]:
    """Turn a string of CRUD letters (any order, repeats allowed) into a set of letters."""
    if not isinstance(raw, str):
        where = ".".join(path)
        raise ConfigError(
            f"permissions.{where} must be a string of the letters c, r, u, d, not {raw!r}",
            path=("permissions", *path),
        )
    bad = sorted({ch for ch in raw if ch not in "crud"})
    if bad:
        where = ".".join(path)
        raise ConfigError(
            f"permissions.{where} = {raw!r} has letters other than c, r, u, d: {''.join(bad)}",
            path=("permissions", *path),
        )
    return frozenset(raw)


def _letters(rights: frozenset[str]) -> str:
    return "".join(ch for ch in "crud" if ch in rights)


class PermissionMatrix:
    """An immutable role × named-graph table of create/read/update/delete rights.

    Build one with :meth:`default`, :meth:`from_dict` or :meth:`merged`; ask it
    with :meth:`check` (raises) or :meth:`allowed` (a bool). Lookups are pure:
    the matrix never changes after it is built, so one instance can be shared by
    every actor that checks permissions.
    """

    __slots__ = ("_default_graph", "_rules")

    def __init__(
        self,
        rules: Mapping[str, Mapping[str, frozenset[str]]],
        *,
        default_graph: str = DEFAULT_GRAPH,
    ) -> None:
        """Use :meth:`from_dict`; this takes an already-validated table."""
        self._rules: dict[str, dict[str, frozenset[str]]] = {
            role: dict(graphs) for role, graphs in rules.items()
        }
        self._default_graph = default_graph

    # ------------------------------------------------------------------ building

    @classmethod
    def default(cls) -> PermissionMatrix:
        """The default table (see :data:`DEFAULT_PERMISSIONS`; docs/L2.md, "The default table")."""
        return cls.from_dict(DEFAULT_PERMISSIONS)

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], *, default_graph: str = DEFAULT_GRAPH
    ) -> PermissionMatrix:
        """Exactly the table in ``data`` (``{role: {graph: "crud"}}``, ``"*"`` = any graph).

        A role without a row has no rights at all. Unknown roles, malformed graph
        names and letters other than c/r/u/d are a
        :class:`~gliding_actors.errors.ConfigError` naming the key path.
        """
        return cls(_validate(data), default_graph=_validate_default_graph(default_graph))

    def merged(self, overrides: Mapping[str, Any]) -> PermissionMatrix:
        """A copy in which every (role, graph) cell named in ``overrides`` replaces ours.

        ``PermissionMatrix.default().merged({"DA": {"review": "r"}})`` lets DA
        read reviews and leaves everything else as it was; ``""`` revokes a cell.
        """
        extra = _validate(overrides)
        rules = {role: dict(graphs) for role, graphs in self._rules.items()}
        for role, graphs in extra.items():
            rules.setdefault(role, {}).update(graphs)
        return PermissionMatrix(rules, default_graph=self._default_graph)

    # ------------------------------------------------------------------ asking

    @property
    def default_graph(self) -> str:
        """The graph checked when a call names none."""
        return self._default_graph

    def allowed(self, role: str, graph: str | None, action: str) -> bool:
        """True if ``role`` may ``action`` in ``graph`` (None: :attr:`default_graph`).

        Bad input (unknown role or action, a malformed graph name) is
        :class:`~gliding_actors.errors.InvalidInput`, not ``False``: a typo must
        not look like a refusal.
        """
        _check_role(role)
        target = self._graph(graph)
        letter = _action_letter(action)
        return letter in self._rights(role, target)

    def check(self, role: str, graph: str | None, action: str) -> None:
        """Return if allowed; else raise :class:`~gliding_actors.errors.PermissionDenied`.

        The message names the role, the graph and the action, so an agent (or
        the LLM behind it) can tell what it tried and where.
        """
        if not self.allowed(role, graph, action):
            target = self._graph(graph)
            note = "" if graph is not None else " (no graph given: the default graph)"
            raise PermissionDenied(f"role {role} may not {action} in graph {target!r}{note}")

    def rights(self, role: str, graph: str | None) -> str:
        """The rights of ``role`` in ``graph`` as CRUD letters, e.g. ``"cru"``."""
        _check_role(role)
        return _letters(self._rights(role, self._graph(graph)))

    def readable_graphs(self, role: str, known_graphs: Iterable[str]) -> list[str]:
        """The graphs among ``known_graphs`` that ``role`` may read, sorted, without repeats.

        The caller passes the graphs that exist (the store knows them; the matrix
        does not), which is how ``"*"`` rights turn into a concrete list — e.g.
        to scope a SPARQL query to what an agent may see.
        """
        _check_role(role)
        graphs = sorted({_check_graph(g) for g in known_graphs})
        return [g for g in graphs if "r" in self._rights(role, g)]

    def to_dict(self) -> dict[str, dict[str, str]]:
        """The table as plain data in :meth:`from_dict`'s shape (sorted, msgpack-ready)."""
        return {
            role: {graph: _letters(self._rules[role][graph]) for graph in sorted(self._rules[role])}
            for role in sorted(self._rules)
        }

    snapshot = to_dict

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PermissionMatrix):
            return NotImplemented
        return self.to_dict() == other.to_dict() and self._default_graph == other._default_graph

    def __hash__(self) -> int:
        return hash((repr(self.to_dict()), self._default_graph))

    def __repr__(self) -> str:
        return f"PermissionMatrix({self.to_dict()!r})"

    # ------------------------------------------------------------------ private

    def _graph(self, graph: str | None) -> str:
        return self._default_graph if graph is None else _check_graph(graph)

    def _rights(self, role: str, graph: str) -> frozenset[str]:
        row = self._rules.get(role)
        if row is None:
            return frozenset()
        if graph in row:
            return row[graph]
        return row.get(ANY_GRAPH, frozenset())


def _check_role(role: object) -> None:
    if role not in ROLES:
        raise InvalidInput(f"unknown role {show(role)} (roles: {', '.join(ROLES)})")


def _check_graph(graph: object) -> str:
    if not is_valid_label(graph) or graph == ANY_GRAPH:
        raise InvalidInput(
            f"a graph name is a non-empty string without control characters, not {show(graph)}"
        )
    assert isinstance(graph, str)
    return graph


def _action_letter(action: object) -> str:
    if not isinstance(action, str) or action not in _LETTER:
        raise InvalidInput(f"unknown action {show(action)} (actions: {', '.join(ACTIONS)})")
    return _LETTER[action]


def _validate_default_graph(graph: object) -> str:
    if not is_valid_label(graph) or graph == ANY_GRAPH:
        raise ConfigError(f"the default graph must be a graph name, not {graph!r}")
    assert isinstance(graph, str)
    return graph


def _validate(data: Any) -> dict[str, dict[str, frozenset[str]]]:
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"permissions must be a mapping of role to graphs, not {type(data).__name__}",
            path=("permissions",),
        )
    rules: dict[str, dict[str, frozenset[str]]] = {}
    for role, graphs in data.items():
        if role not in ROLES:
            raise ConfigError(
                f"permissions: unknown role {role!r} (roles: {', '.join(ROLES)})",
                path=("permissions", str(role)),
            )
        if not isinstance(graphs, Mapping):
            raise ConfigError(
                f"permissions.{role} must be a mapping of graph to letters, "
                f"not {type(graphs).__name__}",
                path=("permissions", role),
            )
        row: dict[str, frozenset[str]] = {}
        for graph, raw in graphs.items():
            if not (graph == ANY_GRAPH or is_valid_label(graph)):
                raise ConfigError(
                    f"permissions.{role}: {graph!r} is not a graph name or '*'",
                    path=("permissions", role, str(graph)),
                )
            row[graph] = _parse_rights(raw, (role, graph))
        rules[role] = row
    return rules
