"""``bench team``: N agents of a PDCA team running the example team's op mix on threads.

The example team (``examples/pdca_team``) is five agents, one per role, and
each role step is the same cycle: take a context, "think" (the LLM), record
the turn, then act on the shared memory. This module keeps that op mix and
scales the team: agent ``i`` gets role ``ROLE_ORDER[i % 5]`` (a team of one
is a doer, of two a doer and a checker, of five the example's team) and
agents form *cells* of five that share one set of lines, the way one PDCA
team shares its plan, artifact and reviews. Every agent runs its role's
cycle in its own thread, all at once (no LLM latency: the memory is the
only thing being measured).

Role cycles (``c`` the agent's cell):

* DA: ``lock repo:c`` → ``context`` → ``turn`` → ``write artifact:c`` →
  ``unlock`` → ``publish review-requests/c`` → ``inbox``;
* CA: ``inbox`` → ``read artifact:c`` → ``context`` → ``turn`` →
  ``write review:c`` → ``publish reviews/c``;
* PA: ``read intent:c`` → ``context`` → ``turn`` → ``write plan:c``;
* AA: ``inbox`` → ``read review:c`` → ``context`` → ``turn`` →
  ``write decision:c/k`` (``confirmed_fact``: write-through) →
  ``publish decisions/c``;
* SA: ``heartbeat`` → ``read plan:c`` → ``context`` → ``turn`` →
  ``create task:c/k`` → ``complete task:c/k`` → ``inbox``.

Figures per team size, each size in a fresh process (so one size's threads,
caches and allocator state do not leak into the next one's RSS): throughput
(ops / wall time of the timed cycles), p50/p99 latency per op type (each
blocking call timed with ``time.perf_counter`` in the calling thread),
coherence protocol messages per op (``stats()["coherence"]["messages_total"]``
before and after the timed cycles, divided by the ops), and memory per agent:
the process's resident set (``/proc/self/statm``, after ``gc.collect()``)
once the memory is open and seeded, against the same after the agents were
made and ran, divided by N — it includes each agent's cache actor, L1 actor,
thread stacks touched, chain and archived turns, and (in the first agent's
share) one-off costs such as modules imported on first use; the report's
``memory_marginal_kib_per_agent`` is the slope between the smallest and the
largest team, without them.

The ``record_team`` helper drives the same cycles one op at a time (one cell
of five, a virtual clock each LLM step advances) for ``bench replay``'s trace.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gliding_actors.agent import Agent
from gliding_actors.bench._team_plots import IMG_DIR, write_plots
from gliding_actors.clock import VirtualClock
from gliding_actors.errors import InvalidInput
from gliding_actors.metrics import rss_mb
from gliding_actors.metrics._counters import percentile
from gliding_actors.system import MemorySystem

__all__ = ["QUICK_SIZES", "ROLE_ORDER", "SIZES", "record_team", "role_cycle", "run", "run_size"]

#: the role of agent i is ROLE_ORDER[i % 5]: doers first, then checkers, planners, deciders, schedulers
ROLE_ORDER: tuple[str, ...] = ("DA", "CA", "PA", "AA", "SA")
CELL = len(ROLE_ORDER)
SIZES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
QUICK_SIZES: tuple[int, ...] = (1, 2, 4, 8)
#: timed role cycles per team size (shared by the agents), so every size does about the same work
TOTAL_CYCLES = 320
QUICK_TOTAL_CYCLES = 40
MIN_CYCLES = 3
#: ops ``record_team`` makes before the first cycle (four seeding writes, four subscriptions)
SETUP_EVENTS = 8

_TEXTS: dict[str, tuple[str, str, str]] = {  # role -> (query, thought, summary) in the example's vein
    "DA": ("rate limiter plan and review findings",
           "Implement the bucket and the middleware; the plan asks for Retry-After.",
           "DA implemented TokenBucket and the middleware"),
    "CA": ("review the rate limiter artifact",
           "The 429 must carry Retry-After; refill math and tests checked.",
           "CA reviewed the rate limiter"),
    "PA": ("token bucket per client, 429 with Retry-After",
           "A token bucket per client key; refill rate and burst from config.",
           "PA planned a token-bucket limiter"),
    "AA": ("review verdict: decide",
           "A correctable defect means another round; a pass means accept.",
           "AA decided on the review"),
    "SA": ("rate limit task status",
           "Open the next task, close the finished one, watch the team.",
           "SA scheduled the next step"),
}

Timer = Callable[[str, Callable[[], Any]], Any]


def _untimed(_op: str, call: Callable[[], Any]) -> Any:
    return call()


def role_of(index: int) -> str:
    return ROLE_ORDER[index % CELL]


def seed_cells(memory: MemorySystem, cells: int) -> None:
    """Write each cell's intent, plan, artifact and review so every role's first read finds a line."""
    seeder = memory.agent("seeder", "system")
    for c in range(cells):
        seeder.write(f"intent:{c}", {"request": "Add a per-client rate limiter to the HTTP API"}, graph="shared")
        seeder.write(f"plan:{c}", {"steps": "1) TokenBucket 2) middleware 3) 429 + Retry-After"}, graph="plan")
        seeder.write(f"artifact:{c}", {"code": "class TokenBucket: ...", "round": 0}, graph="execution")
        seeder.write(f"review:{c}", {"verdict": "none", "round": 0}, graph="review")


def subscribe(agent: Agent, role: str, cell: int) -> None:
    """The example's subscriptions, per cell: CA hears review requests, AA reviews, DA and SA decisions."""
    topic = {"CA": "review-requests", "AA": "reviews", "DA": "decisions", "SA": "decisions"}.get(role)
    if topic is not None:
        agent.subscribe(f"{topic}/{cell}")


