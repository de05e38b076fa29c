"""The scenario loader: valid files load; every mistake is reported at FILE:LINE:COL.

Each error test pins the exact line and column, because pointing at the right
character is the whole value of the loader's messages.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from gliding_actors.config import Config
from gliding_actors.errors import InvalidInput, ScenarioFormatError
from gliding_actors.scenario._loader import load_scenario, load_scenario_text
from gliding_actors.scenario._model import OpStep, ParallelStep, Position

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "scenarios" / "examples" / "pdca_auth_refactor.yaml"  # the format's worked example

HEAD = """\
format: gliding-actors/scenario@1
name: test
agents:
  - {id: pa, role: PA}
  - {id: da, role: DA}
"""  # lines 1-5; a test's own text starts on line 6


def fail(text: str, file: str = "s.yaml") -> ScenarioFormatError:
    with pytest.raises(ScenarioFormatError) as info:
        load_scenario_text(textwrap.dedent(text), file)
    return info.value


def at(err: ScenarioFormatError, line: int, col: int, *words: str) -> None:
    assert (err.line, err.col) == (line, col), str(err)
    for word in words:
        assert word in err.message, str(err)
    assert str(err).startswith(f"{err.file}:{line}:{col}: ")


# ---------------------------------------------------------------- valid files


def test_spec_example_loads() -> None:
    s = load_scenario(EXAMPLE)
    assert s.name == "PDCA team refactors authentication"
    assert s.seed == 7
    assert s.path == str(EXAMPLE)
    assert [a.id for a in s.agents] == ["sa", "pa", "da", "ca", "aa"]
    assert s.agents[0].pos == Position(str(EXAMPLE), 12, 5)
    assert s.config.l1.token_budget == 400
    assert s.config.coherence.critical_tags == ("user_intent", "confirmed_fact")
    assert s.config_data == {
        "coherence": {"critical_tags": ["user_intent", "confirmed_fact"]},
        "l1": {"token_budget": 400},
    }
    assert len(s.steps) == 23
    write = s.steps[4]
    assert isinstance(write, OpStep)
    assert (write.op, write.agent, write.number, write.member) == ("write", "pa", 5, None)
    assert write.pos.line == 22 and write.pos.col == 5
    assert write.args["tags"] == ["user_intent"]
    assert set(write.args) == {"iri", "graph", "tags", "value"}
    assert write.expect == {"policy": "write_through", "version": 1}
    inspect = s.steps[13]
    assert isinstance(inspect, OpStep) and inspect.op == "inspect" and inspect.agent is None
    advance = s.steps[21]
    assert isinstance(advance, OpStep) and advance.args == {"seconds": 45}
    assert s.final == {
        "lines": {
            "decision:jwt": {
                "l0": {
                    "value": {"@type": "Decision", "decision": "ship", "reason": "review approved"}
                }
            }
        }
    }
    assert s.final_pos is not None and s.final_pos.line == 47


def _plain_types(value: object) -> None:
    """No parser types (ruamel's CommentedMap, ScalarFloat, …) may leak out."""
    assert type(value) in (dict, list, str, int, float, bool, type(None)), type(value)
    if isinstance(value, dict):
        for k, v in value.items():
            assert type(k) is str
            _plain_types(v)
    elif isinstance(value, list):
        for v in value:
            _plain_types(v)


def test_yaml_values_are_plain_python_and_yaml_1_2() -> None:
    s = load_scenario_text(
        HEAD
        + textwrap.dedent(
            """\
            steps:
              - op: write
                agent: pa
                iri: "x:1"
                value:
                  flag: yes
                  switch: on
                  n: 0o17
                  f: 1.5
                  when: 2024-01-01
                  text: |
                    two lines
                    here
            """
        ),
        "v.yaml",
    )
    step = s.steps[0]
    assert isinstance(step, OpStep)
    # YAML 1.2: yes/on are strings, 0o17 is octal, a date stays a string.
    assert step.args["value"] == {
        "flag": "yes",
        "switch": "on",
        "n": 15,
        "f": 1.5,
        "when": "2024-01-01",
        "text": "two lines\nhere\n",
    }
    _plain_types(dict(step.args))
    _plain_types(dict(s.config_data))


def test_parallel_members_are_numbered_and_labels_resolve() -> None:
    s = load_scenario_text(
        HEAD
        + textwrap.dedent(
            """\
            steps:
              - {op: write, agent: pa, iri: "x:1", value: {a: 1}, as: first}
              - parallel:
                  - {op: read, agent: pa, iri: "x:1", expect: {same_as: first}, as: r1}
                  - {op: inspect, iri: "x:1"}
              - {op: quiesce}
              - {op: read, agent: da, iri: "x:1", expect: {same_as: r1}}
            final:
              lines: {"x:1": {directory: S, same_as: r1}}
              session: {pa: {count: 0}}
            """
        ),
        "p.yaml",
    )
    block = s.steps[1]
    assert isinstance(block, ParallelStep)
    assert block.number == 2 and block.pos == Position("p.yaml", 8, 5)
    assert [(o.op, o.number, o.member, o.where) for o in block.ops] == [
        ("read", 2, 1, "step 2.1"),
        ("inspect", 2, 2, "step 2.2"),
    ]
    assert block.ops[0].label == "r1" and block.ops[0].pos == Position("p.yaml", 9, 9)
    assert s.final is not None and s.final["session"] == {"pa": {"count": 0}}


def test_json_scenario_loads(tmp_path: Path) -> None:
    doc = {
        "format": "gliding-actors/scenario@1",
        "name": "json",
        "seed": 3,
        "config": {"l1": {"beta": 0.5}},
        "agents": [{"id": "pa", "role": "PA"}, {"id": "ca", "role": "CA"}],
        "steps": [
            {
                "op": "write",
                "agent": "pa",
                "iri": "x:1",
                "value": {"on": True},
                "tags": ["emphasis"],
            },
            {"parallel": [{"op": "read", "agent": "ca", "iri": "x:1"}, {"op": "flush"}]},
            {"op": "advance", "seconds": 1.5},
        ],
    }
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc, indent="\t"), encoding="utf-8")
    s = load_scenario(path)
    assert s.seed == 3 and s.config.l1.beta == 0.5
    assert isinstance(s.steps[0], OpStep) and s.steps[0].args["value"] == {"on": True}
    block = s.steps[1]
    assert isinstance(block, ParallelStep) and block.ops[1].op == "flush"
    # Positions are real for JSON too: the third step's '{' is on line 43 of the tab-indented dump.
    lines = path.read_text().splitlines()
    third = s.steps[2].pos
    assert lines[third.line - 1][third.col - 1] == "{"
    assert '"advance"' in lines[third.line]


