"""Property tests: a broken file is always a positioned ScenarioFormatError, never a crash.

The base document exercises most of the format (parallel blocks, labels,
expectations of every shape, config, final); each example breaks it in one
way the spec forbids and checks the loader says so with a real position.
"""

from __future__ import annotations

import copy
import io
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from gliding_actors.errors import ScenarioFormatError
from gliding_actors.scenario._loader import load_scenario_text
from gliding_actors.scenario._opspecs import get_op_spec
from gliding_actors.scenario._schema import scenario_validator

BASE: dict[str, Any] = {
    "format": "gliding-actors/scenario@1",
    "name": "props",
    "description": "base document for mutations",
    "seed": 3,
    "config": {
        "coherence": {"critical_tags": ["user_intent"]},
        "l1": {"token_budget": 300, "beta": 0.5},
    },
    "agents": [{"id": "pa", "role": "PA"}, {"id": "da", "role": "DA"}, {"id": "ca", "role": "CA"}],
    "steps": [
        {"op": "subscribe", "agent": "ca", "topic": "reviews"},
        {
            "op": "write",
            "agent": "pa",
            "iri": "plan:1",
            "value": {"goal": "ship"},
            "tags": ["user_intent"],
            "graph": "plan",
            "as": "w1",
            "expect": {"version": 1, "policy": "write_through", "state": "M", "messages": 0},
        },
        {
            "parallel": [
                {
                    "op": "read",
                    "agent": "da",
                    "iri": "plan:1",
                    "expect": {"same_as": "w1", "state_in": ["S", "E"]},
                },
                {
                    "op": "lock",
                    "agent": "da",
                    "resource": "repo",
                    "mode": "write",
                    "timeout_s": 1.5,
                    "expect": {"granted": True},
                },
                {
                    "op": "inspect",
                    "iri": "plan:1",
                    "expect": {"caches": {"pa": "S"}, "sharers": ["da", "pa"]},
                },
            ]
        },
        {
            "op": "turn",
            "agent": "pa",
            "role": "assistant",
            "summary": "s",
            "thought": "t",
            "content": "c",
            "supplement": False,
            "relevance": 0.5,
            "expect": {"max_tokens": 300, "at_least": {"tokens": 1}},
        },
        {
            "op": "search",
            "agent": "ca",
            "text": "jwt",
            "k": 3,
            "filters": {"tags": ["x"], "min_importance": 0.1},
        },
        {
            "op": "context",
            "agent": "ca",
            "max_tokens": 200,
            "expect": {"count": 0, "contains": ["plan:1"]},
        },
        {
            "op": "task.complete",
            "agent": "da",
            "task": "t:1",
            "status": "completed",
            "expect": {"error": "CycleError"},
        },
        {"op": "crash", "target": "agent:da"},
        {"op": "advance", "seconds": 5},
        {"op": "agents", "expect": {"agents": {"pa": {"stale": False, "role": "PA"}}}},
        {"op": "quiesce"},
    ],
    "final": {
        "lines": {"plan:1": {"l0": {"version": 1}, "directory": "S"}},
        "session": {"pa": {"tokens": 3, "weak_refs": []}},
    },
}

# Children of these keys are free-form JSON (values, messages, list-membership
# expectations): anything goes inside them, so mutations stop at the key itself.
FREE = {"value", "message", "jsonld", "contains", "excludes", "value_in"}


def _dump(doc: Any, syntax: str) -> str:
    if syntax == "json":
        return json.dumps(doc, indent=2)
    out = io.StringIO()
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.dump(doc, out)
    return out.getvalue()


