"""Role projections: SA/PA/DA show what they should, and never exceed their token budgets."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gliding_actors.errors import InvalidInput
from gliding_actors.l1 import get_counter
from gliding_actors.skills import BUDGETS, load_skill_file, project_skill, sign_skill, skill_node
from skill_support import EXAMPLES, LEAD, rotate_node

COUNTER = get_counter("estimate-v1")


def _tokens(view: Any) -> int:
    return COUNTER.count(json.dumps(view, ensure_ascii=False, separators=(",", ":")))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_skills_fit_every_role_in_full(path: Any) -> None:
    node = sign_skill(load_skill_file(path), LEAD, "lead")
    for level, budget in BUDGETS.items():
        view = project_skill(node, level, counter=COUNTER)
        assert view["mode"] == "full", (level, view["full_tokens"])
        assert view["tokens"] == _tokens(view["jsonld"]) <= budget == view["max_tokens"]
        assert view["counter"] == "estimate-v1" and view["level"] == level
        assert node["signature"]["value"] not in json.dumps(view["jsonld"])  # for the guard, not the prompt


def test_each_level_shows_its_resolution() -> None:
    node = rotate_node()
    sa = project_skill(node, "SA", counter=COUNTER)["jsonld"]
    assert set(sa) == {"@id", "@type", "name", "what", "trigger"} and sa["@type"] == "AtomicSkill"
    pa = project_skill(node, "PA", counter=COUNTER)["jsonld"]
    assert pa["steps"] == ["1. Generate", "2. Publish", "3. Switch"]  # an overview: titles only
    assert pa["parameters"] == ["service*", "ttl", "tags", "dry_run"]
    assert pa["prerequisite"] == ["skill:keygen"] and pa["alternative"] == ["skill:revoke", "skill:reissue"]
    assert "inputSchema" not in pa and "Make a new pair." not in json.dumps(pa)
    da = project_skill(node, "DA", counter=COUNTER)["jsonld"]
    assert da["steps"][1] == {"order": 2, "title": "Publish", "instructions": "Add it to the JWKS.\nWait max-age."}
    assert da["inputSchema"] == node["inputSchema"]["@value"]
    one = project_skill(node, "DA", step=2, counter=COUNTER)["jsonld"]
    assert [s["order"] for s in one["steps"]] == [2] and one["stepCount"] == 3
    # roles map to levels; level= overrides
    assert project_skill(node, "CA", counter=COUNTER)["level"] == "PA"
    assert project_skill(node, "system", counter=COUNTER)["level"] == "DA"
    assert project_skill(node, "SA", level="DA", counter=COUNTER)["level"] == "DA"


def _huge(steps: int, width: int, properties: int) -> dict[str, Any]:
    words = ("rotate the key and publish it to every verifier " * (width // 48 + 1))[:width].strip() or "w"
    return skill_node(
        "skill:huge",
        name="Huge " + words[:60].strip(),
        what=words,
        trigger=words,
        steps=[(f"Step {i} {words[:30].strip()}", words) for i in range(steps)],
        input_schema={
            "type": "object",
            "properties": {f"p{i}": {"type": "string", "description": words, "enum": ["a", "b"]}
                           for i in range(properties)},
        },
        prerequisites=[f"skill:pre-{i}" for i in range(steps)],
        alternatives=[f"skill:alt-{i}" for i in range(steps)],
    )


@settings(max_examples=40)
@given(
    steps=st.integers(1, 40),
    width=st.integers(1, 3000),
    properties=st.integers(0, 30),
    role=st.sampled_from(["SA", "PA", "DA", "CA", "AA", "system"]),
    budget=st.one_of(st.none(), st.integers(1, 2500)),
)
def test_a_projection_never_exceeds_its_budget(
    steps: int, width: int, properties: int, role: str, budget: int | None
) -> None:
    node = _huge(steps, width, properties)
    view = project_skill(node, role, max_tokens=budget, counter=COUNTER)
    limit = BUDGETS[view["level"]] if budget is None else budget
    assert view["tokens"] == _tokens(view["jsonld"]) <= limit
    if view["mode"] != "reference":
        assert view["jsonld"]["@id"] == "skill:huge"
    if view["mode"] == "truncated" and "inputSchema" in view["jsonld"]:
        # schema structure is never cut: only its prose
        schema = view["jsonld"]["inputSchema"]
        assert all(p["enum"] == ["a", "b"] and p["type"] == "string" for p in schema["properties"].values())


def test_degradation_keeps_the_most_important_parts() -> None:
    node = _huge(20, 2000, 10)
    sa = project_skill(node, "SA", counter=COUNTER)
    assert sa["mode"] == "truncated" and sa["tokens"] <= 200
    assert set(sa["jsonld"]) == {"@id", "@type", "name", "what", "trigger"}
    assert sa["jsonld"]["what"].endswith("…")
    tiny = project_skill(node, "DA", max_tokens=12, counter=COUNTER)
    assert tiny["mode"] == "reference" and tiny["tokens"] <= 12
    assert project_skill(node, "DA", max_tokens=1, counter=COUNTER)["jsonld"] == {}


def test_bad_arguments_are_refused() -> None:
    node = rotate_node()
    for kwargs in ({"max_tokens": 0}, {"max_tokens": True}, {"level": "XX"}, {"step": 4}, {"step": 0}):
        with pytest.raises(InvalidInput):
            project_skill(node, "DA", counter=COUNTER, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="step"):
        project_skill(node, "PA", step=1, counter=COUNTER)
    with pytest.raises(InvalidInput, match="role"):
        project_skill(node, "boss", counter=COUNTER)
    with pytest.raises(InvalidInput):
        project_skill({"@id": "skill:x"}, "SA", counter=COUNTER)


def test_the_default_counter_is_the_librarys() -> None:
    view = project_skill(rotate_node(), "PA")
    assert view["counter"] in ("estimate-v1", "cl100k_base") and view["tokens"] <= 500
