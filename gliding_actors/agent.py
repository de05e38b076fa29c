"""The handle an orchestrator holds for one agent, and its asyncio view.

Every operation is defined once (:mod:`gliding_actors._operation`) and has
three faces: a blocking method (``publish``) that waits with a timeout, a
``submit_*`` method returning a :class:`~gliding_actors.runtime.Future`
without waiting (scenario replay issues several ops at once with it), and an
awaitable twin on ``agent.aio``. Input is checked in the definition, before
anything is sent, so bad input is refused with
:class:`~gliding_actors.errors.InvalidInput` and changes nothing.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable
from typing import Any

from gliding_actors._agent_ports import AgentPorts
from gliding_actors._checks import (
    MAX_VALUE_DEPTH,
    check_graph,
    check_iri,
    check_object,
    check_storable,
    check_tags,
    check_ttl,
)
from gliding_actors._coordination import CoordinationOps
from gliding_actors._operation import Call, Tracer, not_at_once, operation, same
from gliding_actors._results import (
    ModifyResult,
    ReadResult,
    UpdateResult,
    WriteResult,
    absent,
    evicted_of,
    nothing,
    read_result,
    version_of,
)
from gliding_actors.coherence._hosting import cache_name, unpack_value
from gliding_actors.errors import InvalidInput, PermissionDenied, show
from gliding_actors.l0 import is_importance
from gliding_actors.l1._actor import session_actor_name, turn_request
from gliding_actors.l1._archive import reload_turn
from gliding_actors.l1._session import check_embedding
from gliding_actors.l2._update import check_update, plan_update
from gliding_actors.llm import ExtractiveSummarizer, Summarizer, parse_answer
from gliding_actors.roles import ROLES
from gliding_actors.runtime import BaseFuture, CompletedFuture, Future, MappedFuture
from gliding_actors.runtime._future import wait_bound

__all__ = ["MAX_VALUE_DEPTH", "ROLES", "Agent", "AgentPorts", "AsyncAgent", "ModifyResult", "ReadResult", "WriteResult"]


class Agent(CoordinationOps):
    """One agent's view of the memory. Get one from :meth:`MemorySystem.agent`."""

    def __init__(self, system: AgentPorts, agent_id: str, role: str) -> None:
        self._system = system
        self._id = agent_id
        self._role = role
        self._cache = cache_name(agent_id)
        #: this agent's published cache lines (see SnapshotBoard)
        self._view = system.board.view(agent_id)
        self._view_get = self._view.get  # bound once: the hit path's first lookup
        #: ops this handle has in flight per IRI: a read must not hit around them
        self._in_flight: dict[str, int] = {}
        self._in_flight_lock = threading.Lock()
        #: which named graph each line is in (shared by every handle of the system)
        self._line_graphs = system.line_graphs
        #: the graph of a line nobody wrote yet (the fast path's guess for a create)
        self._default_graph = system.line_graphs.default_graph
        #: graphs this role was found to be allowed to read; the matrix never
        #: changes, so a graph, once here, stays (the hit path's one set lookup)
        self._readable: set[str] = set()
        #: sees every operation when the memory is recorded (scenario/_record.py)
        self._trace: Tracer | None = None
        #: this agent's read counters for stats() (gliding_actors/metrics/_counters.py);
        #: the hit path touches only ``_tallies``, this handle's own map
        self._counters = system.counters.agent(agent_id)
        self._tallies = self._counters.tallies
        self._tally_of = self._tallies.get
        #: lines written with a time to live (the read paths' O(1) "is anything due?")
        self._expiry_table = system.expiry.table
        self._expiry_heap = self._expiry_table.heap

    @property
    def id(self) -> str:
        return self._id

    @property
    def role(self) -> str:
        return self._role

    @property
    def system(self) -> AgentPorts:
        return self._system

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

    def _hit(
        self, otherwise: Callable[..., ReadResult | None], iri: str, *, timeout: float | None = None
    ) -> ReadResult | None:
        """The read served from this agent's published cache view, or ``otherwise(iri, timeout=timeout)``
        on a miss (``read``'s fast path, see ``operation``'s ``at_once``; ``timeout`` is the read's own
        argument: a hit waits for nothing, but a bad one is refused all the same).

        No message and no lock: one dict lookup on the board (only IRIs that
        passed validation on the way in are ever there), one membership test
        against this handle's own ops in flight (a read must not overtake
        them), and a private copy of the value.
        """
        if type(iri) is not str:  # a list or dict cannot be looked up; the definition's check refuses it
            return otherwise(iri, timeout=timeout)
        if timeout is not None:
            wait_bound(timeout)  # InvalidInput, as a miss would raise
        # an expired line reads as absent: deleted before any read answers (an empty list when no line has a TTL)
        if self._expiry_heap and self._expiry_table.due():
            self._system.expiry.sweep()
        hit = self._view_get(iri)
        if hit is None or iri in self._in_flight:
            return otherwise(iri, timeout=timeout)
        state, packed, version, graph = hit
        # one set lookup once the graph was found readable; the matrix is asked only the first time
        if graph is not None and graph not in self._readable and not self._may_read_graph(graph):
            return absent(state, 0)
        # stats(): one more lookup, in this handle's own map, no lock (metrics/_counters.py)
        tally = self._tally_of(iri)
        if tally is not None and tally.packed is packed:
            tally.hits += 1
        else:
            self._counters.hit_new_copy(iri, packed, version)
        return {"value": unpack_value(packed), "version": version, "state": state, "messages": 0}

    @operation(at_once=_hit)
    def read(self, iri: str, *, timeout: float | None = None) -> Call[ReadResult, ReadResult]:
        """The line's latest completed value and version, coherent with every agent's writes.

        A hit on this agent's S/E/M copy is answered without a message.
        """
        hit = self._hit(not_at_once, iri)
        if hit is not None:
            return Call(CompletedFuture(hit), same, timeout)
        check_iri(iri)
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
        return Call(MappedFuture(loading, self._read_answer), same, timeout)

    submit_read = read.submit

    def _read_answer(self, result: dict[str, Any]) -> ReadResult:
        """Judge the read on the graph the data really came from before handing it over.

        A line in a graph this role may not read answers as an absent line
        does (no value, version 0), so a read tells an agent nothing of a line
        it may not see, not even that it exists. The copy stays in this
        agent's cache (the protocol already ran); its value is never returned.
        """
        graph = result.get("graph")
        if graph is not None and not self._may_read_graph(graph):
            return absent(result["state"], result["messages"])
        return read_result(result)

    def _may_read_graph(self, graph: str) -> bool:
        """Whether this role may read ``graph`` (each graph asks the matrix once)."""
        if graph in self._readable:
            return True
        if not self._system.permissions.allowed(self._role, graph, "read"):
            return False
        self._readable.add(graph)
        return True

    def _seen_version(self, iri: str) -> int:
        """The version of ``iri`` this agent may know of: 0 for a line it may not read, as for an absent one."""
        return self._line_graphs.version_of(iri) if self._may_read_graph(self._line_graphs.graph_of(iri)) else 0

    def get(self, iri: str, *, timeout: float | None = None) -> dict[str, Any] | None:
        """Just the value of :meth:`read` (None when absent)."""
        return self.read(iri, timeout=timeout)["value"]

    # -- permissions: a fast path here, before anything is sent; the cache decides --
    def _require(self, action: str, graph: str, iri: str) -> None:
        if not self._system.permissions.allowed(self._role, graph, action):
            raise PermissionDenied(f"role {self._role} may not {action} in graph {graph!r} (line {iri})")

    def _check_may_write(self, iri: str, graph: str | None) -> None:
        """Check a write or cas of ``iri`` into ``graph`` against the registry (the fast path).

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
            # the graph the cache put the version in, judged where the write was ordered
            where = result.get("graph") or (line_graphs.graph_of(iri) if keep else graph)
            line_graphs.record(iri, where, int(result["version"]))
            return result

        def on_done(done: Any) -> None:
            if isinstance(done, BaseFuture) and done.exception() is None:
                note(done.result_now())

        future.add_done_callback(on_done)
        return MappedFuture(future, note)

    def _send_write(
        self,
        kind: str,
        iri: str,
        value: dict[str, Any],
        tags: Iterable[str] | None,
        graph: str | None,
        importance: float | None = None,
        ttl_s: float | None = None,
        **extra: Any,
    ) -> Future[Any]:
        """Validate a write once (IRI, JSON object, JSON-LD, tags, graph, importance, time to live,
        permission), then send it to the cache, recording where the line lands and when it
        expires; raises before anything is sent."""
        _check_importance(importance)
        ttl = check_ttl(ttl_s)
        checked_iri = check_iri(iri)
        checked_value = check_object(value, "a line's value")
        check_storable(checked_iri, checked_value, self._system.config.l0.max_node_bytes)
        checked_graph = check_graph(graph)
        # a value the graph could not hold, or one describing another node, is refused before the protocol
        self._system.graph.check_value(checked_iri, checked_value)
        # The fast path: refuse now what the registry already shows is refused.
        # The cache judges the write again on the version it overwrites, and a
        # write naming no graph stays in the graph the line is in at that moment.
        self._check_may_write(checked_iri, checked_graph)
        request = {
            "t": kind,
            "iri": checked_iri,
            "value": checked_value,
            "tags": check_tags(tags),
            "graph": checked_graph,
            **extra,
        }
        if importance is not None:
            request["importance"] = float(importance)
        if ttl is not None:
            expires = request["expires"] = self._system.clock.now() + ttl
            table = self._system.expiry.table

            def expiring(done: Any) -> None:
                if isinstance(done, BaseFuture) and done.exception() is None:
                    table.note(checked_iri, int(done.result_now()["version"]), expires)

        sent = self._line_op(checked_iri, request)
        if ttl is not None:
            sent.add_done_callback(expiring)
        intent_tag = self._system.config.prefetch.intent_tag
        if intent_tag and intent_tag in request["tags"]:  # the team's intent: the memory judges whether it changed
            context = self._system.context

            def intent_written(done: Any) -> None:
                if isinstance(done, BaseFuture) and done.exception() is None:
                    context.intent_written(checked_iri, checked_value)

            sent.add_done_callback(intent_written)
        return self._recording(checked_iri, sent, checked_graph)

    @operation
    def write(
        self,
        iri: str,
        value: dict[str, Any],
        *,
        tags: Iterable[str] | None = None,
        graph: str | None = None,
        importance: float | None = None,
        ttl_s: float | None = None,
        timeout: float | None = None,
    ) -> Call[WriteResult, WriteResult]:
        """Write ``value`` (a JSON object); completes once this agent holds the line in M.

        A write carrying a critical tag (config ``coherence.critical_tags``) is
        write-through: it completes only after L2 and L0 hold it durably.
        ``importance`` (0..1; None keeps the line's, 0.5 for a new one) is kept
        in L0 and filters search. With ``ttl_s`` the line expires that many
        seconds after this write (on the memory's clock): from then on it reads
        as absent everywhere, and the system deletes it (docs/COHERENCE.md,
        "Time to live"); a later write without ``ttl_s`` makes it permanent.
        """
        return Call(self._send_write("store", iri, value, tags, graph, importance, ttl_s), same, timeout)

    submit_write = write.submit

    @operation
    def cas(
        self,
        iri: str,
        version: int,
        value: dict[str, Any],
        *,
        tags: Iterable[str] | None = None,
        graph: str | None = None,
        importance: float | None = None,
        ttl_s: float | None = None,
        timeout: float | None = None,
    ) -> Call[WriteResult, WriteResult]:
        """Write only if the line is still at ``version``; ``ConflictError`` otherwise (the rest as :meth:`write`)."""
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise InvalidInput(f"cas: version is an integer >= 0, not {show(version)}")
        sent = self._send_write("cas", iri, value, tags, graph, importance, ttl_s, version=version)
        return Call(sent, same, timeout)

    submit_cas = cas.submit

    @operation
    def modify(
        self,
        iri: str,
        fn: Callable[[dict[str, Any] | None], dict[str, Any]],
        *,
        tags: Iterable[str] | None = None,
        graph: str | None = None,
        importance: float | None = None,
        timeout: float | None = None,
    ) -> Call[ModifyResult, ModifyResult]:
        """Atomically replace the line's value with ``fn(value)`` (``value`` None when absent).

        The cache obtains the line in M, as for a write, and calls ``fn`` there on
        a private copy of the current value, exactly once: no other agent's write
        can fall between the value ``fn`` saw and the one it made, so a counter
        needs no retry loop. ``fn`` runs in this agent's cache actor, in this
        process on every runtime (it is never pickled), while that actor waits:
        keep it short and free of I/O and of calls into this memory. Its thread
        is the one that called ``modify`` or the cache actor's own, never another
        agent's. If ``fn``
        raises, the line is unchanged and :class:`~gliding_actors.errors.ModifyFailed`
        names its exception; a result that is not a JSON object a line may hold is
        :class:`~gliding_actors.errors.InvalidInput`, unchanged too. Rights, tags,
        graph and importance as :meth:`write`; returns the new version and ``value``.
        """
        if not callable(fn):
            raise InvalidInput(f"modify: fn is a function of the value, not {show(fn)}", path=("fn",))
        _check_importance(importance)
        checked_iri = check_iri(iri)
        checked_graph = check_graph(graph)
        checked_tags = check_tags(tags)
        intent_tag = self._system.config.prefetch.intent_tag
        if intent_tag and intent_tag in checked_tags:
            raise InvalidInput(f"the team's intent (tag {intent_tag!r}) is written with write, not modify")
        self._check_may_write(checked_iri, checked_graph)
        functions = self._system.modify_functions
        token = functions.lend(fn)  # the message carries the token: messages are data, a function is not
        request: dict[str, Any] = {"t": "modify", "iri": checked_iri, "fn": token, "tags": checked_tags, "graph": checked_graph}
        if importance is not None:
            request["importance"] = float(importance)
        try:
            asked = self._line_op(checked_iri, request)
        except BaseException:
            functions.take_back(token)
            raise
        asked.add_done_callback(lambda _done: functions.take_back(token))
        return Call(self._recording(checked_iri, asked, checked_graph), same, timeout)

    submit_modify = modify.submit

    @operation
    def delete(
        self, iri: str, *, version: int | None = None, timeout: float | None = None
    ) -> Call[dict[str, Any], int]:
        """Delete the line (a write of a tombstone); returns the new version.

        Needs the ``delete`` right on the line's graph; the tombstone stays in that graph.
        With ``version``, only if the line is still at it (``ConflictError`` otherwise, as :meth:`cas`).
        """
        checked = check_iri(iri)
        request: dict[str, Any] = {"t": "delete", "iri": checked}
        if version is not None:
            if isinstance(version, bool) or not isinstance(version, int) or version < 0:
                raise InvalidInput(f"delete: version is an integer >= 0 (or None), not {show(version)}")
            request["version"] = version
        self._require("delete", self._line_graphs.graph_of(checked), checked)
        sent = self._recording(checked, self._line_op(checked, request), None, keep=True)
        return Call(sent, version_of, timeout)

    submit_delete = delete.submit

    @operation
    def evict(self, iri: str, *, timeout: float | None = None) -> Call[dict[str, Any], None]:
        """Give this agent's copy up (a dirty copy is written back home first)."""
        return Call(self._line_op(check_iri(iri), {"t": "evict", "iri": iri}), nothing, timeout)

    submit_evict = evict.submit

    # -- SPARQL over the blackboard graph --------------------------------------
    @operation
    def query(
        self, sparql: str, bindings: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> Call[dict[str, Any], dict[str, Any]]:
        """Run SPARQL SELECT/ASK/CONSTRUCT over the graphs this agent's role may read.

        Answers ``{"rows"}``, ``{"boolean"}`` or ``{"jsonld"}``. Coherent:
        every dirty line is recalled home (and so into the graph) first, so the
        query sees every write completed before it began. Confined by the
        query's dataset, never by editing its text.
        """
        if not isinstance(sparql, str) or not sparql.strip():
            raise InvalidInput("a SPARQL query is a non-empty string")
        system = self._system
        system.graph.check_query(sparql, bindings)  # before the recall: a refused query moves nothing
        system.expiry.sweep_if_due()
        role = self._role

        def run(_moved: int) -> dict[str, Any]:
            graphs = system.readable_graphs(role)
            result: dict[str, Any] = system.graph.query(
                sparql, graphs=None if role == "system" else graphs, bindings=bindings, role_is_system=role == "system"
            )
            return result

        return Call(MappedFuture(system.submit_recall(), run), same, timeout)

    submit_query = query.submit

    @operation
    def update(self, sparql: str, *, timeout: float | None = None) -> Call[UpdateResult, UpdateResult]:
        """Change lines with a SPARQL update (``INSERT DATA``, ``DELETE DATA``, ``DELETE/INSERT ...
        WHERE``, ``CLEAR``/``DROP GRAPH``, ...); answers ``{created, changed, deleted, versions}``.

        The update sees the graphs this role may read (as :meth:`query` does)
        and never runs on the graph itself: what it would change is turned into
        new values of whole lines (docs/L2.md, "SPARQL update"), every one
        checked before the first is written, then written through coherence as
        ``cas`` on the version read, so every cache, L2 and L0 agree. Each line
        needs this role's rights where it lives (``create``, ``update``, or
        ``delete`` for a line the update empties): :class:`PermissionDenied`
        otherwise, and ``LOAD``/``SERVICE`` are :class:`InvalidInput`. Not one
        transaction across lines: a line another agent wrote meanwhile stops the
        update with :class:`ConflictError`, the lines before it (in IRI order)
        written. A line keeps its tags and importance and loses its time to
        live, as any write without ``ttl_s``. Runs on the calling thread.
        """
        check_update(sparql)
        system = self._system
        wait = system.config.runtime.ask_timeout_s if timeout is None else timeout
        system.expiry.sweep_if_due()
        system.submit_recall().get(wait)
        seen: dict[str, ReadResult] = {}

        def value_of(iri: str) -> tuple[dict[str, Any] | None, str | None]:
            graph = self._line_graphs.known(iri)
            if graph is not None:
                self._require("read", graph, iri)
            seen[iri] = self.read(iri, timeout=wait)
            return seen[iri]["value"], graph

        changes = plan_update(sparql, system.graph, system.readable_graphs(self._role), value_of, self._default_graph)
        for change in changes:  # every right and every value first: a refused update writes nothing
            action = "create" if not change.existed else "delete" if change.value is None else "update"
            self._require(action, change.graph, change.iri)
            if change.value is not None:
                check_storable(change.iri, change.value, system.config.l0.max_node_bytes)
                system.graph.check_value(change.iri, change.value)
        result: UpdateResult = {"created": [], "changed": [], "deleted": [], "versions": {}}
        for change in changes:
            version = seen[change.iri]["version"]
            if change.value is None:
                result["versions"][change.iri] = self.delete(change.iri, version=version, timeout=wait)
                result["deleted"].append(change.iri)
                continue
            node = system.graph.node(change.iri)
            tags = node.tags if node is not None else ()
            written = self.cas(change.iri, version, change.value, tags=tags, graph=change.graph, timeout=wait)
            result["versions"][change.iri] = written["version"]
            result["created" if not change.existed else "changed"].append(change.iri)
        return Call(CompletedFuture(result), same, timeout)

    submit_update = update.submit

    # -- L1 session (summary chain under a token budget; docs/L1.md) -----------------
    def _session_ask(self, request: dict[str, Any]) -> Future[Any]:
        return self._ask(session_actor_name(self._id), request)

    @operation
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
    ) -> Call[dict[str, Any], dict[str, Any]]:
        """Archive ``thought`` and ``content`` to L0 and append ``summary`` to this agent's chain.

        ``role`` is the LLM message role the summary renders with;
        ``relevance`` (0..1) is the turn's relevance to the current task
        (default 0.5); ``supplement`` shields it from the hard-threshold
        phase; ``tokens`` overrides the counted cost (replaying recorded
        traces); ``cites`` names the lines the turn relied on (a later write
        to one marks it stale; each must be readable by this role, else
        :class:`~gliding_actors.errors.PermissionDenied`). Returns ``{archive_iri, evicted, tokens,
        turn_tokens, seq, counter}``: ``tokens`` is the chain's total after
        eviction, ``counter`` the token counter that produced it.
        """
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
            version_of=self._seen_version,
        )
        return Call(self._session_ask(request), same, timeout)

    submit_turn = turn.submit

    def turn_from(
        self,
        answer: object,
        *,
        summarizer: Summarizer | None = None,
        role: str = "assistant",
        supplement: bool = False,
        relevance: float | None = None,
        cites: Iterable[str] | dict[str, int] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Record an LLM's answer as this agent's turn: :meth:`turn` with its thought, content and summary.

        ``answer`` is the model's text (parsed and repaired by
        :func:`gliding_actors.llm.parse_answer`: a code fence or prose around
        the JSON object is fine), an object with the keys, or an
        :class:`~gliding_actors.llm.Answer`. A missing summary is written by
        ``summarizer`` (default: the extractive one, no model needed). A text
        that holds no such answer is :class:`~gliding_actors.errors.MalformedAnswer`
        and records nothing. Returns :meth:`turn`'s result plus ``answer``
        (``{thought, content, summary, summarized}``), so the caller acts on
        the content it parsed.
        """
        parsed = parse_answer(answer, summarizer=summarizer)
        result = self.turn(
            parsed.summary,
            thought=parsed.thought,
            content=parsed.content,
            role=role,
            supplement=supplement,
            relevance=relevance,
            cites=cites,
            timeout=timeout,
        )
        return {**result, "answer": parsed.to_dict()}

    def consolidate(
        self, keep: int = 4, *, summarizer: Summarizer | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """Fold the chain's older turns (all but the newest ``keep``) into one fact turn; answers
        ``{fact, folded, tokens, fact_tokens}`` (``fact`` None when fewer than two turns are older).

        The fact's summary is ``summarizer``'s summary of theirs (run here, in
        the caller's thread; it may ask a model); without one it lists each
        folded summary's first sentence. Nothing is lost: the folded turns stay
        archived, and the fact's archived node names each of them under
        ``prov:wasDerivedFrom`` (:meth:`reload` the fact to follow them). The
        fact stands where the oldest folded turn stood, cites what they cited
        and is stale where one of them was (docs/L1.md, "Consolidation").
        """
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
            raise InvalidInput(f"keep is an integer >= 0, not {show(keep)}")
        wait = self._system.config.runtime.ask_timeout_s if timeout is None else timeout
        chain = self._session_ask({"t": "session"}).get(wait)
        turns = chain["turns"]
        older = turns[: len(turns) - keep] if keep else turns
        if len(older) < 2:
            return {"fact": None, "folded": [], "tokens": int(chain["tokens"]), "fact_tokens": 0}
        summaries = [str(t["summary"]) for t in older]
        thought = f"Consolidated {len(older)} earlier turns of {self._id}."
        content = "\n".join(f"- {summary}" for summary in summaries)
        summary = summarizer.summarize(thought, content) if summarizer is not None else _first_sentences(summaries)
        return self.fold([t["archive_iri"] for t in older], summary, thought=thought, content=content, timeout=wait)

    @operation
    def fold(
        self,
        iris: list[str],
        summary: str,
        *,
        thought: str = "",
        content: str = "",
        timeout: float | None = None,
    ) -> Call[dict[str, Any], dict[str, Any]]:
        """Replace the chain turns archived at ``iris`` by one fact turn with ``summary`` (what
        :meth:`consolidate` does once it has a summary; a recorded trace replays this).
        :class:`InvalidInput`, nothing archived, unless each IRI names a turn still in the chain."""
        request = {"t": "fold", "iris": list(iris) if isinstance(iris, (list, tuple)) else iris, "summary": summary,
                   "thought": thought, "content": content}
        return Call(self._session_ask(request), same, timeout)

    submit_fold = fold.submit

    @operation
    def session(self, *, timeout: float | None = None) -> Call[dict[str, Any], dict[str, Any]]:
        """This agent's chain: ``{turns, summaries, tokens, weak_refs, counter, budget, query}``."""
        return Call(self._session_ask({"t": "session"}), same, timeout)

    submit_session = session.submit

    @operation
    def session_messages(self, *, timeout: float | None = None) -> Call[list[dict[str, str]], list[dict[str, str]]]:
        """The chain as LLM chat messages (``{"role", "content"}``), oldest first."""
        return Call(self._session_ask({"t": "messages"}), same, timeout)

    submit_session_messages = session_messages.submit

    @operation
    def handoff(self, *, timeout: float | None = None) -> Call[dict[str, Any], dict[str, Any]]:
        """A hand-off text of this agent's session for another agent: ``{text, tokens, counter, iris, weak_refs}``."""
        return Call(self._session_ask({"t": "handoff"}), same, timeout)

    submit_handoff = handoff.submit

    @operation
    def set_query(
        self, embedding: Iterable[float] | None = None, *, text: str | None = None, timeout: float | None = None
    ) -> Call[dict[str, Any], list[str]]:
        """Compare turns to this query (cosine) instead of their given relevance; None clears it.

        Returns the archive IRIs evicted (the future answers ``{"evicted"}``).
        ``text`` needs an embedder on the agent's session, and the sessions
        :meth:`MemorySystem.agent` starts have none (L1 is not connected to the
        vector engine), so ``text`` is refused with
        :class:`~gliding_actors.errors.InvalidInput`: pass the query's
        ``embedding`` instead, made with the same embedder as the turns'
        embeddings (e.g. ``HashEmbedder().embed([text])[0].tolist()`` from
        :mod:`gliding_actors.hyperspace`). For recall by text, :meth:`context`
        and :meth:`search` use the vector engine directly.
        """
        request: dict[str, Any] = {"t": "query"}
        if embedding is not None:
            request["embedding"] = list(check_embedding(embedding, "a query embedding"))
        if text is not None:
            if not isinstance(text, str) or not text.strip():
                raise InvalidInput(f"a query text is a non-empty string, not {show(text)}")
            request["text"] = text
        return Call(self._session_ask(request), evicted_of, timeout)

    submit_set_query = set_query.submit

    @operation
    def close_session(self, *, timeout: float | None = None) -> Call[dict[str, Any], dict[str, Any]]:
        """Archive this session's node to L0 and start a new, empty chain: ``{session_iri, blocks, tokens, counter}``."""
        return Call(self._session_ask({"t": "close"}), same, timeout)

    submit_close_session = close_session.submit

    def reload(self, iri: str) -> dict[str, Any]:
        """The full archived turn (thought, content, summary, ...) or closed session at ``iri``, from L0.

        Any agent may reload any archive: a hand-off names IRIs for its
        receiver to reload. An IRI that is not an archive, or that holds
        nothing, is :class:`~gliding_actors.errors.InvalidInput`.
        """
        return reload_turn(self._system.l0, iri)

    # -- L3 projections (docs/L3.md) -------------------------------------------
    @operation
    def project(
        self,
        frame: str | None = None,
        task: str | None = None,
        max_tokens: int | None = None,
        *,
        query: str | None = None,
        timeout: float | None = None,
    ) -> Call[dict[str, Any], dict[str, Any]]:
        """What this role sees of ``task`` through ``frame`` (None: this role's default) within ``max_tokens``.

        Answers ``{tokens, iris, jsonld, cached, mode, counter, ...}``. With
        ``query``, a semantic projection: ``iris`` merges the frame's nodes
        with a hybrid search for ``query`` (plus ``ranking``, ``search``).

        Only nodes of graphs this role may read appear; ``tokens`` (counted by
        ``counter``) never exceeds ``max_tokens``; ``mode`` says whether the
        result is ``full``, ``truncated`` or ``reference`` (docs/L3.md). A
        valid cached view answers at once, without a message; otherwise the
        dirty lines are recalled and a worker computes it.
        """
        self._system.expiry.sweep_if_due()
        return Call(self._system.l3.submit(self._role, frame, task, max_tokens, query=query), same, timeout)

    submit_project = project.submit

    # -- Hyperspace: hybrid search (docs/HYPERSPACE.md) ---------------------------------
    @operation
    def search(
        self, text: str, k: int = 10, filters: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> Call[dict[str, Any], dict[str, Any]]:
        """The ``k`` nodes best matching ``text``: ``{iris, scores, embedders}``, best first.

        Text, lexical (BM25) and structural (Poincaré) rankings fused
        (``config.hyperspace``). ``filters``: ``tags`` (a list all must carry,
        or ``{must, should, not}``), ``types``, ``graph``, ``min_importance``,
        ``max_importance``. Coherent (dirty lines are recalled first) and
        confined to what this role may read.
        """
        self._system.expiry.sweep_if_due()
        return Call(self._system.hyperspace.submit_search(self._role, text, k, filters), same, timeout)

    submit_search = search.submit

    # -- the agent's context and intents (docs/CONTEXT.md) -------------------------------
    def set_task(self, task: str | None) -> None:
        """Make ``task`` this agent's current task (None: no task): what :meth:`context` projects."""
        self._system.context.set_task(self._id, task)

    @operation
    def context(
        self,
        query: str | None = None,
        max_tokens: int = 2000,
        *,
        task: str | None = None,
        timeout: float | None = None,
    ) -> Call[dict[str, Any], dict[str, Any]]:
        """One prompt-ready context within ``max_tokens``: ``{text, tokens, iris, counter, sources, ...}``.

        Assembled from this agent's L1 chain, the L3 projection of its role's
        frame for its current task (``task``, else :meth:`set_task`'s) and a
        hybrid search for ``query`` (else its latest summary) over L2 lines
        and L0 archives; the budget goes to what adds most relevance per
        token. ``tokens`` (counted by ``counter``) never exceeds ``max_tokens``.
        """
        self._system.expiry.sweep_if_due()
        sent = self._system.context.submit_context(self._id, self._role, query, max_tokens, task)
        return Call(sent, same, timeout)

    submit_context = context.submit

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

        Needs a runtime whose actors run by themselves (``threads``, ``ray``): on
        ``sim`` nothing moves unless someone drives the simulator, so this
        raises :class:`~gliding_actors.errors.InvalidInput`.
        """
        return AsyncAgent(self)

    def __repr__(self) -> str:
        return f"<Agent {self._id!r} role={self._role}>"


def _first_sentences(summaries: Iterable[str], words: int = 20) -> str:
    """A fact's summary with no model: each summary's first sentence (at most ``words`` words), joined."""
    first = ExtractiveSummarizer(max_words=words)
    parts = (first.summarize("", summary).rstrip(".") for summary in summaries)
    return "; ".join(part for part in parts if part) + "."


class AsyncAgent:
    """Awaitable twins of every :class:`Agent` operation (see :mod:`gliding_actors._aio`).

    Get one with ``agent.aio``; it is a thin view (make as many as you like)
    and may be used from any event loop, one loop per await. Each method is
    the awaitable face of the operation of the same name on :class:`Agent`:
    same arguments, same result, same validation.
    """

    def __init__(self, agent: Agent) -> None:
        runtime = agent.system.runtime
        if runtime.deterministic:
            raise InvalidInput(
                f"the async API needs the threads runtime (or ray), not {show(runtime.kind)}: on sim nothing moves "
                "unless a blocking call drives the simulator (use the blocking API or scenario replay there)"
            )
        self._agent = agent
        self._ask_timeout_s = runtime.ask_timeout_s

    @property
    def agent(self) -> Agent:
        """The blocking handle this view belongs to."""
        return self._agent

    @property
    def ask_timeout_s(self) -> float:
        """How long an await waits when it names no ``timeout``."""
        return self._ask_timeout_s

    @property
    def id(self) -> str:
        return self._agent.id

    @property
    def role(self) -> str:
        return self._agent.role

    read = Agent.read.awaitable
    write = Agent.write.awaitable
    cas = Agent.cas.awaitable
    modify = Agent.modify.awaitable
    delete = Agent.delete.awaitable
    update = Agent.update.awaitable
    fold = Agent.fold.awaitable
    evict = Agent.evict.awaitable
    query = Agent.query.awaitable
    heartbeat = Agent.heartbeat.awaitable
    lock = Agent.lock.awaitable
    unlock = Agent.unlock.awaitable
    create_task = Agent.create_task.awaitable
    depend = Agent.depend.awaitable
    task_layers = Agent.task_layers.awaitable
    release_task = Agent.release_task.awaitable
    complete_task = Agent.complete_task.awaitable
    attach_to_task = Agent.attach_to_task.awaitable
    subscribe = Agent.subscribe.awaitable
    unsubscribe = Agent.unsubscribe.awaitable
    publish = Agent.publish.awaitable
    inbox = Agent.inbox.awaitable
    messages = Agent.messages.awaitable
    turn = Agent.turn.awaitable
    session = Agent.session.awaitable
    session_messages = Agent.session_messages.awaitable
    handoff = Agent.handoff.awaitable
    set_query = Agent.set_query.awaitable
    close_session = Agent.close_session.awaitable
    project = Agent.project.awaitable
    search = Agent.search.awaitable
    context = Agent.context.awaitable

    async def get(self, iri: str, *, timeout: float | None = None) -> dict[str, Any] | None:
        """Awaitable :meth:`Agent.get`."""
        return (await self.read(iri, timeout=timeout))["value"]

    async def reload(self, iri: str) -> dict[str, Any]:
        """Awaitable :meth:`Agent.reload`: one LevelDB read by key (microseconds), done in place."""
        return self._agent.reload(iri)

    async def consolidate(
        self, keep: int = 4, *, summarizer: Summarizer | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """Awaitable :meth:`Agent.consolidate`, in a worker thread (its summarizer may ask a model)."""
        return await asyncio.to_thread(self._agent.consolidate, keep, summarizer=summarizer, timeout=timeout)

    async def turn_from(
        self,
        answer: object,
        *,
        summarizer: Summarizer | None = None,
        role: str = "assistant",
        supplement: bool = False,
        relevance: float | None = None,
        cites: Iterable[str] | dict[str, int] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Awaitable :meth:`Agent.turn_from` (a summarizer, which may ask a model, runs in a worker thread)."""
        if summarizer is None:
            parsed = parse_answer(answer)
        else:
            parsed = await asyncio.to_thread(parse_answer, answer, summarizer=summarizer)
        result = await self.turn(
            parsed.summary,
            thought=parsed.thought,
            content=parsed.content,
            role=role,
            supplement=supplement,
            relevance=relevance,
            cites=cites,
            timeout=timeout,
        )
        return {**result, "answer": parsed.to_dict()}

    async def set_task(self, task: str | None) -> None:
        """Awaitable :meth:`Agent.set_task`: a local note, done in place."""
        self._agent.set_task(task)

    async def intent(self, entities: Iterable[str]) -> None:
        """Awaitable :meth:`Agent.intent`: like it, returns once the prefetch is asked for, not done."""
        self._agent.intent(entities)

    def __repr__(self) -> str:
        return f"<AsyncAgent {self._agent.id!r} role={self._agent.role}>"


def _check_importance(importance: object) -> None:
    """A write's or modify's ``importance``: None (keep the line's) or a number in [0, 1]."""
    if importance is not None and not is_importance(importance):
        raise InvalidInput(f"importance is a number in [0, 1] (or None: the line's), not {show(importance)}")
