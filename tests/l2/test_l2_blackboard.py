"""The blackboard actor as agents use it, on every runtime: locks, awareness, tasks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gliding_actors import ConflictError, CycleError, DeadlockError, InvalidInput, MemorySystem
from gliding_actors.cli import main
from gliding_actors.clock import VirtualClock
from gliding_actors.runtime import BACKENDS

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(params=BACKENDS)
def memory(request: pytest.FixtureRequest) -> Iterator[MemorySystem]:
    with MemorySystem.open(runtime=request.param, clock=VirtualClock()) as system:
        yield system


def test_two_agents_waiting_on_each_other_get_a_deadlock_error(memory: MemorySystem) -> None:
    a, b = memory.agent("a", "DA"), memory.agent("b", "DA")
    assert a.lock("r1") is not None
    assert b.lock("r2") is not None
    waiting = a.submit_lock("r2", "write", timeout_s=30.0)  # a waits for b
    with pytest.raises(DeadlockError):
        b.lock("r1", "write", timeout_s=30.0)  # b would wait for a: refused at once
    b.unlock("r2")
    assert waiting.get(5.0)["granted"] is True


def test_fencing_tokens_only_grow_and_refuse_a_stale_holder(memory: MemorySystem) -> None:
    a, b = memory.agent("a", "DA"), memory.agent("b", "DA")
    first = a.lock("repo")
    assert first is not None
    a.unlock("repo")
    second = b.lock("repo")
    assert second is not None and second > first
    board = memory.runtime.lookup("blackboard")
    board.ask({"t": "fence", "resource": "repo", "token": second}).get(2.0)
    with pytest.raises(ConflictError):
        board.ask({"t": "fence", "resource": "repo", "token": first}).get(2.0)


def test_bad_requests_are_refused(memory: MemorySystem) -> None:
    a = memory.agent("a", "DA")
    with pytest.raises(InvalidInput):
        a.lock("repo", "sideways")
    with pytest.raises(InvalidInput):
        a.heartbeat("dancing")
    a.create_task("task:x")
    with pytest.raises(InvalidInput):
        a.create_task("task:x")
    with pytest.raises(CycleError):
        a.depend("task:x", "task:x")
    assert a.task_layers() == [["task:x"]]


def test_release_takes_a_subtree_out_of_the_dag_or_changes_nothing(memory: MemorySystem) -> None:
    pa, sa = memory.agent("pa", "PA"), memory.agent("sa", "SA")
    sa.subscribe("task.events")
    pa.create_task("task:m")
    pa.create_task("task:m/copy", parent="task:m")
    pa.create_task("task:billing", depends_on=["task:m/copy"])
    pa.write("task:m", {"@type": "Task", "goal": "move sessions"}, graph="plan")
    before = pa.task_layers()
    with pytest.raises(InvalidInput, match="task:billing still wait"):
        sa.release_task("task:m")
    assert pa.task_layers() == before  # refused: nothing released
    with pytest.raises(InvalidInput):
        sa.release_task("task:nowhere")
    assert pa.release_task("task:billing") == ["task:billing"]
    assert sa.release_task("task:m") == ["task:m", "task:m/copy"]
    assert pa.task_layers() == []
    assert pa.read("task:m")["value"] == {"@type": "Task", "goal": "move sessions"}  # the lines stay
    events = [m["message"] for m in sa.inbox() if m["message"].get("type") == "task.released"]
    assert events == [{"type": "task.released", "task": "task:billing", "tasks": ["task:billing"]},
                      {"type": "task.released", "task": "task:m", "tasks": ["task:m", "task:m/copy"]}]


def test_team_status_and_stale_agents(memory: MemorySystem) -> None:
    a, b = memory.agent("a", "DA"), memory.agent("b", "CA")
    a.heartbeat("working", "writing tests")
    assert memory.team()["a"] == {"role": "DA", "status": "working", "stale": False}
    assert a.lock("repo") is not None
    clock = memory.clock
    assert isinstance(clock, VirtualClock)
    clock.advance(20)
    b.heartbeat("idle")
    clock.advance(15)
    team = memory.team()
    assert team["a"]["stale"] is True and team["b"]["stale"] is False
    assert b.lock("repo") is not None  # a's lock went with it


def test_the_blackboard_scenarios_pass_under_50_seeds() -> None:
    files = sorted(str(p) for p in (REPO / "scenarios" / "blackboard").glob("*.yaml"))
    assert len(files) >= 3
    assert main(["replay", *files, "--seeds", "0..49"]) == 0
    assert main(["replay", *files, "--runtime", "threads"]) == 0


def test_sparql_is_coherent_confined_and_survives_a_restart(tmp_path: Path) -> None:
    where = tmp_path / "memory"
    query = "SELECT ?s WHERE { ?s a ?t } ORDER BY ?s"
    with MemorySystem.open(where, runtime="sim") as memory:
        pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
        pa.write("task:t", {"@type": "Task"}, graph="plan")
        da.write("artifact:a", {"@type": "Artifact"}, graph="execution")  # dirty in da's cache
        assert pa.query(query) == {"rows": [{"s": "task:t"}]}
        assert da.query(query) == {"rows": [{"s": "artifact:a"}, {"s": "task:t"}]}
        da.delete("artifact:a")
        assert da.query(query) == {"rows": [{"s": "task:t"}]}
        with pytest.raises(InvalidInput):
            pa.write("task:bad", {"@context": "http://example.org/remote", "x": 1})
        with pytest.raises(InvalidInput):
            pa.query("SELECT {")
    with MemorySystem.open(where, runtime="sim") as memory:
        # The graph is rebuilt from L0 on open (the clean close flushed everything).
        assert memory.agent("ca", "CA").query(query) == {"rows": [{"s": "task:t"}]}
