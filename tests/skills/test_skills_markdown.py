"""Markdown skill files: the examples round-trip byte for byte, any node round-trips, bad files name the line."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gliding_actors.errors import InvalidInput
from gliding_actors.skills import (
    NO_INPUT,
    Skill,
    load_skill_file,
    parse_markdown,
    render_markdown,
    sign_skill,
    skill_node,
    verify_skill,
)
from skill_support import EXAMPLES, KEYRING, LEAD, rotate_node, skills


def test_there_are_examples_of_every_shape() -> None:
    nodes = [Skill.from_node(load_skill_file(path)) for path in EXAMPLES]
    assert len(nodes) >= 5
    assert {s.kind for s in nodes} == {"atomic", "composite"}
    texts = [path.read_text(encoding="utf-8") for path in EXAMPLES]
    assert any("## Parameters" in t for t in texts) and any("## Input schema" in t for t in texts)
    assert any(s.input_schema == NO_INPUT for s in nodes)  # a skill without input
    assert any(s.prerequisites and s.alternatives for s in nodes)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_file_round_trips(path: Path) -> None:
    """Round trip, defined: the file imports to a node; that node renders to the file's exact
    bytes; the rendering imports to an equal node; and so does it once signed."""
    text = path.read_text(encoding="utf-8")
    node = parse_markdown(text, path.name)
    assert render_markdown(node) == text
    assert parse_markdown(render_markdown(node)) == node
    signed = sign_skill(node, LEAD, "lead")
    back = parse_markdown(render_markdown(signed))
    assert back == signed and verify_skill(back, KEYRING) == "lead"
    # the node is exactly JSON: through json and back, nothing moves
    assert json.loads(json.dumps(node)) == node


@settings(max_examples=20)
@given(node=skills())
def test_any_markdown_friendly_node_round_trips(node: dict[str, Any]) -> None:
    text = render_markdown(node)
    assert parse_markdown(text) == node
    assert render_markdown(parse_markdown(text)) == text


@settings(max_examples=20)
@given(title=st.text(max_size=12), what=st.text(max_size=30), instructions=st.text(max_size=30))
def test_rendering_refuses_rather_than_changes_a_node(title: str, what: str, instructions: str) -> None:
    """Arbitrary text: rendering either gives the node back exactly or raises InvalidInput."""
    try:
        node = skill_node("skill:x", name="X", what=what, trigger="t", steps=[(title, instructions)])
    except InvalidInput:
        assume(False)
        return
    try:
        text = render_markdown(node)
    except InvalidInput:
        return
    assert parse_markdown(text) == node


def test_a_field_markdown_cannot_carry_is_named() -> None:
    node = rotate_node()
    node["what"] = "Fine\n## Trigger\nnot a section"
    with pytest.raises(InvalidInput, match="'what'"):
        render_markdown(node)
    node = rotate_node()
    node["steps"][0]["title"] = "a **bold** title"
    with pytest.raises(InvalidInput):
        render_markdown(node)


def test_a_schema_a_table_cannot_mean_is_written_as_a_json_block() -> None:
    node = rotate_node()  # minimum, minLength, items: not a table
    assert "## Input schema" in render_markdown(node)
    table_like = skill_node(
        "skill:t", name="T", what="w", trigger="t", steps=[("s", "")],
        input_schema={"type": "object", "properties": {"a|b": {"type": "string", "description": "x | y"}},
                      "required": ["a|b"], "additionalProperties": False},
    )
    text = render_markdown(table_like)
    assert "| a\\|b | string | yes | x \\| y |" in text
    assert parse_markdown(text) == table_like
    reordered = copy.deepcopy(table_like)
    reordered["inputSchema"]["@value"]["properties"]["c"] = {"type": "integer"}
    reordered["inputSchema"]["@value"]["required"] = ["c", "a|b"]  # not in table order
    text = render_markdown(reordered)
    assert "```json" in text and parse_markdown(text) == reordered


def test_another_layout_imports_to_the_same_node_as_the_canonical_one() -> None:
    canonical = (EXAMPLES[0].parent / "rotate-signing-keys.md").read_text(encoding="utf-8")
    loose = (
        canonical.replace("## Steps\n\n", "## Steps\n\n\n")
        .replace("\n2. ", "\n\n2. ")
        .replace("\r", "")
        .replace("\n", "\r\n")
    )
    # sections in another order
    head, links = loose.split("## Links")
    loose = head.replace("## Trigger", "## Links" + links.rstrip("\r\n") + "\r\n\r\n## Trigger")
    assert loose != canonical
    assert parse_markdown(loose) == parse_markdown(canonical)


GOOD = """---
id: skill:x
type: atomic
---

