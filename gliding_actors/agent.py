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
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

import msgpack
import pyoxigraph as ox

from gliding_actors._ports import MemoryPorts
from gliding_actors.bus import BUS_ACTOR, HISTORY_GRAPH, MESSAGE_IRI_PREFIX
from gliding_actors.coherence._hosting import cache_name, unpack_value
from gliding_actors.errors import InvalidInput, PermissionDenied
from gliding_actors.l0 import is_valid_iri, is_valid_label
from gliding_actors.l0._canonical import JSON_ERRORS, canonical
from gliding_actors.l1._actor import session_actor_name, turn_request
from gliding_actors.l1._archive import ARCHIVE_PREFIX, reload_turn
from gliding_actors.l1._session import check_embedding
from gliding_actors.l2._blackboard import BLACKBOARD_ACTOR, task_lines
from gliding_actors.roles import ROLES
from gliding_actors.runtime import BaseFuture, ChainedFuture, CompletedFuture, Future, MappedFuture

if TYPE_CHECKING:
    from gliding_actors._aio import AsyncAgent
    from gliding_actors.clock import Clock
    from gliding_actors.context._service import ContextService
    from gliding_actors.hyperspace._service import HyperspaceService
    from gliding_actors.l3._service import ProjectionService
    from gliding_actors.metrics._counters import SystemCounters

__all__ = ["ROLES", "Agent", "AgentPorts", "ReadResult", "WriteResult"]


class AgentPorts(MemoryPorts, Protocol):
    """What an agent's handle uses of the memory (a :class:`~gliding_actors.MemorySystem` is one)."""

    @property
    def clock(self) -> Clock: ...
    @property
    def counters(self) -> SystemCounters: ...
    @property
    def l3(self) -> ProjectionService: ...
    @property
    def hyperspace(self) -> HyperspaceService: ...
    @property
    def context(self) -> ContextService: ...

    def submit_flush(self, iris: Iterable[str] | None = None) -> Future[int]:
        """Write down to L0 every line newer in a cache or in L2 than in L0."""



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
    try:
        # The graph (pyoxigraph) is stricter than L0's shape check (e.g. a '%'
        # not followed by two hex digits): a delete of such an IRI put a
        # tombstone home that the graph refused, mid-protocol, and the
        # directory answered nothing ever again (fuzzing found it).
        ox.NamedNode(iri)
    except ValueError as exc:
        raise InvalidInput(f"not a valid IRI: {iri!r} ({exc})") from None
    if iri.startswith(MESSAGE_IRI_PREFIX):  # the bus's kept messages are immutable nodes, not lines
        raise InvalidInput(f"{iri!r} is a published message (read it with messages()), not a line")
    if iri.startswith(ARCHIVE_PREFIX):  # L1's archived turns and sessions are immutable L0 nodes, not lines
        raise InvalidInput(f"{iri!r} is an L1 session archive (read it with reload()), not a line")
    return iri


def _check_tags(tags: Iterable[str] | None) -> list[str]:
    if tags is None:
        return []
    # L0's label rule (no control characters, no lone surrogates): a tag L0
    # would refuse at write-down must be refused here, before the write is
    # acknowledged, or the line could never be written down (fuzzing found it).
    if isinstance(tags, str) or not all(is_valid_label(t) for t in tags):
        raise InvalidInput(f"tags are a list of non-empty strings without control characters, not {tags!r}")
    return sorted(set(tags))


def _check_topic(topic: object) -> str:
    if not isinstance(topic, str) or not topic:
        raise InvalidInput(f"a topic is a non-empty string, not {topic!r}")
    return topic


#: Deepest nesting of objects and lists a value may have. Every layer walks
#: values recursively (the cache's private copy, msgpack, JSON-LD, framing,
#: indexing) and Python's recursion limit is ~1,000 frames: a value ~500 deep
#: crashed the agent's cache actor (fuzzing found it). 100 is far beyond any
#: real node and leaves every layer room.
MAX_VALUE_DEPTH = 100