def test_minimal_file_defaults() -> None:
    s = load_scenario_text(HEAD + "steps: []\n", "m.yml")
    assert s.seed == 0 and s.description is None and s.final is None and s.final_pos is None
    assert s.config == Config() and s.config_data == {}
    assert s.steps == ()


# ---------------------------------------------------------------- structure errors


def test_wrong_type() -> None:
    err = fail(HEAD + "steps:\n  - {op: advance, seconds: ten}\n")
    at(err, 7, 28, "'seconds' must be a number", "'ten'")


def test_wrong_type_of_a_whole_section() -> None:
    at(fail(HEAD + "steps: {op: check}\n"), 6, 8, "'steps' must be a list", "a mapping")


def test_integer_refuses_float_and_range_is_checked() -> None:
    at(fail(HEAD + "seed: 1.5\nsteps: []\n"), 6, 7, "'seed' must be an integer")
    at(fail(HEAD + "seed: -1\nsteps: []\n"), 6, 7, "'seed' must be >= 0")


def test_unknown_top_level_key() -> None:
    err = fail(HEAD + "steps: []\nstep: []\n")
    at(err, 7, 1, "unknown key 'step'", "top level", "did you mean 'steps'?")


def test_unknown_key_in_op() -> None:
    err = fail(HEAD + "steps:\n  - {op: read, agent: pa, iri2: x}\n")
    at(err, 7, 27, "unknown key 'iri2' in op 'read'", "allowed: agent, as, expect, iri, op")


