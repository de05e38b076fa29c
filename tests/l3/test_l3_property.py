"""Property: no projection shows a node of a graph its role may not read, and none exceeds its budget.

Hypothesis builds random task graphs — lines in every named graph linking to
the task, to each other and to missing nodes, some nested objects — then asks
random roles for random frames at random budgets. Each line's summary is a
secret unique to it, so "not shown" is checked on the text itself, not only
on IRIs.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import pytest

from gliding_actors.l3 import BUILTIN_FRAMES
from gliding_actors.system import MemorySystem

GRAPHS = ("plan", "execution", "review", "decision", "knowledge", "shared")
TYPES = ("Task", "Step", "Artifact", "Review", "Decision", "Error", "Skill", "Option")
ROLES = ("SA", "PA", "DA", "CA", "AA")
TASK = "task:t"


@st.composite
def graphs(draw: st.DrawFn) -> list[tuple[str, str, dict[str, Any]]]:
    n = draw(st.integers(1, 9))
    iris = [f"node:n{i}" for i in range(n)]
    lines: list[tuple[str, str, dict[str, Any]]] = []
    for i, iri in enumerate(iris):
        graph = draw(st.sampled_from(GRAPHS))
        targets = draw(st.lists(st.sampled_from([TASK, "node:missing", *iris]), max_size=3))
        value: dict[str, Any] = {
            "@type": draw(st.sampled_from(TYPES)),
            "summary": f"SECRET{i}X",
            "verdict": f"VERDICT{i}X",
            "links": [{"@id": t} for t in targets],
        }
        if draw(st.booleans()):
            value["options"] = [{"summary": f"NESTED{i}X", "task": {"@id": TASK}}]
        lines.append((iri, graph, value))
    if draw(st.booleans()):
        lines.append((TASK, draw(st.sampled_from(GRAPHS)), {"@type": "Task", "summary": "TASKSECRETX"}))
    return lines


asks = st.lists(
    st.tuples(st.sampled_from(ROLES), st.sampled_from(sorted(BUILTIN_FRAMES)), st.one_of(st.none(), st.integers(1, 400))),
    min_size=1,
    max_size=6,
)


def check(lines: list[tuple[str, str, dict[str, Any]]], requests: list[tuple[str, str, int | None]]) -> None:
    with MemorySystem.open(runtime="sim", config={"l3": {"counter": "estimate-v1"}}) as memory:
        writer = memory.agent("sys", "system")
        writer.create_task(TASK)
        for iri, graph, value in lines:
            writer.write(iri, value, graph=graph)
        agents = {role: memory.agent(role.lower(), role) for role in ROLES}
        for role, frame, budget in requests:
            result = agents[role].project(frame, TASK, budget)
            text = json.dumps(result["jsonld"])
            if budget is not None:
                assert result["tokens"] <= budget
            for iri, graph, value in lines:
                if memory.permissions.allowed(role, graph, "read"):
                    continue
                assert iri not in result["iris"], (role, frame, iri, graph)
                for secret in (value["summary"], value.get("verdict")):
                    assert secret is None or secret not in text, (role, frame, iri, graph)
                for nested in value.get("options", []):
                    assert nested["summary"] not in text


@settings(max_examples=25)
@given(graphs(), asks)
def test_projections_are_confined_and_within_budget(lines: list[tuple[str, str, dict[str, Any]]], requests: list[tuple[str, str, int | None]]) -> None:
    check(lines, requests)


@pytest.mark.slow
@settings(max_examples=400)
@given(graphs(), asks)
def test_projections_are_confined_and_within_budget_long(lines: list[tuple[str, str, dict[str, Any]]], requests: list[tuple[str, str, int | None]]) -> None:
    check(lines, requests)