def _depth_exceeds(value: object, limit: int) -> bool:
    """Whether ``value`` nests dicts/lists deeper than ``limit`` (iterative: no recursion to blow)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[object] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _check_object(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidInput(f"{what} must be a JSON object, not {type(value).__name__}")
    if _depth_exceeds(value, MAX_VALUE_DEPTH):
        raise InvalidInput(f"{what} nests objects and lists deeper than {MAX_VALUE_DEPTH} levels")
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInput(f"{what} is not JSON-serialisable: {exc}") from exc
    try:
        # Values travel and are stored as msgpack: integers must fit in 64 bits.
        msgpack.packb(value, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidInput(f"{what} cannot be stored (integers must fit in 64 bits, text must be valid UTF-8): {exc}") from exc
    return value


def _check_storable(iri: str, value: dict[str, Any], max_bytes: int) -> None:
    """Refuse a line value L0 would refuse when it is written down.

    A write-back write is acknowledged long before L0 sees it; if L0 then
    refused the value (a top-level ``@id`` naming another node, a node over
    ``l0.max_node_bytes``), the flush, the task completion and the clean close
    would fail on it for ever, and a write-through write would never be
    acknowledged (fuzzing found both). So L0's rules are checked here, first.
    """
    if "@id" in value and value["@id"] != iri:
        raise InvalidInput(
            f"a line's top-level @id must be the line's own IRI {iri!r} (or absent), not {value['@id']!r}",
            path=("value", "@id"),
        )
    try:
        size = len(canonical(value))
    except JSON_ERRORS as exc:
        raise InvalidInput(f"a line's value is not JSON L0 can store: {exc}", path=("value",)) from exc
    if size > max_bytes:
        raise InvalidInput(
            f"a line's value is {size} bytes of JSON; the limit (l0.max_node_bytes) is {max_bytes}",
            path=("value",),
        )


class Agent:
    """One agent's view of the memory. Get one from :meth:`MemorySystem.agent`."""

    def __init__(self, system: AgentPorts, agent_id: str, role: str) -> None:
        self._system = system
        self._id = agent_id
        self._role = role
        self._cache = cache_name(agent_id)
        #: this agent's published cache lines (see SnapshotBoard)
        self._view = system.board.view(agent_id)
        #: ops this handle has in flight per IRI: a read must not hit around them
        self._in_flight: dict[str, int] = {}
        self._in_flight_lock = threading.Lock()
        #: which named graph each line is in (shared by every handle of the system)
        self._line_graphs = system.line_graphs
        #: the same map as a plain dict, for the hit path's one lookup
        self._graph_map = system.line_graphs.graphs
        self._default_graph = system.line_graphs.default_graph
        #: graphs this role was found to be allowed to read; the matrix never
        #: changes, so a graph, once here, stays (the hit path's second lookup)
        self._readable: set[str] = set()
        #: read() answers a hit without a future; a recording handle turns this
        #: off so every read goes through submit_read (scenario/_record.py)
        self._direct_hits = True
        #: this agent's read counters for stats() (gliding_actors/metrics/_counters.py);
        #: the hit path touches only ``_tallies``, this handle's own map
        self._counters = system.counters.agent(agent_id)
        self._tallies = self._counters.tallies

    @property
    def id(self) -> str:
        return self._id

    @property
    def role(self) -> str:
        return self._role

    @property
    def system(self) -> AgentPorts:
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
        if type(iri) is not str:  # a list or dict cannot be looked up; the caller's check refuses it
            return None
        hit = self._view.get(iri)
        if hit is None or iri in self._in_flight:
            return None
        if self._graph_map.get(iri, self._default_graph) not in self._readable:
            self._check_may_read(iri)  # the first hit in a graph asks the matrix; may raise
        state, packed, version = hit
        # stats(): one more lookup, in this handle's own map, no lock (metrics/_counters.py)
        tally = self._tallies.get(iri)
        if tally is not None and tally.packed is packed:
            tally.hits += 1
        else:
            self._counters.hit_new_copy(iri, packed, version)
        return {"value": unpack_value(packed), "version": version, "state": state, "messages": 0}

    def submit_read(self, iri: str) -> Future[ReadResult]:
        """Read ``iri``; a hit on this agent's S/E/M copy is answered without a message."""
        hit = self._hit(iri)
        if hit is not None:
            return CompletedFuture(hit)
        _check_iri(iri)
        self._check_may_read(iri)
        counters, view = self._counters, self._view
        started = counters.now()
        loading = self._line_op(iri, {"t": "load", "iri": iri})

        def counted(done: Future[Any]) -> None:  # stats(): a miss, its latency and the copy it brought
            try:
                result = done.get(0)
            except Exception:  # noqa: BLE001 - a failed load is no read; its error goes to the caller
                return
            held = view.get(iri)
            counters.load_done(iri, result, None if held is None else held[1], started)

        loading.add_done_callback(counted)
        return MappedFuture(loading, self._read_answer)

    def _read_answer(self, result: dict[str, Any]) -> ReadResult:
        """Check the graph the data really came from before handing it over.

        The check before sending used the registry; another agent's write may
        have moved the line meanwhile. The copy stays in this agent's cache
        (the protocol already ran) but its value is never returned.
        """
        graph = result.get("graph")
        if graph is not None and result["value"] is not None and self._role != "system":
            permissions = self._system.permissions
            if not permissions.allowed(self._role, graph, "read"):
                raise PermissionDenied(
                    f"role {self._role} may not read in graph {graph!r} (line moved there while it was read)"
                )
        return _read_result(result)

    def read(self, iri: str, *, timeout: float | None = None) -> ReadResult:
        """The line's latest completed value and version, coherent with every agent's writes."""
        hit = self._hit(iri) if self._direct_hits else None
        if hit is not None:
            return hit
        return self.submit_read(iri).get(timeout)

    def get(self, iri: str, *, timeout: float | None = None) -> dict[str, Any] | None:
        """Just the value of :meth:`read` (None when absent)."""
        return self.read(iri, timeout=timeout)["value"]

    def _check_jsonld(self, iri: str, value: dict[str, Any]) -> None:
        """Refuse a value the graph could not hold, before it enters the protocol."""
        self._system.graph.check_value(iri, value)

    # -- permissions: decided here, before anything is sent --------------------
    def _require(self, action: str, graph: str, iri: str) -> None:
        if not self._system.permissions.allowed(self._role, graph, action):
            raise PermissionDenied(f"role {self._role} may not {action} in graph {graph!r} (line {iri})")

    def _check_may_read(self, iri: str) -> None:
        """Raise :class:`PermissionDenied` unless this role may read ``iri``'s graph.

        The one check every path that shows a node makes first: read (hit and
        miss) today, and the project, search and context layers. The graph is
        the line's current one (:class:`~gliding_actors.l2._registry.LineGraphs`;
        ``shared`` for an IRI nobody wrote), so the answer needs no message.
        """
        graph = self._line_graphs.graph_of(iri)
        if graph in self._readable:
            return
        self._require("read", graph, iri)
        self._readable.add(graph)

    def _check_may_write(self, iri: str, graph: str | None) -> str:
        """Check a write or cas of ``iri`` into ``graph``; return the graph it will be in.

        A line nobody wrote needs ``create`` on the target graph (``shared``
        when the write names none). An existing line (a deleted one too: its
        tombstone keeps its graph) needs ``update`` on its current graph and
        stays there when the write names no graph; a write naming another
        graph moves it there, which also needs ``create`` on the target: the
        writer takes the node out of one graph's care and puts it in another's.
        """
        current = self._line_graphs.known(iri)
        if graph is not None:
            target = graph
        else:
            target = self._default_graph if current is None else current
        if current is None:
            self._require("create", target, iri)
        else:
            self._require("update", current, iri)
            if target != current:
                self._require("create", target, iri)
        return target

    def _recording(
        self, iri: str, future: Future[Any], graph: str | None, *, keep: bool = False
    ) -> Future[Any]:
        """Record where line ``iri`` is once the write/cas/delete completes with a version.

        ``graph`` is the write's (None: ``shared``); ``keep=True`` keeps the
        line's graph instead (a delete: the tombstone stays where the line
        was). Recorded from the done callback (an op nobody waits for) and
        again, idempotently, when the caller takes the result, so the caller's
        next op already sees it (a thread future wakes its waiter before it
        runs its callbacks). A failed op records nothing.
        """
        line_graphs = self._line_graphs

        def note(result: Any) -> Any:
            where = line_graphs.graph_of(iri) if keep else graph  # None: the default graph
            line_graphs.record(iri, where, int(result["version"]))
            return result

        def on_done(done: Any) -> None:
            if isinstance(done, BaseFuture) and done.exception() is None:
                note(done.result_now())

        future.add_done_callback(on_done)
        return MappedFuture(future, note)

    def _write_request(
        self, kind: str, iri: str, value: dict[str, Any], tags: Iterable[str] | None, graph: str | None
    ) -> dict[str, Any]:
        """Validate a write once (IRI, JSON object, JSON-LD, tags, graph, permission)
        and build the cache request; raises before anything is sent."""
        checked_iri = _check_iri(iri)
        checked_value = _check_object(value, "a line's value")
        _check_storable(checked_iri, checked_value, self._system.config.l0.max_node_bytes)
        checked_graph = _check_graph(graph)
        self._check_jsonld(checked_iri, checked_value)
        # The request always names the graph the line will be in, so a rewrite
        # that names none leaves the line where it is.
        target = self._check_may_write(checked_iri, checked_graph)
        return {
            "t": kind,
            "iri": checked_iri,
            "value": checked_value,
            "tags": _check_tags(tags),
            "graph": target,
        }

    def submit_write(
        self, iri: str, value: dict[str, Any], *, tags: Iterable[str] | None = None, graph: str | None = None
    ) -> Future[WriteResult]:
        request = self._write_request("store", iri, value, tags, graph)
        return self._recording(request["iri"], self._line_op(request["iri"], request), request["graph"])

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
        return self._recording(request["iri"], self._line_op(request["iri"], request), request["graph"])

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
        """Needs the ``delete`` right on the line's graph; the tombstone stays in that graph."""
        checked = _check_iri(iri)
        self._require("delete", self._line_graphs.graph_of(checked), checked)
        return self._recording(checked, self._line_op(checked, {"t": "delete", "iri": checked}), None, keep=True)

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
        system.graph.check_query(sparql, bindings)  # before the recall: a refused query moves nothing
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
        """A task-DAG request (``task.create``, ``task.depend``, ``task.layers``, ``task.complete``).

        ``task.complete`` goes through :meth:`submit_complete_task`: it writes
        the task's lines down before the task is marked finished.
        """
        if isinstance(request, dict) and request.get("t") == "task.complete":
            task = request.get("task")
            if not isinstance(task, str):
                raise InvalidInput(f"task.complete: a task id is a string, not {task!r}")
            return self.submit_complete_task(task, request.get("status", "completed"))
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

    def submit_complete_task(self, task: str, status: str = "completed") -> Future[dict[str, Any]]:
        """Write ``task``'s lines down to L0 in one batch, then mark it ``status``.

        Answers ``{"flushed": lines written, "nodes": the task's lines,
        "ready": tasks that became ready}``. The lines are those
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
                    done = board({"t": "task.complete", "task": task, "status": status})
                    return MappedFuture(
                        done, lambda r: {"flushed": flushed, "nodes": lines, "ready": list(r["ready"])}
                    )

                return ChainedFuture(system.submit_flush(lines), after_flush)

            return ChainedFuture(system.submit_recall(), after_recall)

        return ChainedFuture(board({"t": "task.scope", "task": task, "status": status}), after_scope)

    def complete_task(self, task: str, status: str = "completed", *, timeout: float | None = None) -> list[str]:
        """Write ``task``'s lines down, then mark it completed or failed; returns the tasks that became ready.

        See :meth:`submit_complete_task` (which also answers how many lines were written).
        """
        result: dict[str, Any] = self.submit_complete_task(task, status).get(timeout)
        return list(result["ready"])

    def submit_attach_task(self, task: str, iris: Iterable[str]) -> Future[dict[str, Any]]:
        if isinstance(iris, str):
            raise InvalidInput("iris is a list of IRIs, not one string")
        return self._board_ask({"t": "task.attach", "task": task, "iris": [_check_iri(i) for i in iris]})

    def attach_to_task(self, task: str, iris: Iterable[str], *, timeout: float | None = None) -> None:
        """Record lines as ``task``'s: completing the task writes them down with its other lines."""
        self.submit_attach_task(task, iris).get(timeout)

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
        request = {
            "type": "publish",
            "topic": _check_topic(topic),
            "message": _check_object(message, "a published message"),
            "publisher": self._id,
            "keep": True,
        }
        # the message becomes a node of ``shared`` (the history late readers see)
        self._system.permissions.check(self._role, HISTORY_GRAPH, "create")
        return self._ask(BUS_ACTOR, request)

    def publish(self, topic: str, message: dict[str, Any], *, timeout: float | None = None) -> int:
        """Publish ``message`` (a JSON object) on ``topic``; returns its sequence number.

        When this returns, every current subscriber's inbox holds the message,
        and it is kept in L2 (graph ``shared``) for late readers:
        :meth:`messages`, or SPARQL over ``ga:Message`` nodes.
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

    def submit_messages(
        self, topic: str, since_seq: int = 0, limit: int | None = None
    ) -> Future[list[dict[str, Any]]]:
        if isinstance(since_seq, bool) or not isinstance(since_seq, int) or since_seq < 0:
            raise InvalidInput(f"since_seq is an integer >= 0, not {since_seq!r}")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise InvalidInput(f"limit is an integer >= 0 or None, not {limit!r}")
        request = {"type": "history", "topic": _check_topic(topic), "since_seq": since_seq, "limit": limit}
        self._system.permissions.check(self._role, HISTORY_GRAPH, "read")
        return self._ask(BUS_ACTOR, request)

    def messages(
        self, topic: str, since_seq: int = 0, limit: int | None = None, *, timeout: float | None = None
    ) -> list[dict[str, Any]]:
        """The messages kept on ``topic`` with ``seq > since_seq`` (at most ``limit``), in publish order.

        For a late reader: what was published before it subscribed, or while
        it did not drain its inbox. Each item is an inbox event plus
        ``published_at`` (the clock's seconds). Needs the read right on
        ``shared`` (everyone has it by default); asked of the bus, so it sees
        every publish this handle made before. Page with ``since_seq`` = the
        last ``seq`` seen.
        """
        events: list[dict[str, Any]] = self.submit_messages(topic, since_seq, limit).get(timeout)
        return events

    # -- L1 session (summary chain under a token budget; docs/L1.md) -----------------
    def _session_ask(self, request: dict[str, Any]) -> Future[Any]:
        return self._ask(session_actor_name(self._id), request)

    def submit_turn(
        self,
        summary: str,
        *,
        thought: str = "",
        content: str = "",
        role: str = "assistant",
        supplement: bool = False,
        relevance: float | None = None,
        tokens: int | None = None,
        cites: Iterable[str] | dict[str, int] | None = None,
        embedding: Iterable[float] | None = None,
    ) -> Future[dict[str, Any]]:
        """Record one LLM turn; see :meth:`turn`. Bad arguments raise before anything is sent."""
        request = turn_request(
            summary=summary,
            thought=thought,
            content=content,
            role=role,
            supplement=supplement,
            relevance=relevance,
            tokens=tokens,
            cites=cites,
            embedding=embedding,
            line_graphs=self._line_graphs,
        )
        return self._session_ask(request)

    def turn(
        self,
        summary: str,
        *,
        thought: str = "",
        content: str = "",
        role: str = "assistant",
        supplement: bool = False,
        relevance: float | None = None,
        tokens: int | None = None,
        cites: Iterable[str] | dict[str, int] | None = None,
        embedding: Iterable[float] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Archive ``thought`` and ``content`` to L0 and append ``summary`` to this agent's chain.

        ``role`` is the LLM message role the summary renders with;
        ``relevance`` (0..1) is the turn's relevance to the current task
        (default 0.5); ``supplement`` shields it from the hard-threshold
        phase; ``tokens`` overrides the counted cost (replaying recorded
        traces); ``cites`` names the lines the turn relied on (a later write
        to one marks it stale). Returns ``{archive_iri, evicted, tokens,
        turn_tokens, seq, counter}``: ``tokens`` is the chain's total after
        eviction, ``counter`` the token counter that produced it.
        """
        result: dict[str, Any] = self.submit_turn(
            summary,
            thought=thought,
            content=content,
            role=role,
            supplement=supplement,
            relevance=relevance,
            tokens=tokens,
            cites=cites,
            embedding=embedding,
        ).get(timeout)
        return result

    def submit_session(self) -> Future[dict[str, Any]]:
        return self._session_ask({"t": "session"})

    def session(self, *, timeout: float | None = None) -> dict[str, Any]:
        """This agent's chain: ``{turns, summaries, tokens, weak_refs, counter, budget, query}``."""
        result: dict[str, Any] = self.submit_session().get(timeout)
        return result

    def submit_session_messages(self) -> Future[list[dict[str, str]]]:
        return self._session_ask({"t": "messages"})

    def session_messages(self, *, timeout: float | None = None) -> list[dict[str, str]]:
        """The chain as LLM chat messages (``{"role", "content"}``), oldest first."""
        result: list[dict[str, str]] = self.submit_session_messages().get(timeout)
        return result

    def submit_handoff(self) -> Future[dict[str, Any]]:
        return self._session_ask({"t": "handoff"})

    def handoff(self, *, timeout: float | None = None) -> dict[str, Any]:
        """A hand-off text of this agent's session for another agent: ``{text, tokens, counter, iris, weak_refs}``."""
        result: dict[str, Any] = self.submit_handoff().get(timeout)
        return result

    def submit_set_query(
        self, embedding: Iterable[float] | None = None, *, text: str | None = None
    ) -> Future[dict[str, Any]]:
        """See :meth:`set_query`; answers ``{"evicted": [archive IRIs]}``."""
        request: dict[str, Any] = {"t": "query"}
        if embedding is not None:
            request["embedding"] = list(check_embedding(embedding, "a query embedding"))
        if text is not None:
            if not isinstance(text, str) or not text.strip():
                raise InvalidInput(f"a query text is a non-empty string, not {text!r}")
            request["text"] = text
        return self._session_ask(request)

    def set_query(
        self, embedding: Iterable[float] | None = None, *, text: str | None = None, timeout: float | None = None
    ) -> list[str]:
        """Compare turns to this query (cosine) instead of their given relevance; None clears it.

        Returns the archive IRIs evicted. ``text`` needs an embedder on the
        agent's session, and the sessions :meth:`MemorySystem.agent` starts
        have none (L1 is not connected to the vector engine), so ``text`` is
        refused with :class:`~gliding_actors.errors.InvalidInput`: pass the
        query's ``embedding`` instead, made with the same embedder as the
        turns' embeddings (e.g. ``HashEmbedder().embed([text])[0].tolist()``
        from :mod:`gliding_actors.hyperspace`). For recall by text,
        :meth:`context` and :meth:`search` use the vector engine directly.
        """
        result: dict[str, Any] = self.submit_set_query(embedding, text=text).get(timeout)
        return list(result["evicted"])

    def submit_close_session(self) -> Future[dict[str, Any]]:
        return self._session_ask({"t": "close"})

    def close_session(self, *, timeout: float | None = None) -> dict[str, Any]:
        """Archive this session's node to L0 and start a new, empty chain: ``{session_iri, blocks, tokens, counter}``."""
        result: dict[str, Any] = self.submit_close_session().get(timeout)
        return result

    def reload(self, iri: str) -> dict[str, Any]:
        """The full archived turn (thought, content, summary, ...) or closed session at ``iri``, from L0.

        Any agent may reload any archive: a hand-off names IRIs for its
        receiver to reload. An IRI that is not an archive, or that holds
        nothing, is :class:`~gliding_actors.errors.InvalidInput`.
        """
        return reload_turn(self._system.l0, iri)

    # -- L3 projections (docs/L3.md) -------------------------------------------
    def submit_project(
        self,
        frame: str | None = None,
        task: str | None = None,
        max_tokens: int | None = None,
        query: str | None = None,
    ) -> Future[dict[str, Any]]:
        """A projection of ``task`` through ``frame`` (None: this role's default) within ``max_tokens``.

        A valid cached view answers at once, without a message; otherwise the
        dirty lines are recalled and a worker computes it. Bad arguments raise
        :class:`~gliding_actors.errors.InvalidInput` before anything is sent.
        """
        if query is not None:  # a semantic projection: the frame and a hybrid search, merged
            return self._system.l3.submit(self._role, frame, task, max_tokens, query=query)
        return self._system.l3.submit(self._role, frame, task, max_tokens)

    def project(
        self,
        frame: str | None = None,
        task: str | None = None,
        max_tokens: int | None = None,
        *,
        query: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """What this role sees of ``task``: ``{tokens, iris, jsonld, cached, mode, counter, ...}``.

        With ``query``, a semantic projection: ``iris`` merges the frame's
        nodes with a hybrid search for ``query`` (plus ``ranking``, ``search``).

        Only nodes of graphs this role may read appear; ``tokens`` (counted by
        ``counter``) never exceeds ``max_tokens``; ``mode`` says whether the
        result is ``full``, ``truncated`` or ``reference`` (docs/L3.md).
        """
        result: dict[str, Any] = self.submit_project(frame, task, max_tokens, query).get(timeout)
        return result

    # -- Hyperspace: hybrid search (docs/HYPERSPACE.md) ---------------------------------
    def submit_search(
        self, text: str, k: int = 10, filters: dict[str, Any] | None = None
    ) -> Future[dict[str, Any]]:
        """Hybrid search; see :meth:`search`. Bad arguments raise before anything is sent."""
        return self._system.hyperspace.submit_search(self._role, text, k, filters)

    def search(
        self, text: str, k: int = 10, filters: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> dict[str, Any]:
        """The ``k`` nodes best matching ``text``: ``{iris, scores, embedders}``, best first.

        Text, lexical (BM25) and structural (Poincaré) rankings fused
        (``config.hyperspace``). ``filters``: ``tags`` (a list all must carry,
        or ``{must, should, not}``), ``types``, ``graph``, ``min_importance``,
        ``max_importance``. Coherent (dirty lines are recalled first) and
        confined to what this role may read.
        """
        result: dict[str, Any] = self.submit_search(text, k, filters).get(timeout)
        return result

    # -- the agent's context and intents (docs/CONTEXT.md) -------------------------------
    def set_task(self, task: str | None) -> None:
        """Make ``task`` this agent's current task (None: no task): what :meth:`context` projects."""
        self._system.context.set_task(self._id, task)

    def submit_context(
        self, query: str | None = None, max_tokens: int = 2000, *, task: str | None = None
    ) -> Future[dict[str, Any]]:
        """See :meth:`context`. Bad arguments raise before anything is sent."""
        return self._system.context.submit_context(self._id, self._role, query, max_tokens, task)

    def context(
        self,
        query: str | None = None,
        max_tokens: int = 2000,
        *,
        task: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """One prompt-ready context within ``max_tokens``: ``{text, tokens, iris, counter, sources, ...}``.

        Assembled from this agent's L1 chain, the L3 projection of its role's
        frame for its current task (``task``, else :meth:`set_task`'s) and a
        hybrid search for ``query`` (else its latest summary) over L2 lines
        and L0 archives; the budget goes to what adds most relevance per
        token. ``tokens`` (counted by ``counter``) never exceeds ``max_tokens``.
        """
        result: dict[str, Any] = self.submit_context(query, max_tokens, task=task).get(timeout)
        return result

    def submit_intent(self, entities: Iterable[str]) -> Future[dict[str, Any]]:
        """Prefetch around ``entities``; the future answers ``{prefetched, scores, entities}`` once loaded."""
        return self._system.context.submit_intent(self._id, self._role, entities)

    def intent(self, entities: Iterable[str]) -> None:
        """Say this agent is turning to ``entities``: the lines near them are loaded ahead of use.

        Returns at once (never waits for the prefetch); bad input raises
        :class:`~gliding_actors.errors.InvalidInput` and nothing is sent.
        """
        self.submit_intent(entities)

    @property
    def aio(self) -> AsyncAgent:
        """The awaitable twin of this handle (``await agent.aio.read(iri)``); see :mod:`gliding_actors._aio`.

        Needs the ``threads`` runtime: on ``sim`` nothing moves unless someone
        drives the simulator, so this raises :class:`~gliding_actors.errors.InvalidInput`.
        """
        from gliding_actors._aio import AsyncAgent

        return AsyncAgent(self)

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