def role_cycle(
    agent: Agent, role: str, cell: int, cycle: int, timed: Timer = _untimed, think: Callable[[], object] | None = None
) -> int:
    """One cycle of ``role``'s step (module docstring); returns how many ops it made.

    ``timed(op, call)`` runs each op (the bench times it there); ``think`` runs
    between the context and the turn, where the LLM would answer (the replay
    trace advances a virtual clock there).
    """
    query, thought, summary = _TEXTS[role]
    ops = 0

    def op(name: str, call: Callable[[], Any]) -> Any:
        nonlocal ops
        ops += 1
        return timed(name, call)

    def llm_step() -> None:
        op("context", lambda: agent.context(query, max_tokens=400))
        if think is not None:
            think()
        op("turn", lambda: agent.turn(f"{summary} (cycle {cycle})", thought=thought,
                                      content=f"{role} output of cycle {cycle} in cell {cell}"))

    if role == "DA":
        op("lock", lambda: agent.lock(f"repo:{cell}", "write", timeout_s=30.0))
        try:
            llm_step()
            op("write", lambda: agent.write(f"artifact:{cell}", {"code": f"class TokenBucket: ... # v{cycle}",
                                                                 "round": cycle}, graph="execution"))
        finally:
            op("unlock", lambda: agent.unlock(f"repo:{cell}"))
        op("publish", lambda: agent.publish(f"review-requests/{cell}", {"artifact": f"artifact:{cell}", "round": cycle}))
        op("inbox", agent.inbox)
    elif role == "CA":
        op("inbox", agent.inbox)
        op("read", lambda: agent.read(f"artifact:{cell}"))
        llm_step()
        op("write", lambda: agent.write(f"review:{cell}", {"verdict": "pass" if cycle % 2 else "fail",
                                                           "round": cycle}, graph="review"))
        op("publish", lambda: agent.publish(f"reviews/{cell}", {"review": f"review:{cell}", "round": cycle}))
    elif role == "PA":
        op("read", lambda: agent.read(f"intent:{cell}"))
        llm_step()
        op("write", lambda: agent.write(f"plan:{cell}", {"steps": f"plan revision {cycle}"}, graph="plan"))
    elif role == "AA":
        op("inbox", agent.inbox)
        op("read", lambda: agent.read(f"review:{cell}"))
        llm_step()
        op("write", lambda: agent.write(f"decision:{cell}/{cycle % 4}", {"decision": "revise", "round": cycle},
                                        tags=["confirmed_fact"], graph="decision"))
        op("publish", lambda: agent.publish(f"decisions/{cell}", {"decision": "revise", "round": cycle}))
    else:  # SA
        op("heartbeat", lambda: agent.heartbeat("working", f"cycle {cycle}"))
        op("read", lambda: agent.read(f"plan:{cell}"))
        llm_step()
        task = f"task:{cell}/{agent.id}/{cycle}"
        op("task.create", lambda: agent.create_task(task))
        op("task.complete", lambda: agent.complete_task(task))
        op("inbox", agent.inbox)
    return ops


