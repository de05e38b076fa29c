"""L1 through the agent handle, on both runtimes: real LevelDB, real actors, real bus."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gliding_actors import InvalidInput, MemorySystem
from gliding_actors.clock import VirtualClock
from gliding_actors.runtime import BACKENDS


@pytest.fixture(params=BACKENDS)
def memory(request: pytest.FixtureRequest) -> Iterator[MemorySystem]:
    config = {"l1": {"token_budget": 100, "counter": "estimate-v1", "roles": {"DA": {"token_budget": 4000}}}}
    with MemorySystem.open(runtime=request.param, clock=VirtualClock(), config=config) as system:
        yield system


def test_a_turn_is_archived_to_l0_and_its_summary_joins_the_chain(memory: MemorySystem) -> None:
    pa = memory.agent("pa", "PA")
    result = pa.turn("planned the JWT rollout", thought="cookies do not scale", content="1) keys 2) tokens", relevance=0.9)
    assert result["archive_iri"] == "memory:session-pa/block-1"
    assert result["evicted"] == [] and result["counter"] == "estimate-v1"
    assert result["tokens"] == result["turn_tokens"] > 0
    session = pa.session()
    assert session["summaries"] == ["planned the JWT rollout"]
    assert session["turns"][0]["archive_iri"] == "memory:session-pa/block-1"
    assert session["tokens"] == result["tokens"] and session["weak_refs"] == [] and session["budget"] == 100
    node = pa.reload("memory:session-pa/block-1")
    assert (node["thought"], node["content"], node["summary"]) == (
        "cookies do not scale", "1) keys 2) tokens", "planned the JWT rollout",
    )
    assert node["@type"] == "SessionTurn" and node["agent"] == "pa" and node["relevance"] == 0.9
    # another agent may reload it too (a hand-off names IRIs for its receiver)
    assert memory.agent("ca", "CA").reload("memory:session-pa/block-1")["content"] == "1) keys 2) tokens"


def test_the_budget_evicts_and_every_evicted_turn_reloads_in_full(memory: MemorySystem) -> None:
    pa = memory.agent("pa", "PA")
    evicted: list[str] = []
    for n in range(12):
        evicted += pa.turn(f"step {n}", thought=f"thought {n}", content=f"content {n}", tokens=20)["evicted"]
    session = pa.session()
    assert session["tokens"] <= 100 and len(session["turns"]) == 5
    assert session["weak_refs"] == evicted and len(evicted) == 7
    for iri in evicted:
        n = int(iri.rsplit("-", 1)[1]) - 1
        assert pa.reload(iri)["thought"] == f"thought {n}"


def test_roles_get_their_own_budget(memory: MemorySystem) -> None:
    assert memory.agent("da", "DA").session()["budget"] == 4000
    assert memory.agent("sa", "SA").session()["budget"] == 100


@pytest.mark.parametrize(
    "bad",
    [
        {"summary": ""},
        {"summary": "ok", "relevance": 2},
        {"summary": "ok", "tokens": -3},
        {"summary": "ok", "thought": 5},
        {"summary": "ok", "cites": ["not an iri"]},
        {"summary": "ok", "embedding": ["x"]},
        {"summary": "ok", "role": ""},
    ],
)
def test_a_bad_turn_is_refused_before_sending_and_changes_nothing(memory: MemorySystem, bad: dict[str, Any]) -> None:
    pa = memory.agent("pa", "PA")
    pa.turn("first", tokens=5)
    before = (pa.session(), memory.l0.count())
    with pytest.raises(InvalidInput):
        pa.turn(**bad)
    assert (pa.session(), memory.l0.count()) == before
    assert pa.turn("next", tokens=5)["archive_iri"] == "memory:session-pa/block-2"  # no number was used up


def test_archives_are_not_lines(memory: MemorySystem) -> None:
    pa = memory.agent("pa", "PA")
    iri = pa.turn("s", thought="t", content="c")["archive_iri"]
    with pytest.raises(InvalidInput, match="archive"):
        pa.write(iri, {"summary": "overwritten"})
    with pytest.raises(InvalidInput, match="archive"):
        pa.read(iri)
    assert pa.reload(iri)["content"] == "c"
    with pytest.raises(InvalidInput, match="not an L1 archive"):
        pa.reload("plan:jwt")
    with pytest.raises(InvalidInput, match="no archived turn"):
        pa.reload("memory:session-pa/block-99")


def test_closing_archives_the_session_and_starts_an_empty_one(memory: MemorySystem) -> None:
    pa = memory.agent("pa", "PA")
    first = pa.turn("one", tokens=60)["archive_iri"]
    second = pa.turn("two", tokens=60)["archive_iri"]  # evicts the first (120 > 100)
    closed = pa.close_session()
    assert closed["session_iri"] == "memory:session-pa/session-1"
    assert closed["blocks"] == [first, second] and closed["tokens"] == 60
    node = pa.reload(closed["session_iri"])
    assert node["@type"] == "Session" and node["chain"] == [second] and node["weakRefs"] == [first]
    assert node["handoff"].startswith("Hand-off from pa (PA)")
    after = pa.session()
    assert after["turns"] == [] and after["tokens"] == 0 and after["weak_refs"] == []
    assert pa.turn("three", tokens=1)["archive_iri"] == "memory:session-pa/block-3"
    assert pa.close_session()["session_iri"] == "memory:session-pa/session-2"


def test_messages_handoff_and_query(memory: MemorySystem) -> None:
    da = memory.agent("da", "DA")
    da.turn("asked for RS256", role="user", tokens=5, embedding=[1.0, 0.0])
    da.turn("chose ES256 instead", tokens=5, embedding=[0.0, 1.0], relevance=1.0)
    messages = da.session_messages()
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[0]["content"] == "asked for RS256\n[archive: memory:session-da/block-1]"
    handoff = da.handoff()
    assert "1. asked for RS256 [memory:session-da/block-1]" in handoff["text"] and handoff["counter"] == "estimate-v1"
    assert da.set_query([1.0, 0.0]) == []
    assert da.session()["query"] is True
    with pytest.raises(InvalidInput, match="embeddings of their own"):
        da.set_query(text="auth")  # the session's vectors are the caller's (2-d), not the embedder's
    with pytest.raises(InvalidInput, match="dimensions"):
        da.set_query([1.0, 0.0, 0.0])
    assert da.set_query() == [] and da.session()["query"] is False


def test_a_query_text_is_embedded_by_the_memorys_embedder_and_decides_eviction(memory: MemorySystem) -> None:
    """No vectors by hand: summaries and the query text share the memory's embedder, and the cosine evicts."""
    pa = memory.agent("pa", "PA")  # budget 100 tokens
    jwt = pa.turn("validated the JWT signatures in the auth middleware", tokens=40)["archive_iri"]
    colours = pa.turn("picked the dashboard colour palette", tokens=40)["archive_iri"]
    assert pa.set_query(text="JWT signatures in the auth middleware") == []
    memory.clock.advance(400)  # both past the safe window
    evicted = pa.turn("rotated the JWT signing keys", tokens=30)["evicted"]
    assert evicted == [colours]  # cosine to the query below the threshold: phase 1 takes it, not the older jwt turn
    assert pa.session()["turns"][0]["archive_iri"] == jwt
    # a given score stands whatever the query
    pa.set_query(text="dashboard colours")
    assert pa.turn("noted the on-call rota", tokens=40, relevance=1.0)["evicted"] == [jwt]


