"""The op table mirrors the spec, and extending it extends what files may say."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gliding_actors.errors import ScenarioFormatError
from gliding_actors.scenario import _opspecs
from gliding_actors.scenario._loader import load_scenario_text
from gliding_actors.scenario._opspecs import (
    CONTROL_OPS,
    EXPECTATION_FORMS,
    OpSpec,
    get_op_spec,
    op_names,
    register_op_spec,
)
from gliding_actors.scenario._schema import (
    ScenarioValidator,
    build_scenario_schema,
    scenario_schema,
)

V1_OPS = [
    "read",
    "write",
    "cas",
    "delete",
    "evict",
    "inspect",
    "flush",
    "turn",
    "session",
    "context",
    "project",
    "search",
    "query",
    "task.create",
    "task.depend",
    "task.complete",
    "task.layers",
    "lock",
    "unlock",
    "heartbeat",
    "agents",
    "publish",
    "subscribe",
    "inbox",
    "intent",
    "crash",
    "advance",
    "quiesce",
    "check",
]

HEAD = "format: gliding-actors/scenario@1\nname: t\nagents: [{id: pa, role: PA}]\n"


def test_every_v1_op_is_registered_and_consistent() -> None:
    assert set(V1_OPS) <= set(op_names())
    for name in V1_OPS:
        get_op_spec(name).check()


def test_which_ops_take_an_agent() -> None:
    no_agent = {n for n in V1_OPS if not get_op_spec(n).takes_agent}
    assert no_agent == {"inspect", "flush", "agents", "crash", "advance", "quiesce", "check"}


def test_control_ops() -> None:
    assert set(CONTROL_OPS) == {"advance", "quiesce", "check"}
    assert {n for n in V1_OPS if get_op_spec(n).control} == set(CONTROL_OPS)


def test_main_lists_match_the_spec() -> None:
    expected = {
        "turn": "evicted",
        "session": "turns",
        "context": "iris",
        "project": "iris",
        "search": "iris",
        "query": "rows",
        "task.layers": "layers",
        "inbox": "messages",
        "intent": "prefetched",
    }
    actual = {n: get_op_spec(n).main_list for n in V1_OPS if get_op_spec(n).main_list is not None}
    assert actual == expected


@pytest.mark.parametrize(
    ("op", "required", "optional"),
    [
        ("read", {"iri"}, set()),
        ("write", {"iri", "value"}, {"tags", "graph", "importance", "ttl_s"}),
        ("cas", {"iri", "version", "value"}, {"tags", "graph", "importance", "ttl_s"}),
        ("delete", {"iri"}, {"version"}),
        ("context", {"max_tokens"}, {"query", "task"}),
        ("project", {"frame"}, {"task", "max_tokens"}),
        ("search", {"text", "k"}, {"filters"}),
        ("task.create", {"task"}, {"parent", "depends_on"}),
        ("lock", {"resource", "mode"}, {"timeout_s"}),
        ("heartbeat", set(), {"status", "operation"}),
        ("advance", {"seconds"}, set()),
        ("quiesce", set(), set()),
        ("check", set(), set()),
        ("flush", set(), set()),
        ("sweep", set(), set()),
        ("update", {"sparql"}, set()),
        ("consolidate", set(), {"keep"}),
        ("fold", {"iris", "summary"}, {"thought", "content"}),
    ],
)
def test_args(op: str, required: set[str], optional: set[str]) -> None:
    spec = get_op_spec(op)
    assert set(spec.required_args) == required
    assert set(spec.arg_names) == required | optional
    assert spec.args_schema["additionalProperties"] is False


def test_result_keys() -> None:
    assert set(get_op_spec("read").result_keys) == {"value", "version", "state", "messages"}
    assert set(get_op_spec("write").result_keys) == {"version", "state", "messages", "policy"}
    assert get_op_spec("cas").results == get_op_spec("write").results
    assert set(get_op_spec("inspect").result_keys) == {
        "directory",
        "owner",
        "sharers",
        "caches",
        "l2",
        "l0",
    }
    assert get_op_spec("unlock").result_keys == ()
    assert not set(EXPECTATION_FORMS) & {k for n in V1_OPS for k in get_op_spec(n).result_keys}


def test_schema_is_valid_draft_2020_12() -> None:
    schema = scenario_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    ScenarioValidator.check_schema(schema)
    ScenarioValidator.check_schema(build_scenario_schema())


@pytest.fixture
def restore_registry() -> Iterator[None]:
    saved = dict(_opspecs._REGISTRY)
    yield
    _opspecs._REGISTRY.clear()
    _opspecs._REGISTRY.update(saved)


PING = OpSpec(
    name="ping",
    takes_agent=True,
    args_schema={
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "additionalProperties": False,
    },
    results={"pongs": {"type": "array"}},
    main_list="pongs",
)


@pytest.mark.usefixtures("restore_registry")
def test_register_op_spec_extends_the_format() -> None:
    text = HEAD + "steps:\n  - {op: ping, agent: pa, n: 3, expect: {count: 3, pongs: [1, 2, 3]}}\n"
    with pytest.raises(ScenarioFormatError, match="unknown op 'ping'"):
        load_scenario_text(text, "p.yaml")
    register_op_spec(PING)
    assert get_op_spec("ping").main_list == "pongs"
    step = load_scenario_text(text, "p.yaml").steps[0]
    assert getattr(step, "op", None) == "ping"
    with pytest.raises(ScenarioFormatError) as info:
        load_scenario_text(HEAD + "steps:\n  - {op: ping, agent: pa, n: 3, m: 1}\n", "p.yaml")
    assert (info.value.line, info.value.col) == (5, 33)
    with pytest.raises(ValueError, match="already registered"):
        register_op_spec(PING)
    register_op_spec(PING, replace=True)


@pytest.mark.usefixtures("restore_registry")
def test_registry_restored_means_schema_restored() -> None:
    register_op_spec(PING)
    load_scenario_text(HEAD + "steps: [{op: ping, agent: pa, n: 1}]\n", "p.yaml")
    _opspecs._REGISTRY.pop("ping")
    with pytest.raises(ScenarioFormatError, match="unknown op 'ping'"):
        load_scenario_text(HEAD + "steps: [{op: ping, agent: pa, n: 1}]\n", "p.yaml")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"args_schema": {"type": "object", "properties": {}}}, "additionalProperties"),
        (
            {
                "args_schema": {
                    "type": "object",
                    "properties": {},
                    "required": ["x"],
                    "additionalProperties": False,
                }
            },
            "required args",
        ),
        (
            {
                "args_schema": {
                    "type": "object",
                    "properties": {"agent": {}},
                    "additionalProperties": False,
                }
            },
            "clash with step keys",
        ),
        ({"main_list": "nope"}, "main list"),
        ({"control": True}, "control op takes no agent"),
        ({"results": {"count": {}, "pongs": {}}}, "expectation forms"),
    ],
)
def test_bad_specs_are_refused(change: dict[str, object], message: str) -> None:
    import dataclasses

    bad = dataclasses.replace(PING, **change)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message):
        register_op_spec(bad)
    assert "ping" not in op_names()