# -- bench replay's trace --------------------------------------------------------------


def record_team(
    trace: str | Path, events: int, *, latency_s: float = 2.0, config: Mapping[str, Any] | None = None
) -> int:
    """Record the example team's op mix until the trace holds ``events`` agent ops; returns the count.

    One cell of five agents on threads, driven one op at a time in role order
    DA, CA, AA, PA, SA (the example's loop), on a :class:`VirtualClock` that
    each LLM step advances by ``latency_s``: the converted scenario then
    replays exactly (docs/RECORDING.md). The seeding writes and subscriptions
    are recorded too and count as events; the last cycle stops at the op that
    would exceed the count (an op boundary: a DA cut there may still hold its
    lock when the memory closes, which the trace records as it is). ``config``:
    the memory's overrides, which the trace's header carries into the scenario.
    """
    if events < SETUP_EVENTS:
        raise InvalidInput(f"events must be at least {SETUP_EVENTS} (the seeding and subscriptions), not {events}")
    clock = VirtualClock()
    done = 0

    class _Enough(Exception):
        pass

    def counted(_op: str, call: Callable[[], Any]) -> Any:
        nonlocal done
        if done >= events:
            raise _Enough
        done += 1
        return call()

    with MemorySystem.open(config=config, record=trace, clock=clock) as memory:
        seed_cells(memory, 1)
        team = [(memory.agent(f"{role.lower()}", role), role) for role in ("DA", "CA", "AA", "PA", "SA")]
        for agent, role in team:
            subscribe(agent, role, 0)
        done = SETUP_EVENTS  # four seeding writes, four subscriptions
        cycle = 0
        try:
            while done < events:
                cycle += 1
                for agent, role in team:
                    role_cycle(agent, role, 0, cycle, counted, think=lambda: clock.advance(latency_s))
        except _Enough:
            pass
    return done


# -- one team size, measured -----------------------------------------------------------


def _rss_bytes() -> int:
    """The process's resident set now, after a full collection (``rss_mb``: ``/proc/self/statm``)."""
    gc.collect()
    return round(rss_mb() * 2**20)


def run_size(n: int, cycles: int) -> dict[str, Any]:
    """N agents, each running one untimed warm-up cycle and then ``cycles`` timed ones, all in parallel threads."""
    if n < 1 or cycles < 1:
        raise InvalidInput(f"a team needs n >= 1 agents and cycles >= 1, not n={n}, cycles={cycles}")
    cells = (n + CELL - 1) // CELL
    with MemorySystem.open() as memory:
        seed_cells(memory, cells)
        rss_before = _rss_bytes()
        team = [(memory.agent(f"{role_of(i).lower()}-{i}", role_of(i)), role_of(i), i // CELL) for i in range(n)]
        for agent, role, cell in team:
            subscribe(agent, role, cell)
        latencies: list[dict[str, list[float]]] = [{} for _ in team]
        errors: list[Exception] = []
        warmed = threading.Barrier(n + 1)
        go = threading.Event()

        def worker(k: int) -> None:
            agent, role, cell = team[k]
            mine = latencies[k]

            def timed(op: str, call: Callable[[], Any]) -> Any:
                start = time.perf_counter()
                value = call()
                mine.setdefault(op, []).append(time.perf_counter() - start)
                return value

            try:
                role_cycle(agent, role, cell, 0)  # warm-up: first misses, first archive writes
            except Exception as exc:  # noqa: BLE001 - re-raised after the join
                errors.append(exc)
            warmed.wait()
            go.wait()
            try:
                for cycle in range(1, cycles + 1):
                    role_cycle(agent, role, cell, cycle, timed)
            except Exception as exc:  # noqa: BLE001 - re-raised after the join
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(k,), name=f"team-{k}", daemon=True) for k in range(n)]
        for thread in threads:
            thread.start()
        warmed.wait()
        before = memory.stats()["coherence"]
        start = time.perf_counter()
        go.set()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - start
        if errors:
            raise errors[0]
        after = memory.stats()["coherence"]
        rss_after = _rss_bytes()
    merged: dict[str, list[float]] = {}
    for mine in latencies:
        for op, values in mine.items():
            merged.setdefault(op, []).extend(values)
    ops = sum(len(v) for v in merged.values())
    messages = after["messages_total"] - before["messages_total"]
    per_op: dict[str, dict[str, float | int]] = {}
    for op, values in sorted(merged.items()):
        values.sort()
        per_op[op] = {"count": len(values), "p50_us": round(1e6 * percentile(values, 50), 1),
                      "p99_us": round(1e6 * percentile(values, 99), 1)}
    return {
        "agents": n,
        "roles": {r: sum(1 for _a, role, _c in team if role == r) for r in ROLE_ORDER},
        "cycles_per_agent": cycles,
        "ops": ops,
        "wall_s": round(wall, 3),
        "throughput_ops_s": round(ops / wall, 1),
        "messages": messages,
        "messages_per_op": round(messages / ops, 2),
        "hit_rate": round((after["hits"] - before["hits"]) / max(1, after["reads"] - before["reads"]), 3),
        "rss_delta_bytes": rss_after - rss_before,
        "memory_per_agent_kib": round((rss_after - rss_before) / n / 1024, 1),
        "latency": per_op,
    }


