"""Completing a task writes its dirty lines down to L0 — those lines, and only them.

A task's lines (docs/L2.md, "Completing a task"): lines attached to it, the
line whose IRI is the task's id, and lines whose value links to the task (or
a task of its subtree) — found by SPARQL after a recall. Real LevelDB, real
pyoxigraph, both runtimes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gliding_actors import InvalidInput, MemorySystem
from gliding_actors.clock import VirtualClock
from gliding_actors.l2._blackboard import task_lines
from gliding_actors.l2._graph import GraphStore
from gliding_actors.runtime import BACKENDS, Simulator


@pytest.fixture(params=BACKENDS)
def memory(request: pytest.FixtureRequest) -> Iterator[MemorySystem]:
    with MemorySystem.open(runtime=request.param, clock=VirtualClock()) as system:
        yield system


def _l0(memory: MemorySystem, iri: str) -> tuple[Any, int] | None:
    entry = memory.l0.retrieve(iri, touch=False)
    return None if entry is None else (entry.content, entry.version)


def _links(task: str, **extra: Any) -> dict[str, Any]:
    return {"@type": "Artifact", "task": {"@id": task}, **extra}


def test_a_write_back_line_of_a_task_reaches_l0_at_the_right_version_when_it_completes(
    memory: MemorySystem,
) -> None:
    pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
    pa.create_task("task:keys")
    da.write("artifact:keys", _links("task:keys", path="v1"), graph="execution")
    da.write("artifact:keys", _links("task:keys", path="v2"), graph="execution")
    assert da.write("artifact:keys", _links("task:keys", path="v3"), graph="execution")["policy"] == "write_back"
    assert _l0(memory, "artifact:keys") is None  # dirty in da's cache only

    result = da.submit_complete_task("task:keys").get(10.0)

    assert result["flushed"] == 1
    assert result["nodes"] == ["artifact:keys"]
    assert _l0(memory, "artifact:keys") == (_links("task:keys", path="v3"), 3)
    # da keeps a readable copy; the line is clean now, so a second flush writes nothing
    assert da.read("artifact:keys")["value"] == _links("task:keys", path="v3")
    assert memory.flush() == 0


def test_only_the_tasks_lines_are_written_down(memory: MemorySystem) -> None:
    pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
    pa.create_task("task:a")
    pa.create_task("task:b")
    pa.write("task:a", {"@type": "Task", "goal": "the task's own node"}, graph="plan")
    pa.write("task:b", {"@type": "Task", "goal": "another task's node"}, graph="plan")
    da.write("artifact:a", _links("task:a"), graph="execution")
    da.write("artifact:b", _links("task:b"), graph="execution")
    da.write("note:loose", {"text": "belongs to no task"}, graph="execution")
    # a string that merely spells the task id is not a link
    da.write("note:mention", {"text": "task:a"}, graph="execution")

    result = da.submit_complete_task("task:a").get(10.0)

    assert result["nodes"] == ["artifact:a", "task:a"]
    assert result["flushed"] == 2
    assert _l0(memory, "task:a") is not None and _l0(memory, "artifact:a") is not None
    for other in ("task:b", "artifact:b", "note:loose", "note:mention"):
        assert _l0(memory, other) is None, other
    assert memory.flush() == 4  # the others were still dirty, and still there


def test_flushed_counts_lines_written_not_lines_found(memory: MemorySystem) -> None:
    """A clean line of the task (write-through, already durable) is found but not written."""
    pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
    critical = memory.config.coherence.critical_tags[0]
    pa.create_task("task:t")
    pa.create_task("task:t/child", parent="task:t")
    da.write("artifact:dirty", _links("task:t"), graph="execution")
    assert da.write("decision:durable", _links("task:t"), graph="execution", tags=[critical])["policy"] == "write_through"
    # a link from a nested (blank, skolemised) node of the line counts
    da.write("artifact:nested", {"parts": [{"step": {"@id": "task:t/child"}}]}, graph="execution")
    # a link to the child: the parent's subtree is the parent's work
    da.write("artifact:child", _links("task:t/child"), graph="execution")

    result = da.submit_complete_task("task:t").get(10.0)

    assert result["nodes"] == ["artifact:child", "artifact:dirty", "artifact:nested", "decision:durable"]
    assert result["flushed"] == 3
    assert _l0(memory, "artifact:nested") == ({"parts": [{"step": {"@id": "task:t/child"}}]}, 1)


def test_a_failed_task_writes_its_lines_down_too(memory: MemorySystem) -> None:
    pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
    pa.create_task("task:design")
    pa.create_task("task:impl", depends_on=["task:design"])
    da.write("artifact:impl", _links("task:impl", state="half done"), graph="execution")
    # failing needs no completed dependencies
    result = da.submit_complete_task("task:impl", "failed").get(10.0)
    assert result["flushed"] == 1
    assert _l0(memory, "artifact:impl") == (_links("task:impl", state="half done"), 1)


def test_attached_lines_are_written_down(memory: MemorySystem) -> None:
    pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
    pa.create_task("task:x")
    da.write("log:run-1", {"text": "names no task"}, graph="execution")
    da.attach_to_task("task:x", ["log:run-1"])
    assert da.complete_task("task:x") == []
    assert _l0(memory, "log:run-1") == ({"text": "names no task"}, 1)
    with pytest.raises(InvalidInput):
        da.attach_to_task("task:x", "log:run-1")  # one string is not a list
    with pytest.raises(InvalidInput):
        da.attach_to_task("task:x", ["not an iri"])


def test_a_refused_completion_writes_nothing_and_leaves_the_task_pending(memory: MemorySystem) -> None:
    pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
    pa.create_task("task:design")
    pa.create_task("task:impl", depends_on=["task:design"])
    da.write("artifact:impl", _links("task:impl"), graph="execution")
    l0_before = memory.l0.raw_items()

    for task, status in [
        ("task:impl", "completed"),  # unmet dependency
        ("task:nope", "completed"),  # unknown task
        ("task:impl", "finished"),  # not a final status
        ("bad\x00id", "completed"),  # not a task id
    ]:
        with pytest.raises(InvalidInput):
            da.submit_complete_task(task, status).get(10.0)
    with pytest.raises(InvalidInput):
        da.submit_task({"t": "task.complete", "task": None})

    assert memory.l0.raw_items() == l0_before
    assert memory.inspect("artifact:impl")["caches"]["da"] == "M"  # not even recalled
    # still pending: once its dependency is done it completes, and only then is written down
    assert da.complete_task("task:design") == ["task:impl"]
    assert _l0(memory, "artifact:impl") is None
    da.complete_task("task:impl")
    assert _l0(memory, "artifact:impl") is not None
    with pytest.raises(InvalidInput, match="already completed"):
        da.complete_task("task:impl")


def test_the_raw_task_request_goes_through_the_flush_too(memory: MemorySystem) -> None:
    pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
    pa.create_task("task:r")
    da.write("artifact:r", _links("task:r"), graph="execution")
    result = da.submit_task({"t": "task.complete", "task": "task:r", "status": "completed"}).get(10.0)
    assert result["flushed"] == 1
    assert _l0(memory, "artifact:r") is not None


def test_the_status_changes_only_after_the_flush_answered() -> None:
    """"completed" implies durable: on the simulator's log, the blackboard is told
    to complete only after the directory answered the flush."""
    with MemorySystem.open(runtime="sim", clock=VirtualClock(), seed=3) as memory:
        pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
        pa.create_task("task:k")
        da.write("artifact:k", _links("task:k"), graph="execution")
        sim = memory.runtime
        assert isinstance(sim, Simulator)
        start = len(sim.log)
        assert da.submit_complete_task("task:k").get(10.0)["flushed"] == 1
        log = sim.log[start:]

        def first(match: Any, after: int = -1) -> int:
            return next(i for i, e in enumerate(log) if i > after and match(e))

        flush_asked = first(lambda e: e.kind == "deliver" and e.dst == "dir:0" and e.message.get("t") == "flush")
        flush_answered = first(lambda e: e.kind == "reply" and e.src == "dir:0", after=flush_asked)
        complete = first(
            lambda e: e.kind == "deliver" and e.dst == "blackboard" and e.message.get("t") == "task.complete"
        )
        assert flush_asked < flush_answered < complete


def test_flush_with_iris_asks_each_shard_about_its_own_lines_only() -> None:
    with MemorySystem.open(runtime="sim", config={"coherence": {"directory_shards": 4}}) as memory:
        da = memory.agent("da", "DA")
        iris = [f"artifact:{i}" for i in range(12)]
        for iri in iris:
            da.write(iri, {"n": iri}, graph="execution")
        assert len({memory.directory_for(i) for i in iris}) > 1
        assert memory.submit_flush(iris[:5]).get(10.0) == 5
        assert all(_l0(memory, i) is not None for i in iris[:5])
        assert all(_l0(memory, i) is None for i in iris[5:])
        assert memory.submit_flush([]).get(10.0) == 0
        assert memory.submit_flush(["artifact:never-written"]).get(10.0) == 0
        with pytest.raises(InvalidInput):
            memory.submit_flush("artifact:0")
        with pytest.raises(InvalidInput):
            memory.submit_flush([""])
        assert memory.flush() == 7


# -- task_lines over a bare graph store ------------------------------------------------------


@pytest.fixture
def graph() -> Iterator[GraphStore]:
    with GraphStore() as store:
        yield store


def test_task_lines_finds_links_in_any_graph_and_from_blank_nodes(graph: GraphStore) -> None:
    graph.put_node("task:a", {"goal": "own node"}, "plan", 1)
    graph.put_node("artifact:1", {"task": {"@id": "task:a"}}, "execution", 1)
    graph.put_node("review:1", {"of": [{"item": {"@id": "task:a"}}]}, "review", 1)
    graph.put_node("artifact:2", {"task": {"@id": "task:b"}}, "execution", 1)
    graph.put_node("note:1", {"about": "task:a"}, "shared", 1)  # a string, not a link
    assert task_lines(graph, ["task:a"]) == ["artifact:1", "review:1", "task:a"]
    assert task_lines(graph, ["task:a", "task:b"]) == ["artifact:1", "artifact:2", "review:1", "task:a"]
    assert task_lines(graph, ["task:a"], attached=["log:9"]) == ["artifact:1", "log:9", "review:1", "task:a"]


def test_task_lines_does_not_follow_a_named_node_nested_in_a_line(graph: GraphStore) -> None:
    """A named node inside a line is not a line; its links are not traced back."""
    graph.put_node("doc:1", {"section": {"@id": "doc:1#s2", "task": {"@id": "task:a"}}}, "shared", 1)
    assert task_lines(graph, ["task:a"]) == []


def test_task_ids_that_are_not_iris_are_never_spliced_into_a_query(graph: GraphStore) -> None:
    graph.put_node("artifact:1", {"task": {"@id": "task:a"}}, "execution", 1)
    hostile = ["design", "task:a> } UNION { ?s ?p ?o", 'x" . ?s ?p ?o #', "task:a\n"]
    assert task_lines(graph, hostile) == []
    dump = graph.dump()
    assert task_lines(graph, ["task:a", *hostile]) == ["artifact:1"]
    assert graph.dump() == dump  # reads only


def test_raw_scope_and_attach_requests_without_a_task_are_refused(memory: MemorySystem) -> None:
    board = memory.runtime.lookup("blackboard")
    for request in (
        {"t": "task.scope"},
        {"t": "task.scope", "task": 7},
        {"t": "task.attach", "iris": ["a:b"]},
        {"t": "task.attach", "task": "task:none", "iris": ["a:b"]},
    ):
        with pytest.raises(InvalidInput):
            board.ask(request).get(5.0)
    pa = memory.agent("pa", "PA")
    pa.create_task("task:alive")  # the blackboard is still serving
    assert board.ask({"t": "task.scope", "task": "task:alive"}).get(5.0) == {"tasks": ["task:alive"], "nodes": []}
