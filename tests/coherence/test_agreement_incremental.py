"""The incremental directory-agreement invariant flags exactly what the every-line check flags.

Random coherence scenarios (hypothesis, a modest number of examples) replayed
on the simulator, with and without a known protocol bug switched on in the
real controllers after the first step (the mutation flags of
``test_coherence_mutations.py``). After every step both checks run: the
incremental one (registered, inspecting only the lines touched since its
last check) and :func:`agreement_everywhere` (every covered line). They must
return the same violations, every time; the bug runs must actually produce
violations for the comparison to mean something, and the incremental check
must actually have skipped lines.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mutants import cache_controller, directory_controller

from gliding_actors.runtime import Simulator
from gliding_actors.scenario import load_scenario_text, replay
from gliding_actors.scenario._invariants import invariant
from gliding_actors.scenario._ops import ReplayWorld
from gliding_actors.scenario._ops.coherence import _agreement, _AgreementLog, agreement_everywhere

NAME = "directory agreement at quiescence"
AGENTS = ("a", "b", "c")
LINES = tuple(f"doc:{k}" for k in range(4))

_op = st.tuples(st.sampled_from(("read", "write", "evict")), st.sampled_from(AGENTS), st.sampled_from(LINES))
# one op, a parallel block of two or three, or a quiesce (after which the check always runs)
_step = st.one_of(st.lists(_op, min_size=1, max_size=3), st.just([("quiesce", "", "")]))


def _scenario(steps: list[list[tuple[str, str, str]]]) -> Any:
    def one(op: str, agent: str, iri: str, k: int) -> dict[str, Any]:
        if op == "quiesce":
            return {"op": "quiesce"}
        body: dict[str, Any] = {"op": op, "agent": agent, "iri": iri}
        if op == "write":
            body.update(graph="shared", value={"by": agent, "n": k})
        return body

    # two harmless steps first: the bug goes in after the second (module docstring)
    out: list[dict[str, Any]] = [{"op": "read", "agent": a, "iri": LINES[0]} for a in ("a", "b")]
    for k, block in enumerate(steps):
        ops = [one(op, agent, iri, k) for op, agent, iri in block]
        out.append(ops[0] if len(ops) == 1 else {"parallel": ops})
    doc = {
        "format": "gliding-actors/scenario@1",
        "name": "agreement, incremental against full",
        "agents": [{"id": a, "role": "SA"} for a in AGENTS],
        "steps": out,
    }
    return load_scenario_text(json.dumps(doc), "agreement.json")


class _Both:
    """Registered under the invariant's name: runs the incremental check and the full one, keeps both."""

    def __init__(self) -> None:
        self.pairs: list[tuple[list[str], list[str]]] = []
        self.world: ReplayWorld | None = None

    def __call__(self, world: ReplayWorld) -> list[str]:
        self.world = world
        incremental = _agreement(world)
        full = agreement_everywhere(world)
        self.pairs.append((incremental, full))
        return []  # keep the run going past a violation: later checks are compared too


def _run(steps: list[list[tuple[str, str, str]]], bug: str | None, seed: int) -> _Both:
    both = _Both()

    def inject(_step: Any, _outcomes: Any) -> None:
        """After the second step (the first check has shown the world): switch the bug on in every live
        directory and cache controller."""
        world = both.world
        if bug is None or world is None or world.state.get("bug_on"):
            return
        world.state["bug_on"] = True
        rt = world.system.runtime
        assert isinstance(rt, Simulator)
        for name in [*world.system.directories, *(f"cache:{a}" for a in AGENTS)]:
            actor = rt.behaviour(name)
            actor = getattr(actor, "inner", actor)  # under its supervision wrapper
            # the live controller becomes its mutant: same state, the bug's code from now on
            mutant = cache_controller if name.startswith("cache:") else directory_controller
            actor.controller.__class__ = mutant(frozenset({bug}))

    invariant(NAME)(both)
    try:
        replay(_scenario(steps), seed=seed, runtime="sim", on_step=inject)
    finally:
        invariant(NAME)(_agreement)
    return both


def _compare(both: _Both) -> None:
    assert both.pairs, "the invariant never ran"
    for k, (incremental, full) in enumerate(both.pairs):
        assert incremental == full, f"check {k}: incremental {incremental} but full {full}"


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(steps=st.lists(_step, min_size=4, max_size=14), seed=st.integers(0, 2**16))
def test_incremental_and_full_agree_on_a_correct_protocol(steps: list[list[tuple[str, str, str]]], seed: int) -> None:
    both = _run(steps, None, seed)
    _compare(both)
    assert all(not full for _inc, full in both.pairs)  # the control: a correct protocol passes both


@pytest.mark.parametrize("bug", ["gets_from_memory", "ignore_acks", "accept_stale_putm"])
def test_incremental_flags_what_full_flags_under_an_injected_bug(bug: str) -> None:
    flagged = 0
    for seed in range(10):  # seeded schedules of a contended pair of lines
        rnd = random.Random(seed)
        steps = [
            [(rnd.choice(("read", "write", "write", "evict")), rnd.choice(AGENTS), rnd.choice(LINES[:2]))
             for _ in range(rnd.randint(1, 3))]
            for _ in range(12)
        ]
        both = _run(steps, bug, seed)
        _compare(both)
        flagged += sum(1 for _inc, full in both.pairs if full)
    if bug == "gets_from_memory":
        # it leaves a directory in S while the owner still holds M: the comparison above was not vacuous
        assert flagged > 0, f"{bug} was never flagged: the comparison proved nothing"


def test_the_incremental_check_really_skips_untouched_lines() -> None:
    # every line written, then quiet reads of one line, each followed by a quiesce (a check that runs)
    steps = [[("write", agent, iri)] for iri in LINES for agent in AGENTS] + [[("quiesce", "", "")]]
    steps += [[("read", "a", LINES[0])], [("quiesce", "", "")]] * 4
    both = _run(steps, None, 0)
    _compare(both)
    assert both.world is not None
    log: _AgreementLog = both.world.state["agreement"]
    assert log.incremental_checks > 0
    assert log.lines_inspected < log.lines_covered  # fewer lines than the full check inspected
