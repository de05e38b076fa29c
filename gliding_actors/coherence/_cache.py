"""The per-agent cache controller of the MESI directory protocol, as a plain class.

A :class:`CacheController` holds one agent's private copies ("lines", one
JSON-LD node per IRI) and turns client requests (load, store, cas, delete,
evict) into protocol messages and back. It never blocks, sleeps, spawns,
reads a clock or draws a random number: ``handle(src, msg)`` consumes one
message and returns the messages to send, so an actor (threads in production)
or a deterministic simulator (tests, replay) can host it unchanged.

Why the shape:

* **Per-line queues, never a blocked mailbox.** Client ops on one line run in
  order (an agent reads its own writes); a protocol request that arrives while
  the line is in a transient state waits in that line's ``deferred`` queue.
  Nothing ever waits on another line, so one slow miss cannot stall the agent.
* **Ack counting tolerates Inv-Acks before Data.** Invalidated sharers ack the
  new owner directly and may beat the directory's Data; acks are counted from
  the first one and compared with the count that Data carries.
* **E is real.** A GetS to a line nobody holds is granted E, and a store to E
  turns it into M without a message, so the common "read then update my own
  note" costs one round trip, not two.
* **Rights are judged where the write is ordered.** The handle checks a write
  against its registry first, but the registry learns a line's graph only
  when a write completes. So the controller judges every write again, with
  ``may(graph, action)``, against the copy it holds: once the line is E or M
  that copy *is* the version the write would overwrite, whatever raced it.
  A write naming no graph keeps the line in the graph it is in at that moment.
  A refused write is answered ``PermissionDenied`` and changes nothing.
* **Write policy per write.** A write whose tags meet ``critical_tags`` is
  write-through: once the cache holds M and applied the write it sends ``WT``
  and completes only on ``WT-Ack``, after home stored it durably. Others are
  write-back: the line stays M until recalled, forwarded, evicted or flushed.
"""

from __future__ import annotations

import dataclasses
import math
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from typing import Any

from gliding_actors.coherence import _messages as m
from gliding_actors.coherence._messages import CLIENT, Meta, Msg, Value
from gliding_actors.coherence._states import (
    CACHE_STABLE,
    CACHE_STATES,
    EI_A,
    II_A,
    IM_A,
    IM_AD,
    IS_D,
    LEAVING,
    MI_A,
    MW_A,
    READABLE,
    SI_A,
    SM_A,
    SM_AD,
    E,
    I,
    M,
    ProtocolError,
    S,
)
from gliding_actors.errors import (
    ConflictError,
    InvalidInput,
    ModifyFailed,
    PermissionDenied,
    StorageError,
    show,
)
from gliding_actors.l0 import is_importance
from gliding_actors.l2._permissions import DEFAULT_GRAPH

__all__ = ["CacheController"]

Out = list[tuple[str, Msg]]

#: Requests the directory sends to a cache; only these are ever deferred.
_REQUESTS = frozenset({m.FWD_GET_S, m.FWD_GET_M, m.INV})

#: (state, request kind) pairs that wait in the line's deferred queue.
_STALLS: dict[str, frozenset[str]] = {
    IS_D: frozenset({m.INV, m.FWD_GET_S, m.FWD_GET_M}),
    IM_AD: frozenset({m.FWD_GET_S, m.FWD_GET_M}),
    IM_A: frozenset({m.FWD_GET_S, m.FWD_GET_M}),
    SM_AD: frozenset({m.FWD_GET_S, m.FWD_GET_M}),
    SM_A: frozenset({m.FWD_GET_S, m.FWD_GET_M}),
    MW_A: frozenset({m.FWD_GET_S, m.FWD_GET_M}),
}

@dataclasses.dataclass
class _Line:
    """One line's protocol state, its client-op queue and its deferred requests."""

    state: str = I
    value: Value = None
    version: int = 0
    meta: Meta = None
    #: Inv-Acks the Data said to expect (None until Data arrived).
    acks_needed: int | None = None
    #: Inv-Acks received so far for the GetM in flight (may run ahead of Data).
    acks_got: int = 0
    #: Protocol messages spent so far on behalf of the op at the head of ``ops``.
    msgs: int = 0
    #: The head op started the transaction now in flight (not a capacity eviction).
    busy: bool = False
    #: LRU stamp: larger is more recently used.
    used: int = 0
    ops: deque[Msg] = dataclasses.field(default_factory=deque)
    deferred: deque[tuple[str, Msg]] = dataclasses.field(default_factory=deque)

    def clear_data(self) -> None:
        self.value, self.version, self.meta = None, 0, None


