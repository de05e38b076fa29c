"""The blackboard actor: hosts the task DAG, agent awareness and the lock manager.

The three are plain classes that take ``now``; this behaviour feeds them the
runtime's clock, turns a lock wait into a deferred reply, keeps one timer set
for the earliest lease, wait or heartbeat deadline, and publishes what they
report (``agent.stale``, task events) on the MemoryBus. It never blocks: a
lock wait is queued state answered by a later release, expiry or time-out.

Requests (plain dicts, key ``t``), all from agents' handles:

- ``register {agent, role}``; ``heartbeat {agent, status?, operation?}``;
  ``agents`` → ``{id: {role, status, stale}}``
- ``lock {agent, resource, mode, timeout_s}`` → ``{"granted", "token"?}``;
  ``unlock {agent, resource}``; ``fence {resource, token}`` (ConflictError if stale)
- ``task.create {task, parent?, depends_on?}``, ``task.depend {task, on}``,
  ``task.layers {task}``, ``task.complete {task, status}``
"""

from __future__ import annotations

from typing import Any

from gliding_actors.bus import BUS_ACTOR
from gliding_actors.errors import GlidingError, InvalidInput
from gliding_actors.l2._awareness import KEEP, AgentRegistry, release_stale
from gliding_actors.l2._dag import TaskDAG
from gliding_actors.l2._locks import Effects, Granted, LockManager, Queued
from gliding_actors.runtime import DEFERRED, Context, ReplyToken

__all__ = ["BLACKBOARD_ACTOR", "BlackboardActor"]

BLACKBOARD_ACTOR = "blackboard"
_TICK = {"t": "tick"}


class BlackboardActor:
    """Behaviour of the blackboard actor (see the module docstring)."""

    def __init__(self, *, heartbeat_timeout_s: float, lock_lease_s: float) -> None:
        self.tasks = TaskDAG()
        self.agents = AgentRegistry(heartbeat_timeout_s)
        self.locks = LockManager(lock_lease_s)
        #: lock wait id -> the deferred reply of the agent waiting
        self._waiting: dict[int, ReplyToken] = {}
        self._timer_at: float | None = None

    def receive(self, message: Any, ctx: Context) -> Any:
        if not isinstance(message, dict):
            raise InvalidInput(f"blackboard requests are objects, not {type(message).__name__}")
        kind = message.get("t")
        now = ctx.clock.now()
        if kind == "tick":
            self._timer_at = None
            self._sweep(now, ctx)
            return None
        handler = _HANDLERS.get(str(kind))
        if handler is None:
            raise InvalidInput(f"unknown blackboard request {kind!r}")
        result = handler(self, message, now, ctx)  # a refusal raises having changed nothing
        self._arm(now, ctx)
        return result

    # -- awareness -------------------------------------------------------------
    def _register(self, msg: dict[str, Any], now: float, ctx: Context) -> None:
        self.agents.register(msg["agent"], msg["role"], now=now)

    def _heartbeat(self, msg: dict[str, Any], now: float, ctx: Context) -> dict[str, Any]:
        operation = msg["operation"] if "operation" in msg else KEEP
        self.agents.heartbeat(msg["agent"], now=now, status=msg.get("status"), operation=operation)
        return {}

    def _agents(self, msg: dict[str, Any], now: float, ctx: Context) -> dict[str, Any]:
        self._sweep(now, ctx)
        return {"agents": self.agents.listing(now=now)}

    def _sweep(self, now: float, ctx: Context) -> None:
        sweep = release_stale(self.agents, self.locks, now)
        self._answer_waits(sweep.effects, ctx)
        for event in sweep.events:
            ctx.send(BUS_ACTOR, {"type": "publish", "topic": "agent.stale", "message": event, "publisher": None})

    # -- locks -------------------------------------------------------------------
    def _lock(self, msg: dict[str, Any], now: float, ctx: Context) -> Any:
        token = ctx.defer_reply()
        try:
            outcome = self.locks.acquire(
                msg["agent"], msg["resource"], msg["mode"], float(msg.get("timeout_s", 0.0)), now=now
            )
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

    def _unlock(self, msg: dict[str, Any], now: float, ctx: Context) -> dict[str, Any]:
        self._answer_waits(self.locks.release(msg["agent"], msg["resource"], now=now), ctx)
        return {}

    def _fence(self, msg: dict[str, Any], now: float, ctx: Context) -> dict[str, Any]:
        self.locks.check_fence(msg["resource"], int(msg["token"]))
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
    def _task_create(self, msg: dict[str, Any], now: float, ctx: Context) -> dict[str, Any]:
        self.tasks.create(msg["task"], msg.get("parent"), msg.get("depends_on") or ())
        return {"task": msg["task"]}

    def _task_depend(self, msg: dict[str, Any], now: float, ctx: Context) -> dict[str, Any]:
        self.tasks.depend(msg["task"], msg["on"])
        return {}

    def _task_layers(self, msg: dict[str, Any], now: float, ctx: Context) -> dict[str, Any]:
        return {"layers": self.tasks.layers(msg.get("task"))}

    def _task_complete(self, msg: dict[str, Any], now: float, ctx: Context) -> dict[str, Any]:
        done = self.tasks.complete(msg["task"], msg.get("status", "completed"))
        for event in done.events:
            ctx.send(BUS_ACTOR, {"type": "publish", "topic": "task.events", "message": dict(event), "publisher": None})
        # Nodes attached to a task are written down by the caller's flush; none
        # are attached yet (writes do not name their task), so nothing is flushed.
        return {"flushed": 0, "ready": list(done.ready), "nodes": list(done.nodes)}


_HANDLERS: dict[str, Any] = {
    "register": BlackboardActor._register,
    "heartbeat": BlackboardActor._heartbeat,
    "agents": BlackboardActor._agents,
    "lock": BlackboardActor._lock,
    "unlock": BlackboardActor._unlock,
    "fence": BlackboardActor._fence,
    "task.create": BlackboardActor._task_create,
    "task.depend": BlackboardActor._task_depend,
    "task.layers": BlackboardActor._task_layers,
    "task.complete": BlackboardActor._task_complete,
}