def test_a_write_to_a_cited_line_marks_the_turn_stale(memory: MemorySystem) -> None:
    pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
    pa.write("plan:jwt", {"summary": "RS256"}, graph="plan")
    da.read("plan:jwt")
    da.turn("implemented RS256 signing", cites=["plan:jwt"], tokens=10)
    da.turn("unrelated", tokens=10)
    memory.quiesce()
    assert [t["stale"] for t in da.session()["turns"]] == [False, False]  # its own version is no change
    pa.write("plan:jwt", {"summary": "ES256"}, graph="plan")
    memory.quiesce()
    session = da.session()
    assert [t["stale_lines"] for t in session["turns"]] == [["plan:jwt"], []]
    assert session["tokens"] > 20  # the note costs tokens
    assert da.session_messages()[0]["content"].startswith("[stale: plan:jwt changed")


def test_numbering_resumes_after_a_reopen_and_archives_stay_out_of_the_graph(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path, runtime="sim") as first:
        pa = first.agent("pa", "PA")
        pa.turn("one", thought="t1", content="c1")
        pa.turn("two", thought="t2", content="c2")
    with MemorySystem.open(tmp_path, runtime="sim") as second:
        pa = second.agent("pa", "PA")
        assert pa.session()["summaries"] == ["one", "two"]  # the open session resumes from the archive
        assert pa.turn("three")["archive_iri"] == "memory:session-pa/block-3"
        assert pa.reload("memory:session-pa/block-1")["thought"] == "t1"
        rows = second.agent("root", "system").query("SELECT ?s WHERE { ?s ?p ?o }")["rows"]
        assert not any(str(r.get("s", "")).startswith("memory:session-") for r in rows)
        assert "memory:session-pa/block-1" not in second.line_graphs.graphs


