"""Consolidation: older turns fold into a fact that keeps every one of them reachable."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gliding_actors import MemorySystem, VirtualClock
from gliding_actors.agent import Agent
from gliding_actors.errors import InvalidInput
from gliding_actors.l1._actor import DERIVED_FROM, session_actor_name


def reachable_from(agent: Agent, iri: str) -> set[str]:
    """Every archived turn reachable by IRI from ``iri``, following ``prov:wasDerivedFrom`` down."""
    found, todo = set(), [iri]
    while todo:
        node = agent.reload(todo.pop())
        for item in node.get(DERIVED_FROM, ()):
            if item["@id"] not in found:
                found.add(item["@id"])
                todo.append(item["@id"])
    return found


def add_turns(agent: Agent, clock: VirtualClock, count: int, start: int = 0) -> list[str]:
    iris = []
    for n in range(start, start + count):
        clock.advance(10)
        iris.append(agent.turn(f"Decision {n} was made. Because of reason {n}.", thought=f"t{n}", content=f"c{n}")["archive_iri"])
    return iris


def test_consolidation_loses_nothing_and_survives_a_reopen(tmp_path: Path) -> None:
    clock = VirtualClock()
    with MemorySystem.open(tmp_path, runtime="sim", clock=clock) as memory:
        pa = memory.agent("pa", "PA")
        first = add_turns(pa, clock, 6)
        before = pa.session()
        result = pa.consolidate(keep=2)
        assert result["folded"] == first[:4]
        chain = pa.session()
        assert [t["archive_iri"] for t in chain["turns"]] == [result["fact"], *first[4:]]
        assert chain["tokens"] < before["tokens"]
        assert chain["summaries"][0] == "Decision 0 was made; Decision 1 was made; Decision 2 was made; Decision 3 was made."
        # a second consolidation folds the first fact too: every archived turn stays reachable
        more = add_turns(pa, clock, 3, start=6)
        second = pa.consolidate(keep=1)
        assert second["folded"] == [result["fact"], *first[4:], *more[:2]]
        assert reachable_from(pa, second["fact"]) == {*first, result["fact"], *more[:2]}
        for iri in first:
            assert pa.reload(iri)["content"].startswith("c")  # each folded turn's node is untouched
        kept = [t["archive_iri"] for t in pa.session()["turns"]]
    with MemorySystem.open(tmp_path, runtime="sim", clock=clock) as memory:
        pa = memory.agent("pa", "PA")
        assert [t["archive_iri"] for t in pa.session()["turns"]] == kept
        nxt = pa.turn("After the reopen.")["archive_iri"]
        assert [t["archive_iri"] for t in pa.session()["turns"]] == [*kept, nxt]


def test_a_summarizer_writes_the_fact_in_the_callers_thread() -> None:
    seen: list[str] = []

    class Recording:
        def summarize(self, thought: str, content: str) -> str:
            seen.append(content)
            return "Three decisions about auth."

    clock = VirtualClock()
    with MemorySystem.open(runtime="sim", clock=clock) as memory:
        pa = memory.agent("pa", "PA")
        add_turns(pa, clock, 3)
        result = pa.consolidate(keep=0, summarizer=Recording())
        assert seen == ["\n".join(f"- Decision {n} was made. Because of reason {n}." for n in range(3))]
        assert pa.session()["summaries"] == ["Three decisions about auth."]
        assert pa.reload(result["fact"])["content"] == seen[0]


def test_the_fact_cites_what_the_turns_cited_and_keeps_their_stale_marks() -> None:
    clock = VirtualClock()
    with MemorySystem.open(runtime="sim", clock=clock) as memory:
        pa = memory.agent("pa", "PA")
        pa.write("task:a", {"goal": "v1"}, graph="plan")
        pa.write("task:b", {"goal": "v1"}, graph="plan")
        pa.turn("Read task a.", cites=["task:a"])
        pa.turn("Read task b.", cites=["task:b"])
        pa.write("task:a", {"goal": "v2"}, graph="plan")
        memory.flush()
        memory.quiesce()  # stale marks arrive on the bus after the write: a quiesce, not the flush, waits for them
        assert pa.session()["turns"][0]["stale_lines"] == ["task:a"]
        pa.consolidate(keep=0)
        (fact,) = pa.session()["turns"]
        assert fact["cites"] == ["task:a", "task:b"] and fact["stale_lines"] == ["task:a"]
        pa.write("task:b", {"goal": "v2"}, graph="plan")
        memory.flush()
        memory.quiesce()
        assert pa.session()["turns"][0]["stale_lines"] == ["task:a", "task:b"]


def test_nothing_to_fold_and_bad_input_change_nothing() -> None:
    clock = VirtualClock()
    with MemorySystem.open(runtime="sim", clock=clock) as memory:
        pa = memory.agent("pa", "PA")
        iris = add_turns(pa, clock, 3)
        assert pa.consolidate(keep=2)["fact"] is None  # one older turn: nothing to fold
        for bad in (-1, True, "2", 1.5):
            with pytest.raises(InvalidInput):
                pa.consolidate(keep=bad)  # type: ignore[arg-type]
        for wrong in ([iris[0], iris[0]], [iris[0], "memory:session-pa/block-99"], [], "not a list"):
            with pytest.raises(InvalidInput):
                pa.fold(wrong, "a fact")  # type: ignore[arg-type]
        with pytest.raises(InvalidInput):
            pa.fold(iris[:2], "   ")  # a fact needs a summary
        assert [t["archive_iri"] for t in pa.session()["turns"]] == iris
        assert pa.turn("next")["archive_iri"].endswith("/block-4")  # nothing was archived by the refusals
        with pytest.raises(InvalidInput):  # the session actor judges its own mailbox too
            memory.runtime.lookup(session_actor_name("pa")).ask({"t": "fold", "iris": [iris[0], 7]}).get(10)


def test_the_awaitable_twin_consolidates_too() -> None:
    with MemorySystem.open(runtime="threads") as memory:
        pa = memory.agent("pa", "PA")
        for n in range(3):
            pa.turn(f"Turn {n}.")
        result = asyncio.run(pa.aio.consolidate(keep=1))
        assert len(result["folded"]) == 2
        assert asyncio.run(pa.aio.session())["summaries"][0] == "Turn 0; Turn 1."
