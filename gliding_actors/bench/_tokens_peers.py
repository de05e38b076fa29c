"""One operation sequence, three systems, one estimator: the accounting of ``bench tokens``.

The same sequence of reads and writes is replayed on this project (the
deterministic simulator) and on agent-coherence with its ``lazy`` and
``eager`` strategies, and each read is charged what crossed into the
reading agent's context, by one estimator for all (:func:`estimate`:
``len(compact sorted JSON) // 4``):

* **re-send** (the baseline): every read is sent the whole value;
* **this project**: a read that missed is sent the value it returns, a hit
  (the agent holds that version: the read sent no message) nothing;
* **agent-coherence**: a read that fetched is sent the content, a hit
  nothing; under ``eager`` every write also pushes its content to each other
  agent it reaches (counted per agent, from its own audit log). Every agent
  is registered before the first operation, so a push reaches the whole team.

Writes are not charged to anyone: what a writer sends is its own output. The
fetch agent-coherence makes before a write by an agent without a valid copy
is not charged either: it does not reach the agent's context.

A read of this project is **stale** when its value differs from the last one
written to that artifact (reads and writes are sequential, so every write
before a read was acknowledged before it began).

agent-coherence's own three benchmarks, unrolled (:func:`agent_coherence_sequences`): the
planning, code-review and high-churn LangGraph graphs of its repository
(github.com/Cohexa-ai/agent-coherence, ``benchmarks/langgraph_real/``
``bench_planner.py``, ``bench_code_review.py``, ``bench_high_churn.py``,
added in commit ``185f646``, unchanged since; the figures of its README's
token table). Each graph runs its nodes in order, and each node's reads and
writes are the store calls it makes; a fake LLM's output is ``"word"``
repeated ``T * 4 // 5`` times for a nominal size ``T`` (320, 280, 250 tokens),
and every write is a whole new value. A ``setup`` agent seeds the artifact the
code-review and high-churn graphs start from.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Op", "agent_coherence_sequences", "compact_json", "estimate", "replay_agent_coherence", "replay_ours"]


@dataclass(frozen=True)
class Op:
    """One step of a sequence: ``agent`` reads ``artifact`` (``value`` None) or writes ``value`` to it."""

    agent: str
    artifact: str
    value: dict[str, Any] | None = None


def estimate(value: Any) -> int:
    """The one token estimator of the comparison: compact, key-sorted JSON, four characters a token."""
    return len(compact_json(value)) // 4


def compact_json(value: Any) -> str:
    """The text the estimator counts: compact, key-sorted JSON."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _words(tokens: int) -> str:
    """agent-coherence's fake LLM output of nominal size ``tokens``."""
    return " ".join(["word"] * (tokens * 4 // 5))


def agent_coherence_sequences() -> dict[str, list[Op]]:
    """agent-coherence's planning, code-review and high-churn benchmarks as sequences (module docstring)."""
    planning = [Op("planner", "plan", {"content": _words(320)})]
    for agent in ("researcher", "executor", "reviewer"):
        planning += [Op(agent, "plan")] * 4
    review = [Op("setup", "codebase", {"code": _words(280)})]
    review += [Op("reviewer_a", "codebase")] * 3 + [Op("reviewer_a", "review_a", {"review": _words(280)})]
    review += [Op("reviewer_b", "codebase")] * 3 + [Op("reviewer_b", "review_a")] * 2
    review += [Op("reviewer_b", "review_b", {"review": _words(280)})]
    review += [Op("synthesizer", "codebase")] * 3 + [Op("synthesizer", "review_a")] * 2
    review += [Op("synthesizer", "review_b")] * 2 + [Op("synthesizer", "final_review", {"synthesis": _words(280)})]
    churn = [Op("setup", "shared_state", {"state": _words(250), "writer": "setup"})]
    for agent in ("agent_a", "agent_b", "agent_c", "agent_d"):
        churn += [Op(agent, "shared_state")] * 2 + [Op(agent, "shared_state", {"state": _words(250), "writer": agent})]
    return {"ac_planning": planning, "ac_code_review": review, "ac_high_churn": churn}


def _agents(ops: Sequence[Op]) -> list[str]:
    return list(dict.fromkeys(op.agent for op in ops))


def replay_ours(ops: Sequence[Op], *, seed: int = 7, graph: str = "execution") -> dict[str, Any]:
    """``ops`` on a fresh memory on the simulator; what each read was sent, and what ``stats()`` counted."""
    from gliding_actors.metrics._counters import line_text
    from gliding_actors.system import MemorySystem

    reads = writes = hits = resend = sent = stale = counted_resend = 0
    last: dict[str, dict[str, Any]] = {}
    with MemorySystem.open(runtime="sim", seed=seed) as memory:
        counter = memory.counters.counter
        team = {name: memory.agent(name, "DA") for name in _agents(ops)}
        before = memory.stats()["coherence"]
        for op in ops:
            iri = f"artifact:{op.artifact}"
            if op.value is not None:
                team[op.agent].write(iri, op.value, graph=graph)
                last[iri] = op.value
                writes += 1
                continue
            result = team[op.agent].read(iri)
            value = result["value"]
            reads += 1
            resend += estimate(value)
            counted_resend += counter.count(line_text(iri, value))  # what stats() counts, by the context's counter
            if result["messages"] == 0:
                hits += 1
            else:
                sent += estimate(value)
            stale += value != last.get(iri)
        after = memory.stats()["coherence"]
    counted = {k: after[k] - before[k] for k in ("reads", "hits", "misses", "tokens_saved", "tokens_fetched")}
    return {
        "reads": reads,
        "writes": writes,
        "hits": hits,
        "misses": reads - hits,
        "resend_tokens": resend,
        "tokens": sent,
        "stale_reads": stale,
        "stats": counted,
        "counted_resend_tokens": counted_resend,
        "counter": counter.name,
    }


def replay_agent_coherence(ops: Sequence[Op], strategy: str) -> dict[str, Any]:
    """``ops`` on agent-coherence (``lazy`` or ``eager``), every agent registered first (module docstring)."""
    from ccs.adapters.base import CoherenceAdapterCore
    from ccs.coordinator.service import CrashRecoveryConfig
    from ccs.core.states import MESIState

    audit: list[dict[str, Any]] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        core = CoherenceAdapterCore(
            strategy_name=strategy,
            crash_recovery=CrashRecoveryConfig(enabled=False),  # a replay has no wall clock to time out on
            content_audit_log=audit.append,
        )
    for name in _agents(ops):
        core.register_agent(name)
    ids: dict[str, Any] = {}
    reads = hits = sent = pushed = 0
    for tick, op in enumerate(ops, start=1):
        if op.value is not None:
            if op.artifact not in ids:  # as its LangGraph store does: registered empty, then written
                ids[op.artifact] = core.register_artifact(name=op.artifact, content="").id
            seen = len(audit)
            content = compact_json(op.value)
            core.write(agent_name=op.agent, artifact_id=ids[op.artifact], content=content, now_tick=tick)
            pushes = sum(1 for record in audit[seen:] if record.get("source") == "broadcast")
            pushed += pushes
            sent += pushes * (len(content) // 4)
            continue
        entry = core.runtime(op.agent).cache.get(ids[op.artifact])
        held = entry is not None and entry.state != MESIState.INVALID
        response = core.read(agent_name=op.agent, artifact_id=ids[op.artifact], now_tick=tick)
        reads += 1
        if held:
            hits += 1
        else:
            sent += len(response.content) // 4
    return {"strategy": strategy, "reads": reads, "hits": hits, "misses": reads - hits, "pushes": pushed, "tokens": sent}
