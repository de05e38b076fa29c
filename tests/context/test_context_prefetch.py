"""The Prefetcher: exact top-K on a fixture graph, loads ahead of use, fewer misses on a replayed trace."""

from __future__ import annotations

import pytest

from gliding_actors.context import plan_prefetch
from gliding_actors.errors import InvalidInput
from gliding_actors.system import MemorySystem

#: the fixture graph (undirected for the walk): two entities a and b
#:   a - x1 - y1        b - x2
#:   a - x2 - y2        b - y3 - z (3 hops from b)
#:   a - x3             y1 - y4
EDGES = [("a", "x1"), ("x1", "y1"), ("a", "x2"), ("x2", "y2"), ("a", "x3"), ("b", "x2"), ("b", "y3"), ("y3", "z"), ("y1", "y4")]


def neighbours(node: str) -> list[str]:
    return [v for u, v in EDGES if u == node] + [u for u, v in EDGES if v == node]


def test_plan_scores_decay_per_hop_summed_over_entities() -> None:
    plan = plan_prefetch(["a", "b"], neighbours, hops=2, decay=0.5, top_k=10)
    # x2: 1 hop from a and from b = 0.5 + 0.5; x1, x3, y3: 0.5; y1, y2 (2 from a) = 0.25,
    # y2 is also 2 from b: 0.5; z is 2 from b: 0.25; y4 is 3 from a: out of reach
    assert plan == [
        ("x2", 1.0),
        ("x1", 0.5),
        ("x3", 0.5),
        ("y2", 0.5),
        ("y3", 0.5),
        ("y1", 0.25),
        ("z", 0.25),
    ]
    assert plan_prefetch(["a", "b"], neighbours, top_k=3) == [("x2", 1.0), ("x1", 0.5), ("x3", 0.5)]
    # not eligible: still walked through, never ranked
    assert [i for i, _ in plan_prefetch(["a"], neighbours, top_k=3, eligible=lambda i: i != "x1")] == ["x2", "x3", "b"]


def build(memory: MemorySystem) -> None:
    """The fixture graph as lines: each edge u -> v is a link ``rel`` from u's value to v."""
    writer = memory.agent("writer", "PA")
    nodes = sorted({n for e in EDGES for n in e})
    for node in nodes:
        links = [{"@id": f"n:{v}"} for u, v in EDGES if u == node]
        writer.write(f"n:{node}", {"@type": "Entity", "summary": f"node {node}", "rel": links}, graph="plan")
    memory.flush()
    writer.evict  # the writer keeps its copies; readers start cold


@pytest.fixture
def memory() -> MemorySystem:
    mem = MemorySystem.open(runtime="sim", seed=3)
    build(mem)
    yield mem  # type: ignore[misc]
    mem.close()


def test_intent_loads_exactly_the_expected_top_k_into_l2_and_the_cache(memory: MemorySystem) -> None:
    reader = memory.agent("reader", "DA")
    result = reader.submit_intent(["n:a", "n:b"]).get(5)
    assert result["prefetched"] == ["n:x2", "n:x1", "n:x3", "n:y2", "n:y3"]
    assert result["scores"] == [1.0, 0.5, 0.5, 0.5, 0.5]
    for iri in result["prefetched"]:
        state = memory.inspect(iri)
        assert state["caches"]["reader"] == "S" and state["l2"] is not None
        assert reader.read(iri)["messages"] == 0  # a hit: loaded ahead of use
    assert memory.inspect("n:y1")["caches"]["reader"] == "I"


def test_intent_returns_at_once_and_refuses_bad_input() -> None:
    with MemorySystem.open(runtime="threads") as mem:
        build(mem)
        reader = mem.agent("reader", "DA")
        before = mem.context.stats()
        for bad in ([], "n:a", ["not an iri"], [3]):
            with pytest.raises(InvalidInput):
                reader.intent(bad)  # type: ignore[arg-type]
        assert mem.context.stats() == before  # nothing was planned
        assert reader.intent(["n:a"]) is None  # fire and forget
        mem.quiesce(5)
        assert mem.inspect("n:x1")["caches"]["reader"] == "S"


def test_a_role_never_prefetches_what_it_may_not_read() -> None:
    with MemorySystem.open(runtime="sim", config={"permissions": {"PA": {"secret": "crud"}, "DA": {"secret": ""}}}) as mem:
        build(mem)
        mem.agent("writer", "PA").write("n:hidden", {"rel": {"@id": "n:a"}}, graph="secret")
        mem.flush()
        reader = mem.agent("reader", "DA")
        result = reader.submit_intent(["n:a"]).get(5)
        assert "n:hidden" not in result["prefetched"]


def _replay_misses(enabled: bool) -> int:
    """A recorded DA trace: an intent on the task's entities, then the reads the agent made.

    Misses are counted by the ``messages`` of each read (0 = a hit).
    """
    with MemorySystem.open(runtime="sim", seed=1, config={"prefetch": {"enabled": enabled}}) as mem:
        build(mem)
        reader = mem.agent("reader", "DA")
        reader.submit_intent(["n:a", "n:b"]).get(5)
        trace = ["n:a", "n:x2", "n:x1", "n:y2", "n:x3", "n:b", "n:y3", "n:y1"]
        return sum(1 for iri in trace if reader.read(iri)["messages"] > 0)


def test_a_replayed_trace_misses_less_with_the_prefetcher_on() -> None:
    off = _replay_misses(False)
    on = _replay_misses(True)
    assert off == 8  # every first read a miss
    assert on == 3  # n:a, n:b (the entities themselves) and n:y1 (ranked 6th) still miss
    assert on < off
