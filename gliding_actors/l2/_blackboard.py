"""The blackboard actor: hosts the task DAG, agent awareness and the lock manager.

The three are plain classes that take ``now``; this behaviour feeds them the
runtime's clock, turns a lock wait into a deferred reply, keeps one timer set
for the earliest lease, wait or heartbeat deadline, and publishes what they
report (``agent.stale``, task events) on the MemoryBus. It never blocks: a
lock wait is queued state answered by a later release, expiry or time-out.

Requests (plain dicts, key ``t``, parsed into the typed values of
:mod:`~gliding_actors.l2._board_requests` at the door), all from agents' handles:

- ``register {agent, role}``; ``heartbeat {agent, status?, operation?}``;
  ``agents`` → ``{id: {role, status, stale}}``
- ``lock {agent, resource, mode, timeout_s}`` → ``{"granted", "token"?}``;
  ``unlock {agent, resource}``; ``fence {resource, token}`` (ConflictError if stale)
- ``task.create {task, parent?, depends_on?}``, ``task.depend {task, on}``,
  ``task.layers {task}``, ``task.attach {task, iris}``,
  ``task.scope {task, status}`` → ``{"tasks", "nodes"}`` (checks that the task
  may finish so, changes nothing), ``task.complete {task, status}``,
  ``task.release {task}`` → ``{"released"}`` (the task and its subtree leave the DAG)
- ``task.members {task}`` → ``{"tasks", "nodes", "statuses"}``: the subtree, attached
  lines and DAG statuses whatever the status (L3 scopes projections with it)

Completing a task writes the task's lines down to L0 first (see
:func:`task_lines` and ``Agent.submit_complete_task``): the handle asks
``task.scope``, recalls, finds the lines, flushes them, and only then sends
``task.complete`` — so a task reported completed has its lines durable.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable
from typing import Any

import pyoxigraph as ox

from gliding_actors.bus import AGENT_STALE, BUS_ACTOR, TASK_EVENTS
from gliding_actors.errors import GlidingError, InvalidInput
from gliding_actors.l2._awareness import AgentRegistry, release_stale
from gliding_actors.l2._board_requests import (
    Agents,
    Fence,
    Heartbeat,
    Lock,
    Register,
    TaskAttach,
    TaskComplete,
    TaskCreate,
    TaskDepend,
    TaskLayers,
    TaskMembers,
    TaskRelease,
    TaskScope,
    Tick,
    Unlock,
    parse_request,
)
from gliding_actors.l2._dag import TaskDAG
from gliding_actors.l2._graph import GraphStore
from gliding_actors.l2._jsonld import GENID_BASE
from gliding_actors.l2._locks import Effects, Granted, LockManager, Queued
from gliding_actors.runtime import DEFERRED, Context, ReplyToken

__all__ = ["BLACKBOARD_ACTOR", "BlackboardActor", "BlackboardState", "task_lines"]

BLACKBOARD_ACTOR = "blackboard"
_TICK = Tick().message()


@dataclasses.dataclass
class BlackboardState:
    """The task DAG, the agent registry and the lock table: what outlives the actor.

    The :class:`~gliding_actors.MemorySystem` keeps one and hands it to every
    :class:`BlackboardActor` its supervisor builds (as a directory's home
    outlives the directory actor). Each of the three is changed only through
    calls that check first and raise having changed nothing, so between two
    calls it is consistent; a crash is an exception in the actor around them.
    It is memory: a process crash loses it (docs/RELIABILITY.md).
    """

    tasks: TaskDAG
    agents: AgentRegistry
    locks: LockManager

    @classmethod
    def new(cls, *, heartbeat_timeout_s: float, lock_lease_s: float) -> BlackboardState:
        """Empty: no task, no agent, no lock."""
        return cls(TaskDAG(), AgentRegistry(heartbeat_timeout_s), LockManager(lock_lease_s))


class BlackboardActor:
    """Behaviour of the blackboard actor (see the module docstring).

    Built over an existing ``state`` (its supervisor restarting it after a
    crash), it serves on with the same tasks, registrations and locks — a
    lock held stays held and fencing tokens keep increasing from the last one
    issued, so no token is given twice — and repairs what died with the old
    actor: lock waits queued in the table whose deferred replies the crash
    failed (their callers got ``ActorCrashed``) are withdrawn, newest first at
    the table's own instant, so none is granted to an agent nobody will tell;
    the lease/heartbeat timer is set again (``on_start``). ``recovery_notes``
    says what was repaired.
    """

    def __init__(
        self, *, heartbeat_timeout_s: float, lock_lease_s: float, state: BlackboardState | None = None
    ) -> None:
        if state is None:
            state = BlackboardState.new(heartbeat_timeout_s=heartbeat_timeout_s, lock_lease_s=lock_lease_s)
            rebuilt = False
        else:
            rebuilt = True
        self.state = state
        self.tasks = state.tasks
        self.agents = state.agents
        self.locks = state.locks
        #: lock wait id -> the deferred reply of the agent waiting
        self._waiting: dict[int, ReplyToken] = {}
        self._timer_at: float | None = None
        #: what this build repaired in the state it took over (the supervisor's ping reports it)
        self.recovery_notes: list[str] = []
        if rebuilt:
            self._orphaned_waits()

    def _orphaned_waits(self) -> None:
        """Withdraw the waits whose replies died with the previous actor."""
        locks = self.locks
        table = locks.snapshot()["resources"]
        waits = sorted((int(w["wait_id"]) for r in table.values() for w in r["queue"]), reverse=True)
        at = locks.now
        if at is not None:
            for wait_id in waits:  # newest first: a queue head that fitted would have been granted already
                effects = locks.cancel(wait_id, now=at)
                for grant in effects.granted:  # not expected (see above); its lease expires by itself
                    self.recovery_notes.append(
                        f"blackboard: withdrawing waits granted {grant.resource} to {grant.agent} (token {grant.token})"
                    )
        held = sum(len(r["holders"]) for r in table.values())
        self.recovery_notes.append(
            f"blackboard: {len(waits)} orphaned lock waits withdrawn; {held} holds,"
            f" {len(self.tasks)} tasks, {len(self.agents.listing(now=at or 0.0))} agents kept"
        )

    def on_start(self, ctx: Context) -> None:
        """Set the timer for the earliest lease, wait or heartbeat deadline (after a restart)."""
        self._arm(ctx.clock.now(), ctx)

    def receive(self, message: Any, ctx: Context) -> Any:
        request = parse_request(message)  # InvalidInput for a malformed one, before anything changes
        now = ctx.clock.now()
        if isinstance(request, Tick):
            self._timer_at = None
            self._sweep(now, ctx)
            return None
        result = _HANDLERS[type(request)](self, request, now, ctx)  # a refusal raises having changed nothing
        self._arm(now, ctx)
        return result

    # -- awareness -------------------------------------------------------------
    def _register(self, req: Register, now: float, ctx: Context) -> None:
        self.agents.register(req.agent, req.role, now=now)

    def _heartbeat(self, req: Heartbeat, now: float, ctx: Context) -> dict[str, Any]:
        self.agents.heartbeat(req.agent, now=now, status=req.status, operation=req.operation)
        return {}

    def _agents(self, req: Agents, now: float, ctx: Context) -> dict[str, Any]:
        self._sweep(now, ctx)
        return {"agents": self.agents.listing(now=now)}

    def _sweep(self, now: float, ctx: Context) -> None:
        sweep = release_stale(self.agents, self.locks, now)
        self._answer_waits(sweep.effects, ctx)
        for event in sweep.events:
            ctx.send(BUS_ACTOR, {"type": "publish", "topic": AGENT_STALE, "message": event, "publisher": None})

    # -- locks -------------------------------------------------------------------
    def _lock(self, req: Lock, now: float, ctx: Context) -> Any:
        token = ctx.defer_reply()
        try:
            outcome = self.locks.acquire(req.agent, req.resource, req.mode, req.timeout_s, now=now)
        except GlidingError as exc:
            # The manager caught up to ``now`` before refusing: its catch-up
            # effects (expiries, grants to others) must still be delivered, so
            # the refusal is answered, not raised (a raise would drop them).
            self._answer_waits(self.locks.take_effects(), ctx)
            ctx.fail(token, exc)
            return DEFERRED
        self._answer_waits(outcome.effects, ctx)
        if isinstance(outcome, Queued):
            self._waiting[outcome.wait_id] = token
        elif isinstance(outcome, Granted):
            ctx.resolve(token, {"granted": True, "token": outcome.token})
        else:
            ctx.resolve(token, {"granted": False, "blockers": list(outcome.blockers)})
        return DEFERRED

    def _unlock(self, req: Unlock, now: float, ctx: Context) -> dict[str, Any]:
        self._answer_waits(self.locks.release(req.agent, req.resource, now=now), ctx)
        return {}

    def _fence(self, req: Fence, now: float, ctx: Context) -> dict[str, Any]:
        self.locks.check_fence(req.resource, req.token)
        return {}

    def _answer_waits(self, effects: Effects, ctx: Context) -> None:
        for grant in effects.granted:
            token = self._waiting.pop(grant.wait_id, None)
            if token is not None:
                ctx.resolve(token, {"granted": True, "token": grant.token})
        for wait in (*effects.timed_out, *effects.cancelled):
            token = self._waiting.pop(wait.wait_id, None)
            if token is not None:
                ctx.resolve(token, {"granted": False})

    def _arm(self, now: float, ctx: Context) -> None:
        """Keep one timer set for the earliest lock or heartbeat deadline."""
        deadlines = [d for d in (self.locks.next_deadline(), self.agents.next_deadline()) if d is not None]
        if not deadlines:
            return
        due = min(deadlines)
        if self._timer_at is not None and self._timer_at <= due:
            return
        self._timer_at = due
        ctx.schedule(max(0.0, due - now), _TICK)

    # -- tasks -------------------------------------------------------------------
    def _task_create(self, req: TaskCreate, now: float, ctx: Context) -> dict[str, Any]:
        self.tasks.create(req.task, req.parent, req.depends_on)
        return {"task": req.task}

    def _task_depend(self, req: TaskDepend, now: float, ctx: Context) -> dict[str, Any]:
        self.tasks.depend(req.task, req.on)
        return {}

    def _task_layers(self, req: TaskLayers, now: float, ctx: Context) -> dict[str, Any]:
        return {"layers": self.tasks.layers(req.task)}

    def _task_attach(self, req: TaskAttach, now: float, ctx: Context) -> dict[str, Any]:
        self.tasks.attach(req.task, req.iris)
        return {}

    def _task_scope(self, req: TaskScope, now: float, ctx: Context) -> dict[str, Any]:
        """What completing ``task`` will write down: its subtree and attached nodes.

        Refuses, as :meth:`TaskDAG.complete` would, a task that may not finish
        with ``status`` now, so a refused completion flushes nothing. Changes
        nothing: the status changes only at ``task.complete``, after the flush.
        """
        self.tasks.info(req.task)  # InvalidInput: a bad or unknown id, before a bad status
        self.tasks.check_finish(req.task, req.status)
        subtree = self.tasks.subtree(req.task)
        nodes = sorted({iri for t in subtree for iri in self.tasks.info(t).nodes})
        return {"tasks": subtree, "nodes": nodes}

    def _task_members(self, req: TaskMembers, now: float, ctx: Context) -> dict[str, Any]:
        """``task``'s subtree, attached lines and DAG statuses, whatever its status.

        L3 scopes a projection with it. An id the DAG does not know answers
        just itself (a task may have lines without a DAG entry, e.g. after a
        process restart). Changes nothing.
        """
        task = req.task
        try:
            subtree = self.tasks.subtree(task)
        except InvalidInput:
            return {"tasks": [task], "nodes": [], "statuses": {}}
        infos = [self.tasks.info(t) for t in subtree]
        nodes = sorted({iri for info in infos for iri in info.nodes})
        return {"tasks": subtree, "nodes": nodes, "statuses": {info.task: info.status for info in infos}}

    def _task_release(self, req: TaskRelease, now: float, ctx: Context) -> dict[str, Any]:
        """Take ``task`` and its subtree out of the DAG (the lines stay in the memory); ``task.released``
        is published. Refused when a pending task outside the subtree still waits for one inside."""
        released = self.tasks.release(req.task)
        event = {"type": "task.released", "task": req.task, "tasks": released}
        ctx.send(BUS_ACTOR, {"type": "publish", "topic": TASK_EVENTS, "message": event, "publisher": None})
        return {"released": released}

    def _task_complete(self, req: TaskComplete, now: float, ctx: Context) -> dict[str, Any]:
        done = self.tasks.complete(req.task, req.status)
        for event in done.events:
            ctx.send(BUS_ACTOR, {"type": "publish", "topic": TASK_EVENTS, "message": dict(event), "publisher": None})
        # The task's lines were written down before this request was sent (the
        # handle flushes first); ``flushed`` is the handle's to report.
        return {"ready": list(done.ready), "nodes": list(done.nodes)}


def task_lines(graph: GraphStore, tasks: Iterable[str], attached: Iterable[str] = ()) -> list[str]:
    """The lines that belong to ``tasks`` (a task and its subtree), sorted.

    A line belongs to a task when it is ``attached`` to it, when its IRI *is*
    the task's id (the task's own node), or when its value links to the task
    (``{"about": {"@id": "task:x"}}``: a triple ``?s ?p <task:x>`` whose
    subject is the line itself or one of its skolemised blank nodes, in any
    named graph). Links are found with SPARQL over the graph, one query per
    task with the task bound as an RDF term — no id is spliced into query
    text; an id that is not an IRI cannot be linked to and is skipped. The
    caller recalls dirty lines first, so values still in agents' caches are
    in the graph. A named node nested in a line is not a line: a link from it
    is not followed back to the line holding it.

    Reads only (the graph's query and node cache are safe from any thread).
    """
    found = set(attached)
    skolems: set[str] = set()
    for task in tasks:
        if graph.node(task) is not None:
            found.add(task)
        try:
            ox.NamedNode(task)
        except ValueError:
            continue
        rows = graph.query(
            "SELECT DISTINCT ?s ?task WHERE { ?s ?p ?task }",
            graphs=None,
            bindings={"task": {"@id": task}},
            role_is_system=True,
        )["rows"]
        for row in rows:
            subject = row["s"]
            if subject.startswith(GENID_BASE):
                skolems.add(subject)
            elif graph.node(subject) is not None:
                found.add(subject)
    for skolem in sorted(skolems):
        owner = _skolem_owner(graph, skolem)
        if owner is not None:
            found.add(owner)
    return sorted(found)


def _skolem_owner(graph: GraphStore, skolem: str) -> str | None:
    """The line that put skolem IRI ``skolem`` (its blank node), or None.

    A skolem IRI is ``GENID_BASE + sha256(line)[:32] + "/b<n>"`` and hangs
    off its line through a chain of triples; the lines that reach it are the
    candidates, and the digest picks the one that made it.
    """
    digest = skolem[len(GENID_BASE) :].split("/", 1)[0]
    rows = graph.query(
        "SELECT DISTINCT ?line ?b WHERE { ?line (<urn:gliding-actors:none>|!<urn:gliding-actors:none>)+ ?b }",
        graphs=None,
        bindings={"b": {"@id": skolem}},
        role_is_system=True,
    )["rows"]
    for row in rows:
        line: str = row["line"]
        if hashlib.sha256(line.encode()).hexdigest()[:32] == digest and graph.node(line) is not None:
            return line
    return None


#: each request's handler, by its class
_HANDLERS: dict[type, Any] = {
    Register: BlackboardActor._register,
    Heartbeat: BlackboardActor._heartbeat,
    Agents: BlackboardActor._agents,
    Lock: BlackboardActor._lock,
    Unlock: BlackboardActor._unlock,
    Fence: BlackboardActor._fence,
    TaskCreate: BlackboardActor._task_create,
    TaskDepend: BlackboardActor._task_depend,
    TaskLayers: BlackboardActor._task_layers,
    TaskAttach: BlackboardActor._task_attach,
    TaskScope: BlackboardActor._task_scope,
    TaskComplete: BlackboardActor._task_complete,
    TaskRelease: BlackboardActor._task_release,
    TaskMembers: BlackboardActor._task_members,
}