# X

What it does.

## Trigger

When needed.

## Steps

1. **One** first
2. **Two** second

## Parameters

| name | type | required | description |
| --- | --- | --- | --- |
| a | string | yes | An a. |

## Links

- prerequisite: skill:y
"""


def _line_of(text: str, needle: str) -> int:
    return text.split("\n").index(needle) + 1


@pytest.mark.parametrize(
    ("old", "new", "bad_line", "message"),
    [
        ("---\nid: skill:x", "id: skill:x", 1, "front matter"),
        ("id: skill:x", "id: not an iri", "id: not an iri", "IRI"),
        ("type: atomic", "type: molecular", "type: molecular", "type"),
        ("type: atomic", "colour: red", "colour: red", "unknown front matter key"),
        ("type: atomic", "type: composite", "type: composite", "composite"),
        ("# X", "X", "X", "'# name' heading"),
        ("## Trigger", "## Triggers", "## Triggers", "unknown section"),
        ("## Trigger\n\nWhen needed.\n", "", "# X", "Trigger"),
        ("2. **Two** second", "3. **Two** second", "3. **Two** second", "expected 2"),
        ("2. **Two** second", "2. Two second", "2. Two second", "bold"),
        ("2. **Two** second", "two second", "two second", "numbered step"),
        ("| a | string | yes | An a. |", "| a | text | yes | An a. |", "| a | string | yes | An a. |", "type is one of"),
        ("| a | string | yes | An a. |", "| a | string | maybe | An a. |", "| a | string | maybe | An a. |", "'yes' or 'no'"),
        ("| a | string | yes | An a. |", "| a | string | yes |", "| a | string | yes |", "4 cells"),
        ("| --- | --- | --- | --- |", "| - | - |", "| - | - |", "second line"),
        ("- prerequisite: skill:y", "- requires: skill:y", "- requires: skill:y", "a link is"),
        ("- prerequisite: skill:y", "- prerequisite: not an iri", "- prerequisite: not an iri", "not an IRI"),
        ("### H3", "", 1, ""),  # placeholder replaced below
    ],
)
def test_an_unconvertible_file_names_the_wrong_line(
    tmp_path: Path, old: str, new: str, bad_line: int | str, message: str
) -> None:
    if old == "### H3":
        text, bad_line, message = GOOD.replace("When needed.", "When needed.\n### H3"), "### H3", "headings"
    else:
        assert old in GOOD
        text = GOOD.replace(old, new, 1)
        if old == "| a | string | yes | An a. |" and "text" in new:
            bad_line = new
    line = bad_line if isinstance(bad_line, int) else _line_of(text, bad_line)
    path = tmp_path / "bad.md"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InvalidInput) as info:
        load_skill_file(path)
    assert str(info.value).startswith(f"{path}:{line}: "), (str(info.value), line)
    assert info.value.path == (str(path), line)
    assert message in str(info.value)


def test_json_problems_in_a_schema_block_name_their_line() -> None:
    text = GOOD.replace(
        "## Parameters\n\n| name | type | required | description |\n| --- | --- | --- | --- |\n| a | string | yes | An a. |\n",
        '## Input schema\n\n```json\n{\n  "type": "object",\n  "properties": {,}\n}\n```\n',
    )
    with pytest.raises(InvalidInput) as info:
        parse_markdown(text, "s.md")
    assert info.value.path == ("s.md", _line_of(text, '  "properties": {,}'))
    bad_schema = text.replace('"properties": {,}', '"properties": 3')
    with pytest.raises(InvalidInput, match="not a valid JSON Schema") as info:
        parse_markdown(bad_schema, "s.md")
    assert info.value.path == ("s.md", _line_of(bad_schema, "## Input schema"))
    both = GOOD + '\n## Input schema\n\n```json\n{}\n```\n'
    with pytest.raises(InvalidInput, match="not both"):
        parse_markdown(both, "s.md")


def test_json_skill_files_are_checked_with_the_path(tmp_path: Path) -> None:
    node = rotate_node()
    node["steps"][1]["order"] = 7
    path = tmp_path / "s.json"
    path.write_text(json.dumps(node), encoding="utf-8")
    with pytest.raises(InvalidInput, match=r"\$\.steps\[1\]\.order") as info:
        load_skill_file(path)
    assert info.value.path == ("steps", 1, "order")
    path.write_text("{", encoding="utf-8")
    with pytest.raises(InvalidInput, match="not JSON"):
        load_skill_file(path)
    with pytest.raises(InvalidInput, match="cannot read"):
        load_skill_file(tmp_path / "missing.md")
