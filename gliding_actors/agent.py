"""The handle an orchestrator holds for one agent.

Every operation comes in two forms: a blocking method (``publish``) that waits
with a timeout, and a ``submit_*`` method returning a
:class:`~gliding_actors.runtime.Future` without waiting, which scenario replay
uses to issue several ops at once and which the asyncio bridge builds on.
Input is checked here, before anything is sent, so bad input is refused with
:class:`~gliding_actors.errors.InvalidInput` and changes nothing.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypedDict

from gliding_actors.bus import BUS_ACTOR
from gliding_actors.coherence._hosting import cache_name, unpack_value
from gliding_actors.errors import InvalidInput
from gliding_actors.l0 import is_valid_iri
from gliding_actors.l2._blackboard import BLACKBOARD_ACTOR
from gliding_actors.roles import ROLES
from gliding_actors.runtime import CompletedFuture, Future, MappedFuture

if TYPE_CHECKING:
    from gliding_actors.system import MemorySystem

__all__ = ["ROLES", "Agent", "ReadResult", "WriteResult"]



class ReadResult(TypedDict):
    """What a read returns (the scenario op ``read``'s result keys)."""

    #: the line's value as written, or None when absent or deleted
    value: dict[str, Any] | None
    #: 0 while never written, +1 per completed write or delete
    version: int
    #: this agent's copy after the read: S, E or M (I for a line nobody wrote)
    state: str
    #: coherence-protocol messages the read caused (0 for a hit)
    messages: int


class WriteResult(TypedDict):
    """What a write or cas returns."""

    version: int
    state: str
    messages: int
    #: ``write_through`` (critical tag: durable in L0 before completing) or ``write_back``
    policy: str


def _check_iri(iri: object) -> str:
    if not isinstance(iri, str) or not is_valid_iri(iri):
        raise InvalidInput(f"not a valid IRI (scheme:rest, no spaces or control characters): {iri!r}")
    return iri


def _check_tags(tags: Iterable[str] | None) -> list[str]:
    if tags is None:
        return []
    if isinstance(tags, str) or not all(isinstance(t, str) and t for t in tags):
        raise InvalidInput(f"tags are a list of non-empty strings, not {tags!r}")
    return sorted(set(tags))


def _check_topic(topic: object) -> str:
    if not isinstance(topic, str) or not topic:
        raise InvalidInput(f"a topic is a non-empty string, not {topic!r}")
    return topic


def _check_object(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidInput(f"{what} must be a JSON object, not {type(value).__name__}")
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{what} is not JSON-serialisable: {exc}") from exc
    return value


class Agent:
    """One agent's view of the memory. Get one from :meth:`MemorySystem.agent`."""

    def __init__(self, system: MemorySystem, agent_id: str, role: str) -> None:
        self._system = system
        self._id = agent_id
        self._role = role
        self._cache = cache_name(agent_id)
        #: this agent's published cache lines (see SnapshotBoard)
        self._view = system.board.view(agent_id)
        #: ops this handle has in flight per IRI: a read must not hit around them
        self._in_flight: dict[str, int] = {}
        self._in_flight_lock = threading.Lock()

    @property
    def id(self) -> str:
        return self._id

    @property
    def role(self) -> str:
        return self._role

    @property
    def system(self) -> MemorySystem:
        return self._system

    def _ask(self, actor: str, message: dict[str, Any]) -> Future[Any]:
        return self._system.runtime.lookup(actor).ask(message)

    # -- lines (MESI coherence) ---------------------------------------------
    def _line_op(self, iri: str, request: dict[str, Any]) -> Future[Any]:
        with self._in_flight_lock:
            self._in_flight[iri] = self._in_flight.get(iri, 0) + 1
        try:
            future = self._ask(self._cache, request)
        except BaseException:
            self._landed(iri)
            raise
        future.add_done_callback(lambda _f: self._landed(iri))
        return future

    def _landed(self, iri: str) -> None:
        with self._in_flight_lock:
            left = self._in_flight.get(iri, 0) - 1
            if left > 0:
                self._in_flight[iri] = left
            else:
                self._in_flight.pop(iri, None)

    def _hit(self, iri: str) -> ReadResult | None:
        """The read served from this agent's published cache view, or None on a miss.

        No message and no lock: one dict lookup on the board (only IRIs that
        passed validation on the way in are ever there), one membership test
        against this handle's own ops in flight (a read must not overtake
        them), and a private copy of the value.
        """
        hit = self._view.get(iri)
        if hit is None or iri in self._in_flight:
            return None
        state, packed, version = hit
        return {"value": unpack_value(packed), "version": version, "state": state, "messages": 0}

    def submit_read(self, iri: str) -> Future[ReadResult]:
        """Read ``iri``; a hit on this agent's S/E/M copy is answered without a message."""
        hit = self._hit(iri)
        if hit is not None:
            return CompletedFuture(hit)
        _check_iri(iri)
        return MappedFuture(self._line_op(iri, {"t": "load", "iri": iri}), _read_result)

    def read(self, iri: str, *, timeout: float | None = None) -> ReadResult:
        """The line's latest completed value and version, coherent with every agent's writes."""
        hit = self._hit(iri)
        if hit is not None:
            return hit
        return self.submit_read(iri).get(timeout)

    def get(self, iri: str, *, timeout: float | None = None) -> dict[str, Any] | None:
        """Just the value of :meth:`read` (None when absent)."""
        return self.read(iri, timeout=timeout)["value"]

    def _check_jsonld(self, iri: str, value: dict[str, Any]) -> None:
        """Refuse a value the graph could not hold, before it enters the protocol."""
        self._system.graph.check_value(iri, value)

    def _check_may_write(self, graph: str | None) -> None:
        """A write needs the create or the update right on its graph.

        The handle cannot tell a new line from an existing one before the
        protocol runs, so either right admits the write; on the default matrix
        the two always go together.
        """
        permissions = self._system.permissions
        if not permissions.allowed(self._role, graph, "create"):
            permissions.check(self._role, graph, "update")

    def _write_request(
        self, kind: str, iri: str, value: dict[str, Any], tags: Iterable[str] | None, graph: str | None
    ) -> dict[str, Any]:
        """Validate a write once (IRI, JSON object, JSON-LD, tags, graph, permission)
        and build the cache request; raises before anything is sent."""
        checked_iri = _check_iri(iri)
        checked_value = _check_object(value, "a line's value")
        checked_graph = _check_graph(graph)
        self._check_jsonld(checked_iri, checked_value)
        self._check_may_write(checked_graph)
        return {
            "t": kind,
            "iri": checked_iri,
            "value": checked_value,
            "tags": _check_tags(tags),
            "graph": checked_graph,
        }

    def submit_write(
        self, iri: str, value: dict[str, Any], *, tags: Iterable[str] | None = None, graph: str | None = None
    ) -> Future[WriteResult]:
        return self._line_op(iri, self._write_request("store", iri, value, tags, graph))

    def write(
        self,
        iri: str,
        value: dict[str, Any],
        *,
        tags: Iterable[str] | None = None,
        graph: str | None = None,
        timeout: float | None = None,
    ) -> WriteResult:
        """Write ``value`` (a JSON object); completes once this agent holds the line in M.

        A write carrying a critical tag (config ``coherence.critical_tags``) is
        write-through: it completes only after L2 and L0 hold it durably.
        """
        return self.submit_write(iri, value, tags=tags, graph=graph).get(timeout)

    def submit_cas(
        self,
        iri: str,
        version: int,
        value: dict[str, Any],
        *,
        tags: Iterable[str] | None = None,
        graph: str | None = None,
    ) -> Future[WriteResult]:
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise InvalidInput(f"cas: version is an integer >= 0, not {version!r}")
        request = self._write_request("cas", iri, value, tags, graph)
        request["version"] = version
        return self._line_op(iri, request)

    def cas(
        self,
        iri: str,
        version: int,
        value: dict[str, Any],
        *,
        tags: Iterable[str] | None = None,
        graph: str | None = None,
        timeout: float | None = None,
    ) -> WriteResult:
        """Write only if the line is still at ``version``; ``ConflictError`` otherwise."""
        return self.submit_cas(iri, version, value, tags=tags, graph=graph).get(timeout)

    def submit_delete(self, iri: str) -> Future[dict[str, Any]]:
        return self._line_op(_check_iri(iri), {"t": "delete", "iri": iri})

    def delete(self, iri: str, *, timeout: float | None = None) -> int:
        """Delete the line (a write of a tombstone); returns the new version."""
        result: dict[str, Any] = self.submit_delete(iri).get(timeout)
        return int(result["version"])

    def submit_evict(self, iri: str) -> Future[dict[str, Any]]:
        return self._line_op(_check_iri(iri), {"t": "evict", "iri": iri})

    def evict(self, iri: str, *, timeout: float | None = None) -> None:
        """Give this agent's copy up (a dirty copy is written back home first)."""
        self.submit_evict(iri).get(timeout)

    # -- SPARQL over the blackboard graph --------------------------------------
    def submit_query(self, sparql: str, bindings: dict[str, Any] | None = None) -> Future[dict[str, Any]]:
        """Run SPARQL SELECT/ASK/CONSTRUCT over the graphs this agent's role may read.

        Coherent: every dirty line is recalled home (and so into the graph)
        first, so the query sees every write completed before it began.
        Confined by the query's dataset, never by editing its text.
        """
        if not isinstance(sparql, str) or not sparql.strip():
            raise InvalidInput("a SPARQL query is a non-empty string")
        system = self._system
        role = self._role

        def run(_moved: int) -> dict[str, Any]:
            graphs = system.readable_graphs(role)
            result: dict[str, Any] = system.graph.query(
                sparql, graphs=None if role == "system" else graphs, bindings=bindings, role_is_system=role == "system"
            )
            return result

        return MappedFuture(system.submit_recall(), run)

    def query(self, sparql: str, bindings: dict[str, Any] | None = None, *, timeout: float | None = None) -> dict[str, Any]:
        """Blocking :meth:`submit_query`: ``{"rows"}``, ``{"boolean"}`` or ``{"jsonld"}``."""
        return self.submit_query(sparql, bindings).get(timeout)

    # -- blackboard: awareness, locks, tasks ---------------------------------
    def _board_ask(self, request: dict[str, Any]) -> Future[Any]:
        return self._ask(BLACKBOARD_ACTOR, request)

    def submit_heartbeat(self, status: str | None = None, operation: str | None = None) -> Future[dict[str, Any]]:
        request: dict[str, Any] = {"t": "heartbeat", "agent": self._id, "status": status}
        if operation is not None:
            request["operation"] = operation
        return self._board_ask(request)

    def heartbeat(self, status: str | None = None, operation: str | None = None, *, timeout: float | None = None) -> None:
        """Tell the team this agent is alive (optionally its status and current operation)."""
        self.submit_heartbeat(status, operation).get(timeout)

    def submit_lock(self, resource: str, mode: str = "write", timeout_s: float = 0.0) -> Future[dict[str, Any]]:
        return self._board_ask(
            {"t": "lock", "agent": self._id, "resource": resource, "mode": mode, "timeout_s": timeout_s}
        )

    def lock(self, resource: str, mode: str = "write", timeout_s: float = 0.0, *, timeout: float | None = None) -> int | None:
        """Take a lock (read, write or exclusive); wait up to ``timeout_s`` (0: try once).

        Returns the grant's fencing token, or None when not granted. A wait that
        would close a cycle of agents waiting on each other raises
        :class:`~gliding_actors.errors.DeadlockError` at once.
        """
        wait = (self._system.runtime.ask_timeout_s if timeout is None else timeout) + timeout_s
        result: dict[str, Any] = self.submit_lock(resource, mode, timeout_s).get(wait)
        return int(result["token"]) if result["granted"] else None

    def submit_unlock(self, resource: str) -> Future[dict[str, Any]]:
        return self._board_ask({"t": "unlock", "agent": self._id, "resource": resource})

    def unlock(self, resource: str, *, timeout: float | None = None) -> None:
        self.submit_unlock(resource).get(timeout)

    def submit_task(self, request: dict[str, Any]) -> Future[dict[str, Any]]:
        """A task-DAG request (``task.create``, ``task.depend``, ``task.layers``, ``task.complete``)."""
        return self._board_ask(request)

    def create_task(
        self, task: str, *, parent: str | None = None, depends_on: Iterable[str] = (), timeout: float | None = None
    ) -> None:
        self.submit_task({"t": "task.create", "task": task, "parent": parent, "depends_on": list(depends_on)}).get(timeout)

    def depend(self, task: str, on: str, *, timeout: float | None = None) -> None:
        """``task`` waits for ``on``; :class:`~gliding_actors.errors.CycleError` if that closes a cycle."""
        self.submit_task({"t": "task.depend", "task": task, "on": on}).get(timeout)

    def task_layers(self, task: str | None = None, *, timeout: float | None = None) -> list[list[str]]:
        """Kahn layers of ``task``'s subtree (every task when None): what can run together."""
        result: dict[str, Any] = self.submit_task({"t": "task.layers", "task": task}).get(timeout)
        return [list(layer) for layer in result["layers"]]

    def complete_task(self, task: str, status: str = "completed", *, timeout: float | None = None) -> list[str]:
        """Mark ``task`` completed or failed; returns the tasks that became ready."""
        result: dict[str, Any] = self.submit_task({"t": "task.complete", "task": task, "status": status}).get(timeout)
        return list(result["ready"])

    # -- coordination (MemoryBus) -------------------------------------------
    def submit_subscribe(self, topic: str) -> Future[None]:
        return self._ask(
            BUS_ACTOR,
            {"type": "subscribe", "topic": _check_topic(topic), "subscriber": self._id, "mode": "mailbox"},
        )

    def subscribe(self, topic: str, *, timeout: float | None = None) -> None:
        """Receive, in this agent's inbox, every message later published on ``topic``."""
        self.submit_subscribe(topic).get(timeout)

    def submit_unsubscribe(self, topic: str) -> Future[None]:
        return self._ask(BUS_ACTOR, {"type": "unsubscribe", "topic": _check_topic(topic), "subscriber": self._id})

    def unsubscribe(self, topic: str, *, timeout: float | None = None) -> None:
        self.submit_unsubscribe(topic).get(timeout)

    def submit_publish(self, topic: str, message: dict[str, Any]) -> Future[dict[str, int]]:
        return self._ask(
            BUS_ACTOR,
            {
                "type": "publish",
                "topic": _check_topic(topic),
                "message": _check_object(message, "a published message"),
                "publisher": self._id,
            },
        )

    def publish(self, topic: str, message: dict[str, Any], *, timeout: float | None = None) -> int:
        """Publish ``message`` (a JSON object) on ``topic``; returns its sequence number.

        When this returns, every current subscriber's inbox holds the message.
        """
        result: dict[str, int] = self.submit_publish(topic, message).get(timeout)
        return result["seq"]

    def submit_inbox(self) -> Future[list[dict[str, Any]]]:
        return self._ask(BUS_ACTOR, {"type": "drain", "subscriber": self._id})

    def inbox(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        """Take every message delivered to this agent, in publish order.

        Each item is ``{"type": "bus.event", "topic", "seq", "publisher", "message"}``.
        """
        events: list[dict[str, Any]] = self.submit_inbox().get(timeout)
        return events

    def __repr__(self) -> str:
        return f"<Agent {self._id!r} role={self._role}>"


def _read_result(result: dict[str, Any]) -> ReadResult:
    return {
        "value": result["value"],
        "version": result["version"],
        "state": result["state"],
        "messages": result["messages"],
    }


def _check_graph(graph: object) -> str | None:
    if graph is None:
        return None
    if not isinstance(graph, str) or not graph or any(c.isspace() for c in graph):
        raise InvalidInput(f"a named graph is a non-empty string without spaces, not {graph!r}")
    return graph
