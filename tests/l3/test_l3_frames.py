"""Each frame on the team's task graph: what each role sees, and what it does not.

The graph (tests/l3/team.py) has the task, its subtask's steps, artifacts,
errors, reviews, decisions, skills and an unrelated billing task, each line in
its owner's graph. Every assertion names IRIs or texts that are, or are not,
in the projection; the ``note`` field of every line (never selected by a
frame) proves that no frame leaks fields it does not name.
"""

from __future__ import annotations

from typing import Any

import pytest

from gliding_actors.agent import Agent
from gliding_actors.l3 import BUILTIN_FRAMES, ROLE_FRAMES
from gliding_actors.system import MemorySystem
from team import CODE_MARKER, CONTENT_MARKER, LINES, OTHER, SUBTASK, TASK, text_of


def node(result: dict[str, Any], iri: str) -> dict[str, Any]:
    for n in result["jsonld"]:
        if n.get("@id") == iri:
            return n
    raise AssertionError(f"{iri} is not a top-level node of {result['iris']}")


def no_foreign(result: dict[str, Any]) -> None:
    text = text_of(result)
    assert "MARK-" not in text  # no frame selects `note`
    assert "billing" not in text  # the other task's lines are out of scope
    assert OTHER not in result["iris"]


def test_the_nine_frames_and_the_role_table() -> None:
    assert sorted(BUILTIN_FRAMES) == sorted([
        "summary_only", "pa_init", "da_input", "ca_review", "aa_decision",
        "health_check", "error_analysis", "reference_only", "5w2h_summary",
    ])
    assert {r: ROLE_FRAMES[r] for r in ("SA", "PA", "DA", "CA", "AA")} == {
        "SA": "summary_only", "PA": "pa_init", "DA": "da_input", "CA": "ca_review", "AA": "aa_decision",
    }


def test_sa_summary_only(team: dict[str, Agent]) -> None:
    result = team["sa"].project(task=TASK)  # SA's default frame
    assert result["frame"] == "summary_only" and result["mode"] == "full" and result["cached"] is False
    # SA reads plan, knowledge, shared: the task, its steps (via the subtask), PA's decision, the status
    assert set(result["iris"]) == {TASK, "step:auth/1", "step:auth/2", "decision:auth/approach", "status:da"}
    task = node(result, TASK)
    assert task == {"@id": TASK, "@type": "Task", "summary": "switch auth to JWT (RS256)", "status": "open"}
    # not execution, review or decision lines (SA may not read them), no goals or bodies
    for hidden in ("artifact:jwt-middleware", "review:jwt-1", "decision:jwt-ship", "error:auth/1"):
        assert hidden not in text_of(result)
    assert "goal" not in text_of(result)
    no_foreign(result)


def test_pa_init(team: dict[str, Agent]) -> None:
    result = team["pa"].project(task=TASK)
    assert result["frame"] == "pa_init"
    task = node(result, TASK)
    assert task["goal"] == "Replace session cookies with JWT"
    assert task["constraints"] == "RS256; 24h expiry"
    # relevant skills, domain entities and resources, embedded with their summaries
    assert task["skills"] == {"@id": "skill:jwt", "@type": "Skill", "summary": "issuing and verifying JWTs"}
    assert task["entities"]["summary"] == "the sessions table being retired"
    assert task["resources"]["@id"] == "resource:auth-repo"
    # earlier decisions PA may read (plan), not AA's (decision graph)
    assert node(result, "decision:auth/approach")["reason"] == "services verify without the secret"
    assert "decision:jwt-ship" not in result["iris"]
    text = text_of(result)
    assert CODE_MARKER not in text and CONTENT_MARKER not in text  # no code bodies
    assert "step:auth/1" not in result["iris"]  # steps are DA's input, not PA's
    no_foreign(result)


def test_da_input(team: dict[str, Agent]) -> None:
    result = team["da"].project(task=TASK)
    assert result["frame"] == "da_input"
    assert result["iris"] == ["step:auth/1", "step:auth/2"]
    first = node(result, "step:auth/1")
    assert first["instructions"].startswith("create an RS256 key pair")
    assert first["language"] == "python"
    assert first["parameters"] == {"name": "key_bits", "required": True, "schema": {"minimum": 2048, "type": "integer"}}
    assert node(result, "step:auth/2")["dependsOn"] == {"@id": "step:auth/1"}  # a reference, not a copy
    assert CODE_MARKER in node(result, "step:auth/2")["code"]  # the doer sees the code it works on
    text = text_of(result)
    assert "verdict" not in text and "goal" not in text
    no_foreign(result)
    squeezed = team["da"].project(task=TASK, max_tokens=80)  # the code is what a tight budget drops first
    assert CODE_MARKER not in text_of(squeezed) and squeezed["iris"]


def test_ca_review_names_a_task_that_has_only_a_goal(memory: MemorySystem) -> None:
    pa, ca = memory.agent("pa", "PA"), memory.agent("ca", "CA")
    pa.create_task("task:bare")
    pa.write("task:bare", {"@type": "Task", "goal": "retire the sessions table"}, graph="plan")
    result = ca.project("ca_review", "task:bare")
    assert result["iris"] == ["task:bare"]
    assert node(result, "task:bare") == {"@id": "task:bare", "@type": "Task", "goal": "retire the sessions table"}
    pa.write("task:bare", {"@type": "Task"}, graph="plan")  # nothing but its type: still named
    assert ca.project("ca_review", "task:bare")["iris"] == ["task:bare"]