def test_unknown_key_in_expect() -> None:
    err = fail(
        HEAD + "steps:\n  - op: read\n    agent: pa\n    iri: x\n    expect:\n      versoin: 1\n"
    )
    at(err, 11, 7, "unknown key 'versoin'", "'expect' of op 'read'", "did you mean 'version'?")


def test_unknown_key_in_config() -> None:
    err = fail(HEAD + "config:\n  l1:\n    token_budgt: 10\nsteps: []\n")
    at(err, 8, 5, "unknown config key 'l1.token_budgt'")


def test_bad_config_value() -> None:
    err = fail(HEAD + "config:\n  coherence: {critical_tags: [a, 3]}\nsteps: []\n")
    at(err, 7, 34, "critical_tags", "must be a string")


def test_unknown_op_suggests() -> None:
    err = fail(HEAD + "steps:\n  - {op: reed, agent: pa, iri: x}\n")
    at(err, 7, 10, "unknown op 'reed'", "did you mean 'read'?")


def test_unknown_op_without_close_match_lists_ops() -> None:
    err = fail(HEAD + "steps:\n  - {op: zzzzzz}\n")
    at(err, 7, 10, "unknown op 'zzzzzz'", "known ops:", "task.create")


def test_bad_yaml_syntax() -> None:
    err = fail(HEAD + "steps:\n  - {op: read, agent: pa, iri: x\n  - {op: check}\n")
    assert err.line == 8 and err.col == 5, str(err)
    assert "invalid YAML" in err.message


def test_bad_yaml_indentation() -> None:
    err = fail(HEAD + "steps:\n  - op: check\n   foo: 1\n")
    assert err.line == 8 and "invalid YAML" in err.message


def test_duplicate_key() -> None:
    err = fail(HEAD + "steps:\n  - op: read\n    agent: pa\n    iri: x\n    agent: da\n")
    at(err, 10, 5, "duplicate key 'agent'")


def test_duplicate_key_in_json() -> None:
    err = fail('{"format": "gliding-actors/scenario@1",\n  "name": "a",\n  "name": "b"}', "d.json")
    at(err, 3, 3, "duplicate key 'name'", "line 2")


def test_json_syntax_error_has_position() -> None:
    err = fail('{"format": "gliding-actors/scenario@1",\n  "name": "a",\n}', "e.json")
    at(err, 3, 1, "invalid JSON")


def test_undeclared_agent() -> None:
    err = fail(HEAD + "steps:\n  - {op: read, agent: paa, iri: x}\n")
    at(err, 7, 23, "agent 'paa' is not declared", "did you mean 'pa'?")


def test_same_as_unknown_label() -> None:
    text = (
        HEAD
        + "steps:\n  - {op: read, agent: pa, iri: x, as: r1}\n  - {op: read, agent: da, iri: x, expect: {same_as: r2}}\n"
    )
    at(fail(text), 8, 53, "same_as names 'r2'", "no earlier step")


def test_same_as_label_defined_later() -> None:
    text = (
        HEAD
        + "steps:\n  - {op: read, agent: da, iri: x, expect: {same_as: r1}}\n  - {op: read, agent: pa, iri: x, as: r1}\n"
    )
    at(fail(text), 7, 53, "same_as names 'r1'", "only at line 8")


def test_same_as_within_one_parallel_block_is_not_earlier() -> None:
    text = HEAD + textwrap.dedent(
        """\
        steps:
          - parallel:
              - {op: read, agent: pa, iri: x, as: r1}
              - {op: read, agent: da, iri: x, expect: {same_as: r1}}
        """
    )
    at(fail(text), 9, 57, "same_as names 'r1'")


def test_duplicate_label() -> None:
    text = (
        HEAD
        + "steps:\n  - {op: read, agent: pa, iri: x, as: r1}\n  - {op: read, agent: da, iri: x, as: r1}\n"
    )
    at(fail(text), 8, 39, "duplicate label 'r1'", "line 7")