def _walk(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    """Every (path, value) that a mutation may touch."""
    found = [(path, node)]
    if path and path[-1] in FREE:
        return found
    if isinstance(node, dict):
        for key, value in node.items():
            found.extend(_walk(value, (*path, key)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found.extend(_walk(value, (*path, index)))
    return found


def _required_keys(doc: dict[str, Any]) -> list[tuple[tuple[Any, ...], str]]:
    """(mapping path, key) pairs whose deletion the spec forbids."""
    out: list[tuple[tuple[Any, ...], str]] = [
        ((), k) for k in ("format", "name", "agents", "steps")
    ]
    for i, _ in enumerate(doc["agents"]):
        out += [(("agents", i), "id"), (("agents", i), "role")]

    def op(path: tuple[Any, ...], step: dict[str, Any]) -> None:
        spec = get_op_spec(step["op"])
        out.append((path, "op"))
        if spec.takes_agent:
            out.append((path, "agent"))
        out.extend((path, arg) for arg in spec.required_args)

    for i, step in enumerate(doc["steps"]):
        if "parallel" in step:
            out.append((("steps", i), "parallel"))
            for j, member in enumerate(step["parallel"]):
                op(("steps", i, "parallel", j), member)
        else:
            op(("steps", i), step)
    return out


def _at(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        doc = doc[part]
    return doc


def _other_type(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        return "not a collection"
    if isinstance(value, str):
        return 12345
    return "not a scalar of the right type"  # int, float, bool


MUTABLE = [(p, v) for p, v in _walk(BASE)]
CONTAINERS = [p for p, v in MUTABLE if isinstance(v, dict) and not (p and p[-1] in FREE)]
REQUIRED = _required_keys(BASE)


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    kind = draw(st.sampled_from(["delete", "add", "retype"]))
    if kind == "delete":
        path, key = draw(st.sampled_from(REQUIRED))
        del _at(doc, path)[key]
    elif kind == "add":
        path = draw(st.sampled_from(CONTAINERS))
        _at(doc, path)["zz_not_in_the_spec"] = 1
    else:
        path, value = draw(st.sampled_from(MUTABLE))
        if not path:
            return {"not": "a scenario"} if draw(st.booleans()) else doc | {"format": 1}
        _at(doc, path[:-1])[path[-1]] = _other_type(value)
    return doc


def test_base_document_is_valid() -> None:
    for syntax, file in (("yaml", "b.yaml"), ("json", "b.json")):
        load_scenario_text(_dump(BASE, syntax), file)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=mutated(), syntax=st.sampled_from(["yaml", "json"]))
def test_every_mutation_is_a_positioned_format_error(doc: dict[str, Any], syntax: str) -> None:
    text = _dump(doc, syntax)
    file = f"m.{syntax}"
    try:
        load_scenario_text(text, file)
    except ScenarioFormatError as err:
        assert err.file == file
        assert 1 <= err.line <= text.count("\n") + 1
        assert err.col >= 1
        assert err.message
    else:
        raise AssertionError(f"mutated file loaded:\n{text}")


_json_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
)
_json = st.recursive(
    _json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200), syntax=st.sampled_from(["yaml", "json"]))
def test_arbitrary_text_never_crashes(text: str, syntax: str) -> None:
    try:
        load_scenario_text(text, f"t.{syntax}")
    except ScenarioFormatError as err:
        assert err.line >= 1 and err.col >= 1


@settings(max_examples=100, deadline=None)
@given(
    extra=st.dictionaries(
        st.sampled_from(["steps", "agents", "final", "config", "seed", "name"]), _json, max_size=3
    ),
    syntax=st.sampled_from(["yaml", "json"]),
)
def test_arbitrary_json_sections_never_crash(extra: dict[str, Any], syntax: str) -> None:
    doc = {**BASE, **extra}
    try:
        load_scenario_text(_dump(doc, syntax), f"j.{syntax}")
    except ScenarioFormatError as err:
        assert err.line >= 1 and err.col >= 1
    else:
        # The loader validates piecewise; the published whole-file schema must agree.
        assert scenario_validator().is_valid(doc)


@settings(max_examples=100, deadline=None)
@given(doc=mutated())
def test_whole_file_schema_agrees_with_the_loader_on_structure(doc: dict[str, Any]) -> None:
    from gliding_actors.scenario._loader import _Positions, _schema_issues

    if not isinstance(doc, dict):
        return
    assert scenario_validator().is_valid(doc) == (not _schema_issues(doc, _Positions()))