def test_ca_review(team: dict[str, Agent]) -> None:
    result = team["ca"].project(task=TASK)
    assert result["frame"] == "ca_review"
    assert set(result["iris"]) == {TASK, "artifact:jwt-middleware", "review:jwt-1"}
    assert node(result, TASK)["acceptanceCriteria"].startswith("all services verify")
    artifact = node(result, "artifact:jwt-middleware")
    assert artifact["summary"] == "JWT verification middleware" and artifact["path"] == "auth/jwt.py"
    review = node(result, "review:jwt-1")
    assert (review["verdict"], review["severity"]) == ("approve", "low")
    assert review["reviews"] == {"@id": "artifact:jwt-middleware"}
    text = text_of(result)
    assert CONTENT_MARKER not in text and CODE_MARKER not in text  # summaries, not bodies
    assert "decision:jwt-ship" not in text  # CA may not read decisions
    no_foreign(result)


def test_aa_decision(team: dict[str, Agent]) -> None:
    result = team["aa"].project(task=TASK)
    assert result["frame"] == "aa_decision"
    assert set(result["iris"]) == {"decision:auth/approach", "decision:jwt-ship", "review:jwt-1"}
    ship = node(result, "decision:jwt-ship")
    options = ship["options"] if isinstance(ship["options"], list) else [ship["options"]]
    assert sorted(o["summary"] for o in options) == ["ship now", "wait a sprint"]
    assert ship["risks"] == {"severity": "medium", "summary": "token theft"}
    review = node(result, "review:jwt-1")
    assert review["suggestions"] == "rotate keys monthly" and review["severity"] == "low"
    assert "goal" not in text_of(result)
    no_foreign(result)


def test_health_check_is_live_and_never_cached(team: dict[str, Agent]) -> None:
    sa = team["sa"]
    result = sa.project("health_check", TASK)
    da = node(result, "urn:gliding-actors:agent:da")
    assert (da["role"], da["status"], da["stale"]) == ("DA", "working", False)
    assert node(result, "status:da")["errorCount"] == 1
    statuses = {n["@id"]: n.get("taskStatus") for n in result["jsonld"]}
    assert statuses[TASK] == "pending" and statuses[SUBTASK] == "pending"
    # SA cannot read execution: the error count per task counts only what it may read
    assert node(result, SUBTASK).get("errorCount") is None
    team["da"].heartbeat("waiting")
    again = sa.project("health_check", TASK)
    assert again["cached"] is False
    assert node(again, "urn:gliding-actors:agent:da")["status"] == "waiting"
    # AA reads execution: the error (of a step of the subtask) is counted for the subtask
    counted = {n["@id"]: n.get("errorCount") for n in team["aa"].project("health_check", TASK)["jsonld"]}
    assert counted[SUBTASK] == 1 and counted[TASK] is None


def test_error_analysis(team: dict[str, Agent]) -> None:
    result = team["ca"].project("error_analysis", TASK)
    assert set(result["iris"]) >= {"error:auth/1", "change:auth/1", "step:auth/2"}
    error = node(result, "error:auth/1")
    assert (error["errorType"], error["message"], error["at"]) == ("ExpiredSignatureError", "token expired 3 s early", 120)
    assert error["step"]["summary"] == "verification middleware"  # the failing step, embedded
    change = node(result, "change:auth/1")
    assert change["changed"] == {"@id": "artifact:jwt-middleware"} and change["agent"] == "da"
    # SA may not read execution: no errors for it
    assert team["sa"].project("error_analysis", TASK)["iris"] == []
    no_foreign(result)


def test_reference_only(team: dict[str, Agent]) -> None:
    result = team["aa"].project("reference_only", TASK)
    assert all(set(n) == {"@id", "@type"} for n in result["jsonld"])
    members = {TASK, "step:auth/1", "step:auth/2", "decision:auth/approach", "decision:jwt-ship",
               "artifact:jwt-middleware", "error:auth/1", "change:auth/1", "review:jwt-1", "status:da"}
    assert set(result["iris"]) == members
    assert set(team["sa"].project("reference_only", TASK)["iris"]) == {
        TASK, "step:auth/1", "step:auth/2", "decision:auth/approach", "status:da"}


def test_5w2h_summary(team: dict[str, Agent]) -> None:
    result = team["pa"].project("5w2h_summary", TASK)
    assert result["jsonld"] == [{
        "@id": TASK, "@type": "Task", "how": "middleware", "howMuch": "3 days",
        "what": "JWT auth", "who": "pa, da, ca", "why": "cookies do not scale across services",
    }]


@pytest.mark.parametrize("frame", sorted(BUILTIN_FRAMES))
def test_every_frame_confined_for_every_role(team: dict[str, Agent], memory: MemorySystem, frame: str) -> None:
    """No frame shows, to any role, a line of a graph that role may not read."""
    for agent in team.values():
        result = agent.project(frame, TASK)
        for iri in result["iris"]:
            if iri in LINES:
                assert memory.may_read(agent.role, iri), (agent.role, frame, iri)
        text = text_of(result)
        for iri, (_role, graph, value) in LINES.items():
            if not memory.permissions.allowed(agent.role, graph, "read"):
                for field in ("summary", "message", "decision", "verdict"):
                    if field in value:
                        assert str(value[field]) not in text, (agent.role, frame, iri, field)


def test_projection_without_a_task_covers_what_the_role_reads(team: dict[str, Agent]) -> None:
    result = team["sa"].project("reference_only")
    assert OTHER in result["iris"] and TASK in result["iris"]
    assert "artifact:jwt-middleware" not in result["iris"]
