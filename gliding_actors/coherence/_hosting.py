"""Thin actors hosting the coherence controllers, and the board read hits use.

The controllers are plain protocol logic (``_cache``, ``_directory``); these
behaviours only translate between them and the runtime:

* a client request arriving at a :class:`CacheActor` from outside (an agent's
  handle) opens a deferred reply whose request id becomes the op id; the
  controller's ``done``/``failed`` for that op answers it;
* every protocol message the controllers emit is sent as it is;
* after each message the cache republishes, on the :class:`SnapshotBoard`, the
  lines that message touched — so an agent's read that hits S/E/M is served
  from the board by its handle, with no message at all.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import msgpack

from gliding_actors.bus import BUS_ACTOR, LINE_CHANGED
from gliding_actors.coherence import _messages as m
from gliding_actors.coherence._cache import CacheController
from gliding_actors.coherence._directory import DirectoryController
from gliding_actors.coherence._home import CensusCarry, LayeredHome
from gliding_actors.coherence._messages import CLIENT, Msg, Value
from gliding_actors.errors import (
    ActorUnavailable,
    ConflictError,
    GlidingError,
    InvalidInput,
    ModifyFailed,
    PermissionDenied,
    StorageError,
    show,
)
from gliding_actors.l2._graph_writer import FENCE, FENCED, GRAPH_ACTOR, PUTS
from gliding_actors.metrics._counters import ActorTally
from gliding_actors.runtime import DEFERRED, RUNTIME_SENDER, Context, InjectedCrash, ReplyToken

#: Bus topic of every completed write or delete: ``{"iri", "version", "agent"}``.
#: Whatever was derived from a line (L3 views, L1 turns citing it) listens here.
#: Sent after the write completes, so it may arrive after the writer's next op;
#: events of different writers may reach the bus out of version order, so a
#: listener keeps the highest version it has seen per IRI.

__all__ = [
    "CACHE_PREFIX",
    "LINE_CHANGED",
    "CacheActor",
    "DirectoryActor",
    "ModifyFunctions",
    "SnapshotBoard",
    "agent_of",
    "cache_name",
    "pack_value",
    "unpack_value",
]

CACHE_PREFIX = "cache:"
_REPLY_PREFIX = "@reply:"


def cache_name(agent: str) -> str:
    """The actor name of an agent's cache."""
    return CACHE_PREFIX + agent


def agent_of(actor: str | None) -> str | None:
    """The agent id behind a cache actor's name (None stays None)."""
    if actor is None:
        return None
    return actor.removeprefix(CACHE_PREFIX)


Hit = tuple[str, bytes, int, "str | None"]
"""(state S/E/M, the value packed with msgpack, version, the graph of that version; None: never written)."""


def pack_value(value: Value) -> bytes:
    """A line's value frozen as bytes: every reader unpacks a private copy."""
    packed: bytes = msgpack.packb(value, use_bin_type=True)
    return packed


#: A private copy of a packed value (msgpack's own function, no frame of ours: a
#: hit is little more than this call; msgpack 1.x decodes text as str by default).
unpack_value: Callable[[bytes], Value] = msgpack.unpackb


class SnapshotBoard:
    """What each agent's cache holds readable (state S/E/M, value, version), by IRI.

    Written only by the agent's cache actor, read by the agent's handle from
    any thread. Entries are immutable tuples and each update is one dict
    assignment or deletion, which CPython makes atomic, so a reader sees either
    the old or the new entry, never a torn one. Values are kept packed, so the
    pack happens once per change in the cache actor and a hit only unpacks its
    private copy.
    """

    def __init__(self) -> None:
        self._views: dict[str, dict[str, Hit]] = {}
        self._lock = threading.Lock()

    def view(self, agent: str) -> dict[str, Hit]:
        with self._lock:
            return self._views.setdefault(agent, {})

    def clear(self, agent: str) -> None:
        """Forget every line of ``agent`` (its cache restarted empty); the view object stays."""
        with self._lock:
            self._views.setdefault(agent, {}).clear()

    def lookup(self, agent: str, iri: str) -> Hit | None:
        view = self._views.get(agent)
        return None if view is None else view.get(iri)

    def holders(self) -> dict[str, dict[str, tuple[str, Value, int]]]:
        """Every view, values unpacked (for invariant checks between steps)."""
        with self._lock:
            views = {agent: dict(view) for agent, view in self._views.items()}
        return {
            agent: {iri: (state, unpack_value(packed), version) for iri, (state, packed, version, _) in view.items()}
            for agent, view in views.items()
        }


