"""Agent.context end to end: the layers, the current task, the fallback path, permissions, refusals, the budget."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gliding_actors.errors import InvalidInput
from gliding_actors.l1._tokens import EstimateCounter
from gliding_actors.system import MemorySystem

COUNT = EstimateCounter().count
CONFIG = {"context": {"counter": "estimate-v1"}, "l3": {"counter": "estimate-v1"}, "l1": {"counter": "estimate-v1"}}


@pytest.fixture
def memory() -> Iterator[MemorySystem]:
    with MemorySystem.open(runtime="sim", config=CONFIG) as mem:
        pa = mem.agent("pa", "PA")
        pa.create_task("task:auth")
        pa.write("task:auth", {"@type": "Task", "goal": "Replace session cookies with JWT", "summary": "switch auth to JWT"}, graph="plan")
        pa.write("decision:alg", {"@type": "Decision", "decision": "sign tokens with RS256", "task": {"@id": "task:auth"}}, graph="plan")
        pa.write("note:lunch", {"summary": "the team lunch is on friday"}, graph="plan")
        pa.turn("planned the JWT rollout in three steps", content="1) keys 2) tokens 3) middleware")
        pa.turn("compared HS256 and RS256 signing", content="asymmetric keys let every service verify")
        yield mem


def test_context_gathers_chain_projection_and_recall(memory: MemorySystem) -> None:
    pa = memory.agent("pa", "PA")
    pa.set_task("task:auth")
    out = pa.context("how are tokens signed?", 400)
    assert out["counter"] == "estimate-v1" and out["tokens"] == COUNT(out["text"]) <= 400
    assert out["task"] == "task:auth" and out["frame"] == "pa_init"
    assert {"memory:session-pa/block-1", "memory:session-pa/block-2", "task:auth", "decision:alg"} <= set(out["iris"])
    assert out["sources"]["l1"]["items"] == 2 and out["sources"]["l3"]["items"] >= 1
    assert "## session" in out["text"] and "## task" in out["text"]
    # dedup: a chain turn the search also found appears once, rendered as the chain has it
    assert len(out["iris"]) == len(set(out["iris"]))
    assert out["text"].count("compared HS256 and RS256 signing") == 1


def test_without_a_task_l3_is_skipped_and_recall_takes_its_share(memory: MemorySystem) -> None:
    aa = memory.agent("aa", "AA")
    out = aa.context("RS256 signing decision", 300)
    assert out["task"] is None
    assert out["path"][0] == {"layer": "l3", "found": 0, "skipped": "no current task"}
    assert "decision:alg" in out["iris"]  # L2, found by search
    assert out["sources"]["l3"]["tokens"] == 0 and out["sources"]["l2"]["items"] >= 1


def test_with_no_line_matching_the_archive_answers(memory: MemorySystem) -> None:
    aa = memory.agent("aa", "AA")
    out = aa.context("every service can verify", 300)
    assert out["path"][1]["found"] == 0  # L2 had nothing (no shared word; by meaning, below the floor)
    assert "memory:session-pa/block-2" in out["iris"]  # L0: pa's archived turn
    assert out["sources"]["l0"]["items"] >= 1


def test_no_query_recalls_by_the_latest_summary(memory: MemorySystem) -> None:
    pa = memory.agent("pa", "PA")
    out = pa.context(max_tokens=300)
    assert out["recall_query"] == "compared HS256 and RS256 signing"


def test_context_never_shows_what_the_role_may_not_read() -> None:
    config = {**CONFIG, "permissions": {"PA": {"secret": "crud"}, "DA": {"secret": ""}}}
    with MemorySystem.open(runtime="sim", config=config) as mem:
        pa = mem.agent("pa", "PA")
        pa.write("secret:key", {"summary": "the RS256 private key lives in the vault"}, graph="secret")
        pa.write("doc:key", {"summary": "RS256 public key is published"}, graph="plan")
        da = mem.agent("da", "DA")
        out = da.context("RS256 key", 500)
        assert "doc:key" in out["iris"] and "secret:key" not in out["iris"] and "vault" not in out["text"]
        assert "secret:key" in pa.context("RS256 key", 500)["iris"]


def test_a_dirty_line_in_another_cache_is_seen(memory: MemorySystem) -> None:
    pa = memory.agent("pa", "PA")
    pa.write("decision:alg", {"@type": "Decision", "decision": "sign tokens with EdDSA now"}, graph="plan")  # write-back: pa holds M
    out = memory.agent("aa", "AA").context("EdDSA", 300)
    assert "decision:alg" in out["iris"] and "EdDSA" in out["text"]


@pytest.mark.parametrize(
    "query, max_tokens, task",
    [(None, 0, None), (None, -3, None), (None, True, None), (None, 1.5, None), ("", 100, None), ("  ", 100, None),
     (3, 100, None), (None, 100, "has space"), (None, 100, 7)],
)
def test_bad_arguments_are_refused_and_change_nothing(memory: MemorySystem, query: object, max_tokens: object, task: object) -> None:
    pa = memory.agent("pa", "PA")
    before = (memory.l0.count(), pa.session(), memory.context.task_of("pa"), memory.runtime.stats() if hasattr(memory.runtime, "stats") else None)
    with pytest.raises(InvalidInput):
        pa.context(query, max_tokens, task=task)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        pa.set_task("has space")
    assert (memory.l0.count(), pa.session(), memory.context.task_of("pa"), memory.runtime.stats() if hasattr(memory.runtime, "stats") else None) == before


words = st.sampled_from(["token", "RS256", "key", "rollout", "review", "cache", "lunch", "deploy", "JWT", "verify", "日本語", "émigré"])
summaries = st.lists(words, min_size=1, max_size=30).map(" ".join)


@settings(max_examples=12)
@given(turns=st.lists(summaries, min_size=0, max_size=12), budgets=st.lists(st.integers(1, 300), min_size=1, max_size=4), query=st.one_of(st.none(), summaries))
def test_context_never_exceeds_max_tokens(turns: list[str], budgets: list[int], query: str | None) -> None:
    with MemorySystem.open(runtime="sim", config={**CONFIG, "l1": {"counter": "estimate-v1", "token_budget": 150}}) as mem:
        agent = mem.agent("da", "DA")
        for i, summary in enumerate(turns):
            agent.turn(summary, content=summary * 3)
            if i % 3 == 0:
                agent.write(f"line:{i}", {"summary": summary}, graph="execution")
        for budget in budgets:
            out = agent.context(query, budget)
            assert out["tokens"] == (COUNT(out["text"]) if out["text"] else 0)
            assert out["tokens"] <= budget


def _recalls(memory: MemorySystem) -> int:
    """Recall requests the directory shards have received so far (the simulator logs every delivery)."""
    log = memory.runtime.log  # type: ignore[attr-defined]
    return sum(
        1
        for entry in log
        if entry.kind == "deliver" and entry.dst in memory.directories
        and isinstance(entry.message, dict) and entry.message.get("t") == "recall"
    )


def test_a_context_request_recalls_the_dirty_lines_once() -> None:
    # Two directory shards; a context with a task (L3 computes a projection) and a query (search):
    # one recall of each shard, not one for the projection and another for the search.
    config = {**CONFIG, "coherence": {"directory_shards": 2}}
    with MemorySystem.open(runtime="sim", config=config) as memory:
        pa = memory.agent("pa", "PA")
        pa.create_task("task:auth")
        pa.write("task:auth", {"@type": "Task", "goal": "JWT auth"}, graph="plan")
        pa.write("decision:alg", {"@type": "Decision", "decision": "RS256", "task": {"@id": "task:auth"}}, graph="plan")
        pa.set_task("task:auth")
        before = _recalls(memory)
        out = pa.context("how are tokens signed?", 400)
        assert out["sources"]["l3"]["items"] >= 1 and "decision:alg" in out["iris"]
        assert _recalls(memory) - before == 2  # one per shard


def _searches(memory: MemorySystem) -> int:
    return int(memory.stats()["hyperspace"]["queries"])


def _notes(memory: MemorySystem, n: int, words: int) -> None:
    pa = memory.agent("pa", "PA")
    filler = " ".join(["orchard"] * (words - 1))
    for i in range(n):
        pa.write(f"note:{i}", {"text": f"kiwi {filler}".strip()}, graph="plan")


def test_hits_that_run_out_before_the_budget_are_asked_for_again_deeper() -> None:
    # 200 one-word lines: the first search's hits fill about half of 1,000 tokens, so the
    # search is asked again, as deep as a budget of the cheapest items could hold
    with MemorySystem.open(runtime="sim", config=CONFIG) as memory:
        _notes(memory, 200, 1)
        da = memory.agent("da", "DA")
        before = _searches(memory)
        out = da.context("kiwi", 1000)
        assert _searches(memory) - before == 2
        assert out["sources"]["l2"]["items"] > 1000 // 16  # more than the first search returned
        assert out["tokens"] == COUNT(out["text"]) <= 1000
        assert memory.stats()["context"]["assembled"] == 1  # one context handed over, not two


def test_hits_that_fill_the_budget_are_searched_for_once() -> None:
    with MemorySystem.open(runtime="sim", config=CONFIG) as memory:
        _notes(memory, 200, 40)  # each line well over a typical item
        da = memory.agent("da", "DA")
        before = _searches(memory)
        out = da.context("kiwi", 1000)
        assert _searches(memory) - before == 1
        assert out["sources"]["l2"]["items"] >= 5 and 900 <= out["tokens"] <= 1000
