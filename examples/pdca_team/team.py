"""A five-agent team working one software task through a PDCA loop, offline.

SA (schedules), PA (plans), DA (does), CA (checks) and AA (decides) share one
``MemorySystem``. The team talks to its model only through the library's LLM
seam (``gliding_actors.llm``, docs/LLM.md): ``llm(messages) -> text``, then
``agent.turn_from(text)``. Here the model is scripted: ``ScriptedLLM`` answers
each call with the next canned ``{thought, content, summary}`` response from
``script.json``, so a run is deterministic and needs no network — and the
script's *content* still steers the loop (CA's "Review: FAIL" sends the team
round again; AA's "Decision: accept" ends it), the way a real model's answer
would. A real model is one line: ``PDCATeam(memory, OpenAIChat(...), task)``.

What each part of the library is used for, and why:

* ``agent.context(query, max_tokens)`` before every LLM step: the prompt the
  role would send (its L1 chain and hybrid-search hits over lines and other
  agents' archived turns, confined to what the role may read), within a token
  budget. No ``set_task``: it is not recorded, so a replayed context would
  lack the projection (docs/RECORDING.md);
* ``llm(prompt_messages(context, request, system=...))`` and
  ``agent.turn_from(reply)`` after it: the summary stays in the agent's
  context, the full thought and content go to L0;
* the task DAG: SA opens ``task:rate-limit`` with Plan → Do → Check → Act
  children (``create_task``, ``depend``, ``task_layers``); each is completed
  when its phase is done for good (Do/Check/Act only once AA accepts);
* a lock: DA holds ``repo:api`` while it changes the code (the fencing token
  goes into the artifact, so a stale writer would be visible);
* pub/sub: DA asks for a review on ``review-requests``, CA answers on
  ``reviews``, AA announces on ``decisions``;
* write-through: AA's decisions and the final contract carry the
  ``confirmed_fact`` tag, so the write returns only once L0 holds them
  (the report shows L0's version right after the write; DA's artifact, an
  ordinary write-back line, is not in L0 yet at that point).

Run it: ``python examples/pdca_team/team.py [--record trace.jsonl]``, or
``gliding-actors demo --team [--out DIR]``, which also converts the trace and
replays it, and keeps the trace, the scenario and a sequence diagram
(``team.jsonl``, ``team.yaml``, ``team.html``) in DIR (default: a new
``./gliding-team-YYYYMMDD-HHMMSS``). ``tests/examples/test_pdca_team.py`` runs
it on threads with recording on, converts the trace and replays it on the
simulator under seeds 0..19.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gliding_actors import MemorySystem, VirtualClock
from gliding_actors.agent import Agent
from gliding_actors.errors import InvalidInput
from gliding_actors.llm import LLM, Answer, prompt_messages

SCRIPT = Path(__file__).resolve().parent / "script.json"
SCRIPT_FORMAT = "gliding-actors/scripted-llm@1"
TEAM = (("sa", "SA"), ("pa", "PA"), ("da", "DA"), ("ca", "CA"), ("aa", "AA"))
#: What each role is told; the loop reads CA's and AA's content, so their prompts pin its first word.
SYSTEM = {
    "SA": "You are the team's scheduler: you open and close the task.",
    "PA": "You are the planner: write the steps of the plan.",
    "DA": "You are the developer: write the code the plan asks for.",
    "CA": "You are the reviewer: start the content with 'Review: PASS' or 'Review: FAIL', then the findings.",
    "AA": "You are the decider: start the content with 'Decision: accept' or 'Decision: revise', then why.",
}
#: The line of the system message naming the step (what ScriptedLLM checks its script against).
_STEP = re.compile(r"^Agent: (\S+)\. Step: (\S+)\.$", re.MULTILINE)
TOP = "task:rate-limit"
PHASES = ("plan", "do", "check", "act")
REPO = "repo:api"
MAX_ROUNDS = 3


@dataclass(frozen=True)
class Response:
    """One canned LLM answer: what it thought, what it produced, the one-line summary."""

    agent: str
    step: str
    thought: str
    content: str
    summary: str


class ScriptedLLM:
    """An :class:`~gliding_actors.llm.LLM` answering from a file, in order; a step it does not expect next is an error.

    The whole file is checked when it is loaded, before the team does
    anything, so a malformed script changes no memory. Each call's system
    message names the agent and the step it is for (``Agent: pa. Step:
    plan.``): a team whose control flow drifted from the script (one round
    too many, a role answering out of turn) fails loudly instead of
    replaying someone else's answer.
    """

    def __init__(self, path: str | Path = SCRIPT) -> None:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InvalidInput(f"cannot read the LLM script {path}: {exc}") from exc
        if not isinstance(data, dict) or data.get("format") != SCRIPT_FORMAT:
            raise InvalidInput(f"{path}: not a scripted-LLM file (format {SCRIPT_FORMAT!r} expected)")
        task, items = data.get("task"), data.get("responses")
        if not isinstance(task, str) or not task.strip():
            raise InvalidInput(f"{path}: 'task' is the task's text, a non-empty string")
        if not isinstance(items, list) or not items:
            raise InvalidInput(f"{path}: 'responses' is a non-empty list")
        roles = {agent for agent, _role in TEAM}
        responses: list[Response] = []
        for n, item in enumerate(items):
            keys = ("agent", "step", "thought", "content", "summary")
            if not isinstance(item, dict) or set(item) != set(keys):
                raise InvalidInput(f"{path}: response {n} must have exactly the keys {', '.join(keys)}")
            if not all(isinstance(item[k], str) and item[k].strip() for k in keys):
                raise InvalidInput(f"{path}: response {n}: every value is a non-empty string")
            if item["agent"] not in roles:
                raise InvalidInput(f"{path}: response {n}: unknown agent {item['agent']!r}")
            responses.append(Response(**{k: item[k] for k in keys}))
        self.task: str = task
        self._responses = responses
        self._next = 0

    @property
    def remaining(self) -> int:
        return len(self._responses) - self._next

    def __call__(self, messages: Sequence[Mapping[str, str]]) -> str:
        """The next response, as a model would write it, for the step the system message names."""
        named = _STEP.search(messages[0]["content"]) if messages else None
        if named is None:
            raise InvalidInput("the scripted LLM needs a system message naming 'Agent: X. Step: Y.'")
        response = self.respond(named.group(1), named.group(2))
        answer = {"thought": response.thought, "content": response.content, "summary": response.summary}
        return json.dumps(answer)

    def respond(self, agent: str, step: str) -> Response:
        """The next response, which must be ``agent``'s for ``step``."""
        if self._next >= len(self._responses):
            raise InvalidInput(f"the LLM script has no response left for {agent} {step}")
        response = self._responses[self._next]
        if (response.agent, response.step) != (agent, step):
            raise InvalidInput(
                f"the LLM script expected {response.agent} {response.step} next, the team asked for {agent} {step}"
            )
        self._next += 1
        return response


