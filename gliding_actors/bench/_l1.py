"""``bench l1``: what a long session costs in context tokens, and what a turn costs in time.

One session of ``turns`` LLM turns (2,000; 300 with ``--quick``) under the
default policy with a 2,000-token budget, one turn every 30 virtual seconds.
Turn sizes are drawn, with a fixed seed, to look like an agent's turns:
``thought`` 100–300 words, ``content`` 150–600 words, ``summary`` 15–40
words, of English-like technical text (a fixed vocabulary); relevance uniform
in [0, 1]; one turn in ten a supplement. The measured token sizes are in the
report (``avg_*_tokens``), counted by ``counter`` — the cl100k_base BPE when
the ``tokens`` extra is installed, else ``estimate-v1``.

* ``tokens_full_history`` — what the whole history costs in full: every
  turn's thought and content, counted.
* ``tokens_in_chain`` — the chain's total after the last turn (summaries with
  their archive IRIs, as rendered); ``savings`` = 1 − in_chain / full_history
  (target ≥ 0.9 at a 2,000-token budget); ``chain_turns``, ``evicted``.
* ``add_turn_p50_us`` (and ``_p99_``) — one turn through the session's own
  path, without an actor hop: check, count the tokens, archive thought and
  content to a real LevelDB L0 (``expect_version=0``), append, evict.
* ``agent_turn_p50_us`` — the same turns through ``Agent.turn`` on the threads
  runtime (handle checks, one ask to the agent's session actor, the same work
  there); ``chains_agree`` says both chains ended identical.
* ``reload_p50_us`` — ``Agent.reload`` of an evicted turn (one L0 read);
  ``reloads_ok`` says every sampled evicted turn came back with its full
  thought and content.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from typing import Any

from gliding_actors.clock import VirtualClock
from gliding_actors.l0 import L0Store
from gliding_actors.l1 import EvictionPolicy, SessionActor, default_counter, reload_turn
from gliding_actors.system import MemorySystem

__all__ = ["run"]

BUDGET = 2000
STEP_S = 30.0

_WORDS = ["agent", "cache", "line", "token", "budget", "summary", "archive", "session", "turn", "plan", "review", "decision", "directory", "owner", "sharer", "write", "read", "flush", "recall", "graph", "query", "frame", "task", "lock", "lease", "heartbeat", "invalidate", "coherent", "durable", "store", "index", "version", "schema", "node", "edge", "middleware", "rotation", "signing", "expiry", "refresh", "header", "payload", "claim", "issuer", "audience", "migration", "rollback", "deploy", "pipeline", "test", "fixture", "assertion", "coverage", "failure", "retry", "timeout", "latency", "throughput", "median", "percentile", "baseline", "regression", "benchmark", "the", "a", "of", "to", "in", "for", "with", "on", "by", "from", "and", "or", "but", "not", "because", "so", "then", "when", "while", "we", "it", "this", "that", "these", "those", "is", "are", "was", "were", "be", "been", "has", "have", "had", "will", "should", "must", "function", "class", "method", "module", "package", "import", "return", "value", "error", "exception", "handler", "request", "response", "client", "server", "endpoint", "database", "table", "column", "row", "transaction", "commit", "branch", "merge", "conflict", "patch", "diff", "file", "path", "config", "option", "default", "override"]


def _text(rng: random.Random, words: int) -> str:
    out: list[str] = []
    while len(out) < words:
        sentence = [rng.choice(_WORDS) for _ in range(rng.randint(8, 20))]
        sentence[0] = sentence[0].capitalize()
        out.extend(sentence[:-1])
        out.append(sentence[-1] + ".")
    return " ".join(out[:words])


def _trace(turns: int) -> list[dict[str, Any]]:
    rng = random.Random(20240601)
    trace = []
    for n in range(turns):
        trace.append(
            {
                "t": "turn",
                "role": "assistant" if n % 3 else "user",
                "summary": _text(rng, rng.randint(15, 40)),
                "thought": _text(rng, rng.randint(100, 300)),
                "content": _text(rng, rng.randint(150, 600)),
                "relevance": round(rng.random(), 3),
                "supplement": rng.random() < 0.1,
            }
        )
    return trace


def _pct(samples: list[int], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1000.0


def run(quick: bool) -> dict[str, Any]:
    turns = 300 if quick else 2000
    trace = _trace(turns)
    counter = default_counter()
    policy = EvictionPolicy(token_budget=BUDGET)
    full = sum(counter.count(t["thought"]) + counter.count(t["content"]) for t in trace)

    # 1. the session's own path on a real L0, no actor hop
    add_ns: list[int] = []
    with tempfile.TemporaryDirectory(prefix="bench-l1-") as where:
        clock = VirtualClock()
        store = L0Store(where, clock=clock)
        try:
            actor = SessionActor(
                "bench", "DA", store=store, clock=clock, policy=policy, counter=counter
            )
            evicted = 0
            for request in trace:
                clock.advance(STEP_S)
                start = time.perf_counter_ns()
                result = actor.turn(request)
                add_ns.append(time.perf_counter_ns() - start)
                evicted += len(result["evicted"])
            direct_chain = [t.archive_iri for t in actor.session.turns]
            in_chain = actor.session.total_tokens
            chain_turns = len(direct_chain)
            reload_sample = actor.session.weak_refs[:: max(1, len(actor.session.weak_refs) // 50)]
            reloads_ok = all(
                reload_turn(store, iri)["content"] == trace[int(iri.rsplit("-", 1)[1]) - 1]["content"]
                for iri in reload_sample
            )
        finally:
            store.close()

    # 2. the same turns through Agent.turn on the threads runtime
    agent_ns: list[int] = []
    reload_ns: list[int] = []
    clock = VirtualClock()
    config = {"l1": {"token_budget": BUDGET, "counter": counter.name}}
    with MemorySystem.open(runtime="threads", clock=clock, config=config) as memory:
        da = memory.agent("bench", "DA")
        for request in trace:
            clock.advance(STEP_S)
            args = {k: v for k, v in request.items() if k != "t"}
            start = time.perf_counter_ns()
            da.turn(args.pop("summary"), **args)
            agent_ns.append(time.perf_counter_ns() - start)
        session = da.session()
        chains_agree = [t["archive_iri"] for t in session["turns"]] == direct_chain and session["tokens"] == in_chain
        for iri in session["weak_refs"][:200]:
            start = time.perf_counter_ns()
            node = da.reload(iri)
            reload_ns.append(time.perf_counter_ns() - start)
            reloads_ok = reloads_ok and node["thought"] == trace[int(iri.rsplit("-", 1)[1]) - 1]["thought"]

    return {
        "turns": turns,
        "budget": BUDGET,
        "counter": counter.name,
        "avg_thought_tokens": round(statistics.mean(counter.count(t["thought"]) for t in trace), 1),
        "avg_content_tokens": round(statistics.mean(counter.count(t["content"]) for t in trace), 1),
        "avg_summary_tokens": round(statistics.mean(counter.count(t["summary"]) for t in trace), 1),
        "tokens_full_history": full,
        "tokens_in_chain": in_chain,
        "savings": round(1.0 - in_chain / full, 4),
        "chain_turns": chain_turns,
        "evicted": evicted,
        "add_turn_p50_us": round(_pct(add_ns, 0.5), 1),
        "add_turn_p99_us": round(_pct(add_ns, 0.99), 1),
        "agent_turn_p50_us": round(_pct(agent_ns, 0.5), 1),
        "reload_p50_us": round(_pct(reload_ns, 0.5), 1) if reload_ns else None,
        "chains_agree": chains_agree,
        "reloads_ok": reloads_ok,
    }
