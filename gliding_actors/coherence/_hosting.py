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
from typing import Any

import msgpack

from gliding_actors.bus import BUS_ACTOR
from gliding_actors.coherence import _messages as m
from gliding_actors.coherence._cache import CacheController
from gliding_actors.coherence._directory import DirectoryController
from gliding_actors.coherence._home import LayeredHome
from gliding_actors.coherence._messages import CLIENT, Msg, Value
from gliding_actors.errors import ConflictError, GlidingError, InvalidInput
from gliding_actors.runtime import DEFERRED, Context, ReplyToken

#: Bus topic of every completed write or delete: ``{"iri", "version", "agent"}``.
#: Whatever was derived from a line (L3 views, L1 turns citing it) listens here.
#: Sent after the write completes, so it may arrive after the writer's next op;
#: events of different writers may reach the bus out of version order, so a
#: listener keeps the highest version it has seen per IRI.
LINE_CHANGED = "line.changed"

__all__ = [
    "CACHE_PREFIX",
    "LINE_CHANGED",
    "CacheActor",
    "DirectoryActor",
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


Hit = tuple[str, bytes, int]
"""(state S/E/M, the value packed with msgpack, version)."""


def pack_value(value: Value) -> bytes:
    """A line's value frozen as bytes: every reader unpacks a private copy."""
    packed: bytes = msgpack.packb(value, use_bin_type=True)
    return packed


def unpack_value(packed: bytes) -> Value:
    value: Value = msgpack.unpackb(packed, raw=False)
    return value


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
            agent: {iri: (state, unpack_value(packed), version) for iri, (state, packed, version) in view.items()}
            for agent, view in views.items()
        }


def _error(name: str, text: str) -> GlidingError:
    if name == ConflictError.__name__:
        return ConflictError(text)
    return InvalidInput(text)


class CacheActor:
    """Hosts one agent's :class:`CacheController`.

    Extra requests from outside (not protocol): ``{"t": "state", "iri"}`` → the
    line's state (transient names included); ``{"t": "states"}`` → every line not
    in I.
    """

    def __init__(self, agent: str, controller: CacheController, board: SnapshotBoard) -> None:
        self.agent = agent
        self.controller = controller
        self._view = board.view(agent)
        #: op id -> IRI of client ops in flight (to announce completed writes)
        self._op_iri: dict[int, str] = {}

    def receive(self, message: Any, ctx: Context) -> Any:
        kind = message.get("t") if isinstance(message, dict) else None
        if ctx.sender is None:
            if kind == "state":
                return self.controller.state(str(message.get("iri")))
            if kind == "states":
                return self.controller.states()
            token = ctx.defer_reply()
            request = dict(message)
            request["op"] = token.request_id
            out = self.controller.handle(CLIENT, request)
            self._op_iri[token.request_id] = request["iri"]
            self._emit(out, ctx, message.get("iri"))
            return DEFERRED
        out = self.controller.handle(ctx.sender, message)
        self._emit(out, ctx, message.get("iri"))
        return None

    def _emit(self, out: list[tuple[str, Msg]], ctx: Context, iri: Any) -> None:
        touched = {iri} if isinstance(iri, str) else set()
        for dst, msg in out:
            line = msg.get("iri")
            if isinstance(line, str):
                touched.add(line)
            if dst != CLIENT:
                ctx.send(dst, msg)
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
                    self._view[line] = (state, pack_value(value), version)
                elif current[0] != state:
                    self._view[line] = (state, current[1], version)
        for dst, msg in out:
            if dst != CLIENT:
                continue
            token = ReplyToken(msg["op"])
            iri_done = self._op_iri.pop(msg["op"], None)
            if msg["t"] == m.DONE:
                result = msg["result"]
                if "policy" in result and iri_done is not None:  # a write or delete completed
                    event = {"iri": iri_done, "version": result["version"], "agent": self.agent}
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
    IRIs written.
    """

    def __init__(self, name: str, home: LayeredHome) -> None:
        self.name = name
        self.home = home
        self.controller = DirectoryController(name, home)
        #: recall id -> (reply token, then-flush?)
        self._waiting: dict[int, tuple[ReplyToken, bool, list[str] | None]] = {}

    def receive(self, message: Any, ctx: Context) -> Any:
        kind = message.get("t") if isinstance(message, dict) else None
        if ctx.sender is None:
            if kind == "inspect":
                iri = str(message.get("iri"))
                found = self.controller.inspect(iri)
                found["l2"] = self.home.peek(iri)
                return found
            if kind in ("recall", "flush"):
                token = ctx.defer_reply()
                iris = message.get("iris")
                self._waiting[token.request_id] = (token, kind == "flush", iris)
                out = self.controller.handle(ctx.name, m.recall(ctx.name, token.request_id, iris))
                self._emit(out, ctx)
                return DEFERRED
            raise InvalidInput(f"unknown directory request {kind!r}")
        self._emit(self.controller.handle(ctx.sender, message), ctx)
        return None

    def _emit(self, out: list[tuple[str, Msg]], ctx: Context) -> None:
        for dst, msg in out:
            if dst == ctx.name and msg.get("t") == m.RECALL_ACK:
                self._recalled(msg, ctx)
            else:
                ctx.send(dst, msg)

    def _recalled(self, ack: Msg, ctx: Context) -> None:
        token, then_flush, iris = self._waiting.pop(ack["rid"])
        if then_flush:
            ctx.resolve(token, self.home.flush(iris))
        else:
            ctx.resolve(token, list(ack["iris"]))
