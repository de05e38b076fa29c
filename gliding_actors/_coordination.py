"""An agent's coordination operations: the blackboard (heartbeats, locks, the task DAG) and the bus.

Mixed into :class:`~gliding_actors.agent.Agent`, where the line, session,
projection, search and context operations live; kept apart so each module
reads in one sitting. Each operation is defined once (:mod:`gliding_actors._operation`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gliding_actors._agent_ports import AgentPorts
from gliding_actors._checks import check_iri, check_object, check_size, check_topic
from gliding_actors._operation import Call, Tracer, operation, same
from gliding_actors._results import layers_of, nothing, ready_of, released_of, seq_of, token_of
from gliding_actors.bus import BUS_ACTOR, HISTORY_GRAPH, SYSTEM_TOPICS
from gliding_actors.errors import InvalidInput, PermissionDenied, show
from gliding_actors.l2._awareness import KEEP
from gliding_actors.l2._blackboard import BLACKBOARD_ACTOR, task_lines
from gliding_actors.l2._board_requests import (
    TASK_REQUESTS,
    Heartbeat,
    Lock,
    TaskAttach,
    TaskComplete,
    TaskCreate,
    TaskDepend,
    TaskLayers,
    TaskRelease,
    TaskScope,
    Unlock,
    parse_request,
)
from gliding_actors.runtime import ChainedFuture, Future, MappedFuture

__all__ = ["CoordinationOps"]


class CoordinationOps:
    """Heartbeats, locks, tasks and the bus, for the agent ``_id`` of role ``_role``."""

    _system: AgentPorts
    _id: str
    _role: str
    _trace: Tracer | None

    def _ask(self, actor: str, message: dict[str, Any]) -> Future[Any]:
        return self._system.runtime.lookup(actor).ask(message)

    # -- blackboard: awareness, locks, tasks ---------------------------------
    def _board_ask(self, request: dict[str, Any]) -> Future[Any]:
        return self._ask(BLACKBOARD_ACTOR, request)

    @operation
    def heartbeat(
        self, status: str | None = None, operation: str | None = None, *, timeout: float | None = None
    ) -> Call[dict[str, Any], None]:
        """Tell the team this agent is alive (optionally its status and current operation)."""
        request = Heartbeat(self._id, status, KEEP if operation is None else operation)
        return Call(self._board_ask(request.message()), nothing, timeout)

    submit_heartbeat = heartbeat.submit

    @operation
    def lock(
        self, resource: str, mode: str = "write", timeout_s: float = 0.0, *, timeout: float | None = None
    ) -> Call[dict[str, Any], int | None]:
        """Take a lock (read, write or exclusive); wait up to ``timeout_s`` (0: try once).

        Returns the grant's fencing token, or None when not granted (the
        future answers ``{granted, token}``). A wait that would close a cycle
        of agents waiting on each other raises
        :class:`~gliding_actors.errors.DeadlockError` at once. The caller's
        wait is ``timeout_s`` plus ``timeout``.
        """
        # checked here by the blackboard's own parser, so the wait below is a number
        request = parse_request(
            {"t": Lock.KIND, "agent": self._id, "resource": resource, "mode": mode, "timeout_s": timeout_s}
        )
        assert isinstance(request, Lock)
        limit = (self._system.runtime.ask_timeout_s if timeout is None else timeout) + request.timeout_s
        return Call(self._board_ask(request.message()), token_of, limit)

    submit_lock = lock.submit

    @operation
    def unlock(self, resource: str, *, timeout: float | None = None) -> Call[dict[str, Any], None]:
        return Call(self._board_ask({"t": Unlock.KIND, "agent": self._id, "resource": resource}), nothing, timeout)

    submit_unlock = unlock.submit

    def submit_task(self, request: dict[str, Any]) -> Future[dict[str, Any]]:
        """A task-DAG request (``task.create``, ``task.depend``, ``task.layers``, ``task.complete``, ``task.release``).

        ``task.complete`` goes through :meth:`submit_complete_task`: it writes
        the task's lines down before the task is marked finished.
        """
        parsed = parse_request(request)  # InvalidInput before anything is sent
        if type(parsed) not in TASK_REQUESTS:
            kinds = ", ".join(sorted(kind.KIND for kind in TASK_REQUESTS))
            raise InvalidInput(f"submit_task takes a task-DAG request ({kinds}), not {show(parsed.KIND)}")
        if isinstance(parsed, TaskComplete):
            return self.submit_complete_task(parsed.task, parsed.status)
        return self._board_ask(parsed.message())

    @operation(recorded=False)
    def create_task(
        self, task: str, *, parent: str | None = None, depends_on: Iterable[str] = (), timeout: float | None = None
    ) -> Call[dict[str, Any], None]:
        deps = list(depends_on) if isinstance(depends_on, (list, tuple)) else depends_on  # else refused below
        request = {"t": TaskCreate.KIND, "task": task, "parent": parent, "depends_on": deps}
        return Call(self.submit_task(request), nothing, timeout)

    @operation(recorded=False)
    def depend(self, task: str, on: str, *, timeout: float | None = None) -> Call[dict[str, Any], None]:
        """``task`` waits for ``on``; :class:`~gliding_actors.errors.CycleError` if that closes a cycle."""
        return Call(self.submit_task({"t": TaskDepend.KIND, "task": task, "on": on}), nothing, timeout)

    @operation(recorded=False)
    def release_task(self, task: str, *, timeout: float | None = None) -> Call[dict[str, Any], list[str]]:
        """Take ``task`` and every task under it out of the DAG; returns their ids, sorted.

        For a plan branch given up or a finished subtree no one needs to track:
        the tasks leave the DAG (``task.released`` is published on
        ``task.events``), their lines stay in the memory. Refused
        (:class:`~gliding_actors.errors.InvalidInput`, nothing released) when a
        pending task outside the subtree still waits for an unfinished one
        inside it: releasing would silently unblock it.
        """
        return Call(self.submit_task({"t": TaskRelease.KIND, "task": task}), released_of, timeout)

    @operation(recorded=False)
    def task_layers(self, task: str | None = None, *, timeout: float | None = None) -> Call[dict[str, Any], list[list[str]]]:
        """Kahn layers of ``task``'s subtree (every task when None): what can run together."""
        return Call(self.submit_task({"t": TaskLayers.KIND, "task": task}), layers_of, timeout)

    @operation
    def complete_task(
        self, task: str, status: str = "completed", *, timeout: float | None = None
    ) -> Call[dict[str, Any], list[str]]:
        """Write ``task``'s lines down to L0 in one batch, then mark it ``status``; returns the tasks that became ready.

        The future answers ``{"flushed": lines written, "nodes": the task's
        lines, "ready": tasks that became ready}``. The lines are those
        :func:`~gliding_actors.l2._blackboard.task_lines` finds for the task's
        subtree (docs/L2.md, "Completing a task"). Each step starts when the
        one before answers, and nothing waits in between:

        1. ``task.scope`` — a task that may not finish so (unknown, already
           finished, unmet dependencies, bad status) is refused here with
           :class:`~gliding_actors.errors.InvalidInput`: nothing is flushed;
        2. recall every dirty line home, so the graph holds the lines still in
           agents' caches;
        3. find the task's lines (SPARQL over the graph);
        4. flush exactly those (each shard writes its part as one L0 batch);
        5. ``task.complete`` — only now is the task finished and its events
           published: a completed (or failed) task's lines are durable.

        A failure in steps 2–4 leaves the task pending (complete it again).
        """
        system = self._system
        board = self._board_ask

        def after_scope(scope: dict[str, Any]) -> Future[dict[str, Any]]:
            def after_recall(_moved: int) -> Future[dict[str, Any]]:
                lines = task_lines(system.graph, scope["tasks"], scope["nodes"])

                def after_flush(flushed: int) -> Future[dict[str, Any]]:
                    done = board({"t": TaskComplete.KIND, "task": task, "status": status})
                    return MappedFuture(
                        done, lambda r: {"flushed": flushed, "nodes": lines, "ready": list(r["ready"])}
                    )

                return ChainedFuture(system.submit_flush(lines), after_flush)

            return ChainedFuture(system.submit_recall(), after_recall)

        sent: Future[dict[str, Any]] = ChainedFuture(board({"t": TaskScope.KIND, "task": task, "status": status}), after_scope)
        return Call(sent, ready_of, timeout)

    submit_complete_task = complete_task.submit

    @operation
    def attach_to_task(
        self, task: str, iris: Iterable[str], *, timeout: float | None = None
    ) -> Call[dict[str, Any], None]:
        """Record lines as ``task``'s: completing the task writes them down with its other lines."""
        if not isinstance(iris, (list, tuple, set, frozenset)):
            raise InvalidInput(f"iris is a list of IRIs, not {show(iris)}")
        request = TaskAttach(task, tuple(check_iri(i) for i in iris)).message()
        return Call(self._board_ask(request), nothing, timeout)

    submit_attach_task = attach_to_task.submit

    # -- coordination (MemoryBus) -------------------------------------------
    @operation
    def subscribe(self, topic: str, *, timeout: float | None = None) -> Call[None, None]:
        """Receive, in this agent's inbox, every message later published on ``topic``."""
        request = {
            "type": "subscribe",
            "topic": check_topic(topic),
            "subscriber": self._id,
            "mode": "mailbox",
            "role": self._role,  # a scoped system topic shows this agent only what its role may read
        }
        return Call(self._ask(BUS_ACTOR, request), nothing, timeout)

    submit_subscribe = subscribe.submit

    @operation
    def unsubscribe(self, topic: str, *, timeout: float | None = None) -> Call[None, None]:
        request = {"type": "unsubscribe", "topic": check_topic(topic), "subscriber": self._id}
        return Call(self._ask(BUS_ACTOR, request), nothing, timeout)

    submit_unsubscribe = unsubscribe.submit

    @operation
    def publish(self, topic: str, message: dict[str, Any], *, timeout: float | None = None) -> Call[dict[str, int], int]:
        """Publish ``message`` (a JSON object) on ``topic``; returns its sequence number.

        When this returns, every current subscriber's inbox holds the message,
        and it is kept in L2 (graph ``shared``) for late readers:
        :meth:`messages`, or SPARQL over ``ga:Message`` nodes.
        """
        checked_topic = check_topic(topic)
        checked = check_object(message, "a published message")
        if checked_topic in SYSTEM_TOPICS:
            raise PermissionDenied(
                f"{checked_topic!r} is a system topic: only the memory publishes on "
                f"{', '.join(sorted(SYSTEM_TOPICS))} (agents may subscribe)"
            )
        # the message becomes a node of ``shared`` (the history late readers see), as big as a line may be
        check_size(checked, "a published message", self._system.config.l0.max_node_bytes)
        self._system.permissions.check(self._role, HISTORY_GRAPH, "create")
        request = {"type": "publish", "topic": checked_topic, "message": checked, "publisher": self._id, "keep": True}
        return Call(self._ask(BUS_ACTOR, request), seq_of, timeout)

    submit_publish = publish.submit

    @operation
    def inbox(self, *, timeout: float | None = None) -> Call[list[dict[str, Any]], list[dict[str, Any]]]:
        """Take every message delivered to this agent, in publish order.

        Each item is ``{"type": "bus.event", "topic", "seq", "publisher", "message"}``. The
        mailbox holds at most ``agents.inbox_events``; when older events were dropped to stay
        under it, the list starts with ``{"type": "bus.dropped", "message": {"dropped": n, "max_inbox"}}``.
        """
        return Call(self._ask(BUS_ACTOR, {"type": "drain", "subscriber": self._id}), same, timeout)

    submit_inbox = inbox.submit

    @operation
    def messages(
        self, topic: str, since_seq: int = 0, limit: int | None = None, *, timeout: float | None = None
    ) -> Call[list[dict[str, Any]], list[dict[str, Any]]]:
        """The messages kept on ``topic`` with ``seq > since_seq`` (at most ``limit``), in publish order.

        For a late reader: what was published before it subscribed, or while
        it did not drain its inbox. Each item is an inbox event plus
        ``published_at`` (the clock's seconds). Needs the read right on
        ``shared`` (everyone has it by default); asked of the bus, so it sees
        every publish this handle made before. Page with ``since_seq`` = the
        last ``seq`` seen.
        """
        if isinstance(since_seq, bool) or not isinstance(since_seq, int) or since_seq < 0:
            raise InvalidInput(f"since_seq is an integer >= 0, not {show(since_seq)}")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise InvalidInput(f"limit is an integer >= 0 or None, not {show(limit)}")
        request = {"type": "history", "topic": check_topic(topic), "since_seq": since_seq, "limit": limit}
        self._system.permissions.check(self._role, HISTORY_GRAPH, "read")
        return Call(self._ask(BUS_ACTOR, request), same, timeout)

    submit_messages = messages.submit
