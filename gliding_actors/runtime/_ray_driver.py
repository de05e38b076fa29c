"""Actors hosted in the driver process on the ``ray`` backend (``placement="driver"``).

An agent's cache must run in the agent's own process so that a read hit
sends no message (docs/SCALING.md, "Placement"). When the agents are driven
by the orchestrator that opened the runtime, that process is Ray's driver,
and a driver hosts no Ray actors. So the actor's :class:`Cell` runs on a
thread of the driver, and a small :class:`Relay` Ray actor, on the driver's
node and registered under the actor's name, stands in for it on the
cluster: other actors send to the name as to any actor, the relay queues
what arrives, and a poller thread of the driver takes it in batches.

Everything else is as for a Ray-hosted actor: per-pair sequence numbers with
a reorder buffer, msgpack on the wire (in-process messages are packed too,
so a message means the same whichever side of the wire its receiver is on),
the same typed errors, crashes and restarts by the same :class:`Cell`.
Messages from the driver itself and between driver-hosted actors never
touch Ray.

If the relay's process dies the actor can no longer be reached from the
cluster; the driver's node is the one whose loss ends the driver too, so
this is not recovered.

``placement=DRIVER_ONLY`` is the same host without a relay (and without the
poller): reachable from the driver and its hosted actors only, for a service
nothing on the cluster sends to, at the cost of no Ray worker process.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gliding_actors.clock import Clock
from gliding_actors.errors import ActorUnavailable, GlidingError, InvalidInput
from gliding_actors.runtime._cell import Cell, Effects
from gliding_actors.runtime._future import ThreadFuture
from gliding_actors.runtime._interface import IN_DRIVER, RUNTIME_SENDER, Behaviour, Message
from gliding_actors.runtime._ray_wire import (
    InOrder,
    decode_reply,
    encode_reply,
    pack,
    seen_as,
    unpack,
)

if TYPE_CHECKING:
    from gliding_actors.runtime._ray import RayRuntime

__all__ = ["IN_DRIVER", "DriverHost", "Relay"]

log = logging.getLogger("gliding_actors.runtime.ray")

#: how long one ``take`` waits on an empty relay before the poller asks again
_TAKE_WAIT_S = 0.5


class Relay:
    """The Ray actor standing in for a driver-hosted actor on the cluster.

    It only queues: ``tell``/``ask`` append ``(sender, seq, payload, rid)``;
    the driver's poller ``take``s them in arrival order and ``answer``s the
    asks (an ask comes from a process other than the driver, e.g. a second
    driver; actors only ``tell`` each other).
    """

    def __init__(self) -> None:
        self._inbox: list[tuple[Any, ...]] = []
        self._arrived: asyncio.Event | None = None
        self._waiters: dict[int, asyncio.Future[tuple[Any, ...]]] = {}
        self._rids = itertools.count(1)

    def _put(self, item: tuple[Any, ...]) -> None:
        self._inbox.append(item)
        if self._arrived is not None:
            self._arrived.set()

    async def tell(self, sender: str, seq: int, payload: bytes) -> None:
        self._put(("m", sender, seq, payload, None))

    async def ask(self, sender: str, seq: int, payload: bytes) -> tuple[Any, ...]:
        rid = next(self._rids)
        waiter: asyncio.Future[tuple[Any, ...]] = asyncio.get_running_loop().create_future()
        self._waiters[rid] = waiter
        self._put(("m", sender, seq, payload, rid))
        return await waiter

    async def peer_lost(self, name: str) -> None:
        self._put(("lost", name))

    async def take(self, wait_s: float) -> list[tuple[Any, ...]]:
        """What arrived since the last take; waits up to ``wait_s`` for something."""
        if self._arrived is None:
            self._arrived = asyncio.Event()
        if not self._inbox:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), wait_s)
        self._arrived.clear()
        batch, self._inbox = self._inbox, []
        return batch

    async def answer(self, rid: int, reply: tuple[Any, ...]) -> None:
        waiter = self._waiters.pop(rid, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(reply)

    async def status(self) -> dict[str, Any]:
        return {"queued": len(self._inbox), "asks": len(self._waiters)}


class DriverHost:
    """One actor's :class:`Cell`, run on a thread of the driver.

    A single thread owns the cell (handlers never overlap) and takes work from
    one queue: messages from the driver and from driver-hosted actors (put
    directly, already in order), batches the poller took from the relay
    (reordered by sequence number per sender), timers and peer-lost notices.
    """

    def __init__(
        self,
        runtime: RayRuntime,
        name: str,
        factory: Callable[[], Behaviour],
        clock: Clock,
        *,
        supervisor: str | None,
        restart: bool,
        relay: Any,
    ) -> None:
        self._runtime = runtime
        self.name = name
        self.relay = relay
        self._cell = Cell(name, factory, clock, supervisor=supervisor, restart=restart)
        self._queue: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._in_order: InOrder[tuple[bytes, int | None]] = InOrder()
        #: per target, the next sequence number of this actor's sends to it
        self._out: dict[str, int] = {}
        self._rids = itertools.count(1)
        #: rid -> the driver's future, or the relay's rid of a remote ask
        self._asks: dict[int, ThreadFuture[Any] | int] = {}
        self._stopping = threading.Event()
        self.dead_letters = 0
        #: messages queued for the cell and not yet handled (for quiescence)
        self._pending = 0
        self._pending_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"gliding-driver-{name}", daemon=True)
        self._poller = threading.Thread(target=self._poll, name=f"gliding-relay-{name}", daemon=True)

    # -- lifecycle (called by the runtime) -------------------------------------
    def start(self) -> bool:
        """Run ``on_start`` on this thread, then start serving; True if the actor runs."""
        effects = self._cell.start()
        self._carry_out(effects)
        self._thread.start()
        if self.relay is not None:
            self._poller.start()
        return self._cell.alive

    @property
    def alive(self) -> bool:
        return self._cell.alive and not self._stopping.is_set()

    def stop(self, why: str, timeout: float) -> None:
        """Stop the cell and fail every ask still open with ActorUnavailable."""
        if self._thread.is_alive():
            done = threading.Event()
            self._queue.put(("stop", why, done))
            done.wait(timeout)
        self._stopping.set()
        if self._poller.is_alive():
            self._poller.join(timeout=2 * _TAKE_WAIT_S + timeout)

    def stop_polling(self) -> None:
        """Take nothing more from the relay (the runtime is shutting down)."""
        self._stopping.set()

    def status(self) -> dict[str, Any]:
        return {
            "alive": self.alive,
            "dead_letters": self.dead_letters,
            "held": self._in_order.held,
            "cpu_s": time.process_time(),  # the driver's, shared with everything else in it
            "out": dict(self._out),
            "in": self._in_order.expected,
            "pending": self._pending,
        }

    def _queued(self, n: int) -> None:
        with self._pending_lock:
            self._pending += n

    # -- entry points (any thread) ----------------------------------------------
    def post(self, sender: str | None, payload: bytes, future: ThreadFuture[Any] | None) -> None:
        """A message from this process (the driver, or a driver-hosted actor)."""
        self._queued(1)
        self._queue.put(("local", sender, payload, future))

    def peer_lost(self, name: str) -> None:
        self._queue.put(("lost", name))

    def fire(self, message: Message) -> None:
        """A timer of this actor fell due (any thread)."""
        self._queue.put(("timer", message))

    # -- the poller thread -------------------------------------------------------
    def _poll(self) -> None:
        ray = self._runtime._ray
        while not self._stopping.is_set():
            try:
                batch = ray.get(self.relay.take.remote(_TAKE_WAIT_S), timeout=_TAKE_WAIT_S + 30.0)
            except Exception as exc:  # noqa: BLE001 - the relay or the connection is gone
                if not self._stopping.is_set():
                    log.error("relay of driver-hosted actor %r is unreachable: %s", self.name, exc)
                return
            self._queued(sum(1 for item in batch if item[0] == "m"))
            for item in batch:
                self._queue.put(item)

    # -- the cell's thread -------------------------------------------------------
    def _run(self) -> None:
        while True:
            item = self._queue.get()
            kind = item[0]
            if kind == "local":
                _, sender, payload, future = item
                rid = None
                if future is not None:
                    rid = next(self._rids)
                    self._asks[rid] = future
                self._deliver(sender, unpack(payload), rid)
                self._queued(-1)
            elif kind == "m":
                _, sender, seq, payload, relay_rid = item
                for payload_now, relay_rid_now in self._in_order.arrive(sender, seq, (payload, relay_rid)):
                    rid = None
                    if relay_rid_now is not None:
                        rid = next(self._rids)
                        self._asks[rid] = relay_rid_now
                    self._deliver(seen_as(sender), unpack(payload_now), rid)
                self._queued(-1)
            elif kind == "timer":
                self._deliver(None, item[1], None)
            elif kind == "lost":
                name = item[1]
                self._out.pop(name, None)
                self._in_order.forget(name)
                if getattr(self._cell.behaviour, "receives_peer_lost", False) and self._cell.alive:
                    self._deliver(RUNTIME_SENDER, {"t": "peer.lost", "actor": name}, None)
            elif kind == "stop":
                _, why, done = item
                if self._cell.alive:
                    self._cell.stop()
                self._fail_asks(why)
                done.set()
                return

    def _deliver(self, sender: str | None, message: Message, rid: int | None) -> None:
        self._carry_out(self._cell.deliver(sender, message, rid))

    def _carry_out(self, effects: Effects) -> None:
        ended = effects.crash is not None and not self._cell.alive
        if ended:
            # Free the name before anyone hears of the crash: an asker told
            # ActorCrashed may spawn a successor under it at once.
            self._stopping.set()
            self._runtime._driver_actor_ended(self)
        for to, message in effects.sends:
            self._send(to, message)
        for delay, message in effects.timers:
            self._runtime._schedule(self, delay, message)
        for rid, ok, value in effects.replies:
            self._reply(rid, ok, value)
        if effects.crash is not None:
            log.error("actor %r crashed: %s", self.name, effects.crash["error"])
            if self._cell.supervisor is not None:
                self._send(self._cell.supervisor, effects.crash)
            if ended:
                self._fail_asks(f"actor {self.name!r} stopped after a crash")
                self._queue.put(("stop", "stopped after a crash", threading.Event()))

    def _reply(self, rid: int, ok: bool, value: Any) -> None:
        target = self._asks.pop(rid, None)
        if target is None:
            return
        reply = encode_reply(ok, value)
        if isinstance(target, int):
            if self.relay is not None:  # an ask that came through the relay
                self.relay.answer.remote(target, (*reply, self._cell.alive))
            return
        try:
            target.set_result(decode_reply(reply))
        except GlidingError as error:
            target.set_exception(error)

    def _fail_asks(self, why: str) -> None:
        for rid in list(self._asks):
            self._reply(rid, False, ActorUnavailable(why))

    def _send(self, to: str, message: Message) -> None:
        try:
            payload = pack(message)
        except InvalidInput as exc:
            self.dead_letters += 1
            log.error("actor %r sent %r an unserialisable message (dropped): %s", self.name, to, exc)
            return
        local = self._runtime._driver_host(to)
        if local is not None:
            local.post(self.name, payload, None)
            return
        handle = self._runtime._handle_for(to)
        if handle is None:
            self.dead_letters += 1
            log.debug("dead letter from %r to %r", self.name, to)
            return
        seq = self._out.get(to, 0)
        self._out[to] = seq + 1
        handle.tell.remote(self.name, seq, payload)