def test_an_agent_id_that_needs_escaping_gets_its_own_prefix(memory: MemorySystem) -> None:
    team = memory.agent("team/pa", "PA")
    assert team.turn("s")["archive_iri"] == "memory:session-team%2Fpa/block-1"
    assert memory.agent("team", "PA").turn("s")["archive_iri"] == "memory:session-team/block-1"


def _session_events(memory: MemorySystem) -> int:
    """Bus events delivered to the agents' session actors so far (the simulator logs every delivery)."""
    log = memory.runtime.log  # type: ignore[attr-defined]
    return sum(
        1
        for entry in log
        if entry.kind == "deliver" and entry.dst.startswith("l1:")
        and isinstance(entry.message, dict) and entry.message.get("type") == "bus.event"
    )


def test_a_session_hears_only_of_the_lines_its_turns_cite() -> None:
    with MemorySystem.open(runtime="sim", config={"l1": {"counter": "estimate-v1"}}) as memory:
        pa = memory.agent("pa", "PA")
        idle = [memory.agent(f"da{i}", "DA") for i in range(20)]
        citing = memory.agent("ca", "CA")
        pa.write("plan:a", {"summary": "one"}, graph="plan")
        citing.read("plan:a")
        citing.turn("reviewed the plan", cites=["plan:a"], tokens=5)
        memory.quiesce()
        before = _session_events(memory)
        for n in range(5):
            pa.write("plan:b", {"n": n}, graph="plan")  # cited by no turn: no session hears of it
        memory.quiesce()
        assert _session_events(memory) == before
        pa.write("plan:a", {"summary": "two"}, graph="plan")
        memory.quiesce()
        assert _session_events(memory) == before + 1  # the one session whose turn cites it
        assert citing.session()["turns"][0]["stale_lines"] == ["plan:a"]
        assert all(agent.session()["turns"] == [] for agent in idle)


@pytest.mark.parametrize("seed", range(25))
def test_a_write_racing_a_citing_turn_still_marks_it_stale(seed: int) -> None:
    # The turn saw v1; a write of v2 completes while the turn (and its interest) is on its way.
    # Whichever reaches the bus first, the turn ends up stale.
    with MemorySystem.open(runtime="sim", seed=seed, config={"l1": {"counter": "estimate-v1"}}) as memory:
        pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
        pa.write("plan:jwt", {"summary": "RS256"}, graph="plan")
        memory.quiesce()
        write = pa.submit_write("plan:jwt", {"summary": "ES256"}, graph="plan")
        turn = da.submit_turn("implemented RS256 signing", cites={"plan:jwt": 1}, tokens=10)
        write.get(10)
        turn.get(10)
        memory.quiesce()
        assert da.session()["turns"][0]["stale_lines"] == ["plan:jwt"]