@dataclass
class TeamReport:
    """What happened, for the caller (and the test) to check."""

    rounds: int = 0
    verdicts: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    layers: list[list[str]] = field(default_factory=list)
    context_tokens: dict[str, list[int]] = field(default_factory=dict)
    lock_tokens: list[int] = field(default_factory=list)
    fact_version: int = 0
    fact_l0_version_after_write: int = 0
    artifact_l0_version_after_write: int = 0
    artifact_version_after_write: int = 0
    ready_after: dict[str, list[str]] = field(default_factory=dict)
    review_requests_seen: int = 0
    decisions_seen_by_da: list[str] = field(default_factory=list)


def _phase(name: str) -> str:
    return f"{TOP}/{name}"


def _word_after(prefix: str, content: str) -> str:
    """``"Review: FAIL - ..."`` → ``"fail"``: how the scripted content steers the loop."""
    if not content.startswith(prefix):
        raise InvalidInput(f"the LLM answered {content[:40]!r}, expected it to start with {prefix!r}")
    return content[len(prefix) :].strip().split()[0].lower()


class PDCATeam:
    """The orchestrator: one method per role step, each a context → LLM → turn → memory cycle."""

    def __init__(
        self, memory: MemorySystem, llm: LLM, task: str, *, max_tokens: int = 400, latency_s: float = 2.0
    ) -> None:
        self.memory = memory
        self.llm = llm
        self.task = task
        self.max_tokens = max_tokens
        self.latency_s = latency_s
        self.agents: dict[str, Agent] = {agent: memory.agent(agent, role) for agent, role in TEAM}
        self.report = TeamReport()

    # -- one LLM step ------------------------------------------------------------
    def step(self, agent_id: str, step: str, query: str, *, cites: Sequence[str] = ()) -> Answer:
        """Assemble the role's context, ask the LLM, record its answer as the agent's turn."""
        agent = self.agents[agent_id]
        ctx = agent.context(query, max_tokens=self.max_tokens)
        self.report.context_tokens.setdefault(agent_id, []).append(int(ctx["tokens"]))
        system = f"{SYSTEM[agent.role]}\nAgent: {agent_id}. Step: {step}."
        reply = self.llm(prompt_messages(ctx["text"], query, system=system))
        clock = self.memory.clock
        if isinstance(clock, VirtualClock):  # the model's latency, on an injected clock
            clock.advance(self.latency_s)
        recorded = agent.turn_from(reply, cites=list(cites) or None)
        return Answer(**recorded["answer"])

    # -- the loop ----------------------------------------------------------------
    def run(self) -> TeamReport:
        sa, pa, da, ca, aa = (self.agents[a] for a, _r in TEAM)
        ca.subscribe("review-requests")
        aa.subscribe("reviews")
        da.subscribe("decisions")
        sa.subscribe("decisions")
        self.kickoff(sa)
        self.plan(pa)
        for round_no in range(1, MAX_ROUNDS + 1):
            self.report.rounds = round_no
            self.do(da, round_no)
            verdict = self.check(ca, round_no)
            decision = self.act(aa, round_no, verdict)
            self.report.decisions_seen_by_da += [e["message"]["decision"] for e in da.inbox()]
            if decision == "accept":
                for phase in ("do", "check", "act"):
                    self.report.ready_after[phase] = sa.complete_task(_phase(phase))
                break
        else:
            raise InvalidInput(f"no decision to accept after {MAX_ROUNDS} rounds")
        self.close(sa)
        return self.report

    def kickoff(self, sa: Agent) -> None:
        sa.heartbeat("working", "kickoff")
        sa.write("intent:rate-limit", {"request": self.task}, tags=["user_intent"])
        sa.create_task(TOP)
        for phase in PHASES:
            sa.create_task(_phase(phase), parent=TOP)
        for before, after in zip(PHASES, PHASES[1:]):
            sa.depend(_phase(after), _phase(before))
        self.report.layers = sa.task_layers(TOP)
        self.step("sa", "kickoff", self.task, cites=["intent:rate-limit"])

    def plan(self, pa: Agent) -> None:
        response = self.step("pa", "plan", self.task, cites=["intent:rate-limit"])
        pa.write("plan:rate-limit", {"task": TOP, "steps": response.content}, graph="plan")
        self.report.ready_after["plan"] = pa.complete_task(_phase("plan"))

    def do(self, da: Agent, round_no: int) -> None:
        token = da.lock(REPO, "write", timeout_s=5.0)
        if token is None:
            raise InvalidInput(f"DA could not lock {REPO}")
        self.report.lock_tokens.append(token)
        try:
            response = self.step("da", f"do-{round_no}", "rate limiter plan and review findings",
                                 cites=["plan:rate-limit"])
            written = da.write(
                "artifact:rate-limiter",
                {"code": response.content, "round": round_no, "fence": token},
                graph="execution",
            )
            self.report.artifact_version_after_write = int(written["version"])
            # an ordinary (write-back) line: DA holds it Modified, L0 has not seen this version yet
            self.report.artifact_l0_version_after_write = self.memory.l0.retrieve_version("artifact:rate-limiter")
        finally:
            da.unlock(REPO)
        da.publish("review-requests", {"artifact": "artifact:rate-limiter", "version": written["version"],
                                       "round": round_no})

    def check(self, ca: Agent, round_no: int) -> str:
        requests = [e["message"] for e in ca.inbox()]
        self.report.review_requests_seen += len(requests)
        if not requests:
            raise InvalidInput("CA has no review request")
        artifact = ca.read(requests[-1]["artifact"])
        # Cites only lines that never change afterwards: a stale mark (a cited line
        # rewritten) reaches the chain asynchronously, so a context taken right
        # after the rewrite may or may not show it, and a replay could differ.
        response = self.step("ca", f"check-{round_no}", "review the rate limiter artifact",
                             cites=["plan:rate-limit"])
        verdict = _word_after("Review:", response.content)
        self.report.verdicts.append(verdict)
        ca.write(f"review:rate-limiter/{round_no}", {"artifact_version": artifact["version"], "verdict": verdict,
                                         "findings": response.content}, graph="review")
        ca.publish("reviews", {"review": f"review:rate-limiter/{round_no}", "verdict": verdict, "round": round_no})
        return verdict

    def act(self, aa: Agent, round_no: int, verdict: str) -> str:
        reviews = [e["message"] for e in aa.inbox()]
        if [r["verdict"] for r in reviews] != [verdict]:
            raise InvalidInput(f"AA expected one review ({verdict}), got {reviews}")
        response = self.step("aa", f"act-{round_no}", f"review verdict {verdict}: decide",
                             cites=[reviews[-1]["review"]])
        decision = _word_after("Decision:", response.content)
        self.report.decisions.append(decision)
        # A decision is a confirmed fact of the team: write-through, durable when the call returns.
        aa.write(f"decision:rate-limiter/{round_no}", {"decision": decision, "why": response.content},
                 tags=["confirmed_fact"], graph="decision")
        if decision == "accept":
            fact = aa.write("fact:rate-limit-contract", {"statement": response.content, "task": TOP},
                            tags=["confirmed_fact"], graph="knowledge")
            self.report.fact_version = int(fact["version"])
            self.report.fact_l0_version_after_write = self.memory.l0.retrieve_version("fact:rate-limit-contract")
        aa.publish("decisions", {"decision": decision, "round": round_no})
        return decision

    def close(self, sa: Agent) -> None:
        seen = [e["message"]["decision"] for e in sa.inbox()]
        if seen[-1:] != ["accept"]:
            raise InvalidInput(f"SA closes only after an accept, saw {seen}")
        self.step("sa", "close", "rate limit task status", cites=["fact:rate-limit-contract"])
        self.report.ready_after["top"] = sa.complete_task(TOP)
        sa.heartbeat("idle")


