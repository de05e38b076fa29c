"""``gliding-actors bench agents``: what a write costs as the team grows with agents that do nothing.

A memory is shared by many agents, most of them idle at any moment. A write
must not cost more because they exist. Two memories in one process, on the
threads runtime: one with the writing agent alone, one with the same writer
beside ``idle`` agents that only exist (each with its cache, its L1 session
with a turn, and its blackboard registration). The writer writes the same
rotating set of lines in both; writes are timed in slices that alternate
between the memories, so drift in the machine's load hits both alike.

* ``write_p50_ms_1`` / ``write_p50_ms_<N>`` — median ``Agent.write`` with 1
  and with N agents;
* ``write_p50_ratio_<N>_vs_1`` — their ratio (target at 1,000 agents: <= 1.5).

``--quick`` uses 200 agents instead of 1,000 (the figure is then
``write_p50_ratio_200_vs_1``).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from gliding_actors.agent import Agent
from gliding_actors.system import MemorySystem

__all__ = ["run"]

#: (quick, full): agents in the large memory, the writer included
AGENTS = (200, 1000)
#: lines the writer rotates over, writes per timed slice, slices per memory
LINES, PER_SLICE, SLICES = 32, 50, 12
_CONFIG = {"l1": {"counter": "estimate-v1"}, "l3": {"counter": "estimate-v1"}, "context": {"counter": "estimate-v1"}}


def _timed_writes(writer: Agent, start: int, count: int) -> list[float]:
    """``count`` writes to the rotating lines, each timed (ms)."""
    samples: list[float] = []
    for n in range(start, start + count):
        began = time.perf_counter()
        writer.write(f"bench:line-{n % LINES}", {"n": n, "summary": f"write {n}"})
        samples.append((time.perf_counter() - began) * 1000.0)
    return samples


def _team(memory: MemorySystem, idle: int, progress: Any = None) -> Agent:
    """The writer, plus ``idle`` agents that each took one turn."""
    writer = memory.agent("writer", "DA")
    for i in range(idle):
        agent = memory.agent(f"idle-{i}", ("PA", "DA", "CA", "AA", "SA")[i % 5])
        agent.turn(f"idle agent {i} looked around", tokens=5)
        if progress is not None:
            progress(i + 1)
    for n in range(LINES):  # every line in the writer's cache before timing
        writer.write(f"bench:line-{n}", {"n": n})
    return writer


def run(quick: bool = False) -> dict[str, Any]:
    """Build both memories, alternate timed slices of writes, report the medians and their ratio."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    agents = AGENTS[0 if quick else 1]
    samples: dict[str, list[float]] = {"one": [], "many": []}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ga-bench-agents-") as root:
        with MemorySystem.open(Path(root) / "one", config=_CONFIG) as one, MemorySystem.open(
            Path(root) / "many", config=_CONFIG
        ) as many:
            with Progress(
                TextColumn("{task.description:<14}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            ) as bar:
                task = bar.add_task("idle agents", total=agents - 1)
                writers = {
                    "one": _team(one, 0),
                    "many": _team(many, agents - 1, lambda done: bar.update(task, completed=done)),
                }
                built_s = time.perf_counter() - started
                timed = bar.add_task("timed writes", total=2 * SLICES * PER_SLICE)
                for s in range(SLICES):
                    order = ("one", "many") if s % 2 == 0 else ("many", "one")
                    for name in order:
                        samples[name] += _timed_writes(writers[name], s * PER_SLICE, PER_SLICE)
                        bar.advance(timed, PER_SLICE)
    one_p50, many_p50 = statistics.median(samples["one"]), statistics.median(samples["many"])
    return {
        "suite": "agents",
        "agents": agents,
        "write_p50_ms_1": round(one_p50, 4),
        f"write_p50_ms_{agents}": round(many_p50, 4),
        f"write_p50_ratio_{agents}_vs_1": round(many_p50 / one_p50, 3),
        "writes_per_memory": len(samples["one"]),
        "setup_s": round(built_s, 1),
        "total_s": round(time.perf_counter() - started, 1),
        "targets": {"write_p50_ratio_1000_vs_1": "<= 1.5"},
        "command": "gliding-actors bench agents --json" + (" --quick" if quick else ""),
    }