def _run_size_in_child(n: int, cycles: int) -> dict[str, Any]:
    """``run_size`` in a fresh interpreter: its RSS is this size's alone."""
    code = f"import json, sys; from gliding_actors.bench._team import run_size; print(json.dumps(run_size({n}, {cycles})))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"bench team, {n} agents: the child failed:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run(
    quick: bool = False, *, sizes: Sequence[int] | None = None, total_cycles: int | None = None,
    plots: bool = True, out_dir: str | Path | None = None, in_process: bool = False,
) -> dict[str, Any]:
    """Every team size (module docstring), the figures, and the plots if matplotlib is there.

    Without matplotlib the figures are still reported and ``plots_missing``
    says what to install; the figures also go to ``<out_dir>/team.json`` so
    the plots can be drawn later from them
    (``python gliding_actors/bench/_team_plots.py docs/img/team.json``).
    ``out_dir`` defaults to ``docs/img`` for a full run; a ``quick`` run
    writes nothing unless given one (its figures are not the docs').
    """
    chosen = tuple(sizes) if sizes is not None else (QUICK_SIZES if quick else SIZES)
    total = total_cycles if total_cycles is not None else (QUICK_TOTAL_CYCLES if quick else TOTAL_CYCLES)
    if not chosen or any(n < 1 for n in chosen) or total < 1:
        raise InvalidInput(f"sizes must be positive team sizes and total_cycles >= 1, not {chosen}, {total}")
    measure = run_size if in_process else _run_size_in_child
    results = [measure(n, max(MIN_CYCLES, total // n)) for n in chosen]
    report: dict[str, Any] = {
        "suite": "team",
        "runtime": "threads",
        "cores": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "sizes": results,
        "peak_throughput_ops_s": max(r["throughput_ops_s"] for r in results),
        "peak_at_agents": max(results, key=lambda r: r["throughput_ops_s"])["agents"],
        "median_messages_per_op": statistics.median(r["messages_per_op"] for r in results),
    }
    if len(results) >= 2 and results[-1]["agents"] > results[0]["agents"]:
        # the slope between the smallest and the largest team: the first agent's RSS delta also
        # carries one-off costs (modules imported and the embedder built on first use), the slope not
        first, last = results[0], results[-1]
        slope = (last["rss_delta_bytes"] - first["rss_delta_bytes"]) / (last["agents"] - first["agents"])
        report["memory_marginal_kib_per_agent"] = round(slope / 1024, 1)
    target = out_dir if out_dir is not None else (None if quick else IMG_DIR)
    if plots and target is not None:
        out = Path(target)
        out.mkdir(parents=True, exist_ok=True)
        (out / "team.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
        try:
            report["plots"] = write_plots(report, out)
        except ImportError as exc:
            report["plots"] = []
            report["plots_missing"] = str(exc)
            print(f"bench team: {exc}", file=sys.stderr)
    return report


if __name__ == "__main__":  # pragma: no cover
    from gliding_actors.bench._team_plots import main

    raise SystemExit(main())