def run_team(memory: MemorySystem, script: str | Path = SCRIPT, *, max_tokens: int = 400) -> TeamReport:
    """Run the whole PDCA loop on ``memory``; the script is checked before anything is written.

    On a memory opened with a :class:`VirtualClock` each LLM step advances it
    (a fixed latency), so turns get distinct, reproducible times: a recorded
    trace then converts with exact ``advance`` steps and replays identically
    (on the system clock, sub-second gaps are dropped by the converter and the
    archive order of same-second turns would be the simulator's tie-break).
    """
    llm = ScriptedLLM(script)
    report = PDCATeam(memory, llm, llm.task, max_tokens=max_tokens).run()
    if llm.remaining:
        raise InvalidInput(f"the team finished with {llm.remaining} scripted responses unused")
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A PDCA team (SA, PA, DA, CA, AA) with a scripted LLM.")
    parser.add_argument("--memory", default=None, help="the memory's directory (default: a temporary one)")
    parser.add_argument("--record", default=None, metavar="TRACE.jsonl", help="record every agent op (docs/RECORDING.md)")
    parser.add_argument("--script", default=str(SCRIPT), help="the canned LLM responses")
    args = parser.parse_args(argv)
    with MemorySystem.open(args.memory, record=args.record, clock=VirtualClock()) as memory:
        report = run_team(memory, args.script)
    print(json.dumps(report.__dict__, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
