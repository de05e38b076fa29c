"""The plain Session class: validation, the two phases' edges, queries, staleness, rendering."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest

from gliding_actors.clock import VirtualClock
from gliding_actors.errors import EmbeddingError, InvalidInput
from gliding_actors.l1 import (
    DEFAULT_RELEVANCE,
    EstimateCounter,
    EvictionPolicy,
    Session,
    render_turn,
)


def _session(budget: int = 100, **policy: Any) -> tuple[Session, VirtualClock]:
    clock = VirtualClock(1000.0)
    return Session("da", policy=EvictionPolicy(token_budget=budget, **policy), clock=clock, counter=EstimateCounter()), clock


_n = 0


def _add(session: Session, tokens: int, relevance: float = 0.5, **kw: Any) -> Any:
    global _n
    _n += 1
    return session.add(
        seq=_n, role="assistant", summary=kw.pop("summary", f"turn {_n}"), archive_iri=f"memory:x/{_n}",
        tokens=tokens, relevance=relevance, **kw,
    )


def _state(session: Session) -> Any:
    return (session.snapshot(), session.messages(), session.total_tokens)


@pytest.mark.parametrize(
    "bad",
    [
        {"summary": ""},
        {"summary": 3},
        {"role": ""},
        {"relevance": 1.5},
        {"relevance": True},
        {"tokens": -1},
        {"tokens": 2.5},
        {"supplement": "yes"},
        {"archive_iri": "not an iri"},
        {"embedding": []},
        {"embedding": [1.0, float("nan")]},
        {"cites": "plan:x"},
        {"cites": ["bad iri"]},
        {"cites": {"plan:x": -2}},
        {"seq": 0},
    ],
)
def test_bad_turns_are_refused_and_change_nothing(bad: dict[str, Any]) -> None:
    session, _ = _session()
    _add(session, 10)
    before = _state(session)
    args: dict[str, Any] = {"seq": 99, "role": "assistant", "summary": "ok", "archive_iri": "memory:x/new", **bad}
    with pytest.raises(InvalidInput):
        session.add(**args)
    assert _state(session) == before


def test_an_archive_iri_is_used_once_per_session() -> None:
    session, _ = _session()
    first = _add(session, 10)
    with pytest.raises(InvalidInput, match="already used"):
        session.add(seq=50, role="assistant", summary="again", archive_iri=first.turn.archive_iri, tokens=1)


def test_no_eviction_while_the_total_fits_the_budget_exactly() -> None:
    session, _ = _session(budget=30)
    for _ in range(3):
        assert _add(session, 10, relevance=0.0).evicted == []
    assert session.total_tokens == 30


def test_phase_one_needs_both_low_relevance_and_an_age_past_the_safe_window() -> None:
    session, clock = _session(budget=25, relevance_threshold=0.3, safe_window_s=300)
    old_low = _add(session, 10, relevance=0.29)
    tiny_low = _add(session, 1, relevance=0.1)
    clock.advance(1)
    at_threshold = _add(session, 10, relevance=0.3)  # not below the threshold
    clock.advance(299)  # the low turns are now exactly 300 s old: not older than the window
    result = _add(session, 5, relevance=0.9)  # 26 > 25
    assert result.phase1 == ()
    # phase 2 took the lowest score instead: the least relevant turn
    assert [t.archive_iri for t in result.phase2] == [tiny_low.turn.archive_iri]
    clock.advance(1)  # one second later old_low is past the window; at_threshold never qualifies
    result = _add(session, 1, relevance=0.9)  # 26 > 25 again
    assert [t.archive_iri for t in result.phase1] == [old_low.turn.archive_iri]
    assert result.phase2 == ()
    assert at_threshold.turn.archive_iri in [t.archive_iri for t in session.turns]


def test_phase_one_takes_every_qualifying_turn_even_past_the_point_where_the_chain_fits() -> None:
    session, clock = _session(budget=100)
    a = _add(session, 30, relevance=0.1)
    b = _add(session, 30, relevance=0.1)
    clock.advance(301)
    result = _add(session, 41, relevance=0.9)  # 101 > 100: one eviction would do, phase 1 takes both
    assert [t.archive_iri for t in result.phase1] == [a.turn.archive_iri, b.turn.archive_iri]
    assert session.total_tokens == 41


def test_supplements_are_spared_by_phase_one_but_not_by_phase_two() -> None:
    session, clock = _session(budget=50)
    supplement = _add(session, 30, relevance=0.0, supplement=True)
    clock.advance(1000)
    first = _add(session, 20, relevance=0.9)
    assert first.evicted == []
    result = _add(session, 10, relevance=0.9)
    assert result.phase1 == ()
    assert [t.archive_iri for t in result.phase2] == [supplement.turn.archive_iri]


def test_phase_two_removes_lowest_scores_first_and_stops_as_soon_as_the_chain_fits() -> None:
    session, _clock = _session(budget=100)
    low = _add(session, 40, relevance=0.35)
    mid = _add(session, 40, relevance=0.5)
    _add(session, 10, relevance=0.9)
    result = _add(session, 40, relevance=0.8)  # 130 > 100: one removal (40) fits
    assert [t.archive_iri for t in result.phase2] == [low.turn.archive_iri]
    assert session.total_tokens == 90
    assert mid.turn.archive_iri in [t.archive_iri for t in session.turns]


def test_equal_scores_evict_the_older_turn_first() -> None:
    session, _ = _session(budget=20)
    first = _add(session, 10, relevance=0.5)
    _add(session, 10, relevance=0.5)
    result = _add(session, 10, relevance=1.0)
    assert [t.archive_iri for t in result.phase2] == [first.turn.archive_iri]


def test_a_turn_larger_than_the_budget_is_archived_and_evicted_by_its_own_add() -> None:
    session, _ = _session(budget=50)
    kept = _add(session, 20, relevance=0.9)
    huge = _add(session, 80, relevance=0.9)
    assert huge.turn.archive_iri in huge.evicted
    assert session.total_tokens <= 50
    assert session.weak_refs[-1] == huge.turn.archive_iri
    assert kept.turn.archive_iri in [t.archive_iri for t in session.turns]


def test_a_turn_without_relevance_gets_the_documented_default_and_is_never_hard_evicted() -> None:
    session, clock = _session(budget=10)
    plain = session.add(seq=1, role="assistant", summary="no score", archive_iri="memory:x/plain", tokens=5)
    assert plain.turn.relevance == DEFAULT_RELEVANCE
    clock.advance(10_000)
    result = _add(session, 6, relevance=0.9)
    assert result.phase1 == ()


def test_counted_cost_is_the_rendered_turn_under_the_sessions_counter() -> None:
    session, _ = _session(budget=1000)
    result = session.add(seq=1, role="assistant", summary="wrote the JWT middleware", archive_iri="memory:x/c")
    assert result.turn.tokens == EstimateCounter().count(render_turn("wrote the JWT middleware", "memory:x/c"))
    assert session.snapshot()["counter"] == "estimate-v1"


class _AxisEmbedder:
    """A real, tiny embedder: counts of three marker words (enough to test the seam)."""

    words = ("auth", "db", "ui")

    def embed(self, text: str) -> Sequence[float]:
        lowered = text.lower().split()
        return [float(lowered.count(w)) for w in self.words]


def test_with_a_query_relevance_is_the_cosine_and_decides_both_phases() -> None:
    clock = VirtualClock()
    session = Session("da", policy=EvictionPolicy(token_budget=30), clock=clock, embedder=_AxisEmbedder())
    auth = session.add(seq=1, role="assistant", summary="auth token", archive_iri="memory:q/1", tokens=10)
    db = session.add(seq=2, role="assistant", summary="db index", archive_iri="memory:q/2", tokens=10)
    assert session.relevance_of(db.turn) == DEFAULT_RELEVANCE  # no query yet
    clock.advance(400)
    assert session.set_query(text="auth") == []
    assert session.relevance_of(auth.turn) == pytest.approx(1.0)
    assert session.relevance_of(db.turn) == pytest.approx(0.0)
    # over budget: the db turn (cosine 0 < 0.3, old) goes in phase 1
    result = session.add(seq=3, role="assistant", summary="ui form", archive_iri="memory:q/3", tokens=11)
    assert [t.archive_iri for t in result.phase1] == [db.turn.archive_iri]
    session.set_query(None)
    assert session.relevance_of(auth.turn) == DEFAULT_RELEVANCE  # back to the default


def test_a_given_relevance_stands_against_the_query() -> None:
    clock = VirtualClock()
    session = Session("da", policy=EvictionPolicy(token_budget=30), clock=clock, embedder=_AxisEmbedder())
    kept = session.add(seq=1, role="assistant", summary="db index", archive_iri="memory:g/1", tokens=10, relevance=1.0)
    scored = session.add(seq=2, role="assistant", summary="db table", archive_iri="memory:g/2", tokens=10)
    session.set_query(text="auth")
    assert session.relevance_of(kept.turn) == 1.0 and session.relevance_of(scored.turn) == pytest.approx(0.0)
    clock.advance(400)
    result = session.add(seq=3, role="assistant", summary="ui form", archive_iri="memory:g/3", tokens=11)
    assert [t.archive_iri for t in result.phase1] == [scored.turn.archive_iri]


def test_a_summary_the_embedder_cannot_embed_keeps_the_turn_without_a_vector() -> None:
    class Failing:
        def embed(self, text: str) -> Sequence[float]:
            raise EmbeddingError("endpoint down")

    session = Session("da", clock=VirtualClock(), embedder=Failing())
    added = session.add(seq=1, role="assistant", summary="anything", archive_iri="memory:f/1", tokens=1)
    assert added.turn.embedding is None and session.embed_failures == 1
    with pytest.raises(EmbeddingError):
        session.set_query(text="auth")
    assert session.query is None


def test_a_query_text_needs_an_embedder_and_dimensions_must_agree() -> None:
    session, _ = _session()
    with pytest.raises(InvalidInput, match="embedder"):
        session.set_query(text="auth")
    session.add(seq=1, role="assistant", summary="s", archive_iri="memory:d/1", tokens=1, embedding=[1.0, 0.0])
    before = _state(session)
    with pytest.raises(InvalidInput, match="dimensions"):
        session.set_query([1.0, 0.0, 0.0])
    with pytest.raises(InvalidInput, match="dimensions"):
        session.add(seq=2, role="assistant", summary="s", archive_iri="memory:d/2", tokens=1, embedding=[1.0])
    assert _state(session) == before and session.query is None


def test_a_change_to_a_cited_line_marks_the_turn_stale_once_and_renders_a_note() -> None:
    session, _ = _session(budget=1000)
    cited = _add(session, 10, cites={"plan:jwt": 3, "plan:db": 1})
    other = _add(session, 10)
    assert session.line_changed("plan:jwt", 3) == ([], [])  # the version it saw: not a change
    assert session.line_changed("plan:other", 9) == ([], [])
    stale, evicted = session.line_changed("plan:jwt", 4)
    assert stale == [cited.turn.archive_iri] and evicted == []
    assert session.line_changed("plan:jwt", 5) == ([], [])  # already stale for that line
    turn = session.turns[0]
    assert turn.stale == ("plan:jwt",) and session.turns[1].stale == ()
    assert turn.tokens > turn.base_tokens == 10
    assert session.total_tokens == turn.tokens + 10
    content = session.messages()[0]["content"]
    assert content.startswith("[stale: plan:jwt changed") and cited.turn.archive_iri in content
    assert "stale" not in session.messages()[1]["content"]
    del other


def test_a_stale_note_that_pushes_the_chain_over_budget_triggers_eviction() -> None:
    session, clock = _session(budget=25)
    old = _add(session, 10, relevance=0.1, cites=["plan:jwt"])
    clock.advance(400)
    _add(session, 15, relevance=0.9)
    stale, evicted = session.line_changed("plan:jwt", 1)
    assert stale == [old.turn.archive_iri] and evicted == [old.turn.archive_iri]
    assert session.total_tokens == 15


def test_messages_handoff_and_reset() -> None:
    session, _ = _session(budget=1000)
    _add(session, 5, summary="planned the rollout")
    session.add(seq=77, role="user", summary="user asked for RS256", archive_iri="memory:x/u", tokens=5)
    assert [m["role"] for m in session.messages()] == ["assistant", "user"]
    handoff = session.handoff(role="DA")
    assert handoff["text"].startswith("Hand-off from da (DA): 2 turns in context, 0 evicted.")
    assert "user asked for RS256 [memory:x/u]" in handoff["text"]
    assert handoff["tokens"] == EstimateCounter().count(handoff["text"]) and handoff["counter"] == "estimate-v1"
    session.reset()
    assert session.turns == () and session.total_tokens == 0 and session.weak_refs == []


def test_set_policy_refuses_anything_but_a_policy() -> None:
    session, _ = _session()
    with pytest.raises(InvalidInput):
        session.set_policy({"token_budget": 1})  # type: ignore[arg-type]
    assert dataclasses.asdict(session.policy)["token_budget"] == 100
