"""The permission matrix: the default table exactly as docs/L2.md lists it, config, checks."""

from __future__ import annotations

import itertools
from typing import Any

import msgpack
import pytest

from gliding_actors.errors import ConfigError, InvalidInput, PermissionDenied
from gliding_actors.l2 import ACTIONS, DEFAULT_GRAPH, GRAPHS, ROLES, PermissionMatrix

AGENT_ROLES = ("SA", "PA", "DA", "CA", "AA")
FULL = set(ACTIONS)


def issue_table() -> dict[tuple[str, str], set[str]]:
    """The default table built clause by clause from the issue text, for the six graphs
    and one graph nobody names ("elsewhere")."""
    graphs = (*GRAPHS, "elsewhere")
    table: dict[tuple[str, str], set[str]] = {(r, g): set() for r in ROLES for g in graphs}
    # PA full on plan; DA full on execution; CA full on review;
    table["PA", "plan"] |= FULL
    table["DA", "execution"] |= FULL
    table["CA", "review"] |= FULL
    # AA full on decision and knowledge; SA full on shared;
    table["AA", "decision"] |= FULL
    table["AA", "knowledge"] |= FULL
    table["SA", "shared"] |= FULL
    # everyone reads plan, knowledge, shared;
    for role in AGENT_ROLES:
        for graph in ("plan", "knowledge", "shared"):
            table[role, graph].add("read")
    # DA, CA and AA read execution; CA and AA read review; AA reads everything;
    for role in ("DA", "CA", "AA"):
        table[role, "execution"].add("read")
    for role in ("CA", "AA"):
        table[role, "review"].add("read")
    for graph in graphs:
        table["AA", graph].add("read")
    # everyone may create and update in shared;
    for role in AGENT_ROLES:
        table[role, "shared"] |= {"create", "update"}
    # system may do anything.
    for graph in graphs:
        table["system", graph] |= FULL
    return table


def test_the_default_table_is_exactly_the_issues() -> None:
    matrix = PermissionMatrix.default()
    for (role, graph), rights in issue_table().items():
        for action in ACTIONS:
            assert matrix.allowed(role, graph, action) is (action in rights), (role, graph, action)


def test_the_default_table_as_data() -> None:
    assert PermissionMatrix.default().to_dict()["CA"] == {
        "execution": "r",
        "knowledge": "r",
        "plan": "r",
        "review": "crud",
        "shared": "cru",
    }


def test_check_raises_permission_denied_naming_role_graph_and_action() -> None:
    matrix = PermissionMatrix.default()
    matrix.check("DA", "execution", "delete")
    with pytest.raises(PermissionDenied) as caught:
        matrix.check("DA", "review", "read")
    message = str(caught.value)
    assert "DA" in message and "'review'" in message and "read" in message
    with pytest.raises(PermissionDenied, match="PA may not delete in graph 'shared'"):
        matrix.check("PA", "shared", "delete")


def test_no_graph_means_the_shared_graph() -> None:
    matrix = PermissionMatrix.default()
    assert matrix.default_graph == DEFAULT_GRAPH == "shared"
    for role, action in itertools.product(ROLES, ACTIONS):
        assert matrix.allowed(role, None, action) is matrix.allowed(role, "shared", action)
    with pytest.raises(PermissionDenied, match="no graph given"):
        matrix.check("CA", None, "delete")
    other = PermissionMatrix.from_dict({"PA": {"plan": "crud"}}, default_graph="plan")
    assert other.allowed("PA", None, "delete")


def test_readable_graphs() -> None:
    matrix = PermissionMatrix.default()
    known = ["shared", "plan", "review", "execution", "decision", "knowledge", "scratch", "plan"]
    assert matrix.readable_graphs("PA", known) == ["knowledge", "plan", "shared"]
    assert matrix.readable_graphs("CA", known) == [
        "execution",
        "knowledge",
        "plan",
        "review",
        "shared",
    ]
    assert matrix.readable_graphs("AA", known) == sorted(set(known))
    assert matrix.readable_graphs("system", []) == []
    with pytest.raises(InvalidInput):
        matrix.readable_graphs("PA", ["plan", ""])


def test_from_dict_is_exact_and_the_most_specific_entry_wins() -> None:
    matrix = PermissionMatrix.from_dict(
        {"AA": {"*": "r", "decision": ""}, "DA": {"execution": "dcru"}}
    )
    assert matrix.allowed("AA", "anything", "read")
    assert not matrix.allowed("AA", "decision", "read")  # revoked by the specific entry
    assert matrix.rights("DA", "execution") == "crud"
    assert matrix.rights("PA", "plan") == ""  # no row: no rights
    assert matrix.to_dict() == {"AA": {"*": "r", "decision": ""}, "DA": {"execution": "crud"}}


def test_merged_overrides_single_cells() -> None:
    base = PermissionMatrix.default()
    merged = base.merged({"DA": {"review": "r"}, "system": {"decision": "r"}})
    assert merged.allowed("DA", "review", "read")
    assert not merged.allowed("system", "decision", "update")
    assert merged.allowed("system", "plan", "delete")
    assert merged.rights("DA", "execution") == "crud"
    assert base == PermissionMatrix.default()  # the original is untouched
    assert base != merged


def test_to_dict_round_trips_through_msgpack() -> None:
    data = PermissionMatrix.default().to_dict()
    assert msgpack.unpackb(msgpack.packb(data)) == data
    assert PermissionMatrix.from_dict(data) == PermissionMatrix.default()
    assert hash(PermissionMatrix.from_dict(data)) == hash(PermissionMatrix.default())


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"boss": {"plan": "r"}}, ("permissions", "boss")),
        ({"PA": "crud"}, ("permissions", "PA")),
        ({"PA": {"plan": "rx"}}, ("permissions", "PA", "plan")),
        ({"PA": {"plan": 7}}, ("permissions", "PA", "plan")),
        ({"PA": {"": "r"}}, ("permissions", "PA", "")),
        ({"PA": {3: "r"}}, ("permissions", "PA", "3")),
        (["PA"], ("permissions",)),
    ],
)
def test_bad_config_is_a_config_error_with_its_path(data: Any, path: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError) as caught:
        PermissionMatrix.from_dict(data)
    assert caught.value.path == path
    with pytest.raises(ConfigError):
        PermissionMatrix.default().merged(data)


def test_bad_default_graph() -> None:
    for bad in ("*", "", None):
        with pytest.raises(ConfigError):
            PermissionMatrix.from_dict({}, default_graph=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("role", "graph", "action"),
    [
        ("boss", "plan", "read"),
        (None, "plan", "read"),
        ("PA", "plan", "write"),
        ("PA", "plan", "r"),
        ("PA", "plan", ["read"]),
        ("PA", "", "read"),
        ("PA", "*", "read"),
        ("PA", "bad\ngraph", "read"),
        ("PA", 5, "read"),
    ],
)
def test_bad_questions_are_invalid_input_not_refusals(role: Any, graph: Any, action: Any) -> None:
    matrix = PermissionMatrix.default()
    with pytest.raises(InvalidInput) as caught:
        matrix.check(role, graph, action)
    assert not isinstance(caught.value, PermissionDenied)
    with pytest.raises(InvalidInput):
        matrix.allowed(role, graph, action)
