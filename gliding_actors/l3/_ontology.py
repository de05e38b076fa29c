"""The ontology terms L3's frames read, and the L3 namespace.

Values are read with the default context (``{"@vocab": VOCAB}``, see
``docs/L2_GRAPH.md``), so a plain key ``goal`` written by any agent is the
property ``VOCAB + "goal"`` and ``"@type": "Task"`` is the class
``VOCAB + "Task"``. The frames select nodes and properties by these names,
so this table is the contract between the agents that write the blackboard
and the projections that read it: an agent that writes ``{"@type": "Review",
"verdict": "approve"}`` is seen by ``ca_review`` and ``aa_decision``.
``docs/L3.md`` prints the same table.

A second, private namespace (:data:`L3`) names what only exists inside a
projection: the markers of the task scope in the scratch store a projection
is computed on (``l3:Member``, ``l3:Root`` in graph ``l3:scope``). Agents
never see these terms and cannot write into that graph: the scratch store is
built by the worker from the lines it gathered.
"""

from __future__ import annotations

from gliding_actors.l2._jsonld import VOCAB

__all__ = ["CLASSES", "L3", "LINK_PROPERTIES", "PROPERTIES", "SCOPE_GRAPH", "term"]

#: The L3 namespace: scope markers inside a projection's scratch store only.
L3 = "https://gliding-actors.dev/l3#"
#: The named graph of the scratch store holding the scope markers.
SCOPE_GRAPH = L3 + "scope"

#: Classes the frames select by (``"@type": NAME``).
CLASSES: dict[str, str] = {
    "Task": "a unit of work; the root of a projection's scope",
    "Step": "one step of a plan (what DA executes)",
    "Artifact": "something produced: code, a document, a migration",
    "Review": "CA's check of an artifact",
    "Decision": "AA's (or PA's) decision, with its options and risks",
    "Option": "one option a decision weighed",
    "Risk": "one risk a decision or option carries",
    "Skill": "a capability an agent may use for a task",
    "Resource": "something a task may use (a repository, a service, a budget)",
    "Entity": "a domain entity the task is about (a table, an API, a user type)",
    "Error": "a failure: its type, message, time and failing step",
    "Change": "a recent change to the work (who changed what, when)",
    "AgentStatus": "an agent's reported state (status, heartbeat, error count, locks)",
    "Lock": "a lock on a resource and its holder",
}

#: Properties the frames read; plain JSON keys in values.
PROPERTIES: dict[str, str] = {
    # every node
    "summary": "one-line description of the node (what reference mode keeps)",
    "status": "the node's own status text (open, done, failed, ...)",
    # tasks (pa_init, ca_review)
    "goal": "what the task must achieve",
    "constraints": "limits the solution must respect",
    "resources": "link to a Resource the task may use",
    "skills": "link to a Skill relevant to the task",
    "entities": "link to a domain Entity the task touches",
    "acceptanceCriteria": "what a reviewer checks the result against",
    "parent": "link from a subtask to its parent task",
    "task": "link from any node to the task it belongs to",
    # steps (da_input)
    "instructions": "what the step must do",
    "parameters": "the step's parameters (nested objects: name, schema, description, required)",
    "schema": "a parameter's JSON schema",
    "dependsOn": "link to a step or task that must finish first",
    "language": "the programming language of the step",
    "order": "the step's position in its plan",
    "code": "a step's code body (da_input only: the doer's; never in pa_init or ca_review)",
    # artifacts and reviews (ca_review, aa_decision)
    "path": "where an artifact lives",
    "step": "link from an artifact or error to the step that produced it / failed",
    "content": "an artifact's body (left out of every built-in frame but 5w2h 'what')",
    "reviews": "link from a review to the artifact it checks",
    "verdict": "a review's outcome (approve, reject, changes)",
    "severity": "how serious a finding is (low, medium, high, critical)",
    "suggestions": "what a reviewer proposes",
    # decisions (pa_init, aa_decision)
    "decision": "what was decided",
    "reason": "why",
    "options": "the options weighed (links or nested Option objects)",
    "risks": "the risks seen (links or nested Risk objects)",
    # health and errors (health_check, error_analysis)
    "agent": "the agent a status, change or error is about",
    "role": "an agent's role (SA, PA, DA, CA, AA)",
    "heartbeat": "when an agent last reported (clock seconds)",
    "stale": "true when an agent missed its heartbeat deadline",
    "errorCount": "errors counted for an agent or a task",
    "holder": "the agent holding a lock",
    "resource": "what a lock is on",
    "taskStatus": "the task DAG's status of a task (pending, completed, failed)",
    "errorType": "an error's class",
    "message": "an error's message",
    "at": "when something happened (clock seconds or an ISO date)",
    "changed": "link from a Change to the node it changed",
    # 5W2H
    "what": "5W2H: what",
    "why": "5W2H: why",
    "who": "5W2H: who",
    "when": "5W2H: when",
    "where": "5W2H: where",
    "how": "5W2H: how",
    "howMuch": "5W2H: how much",
}

#: Properties that link nodes of the scope to each other: frames show them as
#: references (``{"@id": ...}``), never embedded, so no node is printed twice.
LINK_PROPERTIES: tuple[str, ...] = ("task", "parent", "dependsOn", "step", "reviews", "changed", "agent")


def term(name: str) -> str:
    """The full IRI of ontology term ``name``."""
    return VOCAB + name
