"""The graph written by its own actor (``l2.graph_writer``): a query still sees every completed write.

With the writer on, a directory queues its graph puts and ships them to
``l2:graph`` as messages — what a shard in another process must do. The
barrier (a recall or flush is answered only after the writer fenced the
shard's puts) is what keeps SPARQL coherent; the simulator's ``hold`` makes the
link to the writer slow, so without the barrier a query overtakes the puts
(the last test shows it does). Real LevelDB, real pyoxigraph.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gliding_actors import InvalidInput, MemorySystem
from gliding_actors.clock import VirtualClock
from gliding_actors.coherence._hosting import DirectoryActor
from gliding_actors.l2._graph_writer import GRAPH_ACTOR
from gliding_actors.runtime import BACKENDS, Simulator

WRITER = {"l2": {"graph_writer": True}}


def _status(agent: Any, iri: str) -> list[str]:
    rows = agent.query(f"SELECT ?s WHERE {{ <{iri}> ga:status ?s }}")["rows"]
    return sorted(row["s"] for row in rows)


def _slow_writer_link(memory: MemorySystem) -> None:
    rt = memory.runtime
    assert isinstance(rt, Simulator)
    for shard in memory.directories:
        rt.hold((shard, GRAPH_ACTOR), 10_000)


def _write_back_rounds(memory: MemorySystem, rounds: int) -> list[tuple[str, str]]:
    """Agents rewrite a few lines; returns (iri, newest status) and checks some writes were write-back."""
    da, db = memory.agent("da", "DA"), memory.agent("db", "DA")
    newest: dict[str, str] = {}
    policies: set[str] = set()
    for n in range(rounds):
        for agent in (da, db):
            iri = f"urn:line:{n % 3}"
            status = f"{agent.id}-{n}"
            policies.add(agent.write(iri, {"@id": iri, "status": status}, graph="execution")["policy"])
            newest[iri] = status
    assert "write_back" in policies  # else the recall had nothing to bring home
    return sorted(newest.items())


@pytest.fixture(params=BACKENDS)
def memory(request: pytest.FixtureRequest) -> Iterator[MemorySystem]:
    with MemorySystem.open(runtime=request.param, clock=VirtualClock(), config=WRITER) as system:
        yield system


def test_the_graph_is_fed_by_messages_and_a_query_sees_the_newest_value(memory: MemorySystem) -> None:
    newest = _write_back_rounds(memory, 6)
    qa = memory.agent("qa", "CA")
    for iri, status in newest:
        assert _status(qa, iri) == [status]
    applied = memory.runtime.lookup(GRAPH_ACTOR).ask({"t": "graph.applied"}).get(10.0)
    assert applied["applied"] >= len(newest) and applied["refused"] == 0
    # every home's outbox was shipped
    assert all(len(home.graph_outbox or ()) == 0 for home in memory._homes.values())


@pytest.mark.parametrize("seed", range(8))
def test_a_query_waits_for_the_slow_writer_under_many_schedules(seed: int) -> None:
    with MemorySystem.open(runtime="sim", clock=VirtualClock(), seed=seed, config=WRITER) as memory:
        newest = _write_back_rounds(memory, 4)
        _slow_writer_link(memory)
        qa = memory.agent("qa", "CA")
        for iri, status in newest:
            assert _status(qa, iri) == [status]


def test_task_completion_sees_lines_whose_puts_are_still_in_flight() -> None:
    with MemorySystem.open(runtime="sim", clock=VirtualClock(), seed=3, config=WRITER) as memory:
        pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
        pa.create_task("task:t")
        for n in range(3):
            da.write("artifact:t", {"@type": "Artifact", "task": {"@id": "task:t"}, "n": n}, graph="execution")
        _slow_writer_link(memory)
        result = da.submit_complete_task("task:t").get(10.0)
        assert result["nodes"] == ["artifact:t"]  # found by SPARQL over the graph, after the barrier
        entry = memory.l0.retrieve("artifact:t", touch=False)
        assert entry is not None and entry.content["n"] == 2


def test_without_the_barrier_a_query_overtakes_the_puts() -> None:
    """The control: answering the recall before the fence lets the slow link show a stale graph."""

    def answer_at_once(self: DirectoryActor, ack: Any, ctx: Any) -> None:
        token, then_flush, iris = self._waiting.pop(ack["rid"])
        ctx.resolve(token, self.home.flush(iris, mark=ack["rid"]) if then_flush else list(ack["iris"]))

    stale = 0
    patch = pytest.MonkeyPatch()
    patch.setattr(DirectoryActor, "_recalled", answer_at_once)
    try:
        for seed in range(4):
            with MemorySystem.open(runtime="sim", clock=VirtualClock(), seed=seed, config=WRITER) as memory:
                newest = _write_back_rounds(memory, 4)
                _slow_writer_link(memory)
                qa = memory.agent("qa", "CA")
                stale += sum(_status(qa, iri) != [status] for iri, status in newest)
    finally:
        patch.undo()
    assert stale > 0


def test_puts_a_crashed_directory_had_queued_are_shipped_by_its_successor() -> None:
    with MemorySystem.open(runtime="sim", clock=VirtualClock(), config=WRITER) as memory:
        memory.agent("da", "DA")
        home = memory._homes["dir:0"]
        assert home.graph_outbox is not None
        home.graph_outbox.add("urn:queued", {"@id": "urn:queued", "status": "kept"}, "execution", 1, ("t",))
        memory.crash("dir:0")
        node = memory.graph.node("urn:queued")
        assert node is not None and node.version == 1 and node.tags == ("t",)


def test_a_crashed_writer_is_rebuilt_over_the_same_graph(memory: MemorySystem) -> None:
    before = _write_back_rounds(memory, 3)
    assert memory.crash("graph")["lost"] == []
    qa = memory.agent("qa", "CA")
    for iri, status in before:
        assert _status(qa, iri) == [status]
    da = memory.agents()["da"]
    da.write("urn:line:0", {"@id": "urn:line:0", "status": "after"}, graph="execution")
    assert _status(qa, "urn:line:0") == ["after"]
    assert memory.supervision()["actors"][GRAPH_ACTOR]["restarts"] == 1


@pytest.mark.parametrize(
    "message",
    [
        {"t": "graph.puts", "nodes": "urn:x"},
        {"t": "graph.puts", "nodes": [["urn:ok", None, "shared", 1, []], ["urn:bad", None, "shared", "1", []]]},
        {"t": "graph.puts", "nodes": [["urn:bad", {"@id": "urn:bad"}, "shared", 1, [7]]]},
        {"t": "graph.fence", "id": 1},  # from outside: there is no one to answer
        {"t": "graph.drop"},
    ],
)
def test_a_malformed_message_is_refused_and_changes_nothing(memory: MemorySystem, message: dict[str, Any]) -> None:
    writer = memory.runtime.lookup(GRAPH_ACTOR)
    before = writer.ask({"t": "graph.applied"}).get(10.0)
    count = memory.graph.count()
    with pytest.raises(InvalidInput):
        writer.ask(message).get(10.0)
    assert writer.ask({"t": "graph.applied"}).get(10.0) == before
    assert memory.graph.count() == count and memory.graph.node("urn:ok") is None
    assert memory.supervision()["crashes"] == 0


def test_the_crash_target_exists_only_with_the_writer() -> None:
    with MemorySystem.open(runtime="sim", clock=VirtualClock()) as memory, pytest.raises(InvalidInput, match="graph"):
        memory.crash("graph")


@pytest.mark.parametrize("suite", ["coherence", "blackboard", "projection", "search", "context"])
def test_the_scenario_suites_pass_with_the_writer(suite: str, replay_suites: Callable[..., None]) -> None:
    replay_suites(suite, WRITER)
