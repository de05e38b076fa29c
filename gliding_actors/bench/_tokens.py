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
text). A write is the artifact's next revision, one edit of it
(:data:`EDITS`: a step moved on, a step rewritten, a step added or dropped,
the summary reworded), as a team edits a plan between two reads; the report
gives the edits by kind (``workloads.<name>.edits``) and how much of the
artifact a revision changes (``edit_share_p50`` / ``_p90``: the changed span
of its text). Tokens are counted by
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

``workloads.<name>`` compares, on one operation sequence, what each read sent
into the agent's context under this project and under agent-coherence 0.15
(``lazy`` and ``eager``), by one estimator for both
(:mod:`gliding_actors.bench._tokens_peers`): ``saved_full``,
``saved_agent_coherence_lazy`` and ``saved_agent_coherence_eager`` (each a
fraction of re-sending every read: 0.764 is 76.4 %), ``stale_reads`` (this
project's), and the counts behind them. ``<name>``: the three workloads above
(their sequences, generated as above) and agent-coherence's own three
benchmark graphs, unrolled (``ac_planning``, ``ac_code_review``,
``ac_high_churn``).
"""

from __future__ import annotations

import os
import random
from typing import Any

from gliding_actors.bench._tokens_peers import (
    Op,
    agent_coherence_sequences,
    compact_json,
    replay_agent_coherence,
    replay_ours,
)

__all__ = ["EDITS", "PUBLISHED", "WORKLOADS", "changed_share", "edit_shares", "revise", "run", "run_workload", "workload_ops"]

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


def _step(rng: random.Random, position: int) -> dict[str, Any]:
    return {
        "@type": "Step",
        "position": position,
        "name": _sentence(rng, 3, 6),
        "text": " ".join(_sentence(rng, 8, 16) for _ in range(rng.randint(1, 3))),
        "status": rng.choice(["todo", "doing", "done"]),
    }


#: how a revision edits an artifact, and how often: what a team does to a plan or a review between
#: two reads (move a step on, rewrite one, add or drop one, reword the summary)
EDITS: tuple[tuple[str, float], ...] = (
    ("status", 0.40),
    ("step_text", 0.30),
    ("add_step", 0.10),
    ("remove_step", 0.10),
    ("description", 0.10),
)
#: a plan or review keeps between this many steps (an edit that would leave them adds or drops instead)
_STEPS = (4, 12)


def revise(rng: random.Random, value: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The next revision of ``value``: one edit drawn from :data:`EDITS`, and its name."""
    edit = rng.choices([name for name, _ in EDITS], weights=[w for _, w in EDITS])[0]
    parts = [dict(part) for part in value["hasPart"]]
    if edit == "remove_step" and len(parts) <= _STEPS[0]:
        edit = "add_step"
    elif edit == "add_step" and len(parts) >= _STEPS[1]:
        edit = "remove_step"
    if edit == "status":
        part = rng.choice(parts)
        part["status"] = rng.choice([s for s in ("todo", "doing", "done") if s != part["status"]])
    elif edit == "step_text":
        rng.choice(parts)["text"] = " ".join(_sentence(rng, 8, 16) for _ in range(rng.randint(1, 3)))
    elif edit == "add_step":
        parts.append(_step(rng, len(parts) + 1))
    elif edit == "remove_step":
        del parts[rng.randrange(len(parts))]
        for position, part in enumerate(parts, start=1):
            part["position"] = position
    revised = {**value, "revision": value["revision"] + 1, "hasPart": parts}
    if edit == "description":
        revised["description"] = " ".join(_sentence(rng, 10, 18) for _ in range(2))
    return revised, edit


def make_artifact(rng: random.Random, index: int, revision: int) -> dict[str, Any]:
    """A JSON-LD node the size of a real team artifact (a plan with steps, a review with findings)."""
    kind = _KINDS[index % len(_KINDS)]
    parts = [_step(rng, i + 1) for i in range(rng.randint(4, 9))]
    return {
        "@context": {"@vocab": "https://schema.org/"},
        "@type": kind,
        "name": f"{kind} {index}",
        "revision": revision,
        "description": " ".join(_sentence(rng, 10, 18) for _ in range(2)),
        "hasPart": parts,
    }


def workload_ops(
    name: str,
    *,
    rounds: int,
    artifacts: int = 2,
    seed: int = 7,
    edits: dict[str, int] | None = None,
) -> list[Op]:
    """The workload's sequence: each artifact written once, then ``rounds`` rounds of its reads and
    writes in a seeded order, each by a seeded agent on a seeded artifact. A write is the next
    revision of the artifact (:func:`revise`: one edit); ``edits`` counts them by kind."""
    n_agents, reads, writes = WORKLOADS[name]
    rng = random.Random(f"{name}:{seed}")
    team = [f"{name}-{i}" for i in range(n_agents)]
    names = [f"{name}-{k}" for k in range(artifacts)]
    current = {artifact: make_artifact(rng, k, 0) for k, artifact in enumerate(names)}
    ops = [Op(team[k % n_agents], artifact, current[artifact]) for k, artifact in enumerate(names)]
    for _ in range(rounds):
        kinds = ["r"] * reads + ["w"] * writes
        rng.shuffle(kinds)
        for kind in kinds:
            agent = rng.choice(team)
            artifact = rng.choice(names)
            if kind == "w":
                current[artifact], edit = revise(rng, current[artifact])
                if edits is not None:
                    edits[edit] = edits.get(edit, 0) + 1
                ops.append(Op(agent, artifact, current[artifact]))
            else:
                ops.append(Op(agent, artifact))
    return ops


def edit_shares(ops: list[Op]) -> list[float]:
    """Each revision's :func:`changed_share` against the one before it, in ``ops``' order."""
    last: dict[str, dict[str, Any]] = {}
    shares = []
    for op in ops:
        if op.value is None:
            continue
        if op.artifact in last:
            shares.append(changed_share(last[op.artifact], op.value))
        last[op.artifact] = op.value
    return shares


def changed_share(before: dict[str, Any], after: dict[str, Any]) -> float:
    """How much of an artifact a revision changes: the span between the two texts' common prefix and
    common suffix (compact sorted JSON, the revision number left out), the longer of the span removed
    and the span written, over the longer text. One edit is one contiguous span (dropping a step
    renumbers the steps after it)."""
    old = compact_json({k: v for k, v in before.items() if k != "revision"})
    new = compact_json({k: v for k, v in after.items() if k != "revision"})
    prefix = len(os.path.commonprefix([old, new]))
    suffix = len(os.path.commonprefix([old[prefix:][::-1], new[prefix:][::-1]]))
    longer = max(len(old), len(new))
    return (longer - prefix - suffix) / longer if longer else 0.0


def _saved(tokens: int, resend: int) -> float:
    return round(1.0 - tokens / resend, 4) if resend else 0.0


def compare(ops: list[Op], *, seed: int = 7) -> tuple[dict[str, Any], dict[str, Any]]:
    """``ops`` on this project and on agent-coherence lazy and eager: the ``workloads.<name>`` entry,
    and this project's replay (:func:`replay_ours`)."""
    ours = replay_ours(ops, seed=seed)
    resend = ours["resend_tokens"]
    entry: dict[str, Any] = {
        "reads": ours["reads"],
        "writes": ours["writes"],
        "agents": len({op.agent for op in ops}),
        "resend_tokens": resend,
        "full_tokens": ours["tokens"],
        "saved_full": _saved(ours["tokens"], resend),
        "hits": ours["hits"],
        "misses": ours["misses"],
        "stale_reads": ours["stale_reads"],
    }
    for strategy in ("lazy", "eager"):
        theirs = replay_agent_coherence(ops, strategy)
        entry[f"agent_coherence_{strategy}_tokens"] = theirs["tokens"]
        entry[f"saved_agent_coherence_{strategy}"] = _saved(theirs["tokens"], resend)
        entry[f"agent_coherence_{strategy}_hits"] = theirs["hits"]
        if strategy == "eager":
            entry["agent_coherence_eager_pushes"] = theirs["pushes"]
    return entry, ours


def run_workload(name: str, *, rounds: int, artifacts: int = 2, seed: int = 7) -> dict[str, Any]:
    """One workload on a fresh memory: the figures of the module docstring, and its ``workloads`` entry."""
    n_agents, reads, writes = WORKLOADS[name]
    edits: dict[str, int] = {}
    ops = workload_ops(name, rounds=rounds, artifacts=artifacts, seed=seed, edits=edits)
    compared, ours = compare(ops, seed=seed)
    shares = sorted(edit_shares(ops))
    compared["edits"] = {kind: edits.get(kind, 0) for kind, _ in EDITS}
    if shares:
        compared["edit_share_p50"] = round(shares[len(shares) // 2], 4)
        compared["edit_share_p90"] = round(shares[min(len(shares) - 1, int(0.9 * len(shares)))], 4)
    delta = ours["stats"]
    baseline = ours["counted_resend_tokens"]
    fetched = delta["tokens_fetched"]
    return {
        "agents": n_agents,
        "reads_per_round": reads,
        "writes_per_round": writes,
        "rounds": rounds,
        "artifacts": artifacts,
        "reads": ours["reads"],
        "writes": ours["writes"],
        "hits": delta["hits"],
        "misses": delta["misses"],
        "baseline_tokens": baseline,
        "ours_tokens": fetched,
        "saved_pct": round(100.0 * (1 - fetched / baseline), 1) if baseline else 0.0,
        "published_pct": round(100.0 * PUBLISHED[name], 1),
        "avg_artifact_tokens": round(baseline / ours["reads"]) if ours["reads"] else 0,
        "consistent": delta["reads"] == ours["reads"] and delta["tokens_saved"] + fetched == baseline,
        "counter": ours["counter"],
        "compared": compared,
    }


def run(quick: bool = False, *, rounds: int | None = None, seed: int = 7) -> dict[str, Any]:
    chosen = rounds if rounds is not None else (15 if quick else 60)
    report: dict[str, Any] = {"suite": "tokens", "seed": seed, "runtime": "sim"}
    workloads: dict[str, Any] = {}
    for name, ops in agent_coherence_sequences().items():
        workloads[name] = compare(ops, seed=seed)[0]
    for name in WORKLOADS:
        report[name] = run_workload(name, rounds=chosen, seed=seed)
        workloads[name] = report[name].pop("compared")
    report["workloads"] = workloads
    report["estimator"] = "len(compact sorted JSON) // 4, over what each read sent into the agent's context"
    report["summary"] = {
        name: {"ours_pct": report[name]["saved_pct"], "published_pct": report[name]["published_pct"]}
        for name in WORKLOADS
    }
    report["targets"] = {"consistent": "true (baseline measured by the bench == stats() saved + fetched)"}
    report["command"] = "gliding-actors bench tokens --json" + (" --quick" if quick else "")
    return report
