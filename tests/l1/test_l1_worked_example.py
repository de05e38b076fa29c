"""The seed design's worked example, on the plain Session class with a virtual clock.

Budget 200, five turns: 60 and 80 tokens relevant, a 40-token low-relevance
supplement 400 s old, 50- and 70-token low-relevance turns 600 s old. Phase 1
takes the two old low-relevance turns, the supplement stays (phase 1 spares
supplements), 180 tokens remain. With budget 150 the scoring phase then removes
the lowest-scoring turn — the supplement. Scores are checked against the
formula written out by hand, so a policy that kept low scores (the seed's
inversion) fails here.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gliding_actors.clock import VirtualClock
from gliding_actors.l1 import EvictionPolicy, Session
from gliding_actors.scenario._loader import load_scenario
from gliding_actors.scenario._replay import replay

REPO = Path(__file__).resolve().parents[2]

LOW, HIGH = 0.1, 0.9


def _five_turn_chain() -> tuple[Session, VirtualClock]:
    """The five turns at the ages of the example, under a budget they all fit."""
    clock = VirtualClock()
    session = Session("pa", policy=EvictionPolicy(token_budget=1000), clock=clock)
    session.add(seq=1, role="assistant", summary="low 50", archive_iri="memory:t/1", relevance=LOW, tokens=50)
    session.add(seq=2, role="assistant", summary="low 70", archive_iri="memory:t/2", relevance=LOW, tokens=70)
    clock.advance(200)
    session.add(
        seq=3, role="user", summary="supplement 40", archive_iri="memory:t/3", relevance=LOW, tokens=40, supplement=True
    )
    clock.advance(400)
    session.add(seq=4, role="assistant", summary="relevant 60", archive_iri="memory:t/4", relevance=HIGH, tokens=60)
    session.add(seq=5, role="assistant", summary="relevant 80", archive_iri="memory:t/5", relevance=HIGH, tokens=80)
    assert session.total_tokens == 300
    return session, clock


def test_budget_200_phase_one_evicts_the_two_old_low_relevance_turns_and_spares_the_supplement() -> None:
    session, _clock = _five_turn_chain()
    result = session.set_policy(EvictionPolicy(token_budget=200))
    assert result is not None
    assert [t.archive_iri for t in result.phase1] == ["memory:t/1", "memory:t/2"]
    assert result.phase2 == ()
    assert [t.summary for t in session.turns] == ["supplement 40", "relevant 60", "relevant 80"]
    assert session.total_tokens == 180
    assert session.weak_refs == ["memory:t/1", "memory:t/2"]


def test_budget_150_then_the_scoring_phase_removes_the_lowest_scoring_turn() -> None:
    session, _clock = _five_turn_chain()
    result = session.set_policy(EvictionPolicy(token_budget=150))
    assert result is not None
    assert [t.archive_iri for t in result.phase1] == ["memory:t/1", "memory:t/2"]
    assert [t.archive_iri for t in result.phase2] == ["memory:t/3"]
    assert session.total_tokens == 140
    assert [t.summary for t in session.turns] == ["relevant 60", "relevant 80"]
    assert session.weak_refs == ["memory:t/1", "memory:t/2", "memory:t/3"]


def test_the_scores_of_the_example_follow_the_formula_and_the_lowest_goes() -> None:
    session, clock = _five_turn_chain()
    now = clock.now()
    by_name = {t.summary: t for t in session.turns}

    def by_hand(rel: float, age: float, tokens: int) -> float:
        return 0.6 * rel + 0.4 * (0.5 / (1 + age) + 0.5 / (1 + tokens))

    supplement = session.score(by_name["supplement 40"], now)
    assert supplement == pytest.approx(by_hand(LOW, 400, 40))
    assert session.score(by_name["relevant 60"], now) == pytest.approx(by_hand(HIGH, 0, 60))
    assert session.score(by_name["relevant 80"], now) == pytest.approx(by_hand(HIGH, 0, 80))
    # high relevance keeps a turn: the supplement is the lowest of the three phase 2 sees
    assert supplement < min(session.score(by_name[n], now) for n in ("relevant 60", "relevant 80"))


def test_changing_only_the_budget_from_200_to_150_removes_exactly_the_supplement() -> None:
    session, _clock = _five_turn_chain()
    session.set_policy(EvictionPolicy(token_budget=200))
    result = session.set_policy(dataclasses.replace(session.policy, token_budget=150))
    assert result is not None and result.phase1 == ()
    assert [t.archive_iri for t in result.phase2] == ["memory:t/3"]
    assert session.total_tokens == 140


def test_the_worked_example_scenario_replays_on_many_seeds_and_on_threads() -> None:
    scenario = load_scenario(REPO / "scenarios" / "l1" / "seed_worked_example.yaml")
    for seed in range(10):
        run = replay(scenario, seed=seed)
        assert run.ok, run.failure
    threaded = replay(scenario, runtime="threads")
    assert threaded.ok, threaded.failure
