"""``bench tokens``: the context tokens coherence saves a team, beside agent-coherence's table.

An orchestrator without shared memory pastes the whole artifact into an
agent's prompt every time the agent reads it. With coherent caches a read
hit costs nothing (the agent already holds that version) and a changed
artifact is re-sent once to each agent that reads it after the change (the
write invalidated its copy, so its next read misses).

Three team workloads shaped like agent-coherence's published table:

=============  ======  ==============  =================
workload       agents  reads : writes  published saving
=============  ======  ==============  =================
planning       4       12 : 1          69 %
reviewing      3       8 : 3           47 %
high_churn     4       8 : 4           29 %
=============  ======  ==============  =================

Each workload runs ``rounds`` rounds on the deterministic simulator (seeded):
a round is its reads and writes in a seeded random order, each by a seeded
random agent on one of ``artifacts`` shared JSON-LD artifacts (a plan, a
design, a review...: nested nodes of 1,500–4,500 characters of technical
text; every write is a new revision of similar size). Tokens are counted by
the context layer's counter (``counter`` in the report: ``cl100k_base`` with
the ``tokens`` extra, else ``estimate-v1``), over the artifact's JSON-LD
node as the context scheduler renders it.

What is measured, not computed:

* ``ours_tokens`` — ``stats()["coherence"]["tokens_fetched"]``: the tokens of
  the copies the misses the system really took brought in (per agent, per
  version);
* ``baseline_tokens`` — the bench's own sum, over every read, of the tokens
  of the value that read returned (what re-sending would have cost); it must
  equal ``tokens_saved + tokens_fetched`` from ``stats()`` (``consistent``);
* ``misses`` / ``hits`` — from ``stats()``; ``saved_pct`` = 1 − ours / baseline.
"""

from __future__ import annotations

import random
from typing import Any

from gliding_actors.metrics._counters import line_text
from gliding_actors.system import MemorySystem

__all__ = ["PUBLISHED", "WORKLOADS", "run", "run_workload"]

#: name -> (agents, reads per round, writes per round)
WORKLOADS: dict[str, tuple[int, int, int]] = {
    "planning": (4, 12, 1),
    "reviewing": (3, 8, 3),
    "high_churn": (4, 8, 4),
}
#: agent-coherence's published savings for the same shapes
PUBLISHED: dict[str, float] = {"planning": 0.69, "reviewing": 0.47, "high_churn": 0.29}

_WORDS = (  # noqa: SIM905 - a sentence of words reads better than a 40-item literal
    "token refresh rotation revocation session cache directory invalidate owner sharer "
    "schema migration rollback index query latency budget review finding severity patch "
    "deploy canary metric alert retry backoff idempotent lease fence quorum replica "
    "snapshot compaction tombstone version conflict merge branch test coverage fixture"
).split()
_KINDS = ("Plan", "Design", "Review", "Spec", "Runbook")


def _sentence(rng: random.Random, lo: int, hi: int) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(lo, hi))]
    return " ".join(words).capitalize() + "."


def make_artifact(rng: random.Random, index: int, revision: int) -> dict[str, Any]:
    """A JSON-LD node the size of a real team artifact (a plan with steps, a review with findings)."""
    kind = _KINDS[index % len(_KINDS)]
    parts = [
        {
            "@type": "Step",
            "position": i + 1,
            "name": _sentence(rng, 3, 6),
            "text": " ".join(_sentence(rng, 8, 16) for _ in range(rng.randint(1, 3))),
            "status": rng.choice(["todo", "doing", "done"]),
        }
        for i in range(rng.randint(4, 9))
    ]
    return {
        "@context": {"@vocab": "https://schema.org/"},
        "@type": kind,
        "name": f"{kind} {index}",
        "revision": revision,
        "description": " ".join(_sentence(rng, 10, 18) for _ in range(2)),
        "hasPart": parts,
    }


def run_workload(
    name: str, *, rounds: int, artifacts: int = 2, seed: int = 7, runtime: str = "sim"
) -> dict[str, Any]:
    """One workload on a fresh memory; the figures of the module docstring."""
    n_agents, reads, writes = WORKLOADS[name]
    rng = random.Random(f"{name}:{seed}")
    with MemorySystem.open(runtime=runtime, seed=seed) as memory:
        counter = memory.counters.counter
        team = [memory.agent(f"{name}-{i}", "DA") for i in range(n_agents)]
        iris = [f"artifact:{name}-{k}" for k in range(artifacts)]
        revision = dict.fromkeys(iris, 0)
        for k, iri in enumerate(iris):  # the artifacts exist before the team starts reading
            team[k % n_agents].write(iri, make_artifact(rng, k, 0), graph="execution")
        before = memory.stats()["coherence"]
        baseline = 0
        done_reads = done_writes = 0
        for _ in range(rounds):
            ops = ["r"] * reads + ["w"] * writes
            rng.shuffle(ops)
            for op in ops:
                agent = rng.choice(team)
                iri = rng.choice(iris)
                if op == "w":
                    revision[iri] += 1
                    agent.write(iri, make_artifact(rng, iris.index(iri), revision[iri]), graph="execution")
                    done_writes += 1
                else:
                    value = agent.read(iri)["value"]
                    baseline += counter.count(line_text(iri, value))
                    done_reads += 1
        after = memory.stats()["coherence"]
    delta = {k: after[k] - before[k] for k in ("reads", "hits", "misses", "tokens_saved", "tokens_fetched")}
    ours = delta["tokens_fetched"]
    return {
        "agents": n_agents,
        "reads_per_round": reads,
        "writes_per_round": writes,
        "rounds": rounds,
        "artifacts": artifacts,
        "reads": done_reads,
        "writes": done_writes,
        "hits": delta["hits"],
        "misses": delta["misses"],
        "baseline_tokens": baseline,
        "ours_tokens": ours,
        "saved_pct": round(100.0 * (1 - ours / baseline), 1) if baseline else 0.0,
        "published_pct": round(100.0 * PUBLISHED[name], 1),
        "avg_artifact_tokens": round(baseline / done_reads) if done_reads else 0,
        "consistent": delta["reads"] == done_reads and delta["tokens_saved"] + ours == baseline,
        "counter": counter.name,
    }


def run(quick: bool = False, *, rounds: int | None = None, seed: int = 7) -> dict[str, Any]:
    chosen = rounds if rounds is not None else (15 if quick else 60)
    report: dict[str, Any] = {"suite": "tokens", "seed": seed, "runtime": "sim"}
    for name in WORKLOADS:
        report[name] = run_workload(name, rounds=chosen, seed=seed)
    report["summary"] = {
        name: {"ours_pct": report[name]["saved_pct"], "published_pct": report[name]["published_pct"]}
        for name in WORKLOADS
    }
    report["targets"] = {"consistent": "true (baseline measured by the bench == stats() saved + fetched)"}
    report["command"] = "gliding-actors bench tokens --json" + (" --quick" if quick else "")
    return report