class CacheController:
    """One agent's private cache: MESI lines, client-op queues, LRU capacity.

    ``directory_for`` names the home directory of an IRI (a single name when the
    directory is not sharded; see :func:`~gliding_actors.coherence.directory_shard`).
    ``capacity`` bounds the lines held or being fetched; a miss that needs a
    slot evicts the least recently used idle line first (PutS / PutE / PutM).
    If every slot is mid-transaction the miss goes ahead anyway (waiting could
    deadlock with the very owner we wait on) and the surplus is evicted as soon
    as lines settle, so at quiescence a cache never holds more than ``capacity``.
    ``critical_tags``: a write carrying any of them is write-through.

    ``incarnation`` counts the cache's lives (0 for the first, +1 per crash and
    restart): its requests carry it and an answer from another cache naming
    another life is dropped (see :func:`~gliding_actors.coherence._messages.with_inc`).

    ``may(graph, action)`` says whether this cache's agent may ``create``,
    ``update`` or ``delete`` in a named graph (its role's row of the permission
    matrix); None allows everything (the system role, protocol tests).
    ``role`` only names the agent in a refusal.

    ``version_floor`` is where this memory's epoch numbers versions from
    (:func:`~gliding_actors.coherence._states.epoch_floor`), or a function of
    the IRI when shards number from different epochs: a write numbers its
    version above both the line's and the floor, so no write after a process
    crash reuses a version the crash lost (0: versions count from 1).
    """

    def __init__(
        self,
        agent: str,
        directory_for: Callable[[str], str] | str,
        capacity: int,
        critical_tags: Iterable[str] = frozenset(),
        *,
        incarnation: int = 0,
        may: Callable[[str, str], bool] | None = None,
        role: str = "system",
        version_floor: int | Callable[[str], int] = 0,
        check_value: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise InvalidInput(f"cache capacity must be an integer >= 1, not {show(capacity)}")
        self.agent = agent
        if isinstance(directory_for, str):
            self._dir_name: str | None = directory_for
            self._dir_fn: Callable[[str], str] | None = None
        else:
            self._dir_name = None
            self._dir_fn = directory_for
        self.capacity = capacity
        self.critical_tags = frozenset(critical_tags)
        self.incarnation = incarnation
        self._may = may
        self._role = role
        self._floor = version_floor
        #: judges a value a modify made (raises InvalidInput), as the handle judges a written one
        self._check_value = check_value
        self._lines: dict[str, _Line] = {}
        self._tick = 0
        # Capacity bookkeeping, kept in step with every line so a miss costs O(1), not a scan:
        #: lines in I or on their way out (LEAVING): the only ones in ``_lines`` that take no slot
        self._away: set[str] = set()
        #: touched lines, least recently used first (``used`` order); never-touched ones in ``_untouched``
        self._lru: OrderedDict[str, None] = OrderedDict()
        self._untouched: set[str] = set()

    # -- public surface -----------------------------------------------------
    def handle(self, src: str, msg: Msg) -> list[tuple[str, Msg]]:
        """Consume one message; return ``(destination, message)`` pairs to send.

        From ``src == "@client"``: a client request (see the module docs of
        :mod:`gliding_actors.coherence`); malformed requests raise
        :class:`~gliding_actors.errors.InvalidInput` and change nothing.
        Otherwise a protocol message from a directory or another cache; one that
        no state allows raises :class:`ProtocolError`.
        """
        out: Out = []
        if src == CLIENT:
            req = _check_request(msg)
            iri = req["iri"]
            self._line(iri).ops.append(req)
            self._settle(iri, out)
            return out
        kind = msg.get("t")
        iri = msg.get("iri")
        if kind not in m.PROTOCOL_KINDS or not isinstance(iri, str):
            raise ProtocolError(f"{self.agent}: not a protocol message for a cache: {msg!r}")
        if kind in (m.DATA, m.INV_ACK) and m.inc_of(msg) != self.incarnation:
            # An answer to a request of a previous life of this cache (it
            # crashed mid-transaction): nobody waits for it here. Data home
            # (to a directory) never reaches a cache, so this is all Data.
            return out
        line = self._line(iri)
        if kind in _REQUESTS and (line.deferred or kind in self._stalls(line.state)):
            # Behind an earlier deferred request (keep the directory's order) or
            # the state cannot take it yet. Only this line waits.
            line.deferred.append((src, msg))
        else:
            self._dispatch(iri, line, src, msg, out)
        self._settle(iri, out)
        return out

    def lookup(self, iri: str) -> tuple[str, Value, int] | None:
        """``(state, value, version)`` if a read of ``iri`` can hit here, else None.

        The state is S, E or M (an upgrade in flight still holds a valid S copy
        and reports S). The value is shared, not copied: treat it as immutable.
        A hosting actor publishes snapshots built from this; the agent's handle
        must not use that snapshot for a line on which it has an op outstanding,
        or it could read around its own pending write.
        """
        line = self._lines.get(iri)
        if line is None or line.state not in READABLE:
            return None
        state = S if line.state in (SM_AD, SM_A) else line.state
        return (state, line.value, line.version)

    def graph_of(self, iri: str) -> str | None:
        """The named graph of this cache's copy of ``iri`` (None: not held here, or never written)."""
        line = self._lines.get(iri)
        return None if line is None else self._graph(line)

    def state(self, iri: str) -> str:
        """The line's protocol state, transient names included (I if absent)."""
        line = self._lines.get(iri)
        return I if line is None else line.state

    def states(self) -> dict[str, str]:
        """Every line not in I, by IRI, in IRI order."""
        return {
            iri: self._lines[iri].state
            for iri in sorted(self._lines)
            if self._lines[iri].state != I
        }

    def home_of(self, iri: str) -> str:
        """The directory that is home of ``iri`` (answers a restarted directory's census)."""
        return self._dir(iri)

    def deferred(self, iri: str) -> list[tuple[str, str]]:
        """``(kind, requester)`` of the forwards and Invs waiting on ``iri``, in order.

        A restarted directory's census needs them: a cache that still owes a
        Fwd-GetM (or an Inv-Ack) is on its way out of the line, not its owner.
        """
        line = self._lines.get(iri)
        if line is None:
            return []
        return [(str(msg["t"]), str(msg.get("req"))) for _src, msg in line.deferred]

    def has_deferred(self) -> bool:
        """True if any line holds a forward or Inv it has not served yet."""
        return any(line.deferred for line in self._lines.values())

    def pending(self, iri: str) -> int:
        """Client ops queued on ``iri`` (the head one may be in flight)."""
        line = self._lines.get(iri)
        return 0 if line is None else len(line.ops)

    def can_complete_locally(self, msg: Msg) -> bool:
        """True if ``handle`` would answer this client request with no protocol message.

        That is: a read that hits S/E/M, a write-back write to E or M (E->M is
        silent), a cas that fails against a valid copy, an evict of an absent
        line; and only when no earlier op on the line is still queued.
        """
        try:
            req = _check_request(msg)
        except InvalidInput:
            return False
        line = self._lines.get(req["iri"])
        if line is None:
            line = _Line()
        if line.ops or line.state not in CACHE_STABLE:
            return False
        kind = req["t"]
        if kind == m.LOAD:
            return line.state != I
        if kind == m.EVICT:
            return line.state == I
        if "version" in req and line.state != I and line.version != req["version"]:
            return True
        if line.state not in (E, M):
            return False
        return not self._write_through(self._write_meta(line, req))

    # -- snapshot / restore (model checking, debugging) ----------------------
    def snapshot(self) -> Msg:
        """The whole controller state as canonical plain data (msgpack-able).

        Canonical: two controllers that behave the same from here on give equal
        snapshots (lines in IRI order, LRU stamps replaced by their rank), which
        is what the exhaustive checker hashes.
        """
        ranks = {
            iri: r
            for r, iri in enumerate(sorted(self._lines, key=lambda k: (self._lines[k].used, k)))
        }
        lines = []
        for iri in sorted(self._lines):
            ln = self._lines[iri]
            lines.append(
                [
                    iri,
                    ln.state,
                    ln.value,
                    ln.version,
                    ln.meta,
                    ln.acks_needed,
                    ln.acks_got,
                    ln.msgs,
                    ln.busy,
                    ranks[iri],
                    list(ln.ops),
                    [[s, d] for s, d in ln.deferred],
                ]
            )
        return {"agent": self.agent, "lines": lines}

    def restore(self, snap: Msg) -> None:
        """Replace the whole state with ``snap`` (from :meth:`snapshot`)."""
        if snap["agent"] != self.agent:
            raise ValueError(f"snapshot of {snap['agent']!r} restored into {self.agent!r}")
        self._lines = {}
        self._away, self._lru, self._untouched = set(), OrderedDict(), set()
        for iri, state, value, version, meta, needed, got, msgs, busy, rank, ops, deferred in snap[
            "lines"
        ]:
            if state not in CACHE_STATES:
                raise ValueError(f"unknown cache state {state!r}")
            self._lines[iri] = _Line(
                state=state,
                value=value,
                version=version,
                meta=meta,
                acks_needed=needed,
                acks_got=got,
                msgs=msgs,
                busy=busy,
                used=rank,
                ops=deque(ops),
                deferred=deque((s, d) for s, d in deferred),
            )
            self._book(iri, state)
        for iri in sorted(self._lines, key=lambda k: self._lines[k].used):
            if self._lines[iri].used:
                self._lru[iri] = None
            else:
                self._untouched.add(iri)
        self._tick = len(self._lines)

    # -- internals ---------------------------------------------------------
    def _dir(self, iri: str) -> str:
        if self._dir_fn is not None:
            return self._dir_fn(iri)
        assert self._dir_name is not None
        return self._dir_name

    def _line(self, iri: str) -> _Line:
        line = self._lines.get(iri)
        if line is None:
            line = self._lines[iri] = _Line()
            self._away.add(iri)
            self._untouched.add(iri)
        return line

    def _enter(self, iri: str, line: _Line, state: str) -> None:
        """Move ``line`` to ``state``; every state change goes through here, for the capacity books."""
        line.state = state
        self._book(iri, state)

    def _book(self, iri: str, state: str) -> None:
        if state == I or state in LEAVING:
            self._away.add(iri)
        else:
            self._away.discard(iri)

    def _forget(self, iri: str) -> None:
        del self._lines[iri]
        self._away.discard(iri)
        self._lru.pop(iri, None)
        self._untouched.discard(iri)

    def _stalls(self, state: str) -> frozenset[str]:
        return _STALLS.get(state, frozenset())

    def _touch(self, iri: str, line: _Line) -> None:
        self._tick += 1
        line.used = self._tick
        self._untouched.discard(iri)
        self._lru[iri] = None
        self._lru.move_to_end(iri)

    def _settle(self, iri: str, out: Out) -> None:
        """Run the line until nothing moves: queued client ops, then deferred requests.

        Client ops go first so that the op whose miss just finished completes
        before a deferred Fwd/Inv takes the line away again (progress); a
        deferred request is then handled in whatever state that leaves.
        """
        line = self._lines[iri]
        while self._pump(iri, line, out) | self._drain(iri, line, out):
            pass
        if line.state == I and not line.ops and not line.deferred and not line.busy:
            self._forget(iri)
        if len(self._lines) > self.capacity:
            self._trim(out)

    def _held(self, but: str | None = None) -> int:
        """Lines taking a slot (neither I nor leaving), ``but`` not counted."""
        held = len(self._lines) - len(self._away)
        return held - 1 if but is not None and but in self._lines and but not in self._away else held

    def _victim(self, but: str | None = None) -> str | None:
        """The least recently used line that holds a stable copy and has no op queued (ties: by IRI).

        Never-touched lines count as least recent. The walk down the LRU order
        passes only lines mid-transaction or on their way out, a handful.
        """
        lines = self._lines

        def idle(k: str) -> bool:
            ln = lines[k]
            return k != but and ln.state in (S, E, M) and not ln.ops and not ln.busy

        first = min((k for k in self._untouched if idle(k)), default=None)
        if first is not None:
            return first
        return next((k for k in self._lru if idle(k)), None)

    def _trim(self, out: Out) -> None:
        """Give back lines held over capacity.

        A miss that found every slot mid-transaction went ahead over capacity
        (waiting could deadlock: the slot's owner may wait on us); once lines
        settle, the surplus least recently used ones go home here. These
        evictions are attributed to no op.
        """
        over = sum(1 for ln in self._lines.values() if ln.state in (S, E, M)) - self.capacity
        while over > 0:
            victim = self._victim()
            if victim is None:
                return
            self._put(victim, self._lines[victim], out)
            over -= 1

    def _drain(self, iri: str, line: _Line, out: Out) -> bool:
        moved = False
        while line.deferred and line.deferred[0][1]["t"] not in self._stalls(line.state):
            src, msg = line.deferred.popleft()
            self._dispatch(iri, line, src, msg, out)
            moved = True
        return moved

    def _pump(self, iri: str, line: _Line, out: Out) -> bool:
        """Advance the head client op while the line is stable; True if anything moved."""
        moved = False
        while line.ops and line.state in CACHE_STABLE:
            req = line.ops[0]
            kind = req["t"]
            if kind == m.LOAD:
                if line.state == I:
                    self._request(iri, line, m.GET_S, IS_D, out)
                    return True
                state = line.state
                self._finish(
                    line,
                    out,
                    {
                        "value": _copy_json(line.value),
                        "version": line.version,
                        "state": state,
                        # the graph the data came from, for the reader's permission re-check
                        "graph": None if line.meta is None else line.meta.get("graph"),
                    },
                )
            elif kind == m.EVICT:
                if line.state == I:
                    self._finish(line, out, {"state": I})
                else:
                    line.busy = True
                    line.msgs += 1  # the Put*; the Put-Ack adds the other one
                    self._put(iri, line, out)
                    return True
            else:
                refusal = None if line.state == I else self._refusal(line, req)
                if refusal is not None:
                    # A valid copy is the latest completed write: judged on it, and a
                    # refusal says nothing of its version. Granted only once E/M.
                    self._refuse(line, out, req, refusal)
                elif "version" in req and line.state != I and line.version != req["version"]:
                    # A valid copy is the latest completed write: fail now, no message.
                    self._fail(line, out, req, line.version)
                elif line.state in (E, M):
                    if kind == m.MODIFY and not self._modify(line, req, out):
                        moved = True
                        continue  # refused: nothing changed, the next op may go
                    if self._write(iri, line, req, out):
                        return True
                elif line.state == S:
                    self._request(iri, line, m.GET_M, SM_AD, out)
                    return True
                else:
                    self._request(iri, line, m.GET_M, IM_AD, out)
                    return True
            moved = True
        return moved

    def _request(self, iri: str, line: _Line, kind: str, nxt: str, out: Out) -> None:
        if line.state == I:
            self._make_room(iri, line, out)
        line.busy = True
        line.acks_needed, line.acks_got = None, 0
        msg = m.get_s(iri, self.agent) if kind == m.GET_S else m.get_m(iri, self.agent)
        out.append((self._dir(iri), m.with_inc(msg, self.incarnation)))
        self._enter(iri, line, nxt)

    def _make_room(self, iri: str, line: _Line, out: Out) -> None:
        """Evict LRU idle lines until a slot is free for ``iri`` (or nothing is evictable)."""
        held = self._held(but=iri)
        while held >= self.capacity:
            victim = self._victim(but=iri)
            if victim is None:
                return  # every slot is mid-transaction: run over capacity; _trim fixes it later
            self._put(victim, self._lines[victim], out)
            line.msgs += 2  # the Put* and its Put-Ack, caused by this op's miss
            held -= 1

    def _put(self, iri: str, line: _Line, out: Out) -> None:
        dest = self._dir(iri)
        if line.state == S:
            out.append((dest, m.put_s(iri, self.agent)))
            self._enter(iri, line, SI_A)
        elif line.state == E:
            out.append((dest, m.put_e(iri, self.agent)))
            self._enter(iri, line, EI_A)
        elif line.state == M:
            out.append((dest, m.put_m(iri, self.agent, line.value, line.version, line.meta)))
            self._enter(iri, line, MI_A)
        else:  # pragma: no cover - callers only put stable copies
            raise ProtocolError(f"{self.agent}: cannot put {iri} in {line.state}")

    def _graph(self, line: _Line) -> str | None:
        """The graph of the version this copy holds; None for a line never written."""
        if line.version == 0:
            return None
        graph = None if line.meta is None else line.meta.get("graph")
        return graph if isinstance(graph, str) else DEFAULT_GRAPH

    def _refusal(self, line: _Line, req: Msg) -> str | None:
        """Why this agent may not apply ``req`` over the copy held (None: it may).

        A line never written needs ``create`` on the target graph; a written
        one (a tombstone too: it keeps its graph) needs ``update`` (``delete``
        for a delete) on its graph, and a write naming another graph moves
        it, which also needs ``create`` there.
        """
        if self._may is None:
            return None
        current = self._graph(line)
        named = req.get("graph")
        if req["t"] == m.DELETE:
            needs = [("delete", current or DEFAULT_GRAPH)]
        elif current is None:
            needs = [("create", named or DEFAULT_GRAPH)]
        else:
            needs = [("update", current)]
            if named is not None and named != current:
                needs.append(("create", named))
        for action, graph in needs:
            if not self._may(graph, action):
                return f"role {self._role} may not {action} in graph {graph!r} (line {req['iri']})"
        return None

    def _refuse(self, line: _Line, out: Out, req: Msg, why: str, *, error: str = PermissionDenied.__name__) -> None:
        line.ops.popleft()
        line.msgs = 0
        line.busy = False
        self._touch(req["iri"], line)
        out.append((CLIENT, m.failed(req["op"], error, why)))

    def _write_meta(self, line: _Line, req: Msg) -> Msg:
        """Tags, graph, importance and expiry of the version ``req`` makes.

        A write naming no graph keeps the line in its graph (the default one for
        a new line); a tombstone also keeps the line's tags unless told
        otherwise, so deleting a critical fact is as durable as writing it was.
        A write giving no importance keeps the line's; only the write itself
        decides the expiry (a write without a time to live makes the line
        permanent again, and a tombstone has none).
        """
        tags = req.get("tags")
        graph = req.get("graph") or self._graph(line) or DEFAULT_GRAPH
        if req["t"] == m.DELETE and line.meta is not None and tags is None:
            tags = line.meta.get("tags", [])
        meta: Msg = {"tags": sorted(set(tags or ())), "graph": graph}
        importance = req.get("importance")
        if importance is None and line.meta is not None:
            importance = line.meta.get("importance")
        if importance is not None:
            meta["importance"] = importance
        if req.get("expires") is not None:
            meta["expires"] = req["expires"]
        return meta

    def _write_through(self, meta: Meta) -> bool:
        return meta is not None and not self.critical_tags.isdisjoint(meta["tags"])

    def _modify(self, line: _Line, req: Msg, out: Out) -> bool:
        """Make the head modify a write of ``fn(current value)``, on the line held in E/M: no other
        write can come between the value ``fn`` saw and the one it made. ``fn`` runs once, here;
        if it raises, or makes no value this line may hold, the op fails and nothing changes."""
        current = None if line.value is None else _copy_json(line.value)
        try:
            made = req["fn"](current)
        except Exception as exc:  # noqa: BLE001 - the caller's function: its failure is the caller's error
            why = f"modify of {req['iri']}: the function raised {type(exc).__name__}: {exc}"
            self._refuse(line, out, req, why, error=ModifyFailed.__name__)
            return False
        try:
            if not isinstance(made, dict):
                raise InvalidInput(f"a modify's function returns a JSON object, not {show(made)}", path=("value",))
            if self._check_value is not None:
                self._check_value(req["iri"], made)
            made = _copy_json(made)  # the function may keep and change what it returned
        except InvalidInput as exc:
            self._refuse(line, out, req, f"modify of {req['iri']}: {exc}", error=InvalidInput.__name__)
            return False
        req["value"] = made
        return True

    def _write(self, iri: str, line: _Line, req: Msg, out: Out) -> bool:
        """Apply the head write on an E/M line. True if it now waits for WT-Ack.

        The caller judged the write's rights on this very copy first.
        """
        meta = self._write_meta(line, req)
        line.value = None if req["t"] == m.DELETE else req["value"]
        floor = self._floor if isinstance(self._floor, int) else self._floor(iri)
        line.version = max(line.version, floor) + 1
        line.meta = meta
        self._enter(iri, line, M)  # E -> M is silent
        if self._write_through(meta):
            self._enter(iri, line, MW_A)
            line.busy = True
            line.msgs += 1  # the WT; the WT-Ack adds the other one
            out.append((self._dir(iri), m.wt(iri, self.agent, line.value, line.version, meta)))
            return True
        self._finish(line, out, {"version": line.version, "state": M, "policy": "write_back", "graph": meta["graph"]})
        return False

    def _finish(self, line: _Line, out: Out, result: dict[str, Any]) -> None:
        req = line.ops.popleft()
        if req["t"] == m.MODIFY:
            result["value"] = _copy_json(req["value"])  # what the function made
        result["messages"] = line.msgs
        line.msgs = 0
        line.busy = False
        self._touch(req["iri"], line)
        out.append((CLIENT, m.done(req["op"], result)))

    def _fail(self, line: _Line, out: Out, req: Msg, current: int) -> None:
        line.ops.popleft()
        line.msgs = 0
        line.busy = False
        self._touch(req["iri"], line)
        text = f"{req['t']} on {req['iri']}: expected version {req['version']}, found {current}"
        out.append((CLIENT, m.failed(req["op"], ConflictError.__name__, text)))

    def _dispatch(self, iri: str, line: _Line, src: str, msg: Msg, out: Out) -> None:
        kind = msg["t"]
        st = line.state
        if kind == m.DATA:
            if st == IS_D:
                line.value, line.version, line.meta = msg["value"], msg["version"], msg["meta"]
                line.msgs += msg["n"]
                self._enter(iri, line, E if msg["excl"] else S)
                return
            if st in (IM_AD, SM_AD):
                line.value, line.version, line.meta = msg["value"], msg["version"], msg["meta"]
                line.msgs += msg["n"]
                line.acks_needed = msg["acks"]
                if line.acks_got > line.acks_needed:
                    raise ProtocolError(
                        f"{self.agent}: {line.acks_got} Inv-Acks for {iri}, Data says {line.acks_needed}"
                    )
                if line.acks_got == line.acks_needed:
                    self._enter(iri, line, M)
                else:
                    self._enter(iri, line, IM_A if st == IM_AD else SM_A)
                return
        elif kind == m.INV_ACK:
            if st in (IM_AD, SM_AD, IM_A, SM_A):
                line.acks_got += 1
                line.msgs += 1
                if st in (IM_A, SM_A) and line.acks_got == line.acks_needed:
                    self._enter(iri, line, M)
                return
        elif kind == m.INV:
            if st in (S, SM_AD, SI_A):
                out.append((msg["req"], m.with_inc(m.inv_ack(iri, self.agent), m.inc_of(msg))))
                line.clear_data()
                self._enter(iri, line, {S: I, SM_AD: IM_AD, SI_A: II_A}[st])
                return
        elif kind == m.FWD_GET_S:
            if st in (E, M, EI_A, MI_A):
                req = msg["req"]
                home = self._dir(iri)
                copies = 1 if req == home else 2
                reply = m.data(
                    iri, self.agent, line.value, line.version, line.meta, acks=0, excl=False, n=msg["n"] + copies
                )
                m.with_inc(reply, m.inc_of(msg))
                out.append((req, reply))
                if req != home:
                    out.append((home, dict(reply)))  # the same Data, a message of its own
                if st in (E, M):
                    self._enter(iri, line, S)
                elif st in (EI_A, MI_A):
                    self._enter(iri, line, SI_A)
                return
        elif kind == m.FWD_GET_M:
            if st in (E, M, EI_A, MI_A):
                out.append(
                    (
                        msg["req"],
                        m.with_inc(
                            m.data(
                                iri,
                                self.agent,
                                line.value,
                                line.version,
                                line.meta,
                                acks=0,
                                excl=False,
                                n=msg["n"] + 1,
                            ),
                            m.inc_of(msg),
                        ),
                    )
                )
                line.clear_data()
                self._enter(iri, line, I if st in (E, M) else II_A)
                return
        elif kind == m.PUT_ACK:
            if st in LEAVING:
                line.clear_data()
                self._enter(iri, line, I)
                if line.busy:
                    line.msgs += 1
                return
        elif kind == m.WT_NACK and st == MW_A and msg["version"] == line.version:
            # Home holds the write but could not make it durable: the line stays this
            # cache's dirty M copy (as a write-back would), and the write fails, typed.
            self._enter(iri, line, M)
            line.msgs += 1
            self._refuse(
                line, out, line.ops[0], f"{msg['iri']} v{line.version} is held but not durable: {msg['error']}",
                error=StorageError.__name__,
            )
            return
        elif kind == m.WT_ACK and st == MW_A and msg["version"] == line.version:
            self._enter(iri, line, M)
            line.msgs += 1
            self._finish(
                line,
                out,
                {"version": line.version, "state": M, "policy": "write_through", "graph": self._graph(line)},
            )
            return
        raise ProtocolError(f"{self.agent}: {kind} from {src} for {iri} in state {st}: {msg!r}")


def _copy_json(value: Any) -> Any:
    """A deep copy of JSON-shaped data, so no caller can mutate a cached value."""
    if isinstance(value, dict):
        return {k: _copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_json(v) for v in value]
    return value


def _check_request(msg: Any) -> Msg:
    """Validate a client request; return a normalised private copy, or raise InvalidInput."""
    if not isinstance(msg, dict):
        raise InvalidInput(f"a client request must be a dict, not {type(msg).__name__}")
    kind = msg.get("t")
    if kind not in m.CLIENT_KINDS:
        raise InvalidInput(
            f"unknown client request {show(kind)} (known: {', '.join(sorted(m.CLIENT_KINDS))})"
        )
    iri = msg.get("iri")
    if not isinstance(iri, str) or not iri:
        raise InvalidInput(f"{kind}: 'iri' must be a non-empty string, not {show(iri)}", path=("iri",))
    op = msg.get("op")
    if isinstance(op, bool) or not isinstance(op, int):
        raise InvalidInput(f"{kind}: 'op' must be an integer, not {show(op)}", path=("op",))
    req: Msg = {"t": kind, "iri": iri, "op": op}
    if kind in (m.STORE, m.CAS):
        value = msg.get("value")
        if not isinstance(value, dict):
            raise InvalidInput(
                f"{kind}: 'value' must be a JSON object (use delete for none)", path=("value",)
            )
        req["value"] = _copy_json(value)
    if kind == m.CAS or (kind == m.DELETE and msg.get("version") is not None):
        version = msg.get("version")
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise InvalidInput(
                f"{kind}: 'version' must be an integer >= 0, not {show(version)}", path=("version",)
            )
        req["version"] = version
    if kind == m.MODIFY:
        fn = msg.get("fn")
        if not callable(fn):
            raise InvalidInput(f"{kind}: 'fn' must be a function of the value, not {show(fn)}", path=("fn",))
        req["fn"] = fn
    if kind in (m.STORE, m.CAS, m.MODIFY):
        importance = msg.get("importance")
        if importance is not None:
            if not is_importance(importance):
                raise InvalidInput(
                    f"{kind}: 'importance' must be a number in [0, 1], not {show(importance)}", path=("importance",)
                )
            req["importance"] = float(importance)
        expires = msg.get("expires")
        if expires is not None:
            if isinstance(expires, bool) or not isinstance(expires, (int, float)) or not math.isfinite(expires):
                raise InvalidInput(
                    f"{kind}: 'expires' must be a finite time in seconds, not {show(expires)}", path=("expires",)
                )
            req["expires"] = float(expires)
    if kind in m.WRITE_KINDS:
        tags = msg.get("tags")
        if tags is not None:
            if not isinstance(tags, (list, tuple)) or not all(isinstance(t, str) for t in tags):
                raise InvalidInput(
                    f"{kind}: 'tags' must be a list of strings, not {show(tags)}", path=("tags",)
                )
            req["tags"] = sorted(set(tags))
        elif kind != m.DELETE:
            req["tags"] = []
        graph = msg.get("graph")
        if graph is not None and not isinstance(graph, str):
            raise InvalidInput(f"{kind}: 'graph' must be a string, not {show(graph)}", path=("graph",))
        req["graph"] = graph
    return req
