"""A directory (or a cache) crashed at every delivery step of one small transaction mix.

The seeded sweep (``test_faults.py``) crashes actors at random steps of long
runs; this is the small-scope check beside it: one workload whose crash-free
run passes through every directory state — a recall's and a reader's S_D, a
GetM deferred behind it, invalidations, a write-through — replayed once per
delivery step with a crash injected right there, on the same schedule. Every
op must end (a result, or the crash's typed error for an op the crashed actor
held), the directory must agree with the caches at quiescence, every agent
must then read one value, and it must be one some op wrote. A directory
crashed twice (the second during the census of the first) is checked at every
pair of steps a few deliveries apart.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gliding_actors import MemorySystem
from gliding_actors.clock import VirtualClock
from gliding_actors.coherence._hosting import cache_name
from gliding_actors.errors import ActorCrashed, GlidingError
from gliding_actors.runtime import Simulator
from gliding_actors.scenario._ops.coherence import line_disagreement
from tools.reliability._faults import _crashable

X = "plan:x"
AGENTS = (("pa", "PA"), ("da", "DA"), ("ca", "CA"))
CONFIG = {"coherence": {"critical_tags": ["confirmed_fact"]}, "runtime": {"max_restarts": 1000}}


def _sim(memory: MemorySystem) -> Simulator:
    rt = memory.runtime
    assert isinstance(rt, Simulator)
    return rt


def _run(crashes: dict[int, str]) -> tuple[int, list[str]]:
    """Run the mix with ``crashes`` (delivery step -> actor) injected; (deliveries, problems)."""
    memory = MemorySystem.open(runtime="sim", clock=VirtualClock(), seed=7, config=CONFIG)
    try:
        pa, da, ca = (memory.agent(a, r) for a, r in AGENTS)
        pa.write(X, {"v": 1})
        da.read(X)
        ca.read(X)
        pa.write(X, {"v": 2})  # pa owns it in M; every cache has talked to the directory
        memory.quiesce()
        sim = _sim(memory)
        written = [{"v": 1}, {"v": 2}, {"v": "da"}, {"v": "ca"}, {"v": "pa"}]
        ops = [
            da.submit_read(X),  # a Fwd-GetS to pa: S_D
            ca.submit_write(X, {"v": "ca"}),  # deferred behind it, then invalidates da and pa
            memory.runtime.lookup("dir:0").ask({"t": "flush", "iris": None}),  # a recall
            pa.submit_write(X, {"v": "pa"}, tags=["confirmed_fact"]),  # write-through
            da.submit_write(X, {"v": "da"}),
        ]
        start = sim.delivered
        problems: list[str] = []
        while not sim.is_quiescent():
            step = sim.delivered - start
            target = crashes.get(step)
            if target is not None:
                crashable = not target.startswith("cache:") or _crashable(
                    getattr(sim.behaviour(target), "inner", sim.behaviour(target)).controller
                )
                if crashable:
                    sim.inject(target, {"t": "crash"})
            sim.step()
        deliveries = sim.delivered - start
        for n, op in enumerate(ops):
            try:
                op.get(5.0)
            except ActorCrashed:
                pass  # the crashed actor held it (a flush's recall, or the crashed cache's own op)
            except GlidingError as exc:
                problems.append(f"op {n}: {type(exc).__name__}: {exc}")
        memory.quiesce()
        disagreement = line_disagreement(X, memory.inspect(X, timeout=5.0))
        if disagreement is not None:
            problems.append(disagreement)
        seen = [memory.agent(a, r).read(X) for a, r in AGENTS]
        values = {repr(s["value"]) for s in seen}
        if len(values) != 1 or seen[0]["value"] not in written:
            problems.append(f"after the mix the agents read {[s['value'] for s in seen]}")
        return deliveries, problems
    finally:
        memory.close(flush=False)


@pytest.fixture(scope="module")
def steps() -> int:
    deliveries, problems = _run({})
    assert problems == []
    assert deliveries > 20  # the mix really is a transaction mix
    return deliveries


def _every_step(crash: Any, steps: int) -> Iterator[tuple[int, list[str]]]:
    for step in range(steps + 1):
        yield step, _run(crash(step))[1]


def test_a_directory_crashed_at_any_step_of_the_mix_loses_no_op_and_keeps_coherence(steps: int) -> None:
    failed = [(step, problems) for step, problems in _every_step(lambda s: {s: "dir:0"}, steps) if problems]
    assert failed == []


@pytest.mark.parametrize("agent", [a for a, _r in AGENTS])
def test_a_cache_crashed_at_any_step_it_may_crash_keeps_coherence(agent: str, steps: int) -> None:
    """A cache in a state the injector still postpones (a deferred forward, waiting for a GetM's
    Data or Inv-Acks) is not crashed: those steps run crash-free."""
    name = cache_name(agent)
    failed = [(step, problems) for step, problems in _every_step(lambda s: {s: name}, steps) if problems]
    assert failed == []


def test_a_directory_crashed_again_during_its_census_at_any_pair_of_steps(steps: int) -> None:
    failed = []
    for first in range(steps + 1):
        for gap in range(1, 7):
            problems = _run({first: "dir:0", first + gap: "dir:0"})[1]
            if problems:
                failed.append((first, gap, problems))
    assert failed == []
