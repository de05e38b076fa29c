"""Breadth-first exploration of every interleaving of the real coherence controllers.

A state is a whole :class:`~coherence_harness.Net` (controllers, home, channels,
ground truth), saved with ``Net.snapshot()`` and hashed by the BLAKE2 digest of its
msgpack encoding; a successor is built by ``Net.restore()`` and one action. The
actions of a state are: deliver the head of any non-empty channel; let an agent
issue its next op, of any kind in ``kinds`` (so every program of that length is
covered, and an agent may issue its next op before the previous one completed,
which exercises the per-line op queues); optionally send one Recall.

Every reachable state is checked with ``Net.check()`` (the harness also checks
each completion as it happens), and every state with no action left must pass
``Net.check_quiescent()``: no deadlock, every op completed exactly once.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import msgpack
from coherence_harness import CRITICAL, InvariantViolation, Net

Action = tuple[Any, ...]


@dataclasses.dataclass
class Result:
    states: int
    transitions: int
    terminals: int
    violation: str | None = None
    #: Every cache and directory state seen (coverage: proves the transients were reached).
    cache_states: set[str] = dataclasses.field(default_factory=set)
    dir_states: set[str] = dataclasses.field(default_factory=set)
    trace: list[str] = dataclasses.field(default_factory=list)


def _request(net: Net, agent: str, index: int, kind: str, iri: str, op: int) -> dict[str, Any]:
    tag = f"{agent}{index}"
    if kind == "load":
        return {"t": "load", "iri": iri, "op": op}
    if kind == "store":
        return {"t": "store", "iri": iri, "op": op, "value": {"w": tag}, "tags": []}
    if kind == "store_wt":
        return {"t": "store", "iri": iri, "op": op, "value": {"w": tag}, "tags": [CRITICAL]}
    if kind == "cas":
        seen = net.seen.get((agent, iri), 0)
        return {"t": "cas", "iri": iri, "op": op, "version": seen, "value": {"w": tag}, "tags": []}
    if kind == "delete":
        return {"t": "delete", "iri": iri, "op": op}
    if kind == "evict":
        return {"t": "evict", "iri": iri, "op": op}
    raise ValueError(kind)


def explore(
    agents: Sequence[str],
    ops_per_agent: int,
    kinds: Sequence[str],
    *,
    iri: str = "urn:x",
    recalls: int = 0,
    bugs: frozenset[str] = frozenset(),
    max_states: int = 2_000_000,
    make_net: Callable[[], Net] | None = None,
) -> Result:
    """Explore every interleaving; stop at the first violation (returned, not raised)."""
    net = make_net() if make_net else Net(list(agents), bugs=bugs, check_msgpack=False)
    digest, first = _digest(net)
    parents: dict[bytes, tuple[bytes, str] | None] = {digest: None}
    frontier: deque[tuple[bytes, list[Any]]] = deque([(digest, first)])
    transitions = terminals = 0
    cache_states: set[str] = set()
    dir_states: set[str] = set()

    def result(violation: str | None = None, trace: list[str] | None = None) -> Result:
        return Result(
            len(parents),
            transitions,
            terminals,
            violation=violation,
            trace=trace or [],
            cache_states=cache_states,
            dir_states=dir_states,
        )

    def trace_to(d: bytes, last: str) -> list[str]:
        steps = [last]
        node = parents[d]
        while node is not None:
            d, step = node
            steps.append(step)
            node = parents[d]
        return list(reversed(steps))

    while frontier:
        key, snap = frontier.popleft()
        net.restore(snap)
        actions = _actions(net, agents, ops_per_agent, kinds, iri, recalls)
        if not actions:
            terminals += 1
            try:
                net.check_quiescent()
            except (InvariantViolation, AssertionError) as exc:
                return result(f"deadlock/final: {exc}", trace_to(key, "end"))
            continue
        for action in actions:
            net.restore(snap)
            label = _label(action)
            try:
                _apply(net, action, iri)
                net.check()
            except Exception as exc:  # noqa: BLE001 - a ProtocolError is as much a finding as a broken invariant
                return result(f"{type(exc).__name__}: {exc}", trace_to(key, label))
            transitions += 1
            child, child_snap = _digest(net)
            if child not in parents:
                parents[child] = (key, label)
                frontier.append((child, child_snap))
                for cache in child_snap[0]:
                    cache_states.update(line[1] for line in cache["lines"])
                for directory in child_snap[1]:
                    dir_states.update(line[1] for line in directory["lines"])
                if len(parents) > max_states:
                    raise RuntimeError(f"state space over {max_states} states")
    return result()


def _digest(net: Net) -> tuple[bytes, list[Any]]:
    snap = net.snapshot()
    return hashlib.blake2b(msgpack.packb(snap), digest_size=16).digest(), snap


def _actions(
    net: Net, agents: Sequence[str], per_agent: int, kinds: Sequence[str], iri: str, recalls: int
) -> list[Action]:
    actions: list[Action] = [("deliver", ch) for ch in net.pending_channels()]
    issued = {a: 0 for a in agents}
    for rec in net.ops.values():
        issued[rec.agent] += 1
    for i, a in enumerate(agents):
        if issued[a] < per_agent:
            for kind in kinds:
                actions.append(("issue", a, issued[a], kind, 100 * (i + 1) + issued[a]))
    if len(net.recalls) < recalls:
        actions.append(("recall",))
    return actions


def _apply(net: Net, action: Action, iri: str) -> None:
    if action[0] == "deliver":
        net.deliver(action[1])
    elif action[0] == "issue":
        _tag, agent, index, kind, op = action
        net.issue(agent, _request(net, agent, index, kind, iri, op))
    else:
        net.recall("dir", [iri])


def _label(action: Action) -> str:
    if action[0] == "deliver":
        return f"deliver {action[1][0]}->{action[1][1]}"
    if action[0] == "issue":
        return f"{action[1]} issues {action[3]} (op {action[4]})"
    return "reader recalls"