def test_control_op_in_parallel() -> None:
    text = (
        HEAD
        + "steps:\n  - parallel:\n      - {op: read, agent: pa, iri: x}\n      - {op: advance, seconds: 3}\n"
    )
    at(fail(text), 9, 14, "control op 'advance'", "parallel")


def test_empty_parallel() -> None:
    at(fail(HEAD + "steps:\n  - parallel: []\n"), 7, 15, "'parallel' needs at least one op")


def test_nested_parallel() -> None:
    text = HEAD + "steps:\n  - parallel:\n      - parallel: [{op: check}]\n"
    at(fail(text), 8, 9, "cannot be nested")


def test_op_and_parallel_in_one_step() -> None:
    at(
        fail(HEAD + "steps:\n  - {op: check, parallel: [{op: check}]}\n"),
        7,
        6,
        "either an op or a 'parallel'",
    )


def test_missing_name() -> None:
    err = fail("format: gliding-actors/scenario@1\nagents: []\nsteps: []\n")
    at(err, 1, 1, "missing required key 'name'", "top level")


def test_missing_agents_and_steps() -> None:
    at(fail("format: gliding-actors/scenario@1\nname: x\nsteps: []\n"), 1, 1, "'agents'")
    at(fail("format: gliding-actors/scenario@1\nname: x\nagents: []\n"), 1, 1, "'steps'")


def test_missing_op_arg() -> None:
    err = fail(HEAD + "steps:\n  - {op: check}\n  - {op: read, agent: pa}\n")
    at(err, 8, 5, "missing required key 'iri' in op 'read'")


def test_unknown_key_wins_over_missing_key_in_same_mapping() -> None:
    # The typo is what the reader should see first, not the consequence.
    err = fail(HEAD + "steps:\n  - {op: read, agent: pa, irl: x}\n")
    at(err, 7, 27, "unknown key 'irl'", "did you mean 'iri'?")


def test_missing_agent_where_needed() -> None:
    at(fail(HEAD + "steps:\n  - {op: read, iri: x}\n"), 7, 5, "op 'read' needs an 'agent'")


def test_agent_given_to_op_that_takes_none() -> None:
    at(
        fail(HEAD + "steps:\n  - {op: inspect, agent: pa, iri: x}\n"),
        7,
        19,
        "op 'inspect' takes no agent",
    )


def test_wrong_format_string() -> None:
    err = fail("format: gliding-actors/scenario@2\nname: x\nagents: []\nsteps: []\n")
    at(err, 1, 9, "'format' must be 'gliding-actors/scenario@1'", "@2")


def test_missing_format() -> None:
    at(fail("name: x\nagents: []\nsteps: []\n"), 1, 1, "missing required key 'format'")


def test_enumerations() -> None:
    at(
        fail(
            "format: gliding-actors/scenario@1\nname: x\nagents:\n  - {id: a, role: pa}\nsteps: []\n"
        ),
        4,
        19,
        "one of SA, PA",
        "did you mean 'PA'?",
    )
    at(
        fail(HEAD + "steps:\n  - {op: lock, agent: pa, resource: r, mode: rw}\n"),
        7,
        46,
        "'mode' must be one of read, write, exclusive",
    )
    at(fail(HEAD + "steps:\n  - {op: crash, target: disk}\n"), 7, 25, "'target' must be agent:ID")
    at(
        fail(HEAD + "steps:\n  - {op: read, agent: pa, iri: x, expect: {error: ConflictErorr}}\n"),
        7,
        51,
        "did you mean 'ConflictError'?",
    )
    at(
        fail(HEAD + "steps:\n  - {op: heartbeat, agent: pa, status: busy}\n"),
        7,
        40,
        "'status' must be one of idle",
    )


def test_duplicate_agent_id() -> None:
    at(
        fail(HEAD + "  - {id: pa, role: CA}\nsteps: []\n"),
        6,
        10,
        "duplicate agent id 'pa'",
        "line 4",
    )


def test_crash_of_undeclared_agent() -> None:
    at(
        fail(HEAD + "steps:\n  - {op: crash, target: 'agent:px'}\n"),
        7,
        25,
        "agent 'px' is not declared",
    )