#: the errors a controller's ``failed`` answer may name (by class name: plain data on the wire)
_FAILURES: dict[str, type[GlidingError]] = {
    cls.__name__: cls for cls in (ConflictError, PermissionDenied, StorageError, InvalidInput, ModifyFailed)
}


def _error(name: str, text: str) -> GlidingError:
    return _FAILURES.get(name, InvalidInput)(text)


class ModifyFunctions:
    """The functions of modifies in flight, by token: a message carries the token, not the function.

    Messages stay plain data (the simulator packs every one; a function is not
    data), and a cache runs in its agents' process on every runtime, so the
    token finds the function there. The handle lends a function before it asks
    and takes it back when the modify is answered, whatever the answer. Each
    loan remembers the thread that made it: a function runs in that thread or
    in its cache actor's own, never in another agent's (see
    :meth:`CacheActor.may_run_inline`).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lent: dict[int, tuple[Callable[[Any], Any], int]] = {}
        self._next = 0

    def lend(self, fn: Callable[[Any], Any]) -> int:
        with self._lock:
            self._next += 1
            self._lent[self._next] = (fn, threading.get_ident())
            return self._next

    def get(self, token: object) -> Callable[[Any], Any] | None:
        with self._lock:
            loan = self._lent.get(token) if type(token) is int else None
        return None if loan is None else loan[0]

    def lent_here(self, token: object) -> bool:
        """Whether the function under ``token`` was lent by the calling thread."""
        with self._lock:
            loan = self._lent.get(token) if type(token) is int else None
        return loan is not None and loan[1] == threading.get_ident()

    def take_back(self, token: int) -> None:
        with self._lock:
            self._lent.pop(token, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._lent)


class CacheActor:
    """Hosts one agent's :class:`CacheController`.

    Extra requests from outside (not protocol): ``{"t": "state", "iri"}`` → the
    line's state (transient names included); ``{"t": "states"}`` → every line not
    in I; ``{"t": "crash"}`` → crashes on purpose (fault injection).

    Recovery: a cache rebuilt after a crash (``reclaim_from`` names every
    directory shard) first sends each of them ``Reclaim``, before any request
    of its new life, so per-pair FIFO makes every directory forget the old
    copies before it sees a new one. Until a directory's ``Reclaim-Ack``
    arrives, what that directory sends was meant for the dead cache (per-pair
    FIFO again: it all comes before the ack): an Inv is acked to its requester
    (the copy is gone anyway), a Fwd-GetM becomes a ``Nack`` (the directory
    answers the waiting requester from home), a Fwd-GetS is dropped (the
    Reclaim already made the directory answer from home), and Data, Put-Ack
    and WT-Ack are dropped (they answer the dead cache's requests). Answers
    from other caches to those requests carry the old incarnation and are
    dropped by the controller. A restarted directory's ``Census`` is always
    answered, with the lines this cache holds whose home it is and the
    forwards and Invs it has deferred on them.

    A lost process (Ray: ``peer.lost`` from the runtime) is not a crash: the
    protocol's recovery assumes a crashed actor's mailbox survives, and a lost
    directory's does not. So the ops in flight on lines whose home was lost
    fail now with ``ActorUnavailable`` rather than at their callers' timeouts,
    and later ops on those lines are refused the same way.
    """

    #: on Ray, the runtime tells this actor when a peer's process died (``peer.lost``)
    receives_peer_lost = True

    def __init__(
        self,
        agent: str,
        controller: CacheController,
        board: SnapshotBoard,
        *,
        reclaim_from: tuple[str, ...] = (),
        tally: ActorTally | None = None,
        functions: ModifyFunctions | None = None,
    ) -> None:
        self.agent = agent
        self.controller = controller
        #: where a modify's token finds its function
        self._functions = functions if functions is not None else ModifyFunctions()
        #: messages sent by kind and writes by policy, for MemorySystem.stats()
        self._tally = tally if tally is not None else ActorTally()
        self._view = board.view(agent)
        self._reclaim_from = reclaim_from
        #: directories whose Reclaim-Ack has not arrived: their messages are the dead life's
        self._unacked: set[str] = set()
        #: op id -> IRI of client ops in flight (to announce completed writes)
        self._op_iri: dict[int, str] = {}
        #: directory shards whose process died: their lines cannot be served
        self._lost: set[str] = set()
        #: op id -> token of the function of each modify in flight
        self._modifies: dict[int, int] = {}

    def may_run_inline(self, message: Any) -> bool:
        """Whether the threads runtime may deliver ``message`` in the sender's thread.

        A handler here is short and never blocks, so a sender may run it at
        once instead of waking this actor's thread, except where a modify's
        function would run: that happens only in the thread that lent it (its
        agent's call) or in this actor's own thread, so one agent's function
        never holds up, or takes a lock inside, another agent's thread.
        """
        functions = self._functions
        if type(message) is dict and message.get("t") == m.MODIFY and not functions.lent_here(message.get("fn")):
            return False
        return all(functions.lent_here(token) for token in self._modifies.values())

    def on_start(self, ctx: Context) -> None:
        for directory in self._reclaim_from:
            ctx.send(directory, m.with_inc({"t": m.RECLAIM}, self.controller.incarnation))
        self._unacked = set(self._reclaim_from)

    def receive(self, message: Any, ctx: Context) -> Any:
        kind = message.get("t") if isinstance(message, dict) else None
        if ctx.sender == RUNTIME_SENDER:
            if kind == "peer.lost":
                self._peer_lost(str(message.get("actor")), ctx)
            return None
        if ctx.sender is None:
            if kind == "state":
                return self.controller.state(str(message.get("iri")))
            if kind == "states":
                return self.controller.states()
            if kind == "crash":
                raise InjectedCrash(f"cache of {self.agent} crashed on purpose")
            iri = message.get("iri") if isinstance(message, dict) else None
            if self._lost and isinstance(iri, str) and self.controller.home_of(iri) in self._lost:
                raise ActorUnavailable(f"{self.controller.home_of(iri)}, home of {iri}, lost its process")
            request = dict(message)
            if kind == m.MODIFY:
                fn = self._functions.get(request.get("fn"))
                if fn is None:
                    raise InvalidInput(f"modify of {show(iri)}: no function was lent under token {show(request.get('fn'))}")
                request["fn"] = fn
            token = ctx.defer_reply()
            request["op"] = token.request_id
            out = self.controller.handle(CLIENT, request)
            self._op_iri[token.request_id] = request["iri"]
            if kind == m.MODIFY:
                self._modifies[token.request_id] = message["fn"]
            self._emit(out, ctx, message.get("iri"))
            return DEFERRED
        if kind == m.CENSUS:
            home = ctx.sender
            held = {iri: st for iri, st in self.controller.states().items() if self.controller.home_of(iri) == home}
            owed = {iri: [list(d) for d in self.controller.deferred(iri)] for iri in held}
            answer = {"t": m.CENSUS_ACK, "lines": held, "deferred": {k: v for k, v in owed.items() if v}}
            if "n" in message:  # which census this answers (a directory may die during one)
                answer["n"] = message["n"]
            ctx.send(home, answer)
            return None
        if kind == m.RECLAIM_ACK:
            # Only the ack of this life's Reclaim: a life that died before its own
            # ack arrived leaves that ack ahead of ours in the channel.
            if m.inc_of(message) == self.controller.incarnation:
                self._unacked.discard(ctx.sender)
            return None
        if ctx.sender in self._unacked:
            self._for_the_dead(ctx.sender, message, ctx)
            return None
        out = self.controller.handle(ctx.sender, message)
        self._emit(out, ctx, message.get("iri"))
        return None

    def _peer_lost(self, actor: str, ctx: Context) -> None:
        """Fail the ops in flight on lines homed at ``actor``, whose process died."""
        if actor.startswith(CACHE_PREFIX):
            return  # a forward to a lost cache ends in the directory's recovery, not here
        self._lost.add(actor)
        for op, iri in sorted(self._op_iri.items()):
            if self.controller.home_of(iri) == actor:
                del self._op_iri[op]
                self._modifies.pop(op, None)
                ctx.fail(ReplyToken(op), ActorUnavailable(f"{actor}, home of {iri}, lost its process"))

    def _for_the_dead(self, directory: str, message: Msg, ctx: Context) -> None:
        """A message from ``directory`` sent to this cache's previous life (before the Reclaim-Ack)."""
        kind, iri = message.get("t"), message.get("iri")
        if kind == m.INV:
            ack = m.inv_ack(str(iri), self.controller.agent)
            ctx.send(message["req"], m.with_inc(ack, m.inc_of(message)))
        elif kind == m.FWD_GET_M:
            nack = {"t": m.NACK, "iri": iri, "src": self.controller.agent, "req": message["req"]}
            ctx.send(directory, m.with_inc(nack, m.inc_of(message)))
        # Fwd-GetS: the Reclaim made the directory answer from home. Data,
        # Put-Ack, WT-Ack: answers to requests that died with the old life.

    def _emit(self, out: list[tuple[str, Msg]], ctx: Context, iri: Any) -> None:
        touched = {iri} if isinstance(iri, str) else set()
        for dst, msg in out:
            line = msg.get("iri")
            if isinstance(line, str):
                touched.add(line)
            if dst != CLIENT:
                ctx.send(dst, msg)
                self._tally.count_sent(msg["t"])
        # Publish before any reply is carried out: a caller woken by its reply
        # must find its own write on the board.
        for line in touched:
            hit = self.controller.lookup(line)
            if hit is None:
                self._view.pop(line, None)
            else:
                state, value, version = hit
                current = self._view.get(line)
                if current is None or current[2] != version:
                    self._view[line] = (state, pack_value(value), version, self.controller.graph_of(line))
                elif current[0] != state:
                    self._view[line] = (state, current[1], version, current[3])
        for dst, msg in out:
            if dst != CLIENT:
                continue
            token = ReplyToken(msg["op"])
            iri_done = self._op_iri.pop(msg["op"], None)
            self._modifies.pop(msg["op"], None)
            if msg["t"] == m.DONE:
                result = msg["result"]
                if "policy" in result:
                    self._tally.count_write(str(result["policy"]))
                if "policy" in result and iri_done is not None:  # a write or delete completed
                    event = {
                        "iri": iri_done,
                        "version": result["version"],
                        "agent": self.agent,
                        # the bus shows the event only to agents whose role may read this graph:
                        # the graph of this version (a later write in the same batch may move it)
                        "graph": result.get("graph") or self.controller.graph_of(iri_done),
                    }
                    ctx.send(
                        BUS_ACTOR,
                        {"type": "publish", "topic": LINE_CHANGED, "message": event, "publisher": self.agent},
                    )
                ctx.resolve(token, result)
            else:
                ctx.fail(token, _error(msg.get("error", ""), msg.get("message", "")))


class DirectoryActor:
    """Hosts one directory shard and its :class:`LayeredHome`.

    Requests from outside: ``{"t": "inspect", "iri"}`` → directory part plus
    ``l2``; ``{"t": "recall", "iris": [...]|None}`` → once every dirty line in
    scope is home, the IRIs fetched; ``{"t": "flush", "iris": ...}`` → recall,
    then write down to L0 every line newer at home than in L0; answers the
    IRIs written; ``{"t": "ready"}`` → ``{"notes": [...], "epoch": E}`` once
    recovered (``E``: the home's epoch, which its lines' writes number from);
    ``{"t": "l2.stats"}`` → the home's :meth:`LayeredHome.stats` (never waits);
    ``{"t": "tally"}`` → ``{"sent", "writes"}``, what this shard counted (never waits);
    ``{"t": "l2.dirty"}`` → ``[[iri, version]]`` newer at home than in L0;
    ``{"t": "l0.versions", "iris": [...]}`` → ``{iri: version in L0}``;
    ``{"t": "l2.versions", "iris": [...]}`` → ``{iri: version at home}`` (L2, else L0);
    ``{"t": "l0.count"}`` → nodes in the home's L0 (a sharded L0's share);
    ``{"t": "crash"}`` → crashes on purpose (fault injection).

    Recovery: built with ``recover_from`` (the agent caches, after a crash of
    this actor), it takes the controller's census
    (:meth:`DirectoryController.begin_census`): it serves nothing until every
    cache has answered; protocol messages and outside requests that arrive
    meanwhile are held back by the controller, in arrival order, and run once
    the directory's sharers and owners are rebuilt from the caches' answers.
    The home (L2) is a separate layer and survives the crash; so does the
    census's record of the protocol messages it held back
    (``home.census_carry``), so a directory that crashes during its census
    starts the next one with them (an outside request held back fails with
    the crash, as any request in flight to a crashed actor does), and so do
    the lines it has waiting in S_D (mirrored there after every handler that
    may change one), so a directory that crashes mid-transaction restores
    them as they were.

    When the home queues its graph puts (``LayeredHome.graph_outbox``, on
    when the graph has its own writer: :mod:`gliding_actors.l2._graph_writer`),
    this actor ships them to ``l2:graph`` at the end of every handler and
    answers a recall or flush only once the writer has fenced them.
    """

    def __init__(
        self,
        name: str,
        home: LayeredHome,
        *,
        recover_from: tuple[str, ...] | None = None,
        tally: ActorTally | None = None,
    ) -> None:
        self.name = name
        self.home = home
        #: messages sent by kind, for MemorySystem.stats()
        self._tally = tally if tally is not None else ActorTally()
        self.controller = DirectoryController(name, home)
        home.state_of = self.controller.l0_state  # a recovered directory's controller takes over
        #: recall id -> (reply token, then-flush?)
        self._waiting: dict[int, tuple[ReplyToken, bool, list[str] | None]] = {}
        #: the caches to take a census of on start (None: a new directory, nothing to rebuild)
        self._recover_from = recover_from
        #: the home's queue of graph puts (None: the home writes the graph itself)
        self._outbox = home.graph_outbox
        #: fences to send behind this handler's puts, and the answers waiting on each
        self._fences: list[int] = []
        self._fenced: dict[int, tuple[ReplyToken, Any]] = {}

    def may_run_inline(self, message: Any) -> bool:
        """True: a handler here is short and never blocks, so the threads runtime may run it in the
        sender's thread rather than wake this actor's."""
        return True

    def on_start(self, ctx: Context) -> None:
        self._ship_graph(ctx)  # what a crashed predecessor's handler had queued
        if self._recover_from is not None:
            self.home.abandon_flushes()  # the dead actor's flushes failed with it
            carry = self.home.census_carry
            carry.number += 1
            asks = self.controller.begin_census(
                self._recover_from, number=carry.number, carried=carry.held_back, open_lines=carry.open_lines
            )
            for cache, census in asks:
                ctx.send(cache, census)

    @property
    def recovery_notes(self) -> list[str]:
        """Copies the last rebuild could not place (the controller's census)."""
        return self.controller.recovery_notes

    def _serve_held_back(self, held: list[tuple[str | None, Any, object]], ctx: Context) -> None:
        """Serve, in arrival order, what waited for the census."""
        for sender, message, reply in held:
            if sender is not None:
                self._protocol(sender, message, ctx)
            elif isinstance(reply, ReplyToken):
                try:
                    result = self._request(message, ctx, reply)
                except GlidingError as exc:
                    ctx.fail(reply, exc)
                    continue
                if result is not DEFERRED:
                    ctx.resolve(reply, result)

    def receive(self, message: Any, ctx: Context) -> Any:
        kind = message.get("t") if isinstance(message, dict) else None
        src = ctx.sender
        if src is None and kind == "crash":
            raise InjectedCrash(f"directory {self.name} crashed on purpose")
        if self.controller.recovering:
            result = self._while_recovering(kind, src, message, ctx)
        elif src is None:
            result = self._request(message, ctx, None)
        else:
            self._protocol(src, message, ctx)
            result = None
        # Only a handler that returns ships: a crashed one's sends are dropped,
        # and what it queued stays in the home's outbox for the next one.
        self._ship_graph(ctx)
        return result

    def _ship_graph(self, ctx: Context) -> None:
        """Send the home's queued graph puts, then the fences behind them (one pair: FIFO)."""
        outbox = self._outbox
        if outbox is None:
            return
        if len(outbox):
            ctx.send(GRAPH_ACTOR, {"t": PUTS, "nodes": outbox.take()})
            self._tally.count_sent(PUTS)
        fences, self._fences = self._fences, []
        for fence in fences:
            ctx.send(GRAPH_ACTOR, {"t": FENCE, "id": fence})
            self._tally.count_sent(FENCE)

    def _request(self, message: Any, ctx: Context, token: ReplyToken | None) -> Any:
        """An outside request; ``token`` is its reply when it already waited (recovery)."""
        kind = message.get("t") if isinstance(message, dict) else None
        if kind == "ready":
            answer = {"notes": list(self.recovery_notes), "epoch": self.home.epoch}
            if self._outbox is None:
                return answer
            # Ready means the graph holds what this shard took home (on open: its whole L0).
            self._after_fence(token if token is not None else ctx.defer_reply(), answer)
            return DEFERRED
        if kind == "inspect":
            iri = str(message.get("iri"))
            found = self.controller.inspect(iri)
            found["l2"] = self.home.peek(iri)
            found["l0"] = self.home.durable_copy(iri)
            return found
        if kind == "l2.stats":
            return dict(self.home.stats())
        if kind == "tally":
            return {"sent": dict(self._tally.sent), "writes": dict(self._tally.writes)}
        if kind == "l2.dirty":
            return [[iri, self.home.version_of(iri)] for iri in self.home.dirty()]
        if kind in ("l0.versions", "l2.versions"):
            iris = message.get("iris")
            if not isinstance(iris, list) or not all(isinstance(i, str) for i in iris):
                raise InvalidInput(f"{kind}: iris is a list of IRIs, not {show(iris)}", path=("iris",))
            version = self.home.durable_version if kind == "l0.versions" else self.home.version_of
            return {iri: version(iri) for iri in iris}
        if kind == "l0.count":
            return self.home.l0_count()
        if kind in ("recall", "flush"):
            if token is None:
                token = ctx.defer_reply()
            iris = message.get("iris")
            self._waiting[token.request_id] = (token, kind == "flush", iris)
            if kind == "flush":
                self.home.begin_flush(token.request_id)  # counts what capacity writes meanwhile
            out = self.controller.handle(ctx.name, m.recall(ctx.name, token.request_id, iris))
            self.home.census_carry.open_lines = self.controller.open_lines()
            self._emit(out, ctx)
            return DEFERRED
        raise InvalidInput(f"unknown directory request {show(kind)}")

    def _protocol(self, src: str, message: Any, ctx: Context) -> None:
        kind = message.get("t") if isinstance(message, dict) else None
        if src.startswith(CACHE_PREFIX):
            self.home.caches.add(src)
        if kind == FENCED and src == GRAPH_ACTOR:
            # Unknown ids are a crashed predecessor's fences: its asks already failed.
            waiting = self._fenced.pop(message.get("id"), None)
            if waiting is not None:
                ctx.resolve(*waiting)
        elif kind == m.RECLAIM:
            self._emit(self.controller.reclaim(src), ctx)
            self.home.census_carry.open_lines = self.controller.open_lines()
            ctx.send(src, m.with_inc({"t": m.RECLAIM_ACK}, m.inc_of(message)))
        elif kind == m.NACK:
            orphan = self.controller.orphaned(str(message.get("iri")), str(message.get("req")), m.inc_of(message))
            self._emit(orphan, ctx)
        elif kind == m.CENSUS_ACK:
            pass  # a late answer to a census that is already complete
        else:
            self._emit(self.controller.handle(src, message), ctx)
            self._keep_open(message.get("iri"))

    def _keep_open(self, iri: Any) -> None:
        """Mirror ``iri``'s S_D state beside the home, where a crash of this actor cannot lose it."""
        if not isinstance(iri, str):
            return
        row = self.controller.open_line(iri)
        lines = self.home.census_carry.open_lines
        if row is not None:
            lines[iri] = row
        elif lines:
            lines.pop(iri, None)

    def _while_recovering(self, kind: Any, src: str | None, message: Any, ctx: Context) -> Any:
        controller = self.controller
        if kind == m.CENSUS_ACK:
            held = controller.census_answer(src, message) if src is not None else None
            if held is not None:
                self.home.census_carry = CensusCarry(
                    number=self.home.census_carry.number, open_lines=controller.open_lines()
                )
                self._serve_held_back(held, ctx)
            return None
        if src is None:
            if kind in ("inspect", "l2.stats", "tally"):  # inspection never waits: it shows the recovery
                return self._request(message, ctx, None)
            controller.hold_back(None, message, ctx.defer_reply())
            return DEFERRED
        controller.hold_back(src, message)
        # Kept where a crash of this actor cannot lose it: the next census serves it.
        self.home.census_carry.held_back.append((src, message))
        return None

    def _emit(self, out: list[tuple[str, Msg]], ctx: Context) -> None:
        for dst, msg in out:
            if dst == ctx.name and msg.get("t") == m.RECALL_ACK:
                self._recalled(msg, ctx)
            else:
                ctx.send(dst, msg)
                self._tally.count_sent(msg["t"])

    def _recalled(self, ack: Msg, ctx: Context) -> None:
        token, then_flush, iris = self._waiting.pop(ack["rid"])
        answer = self.home.flush(iris, mark=ack["rid"]) if then_flush else list(ack["iris"])
        if self._outbox is None:
            ctx.resolve(token, answer)  # the graph was written inside the handlers that stored
            return
        # The graph must hold every put this shard sent before the answer (the barrier).
        self._after_fence(token, answer)

    def _after_fence(self, token: ReplyToken, answer: Any) -> None:
        """Answer ``token`` once the graph writer has applied every put sent before this."""
        self._fenced[token.request_id] = (token, answer)
        self._fences.append(token.request_id)
