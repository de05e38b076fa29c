"""``MemorySystem.stats()``: one plain dict of per-layer figures, read from the counters.

Reading never changes what it reads and sends no protocol message. The
only messages are one ``session`` ask per agent's L1 actor (the chain lives
in the actor), so ``stats()`` waits as any blocking call does, with the
runtime's ask timeout. L0's record count is a key-only scan of the store.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gliding_actors.errors import ActorUnavailable, GlidingError
from gliding_actors.l0 import SHARDS_DIR
from gliding_actors.l1 import session_actor_name

if TYPE_CHECKING:
    from gliding_actors.coherence._home import L2Stats
    from gliding_actors.config import Config
    from gliding_actors.l0 import L0Store
    from gliding_actors.l2._blackboard import BlackboardState
    from gliding_actors.l2._registry import LineGraphs
    from gliding_actors.metrics._counters import SystemCounters
    from gliding_actors.runtime import Runtime

__all__ = ["StatsSource", "collect"]


class _Service(Protocol):
    def stats(self) -> dict[str, Any]: ...


class StatsSource(Protocol):
    """What the figures are read from: the memory, seen through exactly what stats() needs."""

    @property
    def runtime(self) -> Runtime: ...
    @property
    def config(self) -> Config: ...
    @property
    def path(self) -> Path: ...
    @property
    def l0(self) -> L0Store: ...

    @property
    def directories(self) -> tuple[str, ...]: ...
    @property
    def counters(self) -> SystemCounters: ...
    @property
    def line_graphs(self) -> LineGraphs: ...
    @property
    def board_state(self) -> BlackboardState: ...
    @property
    def l3(self) -> _Service: ...
    @property
    def hyperspace(self) -> _Service: ...
    @property
    def context(self) -> _Service: ...

    def agents(self) -> Mapping[str, Any]: ...
    def tallies_elsewhere(self, *, timeout: float | None = None) -> dict[str, dict[str, dict[str, int]]]: ...
    def l2_stats(self, *, timeout: float | None = None) -> dict[str, L2Stats]: ...


def _disk_bytes(path: Path) -> int:
    """Bytes of every file under ``path`` (LevelDB's tables and logs): a directory walk, no read."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except OSError:  # a table compacted away between the walk and the stat
                continue
    return total


def _l1(system: StatsSource, timeout: float | None) -> dict[str, Any]:
    runtime = system.runtime
    agents = sorted(system.agents())
    asks = [runtime.lookup(session_actor_name(a)).ask({"t": "session"}) for a in agents]
    per_agent: dict[str, dict[str, int]] = {}
    for agent, ask in zip(agents, asks, strict=True):
        try:
            session = ask.get(timeout)
        except GlidingError:  # a stopped session actor: its figures are unknown, not zero
            continue
        per_agent[agent] = {
            "turns": len(session.get("turns") or []),
            "evictions": len(session.get("weak_refs") or []),
            "tokens": int(session.get("tokens") or 0),
        }
    keys = ("turns", "evictions", "tokens")
    return {"agents": per_agent, **{key: sum(a[key] for a in per_agent.values()) for key in keys}}


def _l0(system: StatsSource, timeout: float | None) -> dict[str, Any]:
    """Nodes and bytes on disk; with a sharded L0, the shards' too (each asked: it may run elsewhere)."""
    records = system.l0.count()
    folders = [system.path / "l0"]
    if system.config.l0.sharded:
        rt = system.runtime
        for ask in [rt.lookup(name).ask({"t": "l0.count"}) for name in system.directories]:
            try:
                records += int(ask.get(timeout))
            except ActorUnavailable:  # a stopped shard: its records are unknown, not zero
                continue
        folders.append(system.path / SHARDS_DIR)
    return {"records": records, "bytes": sum(_disk_bytes(folder) for folder in folders)}


def _l2(system: StatsSource, timeout: float | None) -> dict[str, Any]:
    homes = list(system.l2_stats(timeout=timeout).values())
    board = system.board_state
    locks = board.locks
    return {
        "lines": len(system.line_graphs.graphs),
        "resident": sum(h["resident"] for h in homes),
        "dirty": sum(h["dirty"] for h in homes),
        "drops": sum(h["drops"] for h in homes),
        "reloads": sum(h["reloads"] for h in homes),
        "forced_writedowns": sum(h["forced_writedowns"] for h in homes),
        "lock_waits": locks.waits_queued,
        "locks_waiting": locks.waiting,
        "locks_held": locks.held,
        "tasks": len(board.tasks),
    }


def collect(system: StatsSource, *, timeout: float | None = None) -> dict[str, Any]:
    """Every layer's figures now (see docs/METRICS.md for each key)."""
    counters = system.counters
    coherence = counters.coherence(system.tallies_elsewhere(timeout=timeout))
    l3 = system.l3.stats()
    hyperspace = system.hyperspace.stats()
    context = system.context.stats()
    return {
        "runtime": system.runtime.kind,
        "coherence": coherence,
        "l0": _l0(system, timeout),
        "l1": _l1(system, timeout),
        "l2": _l2(system, timeout),
        "l3": {
            "view_hits": int(l3["hits"]),
            "view_misses": int(l3["misses"]),
            "views": int(l3["views"]),
            "evicted": int(l3["evicted"]),
            "stale": int(l3["stale"]),
        },
        "hyperspace": {"queries": int(hyperspace["searches"]), "docs": int(hyperspace["docs"])},
        "context": {
            "assembled": int(context["assembled"]),
            "tokens_assembled": int(context["tokens_assembled"]),
            "intents": int(context["intents"]),
            "prefetched": int(context["loaded"]),
        },
        "tokens": {
            "saved": coherence["tokens_saved"],
            "fetched": coherence["tokens_fetched"],
            "naive": coherence["tokens_saved"] + coherence["tokens_fetched"],
            "saved_ratio": round(
                coherence["tokens_saved"] / (coherence["tokens_saved"] + coherence["tokens_fetched"]), 6
            )
            if coherence["tokens_saved"] + coherence["tokens_fetched"]
            else 0.0,
            "counter": counters.counter.name,
        },
    }
