"""A realistic SA/PA/DA/CA/AA task graph for the L3 tests.

Task ``task:auth-refactor`` (subtask ``task:auth-refactor/impl`` in the DAG)
worked by the whole team, each line written by the role that owns its graph
(docs/L2.md's default permissions), plus an unrelated task ``task:billing``
whose lines must never appear in an auth projection. Every line carries a
unique marker in a field no frame reads (``note``), so a test can prove no
text of a line reached a projection, and bodies (``code``, ``content``) carry
markers of their own.
"""

from __future__ import annotations

from typing import Any

from gliding_actors.agent import Agent
from gliding_actors.system import MemorySystem

TASK = "task:auth-refactor"
SUBTASK = "task:auth-refactor/impl"
OTHER = "task:billing"

CODE_MARKER = "CODEBODY-7f3a"
CONTENT_MARKER = "CONTENTBODY-19c2"


def _ref(iri: str) -> dict[str, str]:
    return {"@id": iri}


#: line IRI -> (writer role, graph, value)
LINES: dict[str, tuple[str, str, dict[str, Any]]] = {
    TASK: ("PA", "plan", {
        "@type": "Task", "summary": "switch auth to JWT (RS256)", "status": "open",
        "goal": "Replace session cookies with JWT", "constraints": "RS256; 24h expiry",
        "acceptanceCriteria": "all services verify tokens; sessions table dropped",
        "skills": _ref("skill:jwt"), "entities": _ref("entity:user-session"),
        "resources": _ref("resource:auth-repo"),
        "what": "JWT auth", "why": "cookies do not scale across services", "who": "pa, da, ca",
        "how": "middleware", "howMuch": "3 days", "note": "MARK-task",
    }),
    "step:auth/1": ("PA", "plan", {
        "@type": "Step", "task": _ref(SUBTASK), "summary": "generate the key pair", "order": 1,
        "instructions": "create an RS256 key pair and store it in the vault", "language": "python",
        "parameters": [{"name": "key_bits", "required": True, "schema": {"type": "integer", "minimum": 2048}}],
        "note": "MARK-step1",
    }),
    "step:auth/2": ("PA", "plan", {
        "@type": "Step", "task": _ref(SUBTASK), "summary": "verification middleware", "order": 2,
        "instructions": "verify the token on every request", "language": "python",
        "dependsOn": _ref("step:auth/1"), "code": f"def verify(token): ...  # {CODE_MARKER}",
        "note": "MARK-step2",
    }),
    "decision:auth/approach": ("PA", "plan", {
        "@type": "Decision", "task": _ref(TASK), "summary": "chose RS256 over HS256",
        "decision": "RS256", "reason": "services verify without the secret", "note": "MARK-approach",
    }),
    "skill:jwt": ("AA", "knowledge", {"@type": "Skill", "summary": "issuing and verifying JWTs", "note": "MARK-skill"}),
    "entity:user-session": ("AA", "knowledge", {
        "@type": "Entity", "summary": "the sessions table being retired", "note": "MARK-entity"}),
    "resource:auth-repo": ("SA", "shared", {"@type": "Resource", "summary": "the auth service repository", "note": "MARK-resource"}),
    "artifact:jwt-middleware": ("DA", "execution", {
        "@type": "Artifact", "step": _ref("step:auth/2"), "summary": "JWT verification middleware",
        "path": "auth/jwt.py", "content": f"class JwtMiddleware: ...  # {CONTENT_MARKER}", "note": "MARK-artifact",
    }),
    "error:auth/1": ("DA", "execution", {
        "@type": "Error", "step": _ref("step:auth/2"), "summary": "verification failed on clock skew",
        "errorType": "ExpiredSignatureError", "message": "token expired 3 s early", "at": 120, "note": "MARK-error",
    }),
    "change:auth/1": ("DA", "execution", {
        "@type": "Change", "changed": _ref("artifact:jwt-middleware"), "agent": "da", "at": 118,
        "summary": "allowed 5 s of clock skew", "note": "MARK-change",
    }),
    "review:jwt-1": ("CA", "review", {
        "@type": "Review", "reviews": _ref("artifact:jwt-middleware"), "summary": "middleware review",
        "verdict": "approve", "severity": "low", "suggestions": "rotate keys monthly", "note": "MARK-review",
    }),
    "decision:jwt-ship": ("AA", "decision", {
        "@type": "Decision", "task": _ref(TASK), "summary": "ship the JWT change", "decision": "ship",
        "reason": "review approved", "note": "MARK-ship",
        "options": [{"summary": "ship now"}, {"summary": "wait a sprint"}],
        "risks": [{"summary": "token theft", "severity": "medium"}],
    }),
    "status:da": ("SA", "shared", {
        "@type": "AgentStatus", "task": _ref(TASK), "agent": "da", "status": "working",
        "errorCount": 1, "note": "MARK-status",
    }),
    OTHER: ("PA", "plan", {"@type": "Task", "summary": "billing export", "goal": "CSV export", "note": "MARK-billing"}),
    "step:billing/1": ("PA", "plan", {
        "@type": "Step", "task": _ref(OTHER), "summary": "write the exporter", "instructions": "export", "note": "MARK-billing-step",
    }),
}

AGENTS = {"sa": "SA", "pa": "PA", "da": "DA", "ca": "CA", "aa": "AA"}


def build_team(memory: MemorySystem) -> dict[str, Agent]:
    """Create the agents, the DAG and every line; return the agents by id."""
    agents = {a: memory.agent(a, role) for a, role in AGENTS.items()}
    by_role = {role: agents[a] for a, role in AGENTS.items()}
    pa = agents["pa"]
    pa.create_task(TASK)
    pa.create_task(SUBTASK, parent=TASK)
    pa.create_task(OTHER)
    for iri, (role, graph, value) in LINES.items():
        by_role[role].write(iri, value, graph=graph)
    agents["da"].heartbeat("working", "implementing JWT")
    return agents


def text_of(result: dict[str, Any]) -> str:
    """A projection's JSON-LD as one string (for marker checks)."""
    import json

    return json.dumps(result["jsonld"], ensure_ascii=False)
