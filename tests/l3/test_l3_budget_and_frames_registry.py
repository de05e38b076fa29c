"""Budgets (full → truncated → reference, never over) and user-registered frames."""

from __future__ import annotations

from typing import Any

import pytest

from gliding_actors.agent import Agent
from gliding_actors.errors import InvalidInput
from gliding_actors.l1._tokens import EstimateCounter
from gliding_actors.l3 import BUILTIN_FRAMES, shape
from gliding_actors.l3._shape import _text
from gliding_actors.system import MemorySystem
from team import TASK

COUNTER = EstimateCounter()


def tokens(doc: Any) -> int:
    return COUNTER.count(_text(doc))


@pytest.mark.parametrize("budget", [12, 100, 1000])
@pytest.mark.parametrize("frame", sorted(BUILTIN_FRAMES))
def test_every_frame_fits_every_budget(team: dict[str, Agent], frame: str, budget: int) -> None:
    for agent in team.values():
        result = agent.project(frame, TASK, budget)
        assert result["counter"] == "estimate-v1"
        assert result["tokens"] == tokens(result["jsonld"]) <= budget
        assert result["mode"] in ("full", "truncated", "reference")
        if result["mode"] == "full":
            assert result["full_tokens"] == result["tokens"]
        else:
            assert result["full_tokens"] > budget


def test_the_three_modes_on_aa_decision(team: dict[str, Agent]) -> None:
    aa = team["aa"]
    full = aa.project("aa_decision", TASK)
    assert full["mode"] == "full" and full["tokens"] > 100
    assert aa.project("aa_decision", TASK, 1000)["mode"] == "full"
    truncated = aa.project("aa_decision", TASK, 100)
    assert truncated["mode"] == "truncated" and truncated["tokens"] <= 100
    # the frame's drop order went first: references between nodes and reasons are gone
    assert "reviews" not in _text(truncated["jsonld"]) and "reason" not in _text(truncated["jsonld"])
    tiny = aa.project("aa_decision", TASK, 12)
    assert tiny["mode"] == "reference" and tiny["tokens"] <= 12
    assert all(set(n) <= {"@id", "@type", "summary"} for n in tiny["jsonld"])


def test_shape_degrades_in_order() -> None:
    nodes = [
        {"@id": "task:a", "@type": "Task", "summary": "the task", "goal": "g" * 40, "status": "open"},
        {"@id": "step:b", "@type": "Step", "summary": "a step", "instructions": "i" * 80},
    ]
    full = shape(nodes, drop=("status", "instructions"), max_tokens=None, counter=COUNTER)
    assert full.mode == "full" and full.jsonld == nodes
    # dropping `status` alone is not enough, `instructions` too is
    fit = tokens([{k: v for k, v in n.items() if k not in ("status", "instructions")} for n in nodes])
    cut = shape(nodes, drop=("status", "instructions"), max_tokens=fit, counter=COUNTER)
    assert cut.mode == "truncated" and all("instructions" not in n and "status" not in n for n in cut.jsonld)
    assert len(cut.jsonld) == 2 and nodes[1]["instructions"] == "i" * 80  # the input is not changed
    # then nodes go, least important (last) first
    one = tokens([{k: v for k, v in nodes[0].items() if k != "status"}])
    cut = shape(nodes, drop=("status", "instructions"), max_tokens=one, counter=COUNTER)
    assert cut.mode == "truncated" and [n["@id"] for n in cut.jsonld] == ["task:a"]
    ref = shape(nodes, drop=(), max_tokens=20, counter=COUNTER)
    assert ref.mode == "reference" and ref.tokens <= 20 and ref.jsonld[0]["@id"] == "task:a"
    nothing = shape(nodes, drop=(), max_tokens=1, counter=COUNTER)
    assert nothing == (nothing.jsonld, 1, "reference", full.tokens) and nothing.jsonld == []


# -- user frames ---------------------------------------------------------------------------

GOOD_SPARQL = "CONSTRUCT { ?n ga:goal ?goal } WHERE { GRAPH l3:scope { ?n a l3:Member } ?n ga:goal ?goal }"


def test_a_user_frame_is_registered_and_used(team: dict[str, Agent], memory: MemorySystem) -> None:
    memory.l3.register_frame("goals_only", GOOD_SPARQL, {}, description="just goals", drop=("goal",))
    result = team["pa"].project("goals_only", TASK)
    assert result["jsonld"] == [{"@id": TASK, "goal": "Replace session cookies with JWT"}]
    assert team["pa"].project("goals_only", TASK)["cached"] is True


@pytest.mark.parametrize(
    ("name", "sparql", "frame", "what"),
    [
        ("bad_sparql", "CONSTRUCT { ?n ?p }", {}, "invalid SPARQL"),
        ("select", "SELECT ?n WHERE { ?n ?p ?o }", {}, "CONSTRUCT"),
        ("service", "CONSTRUCT { ?s ?p ?o } WHERE { SERVICE <http://example.org/> { ?s ?p ?o } }", {}, "SERVICE"),
        ("remote_context", GOOD_SPARQL, {"@context": "https://example.org/ctx.jsonld"}, "invalid JSON-LD frame"),
        ("bad_keyword", GOOD_SPARQL, {"@embed": "@sometimes"}, "invalid JSON-LD frame"),
        ("not_object", GOOD_SPARQL, ["x"], "object"),
        ("has space", GOOD_SPARQL, {}, "frame name"),
        ("summary_only", GOOD_SPARQL, {}, "exists already"),
    ],
)
def test_a_bad_frame_is_refused_at_registration(memory: MemorySystem, name: str, sparql: str, frame: Any, what: str) -> None:
    before = memory.l3.frames.names()
    with pytest.raises(InvalidInput, match=what):
        memory.l3.register_frame(name, sparql, frame)
    assert memory.l3.frames.names() == before
