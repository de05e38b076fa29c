"""The task DAG: layers, cycles, readiness, completion, release, garbage collection."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from gliding_actors.errors import CycleError, InvalidInput
from gliding_actors.l2 import TaskDAG


def auth_dag() -> TaskDAG:
    """auth → {design, impl, test}; impl after design, test after impl; docs outside."""
    dag = TaskDAG()
    dag.create("auth")
    dag.create("design", parent="auth")
    dag.create("impl", parent="auth", depends_on=["design"])
    dag.create("test", parent="auth", depends_on=["impl"])
    dag.create("code", parent="impl")
    dag.create("docs", depends_on=["auth"])
    return dag


# --------------------------------------------------------------------------- layers


def test_layers_of_a_subtree() -> None:
    dag = auth_dag()
    assert dag.layers("auth") == [["auth"], ["design"], ["impl"], ["code", "test"]]
    assert dag.layers("impl") == [["impl"], ["code"]]
    assert dag.layers() == [["auth"], ["design", "docs"], ["impl"], ["code", "test"]]


def test_layers_leave_out_dependencies_outside_the_subtree() -> None:
    dag = TaskDAG()
    dag.create("schema")
    dag.create("api")
    dag.create("client", parent="api", depends_on=["schema"])
    dag.create("server", parent="api", depends_on=["schema"])
    dag.create("e2e", parent="api", depends_on=["client", "server"])
    assert dag.layers("api") == [["api"], ["client", "server"], ["e2e"]]
    assert dag.layers() == [["api", "schema"], ["client", "server"], ["e2e"]]


def test_each_layer_is_sorted() -> None:
    dag = TaskDAG()
    for name in ["z", "b", "m", "a"]:
        dag.create(name)
    assert dag.layers() == [["a", "b", "m", "z"]]


# --------------------------------------------------------------------------- cycles


def test_cycle_error_names_the_cycle_and_changes_nothing() -> None:
    dag = auth_dag()
    before = dag.snapshot()
    with pytest.raises(CycleError, match="design -> impl -> test -> design"):
        dag.depend("design", "test")
    assert dag.snapshot() == before


def test_a_parent_cannot_depend_on_its_descendant() -> None:
    dag = auth_dag()
    with pytest.raises(CycleError, match="auth -> impl -> code -> auth"):
        dag.depend("auth", "code")
    dag.depend("code", "auth")  # the other way round is the parent → child order already


def test_self_references_are_cycles() -> None:
    dag = TaskDAG()
    dag.create("a")
    with pytest.raises(CycleError):
        dag.depend("a", "a")
    with pytest.raises(CycleError):
        dag.create("b", depends_on=["b"])
    with pytest.raises(CycleError):
        dag.create("c", parent="c")
    assert dag.tasks() == ["a"]


def test_depend_is_idempotent() -> None:
    dag = auth_dag()
    before = dag.snapshot()
    dag.depend("impl", "design")
    assert dag.snapshot() == before


# --------------------------------------------------------------------------- readiness


def test_ready_follows_dependencies_and_inherits_them_from_ancestors() -> None:
    dag = auth_dag()
    # code's parent impl depends on design: code is not ready either
    assert dag.ready() == ["auth", "design"]
    assert dag.unmet("code") == ["design"]
    dag.complete("design")
    assert dag.ready() == ["auth", "code", "impl"]
    assert dag.unmet("test") == ["impl"]


def test_a_failed_ancestor_blocks_its_subtree() -> None:
    dag = auth_dag()
    dag.complete("design")
    dag.complete("impl", "failed")
    assert dag.ready() == ["auth"]
    assert not dag.is_ready("code")
    assert dag.unmet("test") == ["impl"]


# --------------------------------------------------------------------------- completion


def test_complete_reports_nodes_newly_ready_tasks_and_events() -> None:
    dag = auth_dag()
    dag.attach("design", ["plan:jwt", "artifact:diagram"])
    dag.attach("design", ["plan:jwt"])
    done = dag.complete("design")
    assert done.status == "completed"
    assert done.nodes == ("artifact:diagram", "plan:jwt")
    assert done.ready == ("code", "impl")
    assert done.events == (
        {"type": "task.completed", "task": "design"},
        {"type": "task.ready", "task": "code"},
        {"type": "task.ready", "task": "impl"},
    )
    assert msgpack.unpackb(msgpack.packb(list(done.events))) == list(done.events)


def test_completion_needs_dependencies_but_failure_does_not() -> None:
    dag = auth_dag()
    before = dag.snapshot()
    with pytest.raises(InvalidInput, match="design"):
        dag.complete("impl")
    with pytest.raises(InvalidInput, match="design"):
        dag.complete("code")  # inherited from impl
    assert dag.snapshot() == before
    failed = dag.complete("impl", "failed")
    assert (failed.status, failed.ready, failed.events) == (
        "failed",
        (),
        ({"type": "task.failed", "task": "impl"},),
    )


def test_a_task_finishes_once_and_takes_no_new_dependencies() -> None:
    dag = auth_dag()
    dag.complete("design")
    before = dag.snapshot()
    with pytest.raises(InvalidInput, match="already completed"):
        dag.complete("design", "failed")
    with pytest.raises(InvalidInput, match="already completed"):
        dag.depend("design", "docs")
    assert dag.snapshot() == before


def test_a_parent_may_complete_before_or_after_its_children() -> None:
    dag = auth_dag()
    dag.complete("auth")
    assert dag.is_ready("design")


# --------------------------------------------------------------------------- removal


def test_release_removes_a_subtree() -> None:
    dag = auth_dag()
    dag.complete("design")
    dag.complete("impl", "failed")
    with pytest.raises(InvalidInput, match="test still wait"):
        dag.release("impl")  # it would quietly unblock test
    dag.complete("test", "failed")
    assert dag.release("impl") == ["code", "impl"]
    assert "impl" not in dag and "code" not in dag
    assert dag.info("auth").children == ("design", "test")
    assert dag.info("test").depends_on == ()


def test_release_refuses_to_silently_unblock_outside_work() -> None:
    dag = auth_dag()
    before = dag.snapshot()
    with pytest.raises(InvalidInput, match="docs"):
        dag.release("auth")  # docs (pending) waits for auth (pending)
    assert dag.snapshot() == before
    assert dag.release("docs") == ["docs"]
    assert dag.release("auth") == ["auth", "code", "design", "impl", "test"]
    assert len(dag) == 0


def test_gc_collects_finished_leaves_until_none_is_left() -> None:
    dag = auth_dag()
    for task in ["design", "impl", "code", "test"]:
        dag.complete(task)
    assert dag.gc() == ["code", "design", "impl", "test"]
    assert dag.tasks() == ["auth", "docs"]
    dag.complete("auth")
    assert dag.gc() == ["auth"]  # docs (pending) loses a completed dependency: still ready
    assert dag.ready() == ["docs"]


def test_gc_keeps_a_failed_task_that_blocks_pending_work() -> None:
    dag = TaskDAG()
    dag.create("a")
    dag.create("b", depends_on=["a"])
    dag.complete("a", "failed")
    assert dag.gc() == []
    dag.complete("b", "failed")
    assert dag.gc() == ["a", "b"]


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "call",
    [
        lambda d: d.create("auth"),
        lambda d: d.create(""),
        lambda d: d.create(None),
        lambda d: d.create("x", parent="nope"),
        lambda d: d.create("x", parent=""),
        lambda d: d.create("x", depends_on=["nope"]),
        lambda d: d.create("x", depends_on="design"),
        lambda d: d.create("x", depends_on=[""]),
        lambda d: d.create("x", depends_on=5),
        lambda d: d.depend("nope", "design"),
        lambda d: d.depend("design", "nope"),
        lambda d: d.complete("nope"),
        lambda d: d.complete("design", "done"),
        lambda d: d.complete("design", None),
        lambda d: d.layers("nope"),
        lambda d: d.layers(""),
        lambda d: d.release("nope"),
        lambda d: d.unmet("nope"),
        lambda d: d.attach("design", "plan:x"),
        lambda d: d.attach("design", ["not an iri"]),
        lambda d: d.attach("nope", ["plan:x"]),
    ],
)
def test_bad_input_is_invalid_input_and_changes_nothing(call: Any) -> None:
    dag = auth_dag()
    before = dag.snapshot()
    with pytest.raises(InvalidInput):
        call(dag)
    assert dag.snapshot() == before


def test_snapshot_is_plain_sorted_msgpack_data() -> None:
    dag = auth_dag()
    snap = dag.snapshot()
    assert list(snap) == sorted(snap)
    assert snap["auth"] == {
        "task": "auth",
        "status": "pending",
        "parent": None,
        "children": ["design", "impl", "test"],
        "depends_on": [],
        "dependents": ["docs"],
        "nodes": [],
    }
    assert msgpack.unpackb(msgpack.packb(snap)) == snap


# --------------------------------------------------------------------------- property


NAMES = [f"t{i}" for i in range(10)]


def reaches(edges: set[tuple[str, str]], start: str, goal: str) -> bool:
    """Naive reachability by repeated expansion."""
    seen = {start}
    while True:
        more = {b for a, b in edges if a in seen} - seen
        if not more:
            return goal in seen
        seen |= more


class DagMachine(RuleBasedStateMachine):
    """Random creates, dependencies, completions, releases and collections, checked against
    a naive edge set."""

    def __init__(self) -> None:
        super().__init__()
        self.dag = TaskDAG()

    def edges(self) -> set[tuple[str, str]]:
        out = set()
        for name in self.dag.tasks():
            info = self.dag.info(name)
            out |= {(d, name) for d in info.depends_on}
            if info.parent is not None:
                out.add((info.parent, name))
        return out

    def naive_ready(self) -> list[str]:
        ready = []
        for name in self.dag.tasks():
            if self.dag.status(name) != "pending":
                continue
            lineage, node = [name], self.dag.info(name)
            while node.parent is not None:
                lineage.append(node.parent)
                node = self.dag.info(node.parent)
            deps = {d for t in lineage for d in self.dag.info(t).depends_on}
            if all(self.dag.status(d) == "completed" for d in deps) and all(
                self.dag.status(a) != "failed" for a in lineage[1:]
            ):
                ready.append(name)
        return ready

    def pick(self, data: st.DataObject) -> str | None:
        tasks = self.dag.tasks()
        return data.draw(st.sampled_from(tasks)) if tasks else None

    @rule(task=st.sampled_from(NAMES), data=st.data())
    def create(self, task: str, data: st.DataObject) -> None:
        tasks = self.dag.tasks()
        parent = data.draw(st.sampled_from([None, *tasks, "nope"]))
        deps = data.draw(st.lists(st.sampled_from([*tasks, task]), max_size=3)) if tasks else []
        before = self.dag.snapshot()
        try:
            self.dag.create(task, parent, deps)
        except InvalidInput:
            assert self.dag.snapshot() == before
            assert task in tasks or parent == "nope"
        except CycleError:
            assert self.dag.snapshot() == before
            assert task == parent or task in deps
        else:
            assert self.dag.info(task).depends_on == tuple(sorted(set(deps)))

    @rule(data=st.data())
    def depend(self, data: st.DataObject) -> None:
        tasks = self.dag.tasks()
        if len(tasks) < 2:
            return
        task, on = data.draw(st.lists(st.sampled_from(tasks), min_size=2, max_size=2, unique=True))
        before = self.dag.snapshot()
        edges = self.edges()
        try:
            self.dag.depend(task, on)
        except CycleError:
            assert self.dag.snapshot() == before
            assert reaches(edges, task, on)
        except InvalidInput:
            assert self.dag.snapshot() == before
            assert self.dag.status(task) != "pending"
        else:
            assert not reaches(edges - {(on, task)}, task, on)
            assert on in self.dag.info(task).depends_on

    @rule(data=st.data(), status=st.sampled_from(["completed", "completed", "failed"]))
    def complete(self, data: st.DataObject, status: str) -> None:
        task = self.pick(data)
        if task is None:
            return
        ready_before = set(self.naive_ready())
        before = self.dag.snapshot()
        try:
            done = self.dag.complete(task, status)
        except InvalidInput:
            assert self.dag.snapshot() == before
            unmet = status == "completed" and self.dag.unmet(task)
            assert self.dag.status(task) != "pending" or unmet
        else:
            assert set(done.ready) == set(self.naive_ready()) - ready_before

    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        task = self.pick(data)
        if task is None:
            return
        ready_before = self.naive_ready()
        before = self.dag.snapshot()
        try:
            gone = self.dag.release(task)
        except InvalidInput:
            assert self.dag.snapshot() == before
        else:
            assert task in gone
            assert [t for t in ready_before if t not in gone] == self.naive_ready()

    @rule()
    def gc(self) -> None:
        ready_before = self.naive_ready()
        gone = self.dag.gc()
        assert [t for t in ready_before if t not in gone] == self.naive_ready()

    @invariant()
    def layers_respect_every_edge(self) -> None:
        for root in [None, *self.dag.tasks()]:
            layers = self.dag.layers(root)
            members = set(self.dag.tasks()) if root is None else set(self.dag.subtree(root))
            flat = [t for layer in layers for t in layer]
            assert sorted(flat) == sorted(members) and len(flat) == len(set(flat))
            assert all(layer == sorted(layer) and layer for layer in layers)
            index = {t: i for i, layer in enumerate(layers) for t in layer}
            inner = {(a, b) for a, b in self.edges() if a in members and b in members}
            assert all(index[a] < index[b] for a, b in inner)
            # Kahn layers are tight: every task after layer 0 has a predecessor right before it
            for t, i in index.items():
                if i:
                    assert any(index[a] == i - 1 for a, b in inner if b == t)

    @invariant()
    def acyclic(self) -> None:
        edges = self.edges()
        for a, b in edges:
            assert not reaches(edges, b, a)

    @invariant()
    def ready_matches(self) -> None:
        assert self.dag.ready() == self.naive_ready()

    @invariant()
    def completed_means_dependencies_completed(self) -> None:
        """Direct ones (an ancestor may still take a new dependency after a child finished)."""
        for t in self.dag.tasks():
            if self.dag.status(t) == "completed":
                assert all(self.dag.status(d) == "completed" for d in self.dag.info(t).depends_on)


def test_dag_state_machine() -> None:
    run_state_machine_as_test(
        DagMachine, settings=settings(max_examples=150, stateful_step_count=40, deadline=None)
    )