def test_final_session_unknown_agent() -> None:
    at(
        fail(HEAD + "steps: []\nfinal:\n  session:\n    zz: {tokens: 3}\n"),
        9,
        5,
        "agent 'zz' is not declared",
    )


def test_final_unknown_key() -> None:
    at(
        fail(HEAD + "steps: []\nfinal:\n  line: {}\n"),
        8,
        3,
        "unknown key 'line'",
        "did you mean 'lines'?",
    )


def test_expect_value_type_is_checked() -> None:
    at(
        fail(HEAD + "steps:\n  - {op: read, agent: pa, iri: x, expect: {version: one}}\n"),
        7,
        53,
        "'version' must be an integer",
    )


def test_step_not_a_mapping() -> None:
    at(fail(HEAD + "steps:\n  - {op: check}\n  - check\n"), 8, 5, "step 2 must be a mapping")


def test_step_without_op() -> None:
    at(fail(HEAD + "steps:\n  - {agent: pa}\n"), 7, 5, "step 1 has no 'op'")


def test_first_error_in_file_order_is_reported() -> None:
    text = HEAD + "steps:\n  - {op: read, agent: pa, iri: x, bogus: 1}\n  - {op: reed}\nbad: 1\n"
    at(fail(text), 7, 35, "unknown key 'bogus'")


def test_empty_file_and_non_mapping_top_level() -> None:
    at(fail(""), 1, 1, "empty")
    at(fail("# just a comment\n"), 1, 1, "empty")
    at(fail("- a\n- b\n"), 1, 1, "top level must be a mapping")
    at(fail("   \n", "x.json"), 1, 1, "empty")
    at(fail("[1, 2]", "x.json"), 1, 1, "top level must be a mapping")


def test_two_yaml_documents() -> None:
    at(fail(HEAD + "steps: []\n---\nname: b\n"), 7, 1, "one YAML document")


def test_non_string_key_and_custom_tag_and_non_finite() -> None:
    at(
        fail(HEAD + "steps:\n  - {op: write, agent: pa, iri: x, value: {1: a}}\n"),
        7,
        44,
        "keys must be strings",
    )
    at(
        fail(HEAD + "steps:\n  - {op: write, agent: pa, iri: x, value: !py {a: 1}}\n"),
        7,
        43,
        "tag !py",
    )
    at(fail(HEAD + "steps:\n  - {op: advance, seconds: .inf}\n"), 7, 28, "finite number")


def test_other_extension_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text("x = 1\n")
    with pytest.raises(ScenarioFormatError) as info:
        load_scenario(path)
    at(info.value, 1, 1, "unsupported scenario file type '.toml'", ".yaml")


def test_unreadable_file_is_a_format_error(tmp_path: Path) -> None:
    with pytest.raises(ScenarioFormatError) as info:
        load_scenario(tmp_path / "missing.yaml")
    assert "cannot read" in info.value.message


def test_invalid_utf8_is_positioned(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_bytes(b"format: x\nname: \xff\n")
    with pytest.raises(ScenarioFormatError) as info:
        load_scenario(path)
    at(info.value, 2, 7, "UTF-8")


def test_format_error_is_invalid_input() -> None:
    # Callers catching the broader InvalidInput (or ValueError) still see it.
    err = fail("")
    assert isinstance(err, InvalidInput) and isinstance(err, ValueError)


def test_merge_keys_and_aliases_load_with_positions() -> None:
    text = HEAD + textwrap.dedent(
        """\
        steps:
          - &base {op: read, agent: pa, iri: "x:1"}
          - {<<: *base, agent: da}
          - {<<: *base, iri2: y}
        """
    )
    at(fail(text), 9, 17, "unknown key 'iri2'")
    ok = load_scenario_text(
        HEAD + "steps:\n  - &b {op: read, agent: pa, iri: x}\n  - {<<: *b, agent: da}\n", "m.yaml"
    )
    second = ok.steps[1]
    assert isinstance(second, OpStep) and (second.agent, second.args) == ("da", {"iri": "x"})
