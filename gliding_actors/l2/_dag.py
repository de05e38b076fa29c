"""The task DAG of the blackboard, as a plain deterministic class.

Tasks are decomposed (a *parent* and its *children*) and ordered (a task
*depends on* others). :class:`TaskDAG` keeps both relations, refuses any edge
that would close a cycle before it changes anything, and answers the questions
the team asks: what can start now (:meth:`~TaskDAG.ready`), what still blocks
a task (:meth:`~TaskDAG.unmet`), in which order a piece of work unfolds
(:meth:`~TaskDAG.layers`).

Why these rules:

* **One graph, two kinds of edge.** Layers and cycle checks use
  dependency → dependent *and* parent → child edges, by design: a
  parent is planned (decomposed) before its children are worked on, so it
  comes first. A task therefore can neither depend on its own descendant nor be
  a dependency of its ancestor.
* **Children inherit their ancestors' dependencies, not their completion.** A
  pending task is ready when every task it *or any of its ancestors* depends on
  is ``completed`` and no ancestor has ``failed``: the sub-steps of "implement"
  cannot start before "design", which "implement" depends on, is done. The
  parent's own completion does not gate its children — a parent typically
  completes *after* them, and gating on it would deadlock that pattern. A
  ``failed`` dependency blocks until the orchestrator decides what to do
  (release the blocked work, or add other work).
* **Completion is checked.** Completing a task while something it (or an
  ancestor) depends on is not completed is
  :class:`~gliding_actors.errors.InvalidInput` naming those tasks; a task may
  fail at any time. A finished task takes no new dependencies (they could not
  matter any more), so "completed ⇒ every dependency completed" always holds.
* **Removal never changes readiness.** :meth:`~TaskDAG.release` and
  :meth:`~TaskDAG.gc` only remove a task if no remaining pending task depends
  on it unless it is completed (a completed dependency is satisfied whether or
  not it is still recorded; a pending or failed one is not, so forgetting it
  would silently unblock its dependents).
* **What the host needs from a completion.** Writing the task's dirty nodes to
  L0 is the host's job; :meth:`~TaskDAG.complete` returns the nodes attached
  to the task with :meth:`~TaskDAG.attach`, the tasks it made ready, and the
  events to publish.

``layers(T)`` means: the subtree rooted at ``T`` (``T`` and its descendants via
parent → child), with the dependency edges *among those tasks*, layered by
Kahn's algorithm; dependencies on tasks outside the subtree are left out (they
are prerequisites of the subtree, not part of its order). ``layers()`` without
a task layers the whole DAG. Each layer is sorted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from gliding_actors.errors import CycleError, InvalidInput, show
from gliding_actors.l0 import is_valid_iri, is_valid_label

__all__ = ["TASK_FINAL_STATUSES", "TASK_STATUSES", "TaskCompletion", "TaskDAG", "TaskInfo"]

#: Every status a task can have; new tasks are ``pending``.
TASK_STATUSES: tuple[str, ...] = ("pending", "completed", "failed")
#: The statuses :meth:`TaskDAG.complete` accepts (the scenario op ``task.complete``).
TASK_FINAL_STATUSES: tuple[str, ...] = ("completed", "failed")


@dataclasses.dataclass(frozen=True)
class TaskInfo:
    """One task as plain values (lists sorted)."""

    task: str
    status: str
    parent: str | None
    children: tuple[str, ...]
    depends_on: tuple[str, ...]
    dependents: tuple[str, ...]
    nodes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}


@dataclasses.dataclass(frozen=True)
class TaskCompletion:
    """What :meth:`TaskDAG.complete` tells its host.

    ``nodes``: the IRIs attached to the task (to write down to L0 in one batch).
    ``ready``: tasks that became ready because of this completion (sorted;
    dependents and, through inheritance, their descendants).
    ``events``: plain-data events to publish, in order.
    """

    task: str
    status: str
    nodes: tuple[str, ...]
    ready: tuple[str, ...]
    events: tuple[dict[str, Any], ...]


@dataclasses.dataclass
class _Task:
    status: str = "pending"
    parent: str | None = None
    children: set[str] = dataclasses.field(default_factory=set)
    depends_on: set[str] = dataclasses.field(default_factory=set)
    dependents: set[str] = dataclasses.field(default_factory=set)
    nodes: set[str] = dataclasses.field(default_factory=set)


class TaskDAG:
    """Tasks with parent/child and dependency edges, kept acyclic; see the module docstring."""

    def __init__(self) -> None:
        self._tasks: dict[str, _Task] = {}

    # ------------------------------------------------------------------ changes

    def create(
        self, task: str, parent: str | None = None, depends_on: Iterable[str] = ()
    ) -> TaskInfo:
        """Add a pending task under ``parent`` (optional) after ``depends_on`` (repeats ignored).

        An existing id or an unknown parent or dependency is
        :class:`~gliding_actors.errors.InvalidInput`; naming the
        task itself as its parent or dependency is
        :class:`~gliding_actors.errors.CycleError`. A new task has no outgoing
        edges, so nothing else can close a cycle here.
        """
        _check_id(task, "task")
        if isinstance(depends_on, str):
            raise InvalidInput("depends_on is a list of task ids, not one string")
        deps = sorted(set(_check_ids(depends_on)))
        if parent is not None:
            _check_id(parent, "parent")
        if task in self._tasks:
            raise InvalidInput(f"task {show(task)} already exists")
        if parent == task or task in deps:
            raise CycleError(f"task {task!r} cannot come after itself")
        if parent is not None:
            self._get(parent)
        for dep in deps:
            self._get(dep)
        self._tasks[task] = _Task(parent=parent, depends_on=set(deps))
        if parent is not None:
            self._tasks[parent].children.add(task)
        for dep in deps:
            self._tasks[dep].dependents.add(task)
        return self.info(task)

    def depend(self, task: str, on: str) -> None:
        """Make ``task`` depend on ``on`` (an existing edge: nothing happens).

        :class:`~gliding_actors.errors.CycleError` (naming the cycle) if ``on``
        already comes after ``task`` through dependency or parent → child
        edges; :class:`~gliding_actors.errors.InvalidInput` if either task is
        unknown or ``task`` is already finished. Checked before anything changes.
        """
        _check_id(task, "task")
        _check_id(on, "on")
        node = self._get(task)
        self._get(on)
        if on in node.depends_on:
            return
        if node.status != "pending":
            raise InvalidInput(
                f"task {show(task)} is already {node.status}; it takes no new dependencies"
            )
        path = self._path(task, on)
        if path is not None:
            raise CycleError(
                f"task {task!r} cannot depend on {on!r}: that would close the cycle "
                f"{' -> '.join([*path, task])}"
            )
        node.depends_on.add(on)
        self._tasks[on].dependents.add(task)

    def attach(self, task: str, iris: Iterable[str]) -> None:
        """Record blackboard nodes (IRIs) that belong to ``task``; :meth:`complete` returns them."""
        _check_id(task, "task")
        if isinstance(iris, str):
            raise InvalidInput("iris is a list of IRIs, not one string")
        items = list(iris)
        for iri in items:
            if not is_valid_iri(iri):
                raise InvalidInput(f"not an IRI: {show(iri)}")
        self._get(task).nodes.update(items)

    def complete(self, task: str, status: str = "completed") -> TaskCompletion:
        """Finish a pending task as ``completed`` or ``failed``.

        Completing needs every dependency completed
        (:class:`~gliding_actors.errors.InvalidInput` names the unmet ones);
        failing does not. A task finishes once.
        """
        self.check_finish(task, status)
        node = self._tasks[task]
        before = set(self.ready())
        node.status = status
        ready = [t for t in self.ready() if t not in before]
        events: list[dict[str, Any]] = [{"type": f"task.{status}", "task": task}]
        events.extend({"type": "task.ready", "task": d} for d in ready)
        return TaskCompletion(task, status, tuple(sorted(node.nodes)), tuple(ready), tuple(events))

    def check_finish(self, task: str, status: str) -> None:
        """Refuse what :meth:`complete` would refuse, changing nothing."""
        _check_id(task, "task")
        if status not in TASK_FINAL_STATUSES:
            raise InvalidInput(
                f"a task finishes as {' or '.join(TASK_FINAL_STATUSES)}, not {show(status)}"
            )
        node = self._get(task)
        if node.status != "pending":
            raise InvalidInput(f"task {show(task)} is already {node.status}")
        if status == "completed":
            unmet = self.unmet(task)
            if unmet:
                raise InvalidInput(
                    f"task {show(task)} cannot complete before its dependencies: {', '.join(unmet)}"
                )

    def release(self, task: str) -> list[str]:
        """Remove ``task`` and all its descendants; return their ids, sorted.

        Refused (:class:`~gliding_actors.errors.InvalidInput`, nothing removed)
        when a pending task outside the subtree depends on a task inside it that
        is not completed: removing it would silently unblock that task.
        """
        _check_id(task, "task")
        self._get(task)
        doomed = set(self._subtree(task))
        for name in sorted(doomed):
            node = self._tasks[name]
            if node.status == "completed":
                continue
            outside = sorted(
                d for d in node.dependents if d not in doomed and self._tasks[d].status == "pending"
            )
            if outside:
                raise InvalidInput(
                    f"cannot release {show(task)}: {', '.join(outside)} still wait(s) for "
                    f"{show(name)} ({node.status})"
                )
        self._remove(doomed)
        return sorted(doomed)

    def gc(self) -> list[str]:
        """Remove finished leaves, repeatedly, until none is left; return their ids, sorted.

        A finished task without children goes unless it is ``failed`` and a
        pending task depends on it (that task must stay visibly blocked). A
        parent whose children all went becomes a leaf and may go in turn.
        """
        removed: set[str] = set()
        while True:
            batch = {
                name
                for name, node in self._tasks.items()
                if name not in removed
                and node.status != "pending"
                and not (node.children - removed)
                and not (
                    node.status == "failed"
                    and any(self._tasks[d].status == "pending" for d in node.dependents)
                )
            }
            if not batch:
                break
            removed |= batch
        self._remove(removed)
        return sorted(removed)

    # ------------------------------------------------------------------ queries

    def __contains__(self, task: object) -> bool:
        return task in self._tasks

    def __len__(self) -> int:
        return len(self._tasks)

    def tasks(self) -> list[str]:
        """Every task id, sorted."""
        return sorted(self._tasks)

    def info(self, task: str) -> TaskInfo:
        """One task as plain values."""
        _check_id(task, "task")
        node = self._get(task)
        return TaskInfo(
            task,
            node.status,
            node.parent,
            tuple(sorted(node.children)),
            tuple(sorted(node.depends_on)),
            tuple(sorted(node.dependents)),
            tuple(sorted(node.nodes)),
        )

    def status(self, task: str) -> str:
        """``pending``, ``completed`` or ``failed``."""
        _check_id(task, "task")
        return self._get(task).status

    def unmet(self, task: str) -> list[str]:
        """What ``task`` and its ancestors depend on that is not completed, sorted.

        This is the dependency check: :meth:`complete` refuses while it is not
        empty, and a task is not ready while it is not empty.
        """
        _check_id(task, "task")
        self._get(task)
        deps = {d for name in self._lineage(task) for d in self._tasks[name].depends_on}
        return sorted(d for d in deps if self._tasks[d].status != "completed")

    def is_ready(self, task: str) -> bool:
        """True if ``task`` is pending, :meth:`unmet` is empty and no ancestor failed."""
        _check_id(task, "task")
        if self._get(task).status != "pending" or self.unmet(task):
            return False
        return all(self._tasks[a].status != "failed" for a in self._lineage(task)[1:])

    def ready(self) -> list[str]:
        """Every ready task, sorted."""
        return [t for t in sorted(self._tasks) if self.is_ready(t)]

    def subtree(self, task: str) -> list[str]:
        """``task`` and its descendants via parent → child, sorted."""
        _check_id(task, "task")
        self._get(task)
        return sorted(self._subtree(task))

    def layers(self, task: str | None = None) -> list[list[str]]:
        """Kahn layers of the subtree rooted at ``task`` (None: the whole DAG), each sorted.

        Layer 0 holds the tasks with no incoming edge inside the set; layer
        ``i + 1`` the tasks whose every incoming edge comes from layers ``≤ i``.
        Edges: dependency → dependent and parent → child, both ends in the set.
        """
        if task is None:
            members = set(self._tasks)
        else:
            _check_id(task, "task")
            self._get(task)
            members = set(self._subtree(task))
        indegree = {name: len(self._incoming(name) & members) for name in members}
        layer = sorted(name for name, n in indegree.items() if n == 0)
        layers: list[list[str]] = []
        while layer:
            layers.append(layer)
            following: set[str] = set()
            for name in layer:
                for succ in self._outgoing(name) & members:
                    indegree[succ] -= 1
                    if indegree[succ] == 0:
                        following.add(succ)
            layer = sorted(following)
        assert sum(map(len, layers)) == len(members), "the task graph has a cycle"
        return layers

    def snapshot(self) -> dict[str, Any]:
        """Every task as plain, sorted, msgpack-serialisable data."""
        return {name: self.info(name).to_dict() for name in sorted(self._tasks)}

    # ------------------------------------------------------------------ private

    def _get(self, task: str) -> _Task:
        node = self._tasks.get(task)
        if node is None:
            raise InvalidInput(f"unknown task {show(task)}")
        return node

    def _lineage(self, task: str) -> list[str]:
        """``task``, its parent, its grandparent, … up to the root."""
        chain = [task]
        parent = self._tasks[task].parent
        while parent is not None:
            chain.append(parent)
            parent = self._tasks[parent].parent
        return chain

    def _incoming(self, task: str) -> set[str]:
        node = self._tasks[task]
        return node.depends_on | ({node.parent} if node.parent is not None else set())

    def _outgoing(self, task: str) -> set[str]:
        node = self._tasks[task]
        return node.dependents | node.children

    def _subtree(self, task: str) -> list[str]:
        found = [task]
        i = 0
        while i < len(found):
            found.extend(sorted(self._tasks[found[i]].children))
            i += 1
        return found

    def _path(self, start: str, goal: str) -> list[str] | None:
        """A shortest path start → … → goal along outgoing edges, or None."""
        parent: dict[str, str | None] = {start: None}
        frontier = [start]
        while frontier:
            following: list[str] = []
            for name in frontier:
                if name == goal:
                    path: list[str] = []
                    step: str | None = name
                    while step is not None:
                        path.append(step)
                        step = parent[step]
                    return path[::-1]
                for succ in sorted(self._outgoing(name)):
                    if succ not in parent:
                        parent[succ] = name
                        following.append(succ)
            frontier = following
        return None

    def _remove(self, names: set[str]) -> None:
        for name in names:
            node = self._tasks[name]
            if node.parent is not None and node.parent not in names:
                self._tasks[node.parent].children.discard(name)
            for dep in node.depends_on - names:
                self._tasks[dep].dependents.discard(name)
            for dependent in node.dependents - names:
                self._tasks[dependent].depends_on.discard(name)
        for name in names:
            del self._tasks[name]


def _check_id(value: object, what: str) -> None:
    if not is_valid_label(value):
        raise InvalidInput(
            f"{what} is a task id (a non-empty string without control characters), not {show(value)}"
        )


def _check_ids(values: Iterable[object]) -> list[str]:
    try:
        items = list(values)
    except TypeError:
        raise InvalidInput(f"depends_on is a list of task ids, not {show(values)}") from None
    for value in items:
        _check_id(value, "a dependency")
    return [str(v) for v in items]
