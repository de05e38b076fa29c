"""The Poincaré model is retrained off the search path: the staleness bound of docs/HYPERSPACE.md.

A search retrains only with no model yet, on the first search after open,
or once ``structure_refresh_after`` typed writes accumulated; the actor's
``refresh_structure`` request retrains at once. Real memory, real graph,
real Poincaré training, on the simulator.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gliding_actors.errors import InvalidInput
from gliding_actors.system import MemorySystem

VOCAB = "https://gliding-actors.dev/ns#"


@pytest.fixture()
def memory() -> Iterator[MemorySystem]:
    m = MemorySystem.open(runtime="sim", config={"hyperspace": {"structure_refresh_after": 3}})
    yield m
    m.close(flush=False)


def _nodes(m: MemorySystem) -> set[str]:
    model = m.hyperspace.engine.structure
    return set() if model is None else set(model.nodes())


def test_a_search_retrains_only_when_the_bound_is_reached(memory: MemorySystem) -> None:
    pa = memory.agent("pa", "PA")
    pa.write("task:a", {"@type": "Task", "summary": "first task"}, graph="plan")
    pa.search("task")
    assert {"task:a", VOCAB + "Task"} <= _nodes(memory)  # no model yet: the first search trains one
    assert memory.hyperspace.structure_changes == 0

    pa.write("step:b", {"@type": "Step", "summary": "a step"}, graph="plan")
    pa.write("task:c", {"@type": "Task", "summary": "second task"}, graph="plan")
    pa.search("task")
    # two typed writes, under the bound of three: the model is stale by exactly them
    assert "step:b" not in _nodes(memory) and VOCAB + "Step" not in _nodes(memory)
    assert memory.hyperspace.structure_changes == 2
    hits = pa.search("second task")["iris"]
    assert "task:c" in hits  # a node the model lacks is still found (text, BM25; its type's point)

    pa.write("review:d", {"@type": "Review", "summary": "a review"}, graph="plan")
    pa.search("task")  # the third: retrained, everything in
    assert {"step:b", "task:c", "review:d", VOCAB + "Step", VOCAB + "Review"} <= _nodes(memory)
    assert memory.hyperspace.structure_changes == 0


def test_the_refresh_request_retrains_at_once(memory: MemorySystem) -> None:
    pa = memory.agent("pa", "PA")
    pa.write("task:a", {"@type": "Task", "summary": "first task"}, graph="plan")
    pa.search("task")
    pa.write("step:b", {"@type": "Step", "summary": "a step"}, graph="plan")
    assert memory.inspect("step:b")["caches"]["pa"] == "M"  # not even home yet
    refresh = memory.hyperspace.submit_refresh_structure
    assert refresh().get(10.0) is True  # recalls, catches up, then retrains
    assert "step:b" in _nodes(memory) and memory.hyperspace.structure_changes == 0
    assert refresh().get(10.0) is False  # nothing changed since: nothing to do


def test_untyped_writes_do_not_count_towards_the_bound(memory: MemorySystem) -> None:
    pa = memory.agent("pa", "PA")
    pa.write("task:a", {"@type": "Task", "summary": "first task"}, graph="plan")
    pa.search("task")
    for k in range(5):
        pa.write(f"note:{k}", {"text": f"a plain note {k}"}, graph="plan")
    pa.search("note")
    assert memory.hyperspace.structure_changes == 0


def test_the_bound_is_validated_like_every_setting() -> None:
    for bad in (0, -1, "3"):
        with pytest.raises(InvalidInput):
            MemorySystem.open(runtime="sim", config={"hyperspace": {"structure_refresh_after": bad}})


def test_the_engine_knows_its_graphs_without_scanning_its_documents() -> None:
    """A search asks which graphs hold documents; the answer is kept as documents come and go."""
    from gliding_actors.config import Config
    from gliding_actors.hyperspace._embedders import EmbedderChain, HashEmbedder
    from gliding_actors.hyperspace._engine import HyperspaceEngine

    config = Config().hyperspace
    engine = HyperspaceEngine(config, EmbedderChain([HashEmbedder(config.hash_dim)]))
    assert engine.graphs() == []
    engine.upsert("n:a", {"summary": "one"}, version=1, graph="planning")
    engine.upsert("n:b", {"summary": "two"}, version=1, graph="execution")
    engine.upsert("n:c", {"summary": "three"}, version=1, graph="execution")
    assert engine.graphs() == ["execution", "planning"]
    engine.upsert("n:a", {"summary": "one, moved"}, version=2, graph="execution")  # a rewrite that moves graph
    engine.remove("n:b")
    assert engine.graphs() == ["execution"] == sorted({d.graph for d in engine.docs.values()})
