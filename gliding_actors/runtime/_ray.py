"""The ``ray`` backend: every actor is a Ray actor, addressed by name.

Ray (an existing distributed actor engine, not a home-made network layer)
gives each actor a process somewhere on a cluster, named handles and remote
calls. This module adds what the runtime interface promises on top, hosting
the same :class:`~gliding_actors.runtime._cell.Cell` as the other backends so
refusals, crashes, restarts and deferred replies behave identically:

* **Per-pair FIFO.** Ray orders an async actor's calls only loosely, so every
  message carries a sequence number per (sender, receiver) pair and the
  receiver holds early arrivals until the gap closes. Ordering therefore does
  not depend on how Ray schedules.
* **msgpack on the wire.** Messages and replies cross as msgpack bytes, so a
  message that would not survive the trip fails on every backend's contract,
  not silently here; errors cross as ``(class name, args, attributes)`` and are
  raised in the asker as the same class from :mod:`gliding_actors.errors`.
* **Asks without blocking.** A host's ``ask`` is a coroutine that awaits the
  reply the cell gives now or later (``defer_reply``); the driver waits on
  Ray's object future with a timeout, never on an actor.
* **Time** is the system clock of each process: a virtual clock cannot be
  shared between processes, so ``sim`` stays the backend for deterministic
  replay. The actors hosted in the driver take the runtime's clock, which
  may be a :class:`~gliding_actors.clock.VirtualClock` (a scenario's
  ``advance`` moves it, and their timers fire as on threads).

Ray is an optional extra, imported only when this backend is created.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import itertools
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from gliding_actors.clock import Clock, SystemClock, VirtualClock
from gliding_actors.errors import ActorUnavailable, GlidingError, InvalidInput, Timeout, show
from gliding_actors.runtime._cell import Cell, Effects, check_actor_name, describe_exception
from gliding_actors.runtime._future import ThreadFuture
from gliding_actors.runtime._interface import (
    DRIVER_ONLY,
    IN_DRIVER,
    RUNTIME_SENDER,
    BackendBase,
    Behaviour,
    Message,
)
from gliding_actors.runtime._ray_connect import RayConnection, connect, import_ray
from gliding_actors.runtime._ray_driver import DriverHost, Relay
from gliding_actors.runtime._ray_wire import (
    DRIVER_PREFIX,
    InOrder,
    decode_reply,
    encode_reply,
    pack,
    seen_as,
    unpack,
)
from gliding_actors.runtime._threads import Timers

__all__ = ["RayRuntime", "decode_reply", "encode_reply", "node_affinity", "pack", "unpack"]

log = logging.getLogger("gliding_actors.runtime.ray")

#: sender of timer messages (delivered in-process, outside the FIFO numbering)
_TIMER = "@timer"
#: how long a name found missing counts as missing before it is looked up again
_MISSING_TTL_S = 1.0


def node_affinity(node_id: str) -> Any:
    """Ray's strategy pinning an actor to one node (hard: fail rather than run elsewhere)."""
    strategies = importlib.import_module("ray.util.scheduling_strategies")
    return strategies.NodeAffinitySchedulingStrategy(node_id, soft=False)


class RayHost:
    """The Ray actor hosting one :class:`Cell` (every method runs on its event loop).

    ``receive`` is synchronous and the loop is one thread, so handlers never
    overlap even though Ray lets an async actor take many calls at once.
    """

    def __init__(
        self, name: str, factory: Callable[[], Behaviour], supervisor: str | None, restart: bool, namespace: str
    ) -> None:
        self._namespace = namespace
        self._cell = Cell(name, factory, SystemClock(), supervisor=supervisor, restart=restart)
        self._handles: dict[str, Any] = {}
        self._out: dict[str, int] = {}
        self._in_order: InOrder[tuple[bytes, int | None]] = InOrder()
        self._waiters: dict[int, asyncio.Future[tuple[Any, ...]]] = {}
        self._rids = itertools.count(1)
        #: names found missing, and when: not looked up again for a second (a GCS call each)
        self._missing: dict[str, float] = {}
        self.dead_letters = 0

    # -- remote methods -------------------------------------------------------
    async def start(self) -> bool:
        self._carry_out(self._cell.start())
        return self._cell.alive

    async def tell(self, sender: str, seq: int, payload: bytes) -> None:
        self._arrive(sender, seq, payload, None)

    async def ask(self, sender: str, seq: int, payload: bytes) -> tuple[Any, ...]:
        rid = next(self._rids)
        waiter: asyncio.Future[tuple[Any, ...]] = asyncio.get_running_loop().create_future()
        self._waiters[rid] = waiter
        self._arrive(sender, seq, payload, rid)
        return await waiter

    async def stop(self) -> int:
        """Stop the cell; fail every ask still open. Returns how many there were."""
        self._cell.stop()
        return self._fail_waiters(f"actor {self._cell.name!r} stopped before answering")

    async def peer_lost(self, name: str) -> None:
        """The runtime saw ``name``'s process die: forget its handle and numbering
        (a successor under that name starts at 0) and tell a behaviour that asks
        for it (``receives_peer_lost = True``) as ``{"t": "peer.lost", "actor": name}``
        from ``@runtime``."""
        self._handles.pop(name, None)
        self._out.pop(name, None)
        self._in_order.forget(name)
        if getattr(self._cell.behaviour, "receives_peer_lost", False) and self._cell.alive:
            self._deliver(RUNTIME_SENDER, {"t": "peer.lost", "actor": name}, None)

    async def status(self) -> dict[str, Any]:
        return {
            "alive": self._cell.alive,
            "dead_letters": self.dead_letters,
            "held": self._in_order.held,
            # this actor's process alone (one actor per Ray worker): what its work cost in CPU
            "cpu_s": time.process_time(),
            "node": str(import_ray().get_runtime_context().get_node_id()),
            # for quiescence: messages sent per receiver, and handled per sender (in order)
            "out": dict(self._out),
            "in": self._in_order.expected,
            "pending": 0,  # a message is handled in the same loop turn that takes it in
        }

    # -- ordering -----------------------------------------------------------
    def _arrive(self, sender: str, seq: int, payload: bytes, rid: int | None) -> None:
        for payload_now, rid_now in self._in_order.arrive(sender, seq, (payload, rid)):
            self._deliver(sender, unpack(payload_now), rid_now)

    def _deliver(self, sender: str, message: Message, rid: int | None) -> None:
        self._carry_out(self._cell.deliver(seen_as(sender), message, rid))

    # -- effects ------------------------------------------------------------
    def _carry_out(self, effects: Effects) -> None:
        for to, message in effects.sends:
            self._send(to, message)
        loop = asyncio.get_running_loop()
        for delay, message in effects.timers:
            loop.call_later(delay, self._deliver, _TIMER, message, None)
        for rid, ok, value in effects.replies:
            waiter = self._waiters.pop(rid, None)
            if waiter is not None and not waiter.done():
                # the last element tells the asker whether this actor still runs
                waiter.set_result((*encode_reply(ok, value), self._cell.alive))
        if effects.crash is not None:
            log.error("actor %r crashed: %s", self._cell.name, effects.crash["error"])
            if self._cell.supervisor is not None:
                self._send(self._cell.supervisor, effects.crash)
            if not self._cell.alive:
                self._fail_waiters(f"actor {self._cell.name!r} stopped after a crash")
                # Free the name: a later lookup finds nothing, as on the other backends.
                loop.call_later(0.05, self._exit)

    def _send(self, to: str, message: Message) -> None:
        try:
            payload = pack(message)
        except InvalidInput as exc:
            self.dead_letters += 1
            log.error("actor %r sent %r an unserialisable message (dropped): %s", self._cell.name, to, exc)
            return
        handle = self._handles.get(to)
        if handle is None:
            now = time.monotonic()
            if now - self._missing.get(to, -_MISSING_TTL_S) < _MISSING_TTL_S:
                self.dead_letters += 1
                return
            ray = import_ray()
            try:
                handle = ray.get_actor(to, namespace=self._namespace)
            except ValueError:
                self._missing[to] = now
                self.dead_letters += 1
                log.debug("dead letter from %r to %r", self._cell.name, to)
                return
            self._missing.pop(to, None)
            self._handles[to] = handle
        seq = self._out.get(to, 0)
        self._out[to] = seq + 1
        handle.tell.remote(self._cell.name, seq, payload)

    def _fail_waiters(self, why: str) -> int:
        waiters, self._waiters = self._waiters, {}
        for waiter in waiters.values():
            if not waiter.done():
                waiter.set_result((*encode_reply(False, ActorUnavailable(why)), False))
        return len(waiters)

    def _exit(self) -> None:
        ray = import_ray()
        ray.kill(ray.get_runtime_context().current_actor, no_restart=True)


class _Ref:
    """An :class:`ActorRef` on the ray backend."""

    __slots__ = ("_handle", "_name", "_runtime")

    def __init__(self, runtime: RayRuntime, name: str, handle: Any) -> None:
        self._runtime = runtime
        self._name = name
        self._handle = handle

    @property
    def name(self) -> str:
        return self._name

    def is_alive(self) -> bool:
        return self._runtime._is_alive(self._name)

    def tell(self, message: Message) -> None:
        self._runtime._submit(self._name, self._handle, message, ask=False)

    def ask(self, message: Message) -> ThreadFuture[Any]:
        return self._runtime._submit(self._name, self._handle, message, ask=True)

    def __repr__(self) -> str:
        return f"<ActorRef {self._name!r} ray>"


class RayRuntime(BackendBase):
    """Actors on a Ray cluster: an existing one by ``address``, else a local one.

    ``address`` (``"host:port"`` of a cluster's GCS) joins that cluster as a
    driver pinned to ``node_ip``, so Ray never swaps a loopback address for the
    machine's external one (see :mod:`gliding_actors.runtime._ray_connect`);
    without it Ray starts a local one-node cluster on ``node_ip`` (its own
    local start), stopped with the runtime. A process already connected to Ray
    (e.g. by :func:`~gliding_actors.runtime._ray_connect.connect`) is used as it is.
    ``namespace`` scopes actor names (two systems on one cluster do not see
    each other's actors). ``placement`` of :meth:`spawn` names the Ray node an
    actor runs on. Every ``monitor_s`` seconds a thread asks each actor for its
    status, to notice a process that died (0 turns it off; see :meth:`_watch`).
    """

    kind = "ray"

    def __init__(
        self,
        address: str | None = None,
        *,
        namespace: str | None = None,
        clock: Clock | None = None,
        ask_timeout_s: float = 10.0,
        node_ip: str = "127.0.0.1",
        spawn_timeout_s: float = 60.0,
        monitor_s: float = 1.0,
    ) -> None:
        if clock is not None and not isinstance(clock, (SystemClock, VirtualClock)):
            raise InvalidInput(f"the ray runtime runs on the system clock or a VirtualClock, not {type(clock).__name__}")
        ray = import_ray()
        self._ray = ray
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._ask_timeout_s = ask_timeout_s
        self._spawn_timeout_s = spawn_timeout_s
        self._namespace = namespace or f"gliding-{uuid.uuid4().hex[:12]}"
        self._sender = f"{DRIVER_PREFIX}{uuid.uuid4().hex}"
        self._connection: RayConnection | None = None
        if not ray.is_initialized():
            self._connection = connect(address, namespace=self._namespace, host=node_ip)
        self._handles: dict[str, Any] = {}
        #: actors hosted in this process (placement="driver"), by name
        self._local: dict[str, DriverHost] = {}
        self._supervisors: dict[str, str | None] = {}
        self._dead: set[str] = set()
        self._out: dict[str, int] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._monitor_s = monitor_s
        self._monitor: threading.Thread | None = None
        self._stopping = threading.Event()
        #: actors whose process was seen to die, oldest first (for reports and tests)
        self.lost: list[str] = []
        #: driver-hosted actors' timers on a VirtualClock, as on threads (None: on the system clock)
        self._timers: Timers | None = None
        if isinstance(self._clock, VirtualClock):
            self._timers = Timers(self._clock, lambda host, message: host.fire(message))

    # -- interface ---------------------------------------------------------
    @property
    def namespace(self) -> str:
        return self._namespace

    def spawn(
        self,
        name: str,
        factory: Callable[[], Behaviour],
        *,
        supervisor: str | None = None,
        restart: bool = False,
        placement: str | None = None,
    ) -> _Ref:
        check_actor_name(name)
        ray = self._ray
        with self._lock:
            if self._closed:
                raise ActorUnavailable("the runtime is shut down")
            if name in self._local:
                raise InvalidInput(f"an actor named {show(name)} is already running (in this driver)")
        if placement in (IN_DRIVER, DRIVER_ONLY):
            return self._spawn_in_driver(
                name, factory, supervisor=supervisor, restart=restart, relayed=placement == IN_DRIVER
            )
        host_class = _remote_class(ray, RayHost).options(**self._actor_options(name, placement))
        handle = self._create_named(name, lambda: host_class.remote(name, factory, supervisor, restart, self._namespace))
        try:
            ray.get(handle.start.remote(), timeout=self._spawn_timeout_s)
        except Exception as exc:  # the factory or on_start failed in the worker
            ray.kill(handle, no_restart=True)
            raise ActorUnavailable(f"actor {name!r} did not start: {describe_exception(exc)}") from exc
        with self._lock:
            self._handles[name] = handle
            self._supervisors[name] = supervisor
            self._dead.discard(name)
            self._out[name] = 0
            if self._monitor is None and self._monitor_s > 0:
                self._monitor = threading.Thread(target=self._watch, name="gliding-ray-monitor", daemon=True)
                self._monitor.start()
        return _Ref(self, name, handle)

    def _actor_options(self, name: str, node: str | None) -> dict[str, Any]:
        """The Ray options of an actor registered as ``name``, pinned to ``node`` when given."""
        options: dict[str, Any] = {
            "name": name,
            "namespace": self._namespace,
            # Scheduling needs no CPU: a cluster of two cores still hosts dozens of actors.
            "num_cpus": 0,
            "max_restarts": 0,
        }
        if node is not None:
            options["scheduling_strategy"] = node_affinity(node)
        return options

    def _create_named(self, name: str, create: Callable[[], Any]) -> Any:
        """Create the Ray actor registered under ``name``; InvalidInput if the name is taken.

        A stopped or crashed actor's process may still hold its name for a
        moment: it is ended for good and the creation tried again.
        """
        deadline = time.monotonic() + self._spawn_timeout_s
        while True:
            try:
                return create()
            except ValueError as exc:
                with self._lock:
                    stopped = name in self._dead
                if not stopped or time.monotonic() > deadline:
                    raise InvalidInput(f"an actor named {show(name)} is already running: {exc}") from exc
                self._kill_by_name(name)
                time.sleep(0.05)
            except Exception as exc:  # pickling the factory failed: say what could not be sent
                raise InvalidInput(f"actor {show(name)} cannot be sent to Ray: {describe_exception(exc)}") from exc

    def _spawn_in_driver(
        self, name: str, factory: Callable[[], Behaviour], *, supervisor: str | None, restart: bool, relayed: bool
    ) -> _Ref:
        """Host the actor on a thread of this process, with a :class:`Relay` under
        its name on this node so the cluster can reach it (see :mod:`._ray_driver`),
        unless it is not ``relayed`` (:data:`DRIVER_ONLY`)."""
        ray = self._ray
        relay = None
        if relayed:
            options = self._actor_options(name, ray.get_runtime_context().get_node_id())
            relay_class = _remote_class(ray, Relay).options(**options)
            relay = self._create_named(name, relay_class.remote)
        try:
            if relay is not None:
                ray.get(relay.status.remote(), timeout=self._spawn_timeout_s)
            host = DriverHost(
                self, name, factory, self._clock, supervisor=supervisor, restart=restart, relay=relay
            )
        except Exception as exc:  # the factory failed, or the relay never came up
            if relay is not None:
                ray.kill(relay, no_restart=True)
            raise ActorUnavailable(f"actor {name!r} did not start: {describe_exception(exc)}") from exc
        with self._lock:
            self._local[name] = host
            self._supervisors[name] = supervisor
            self._dead.discard(name)
        if not host.start():
            self._driver_actor_ended(host)
            raise ActorUnavailable(f"actor {name!r} did not start: its on_start failed")
        return _Ref(self, name, host)

    def _schedule(self, host: DriverHost, delay: float, message: Message) -> None:
        """A driver-hosted actor's timer: on a VirtualClock it fires when the clock
        is moved past it (as on threads); on the system clock after ``delay`` s."""
        if self._timers is not None:
            self._timers.add(delay, host, message)
            return
        timer = threading.Timer(delay, host.fire, args=(message,))
        timer.daemon = True
        timer.start()

    def _driver_host(self, name: str) -> DriverHost | None:
        with self._lock:
            return self._local.get(name)

    def _handle_for(self, name: str) -> Any:
        """The Ray handle of a cluster-hosted actor (or of a relay), None if there is none."""
        with self._lock:
            handle = self._handles.get(name)
        if handle is not None:
            return handle
        try:
            return self._ray.get_actor(name, namespace=self._namespace)
        except ValueError:
            return None

    def _driver_actor_ended(self, host: DriverHost) -> None:
        """A driver-hosted actor stopped for good (a crash it did not restart from):
        free its name, as a Ray-hosted one's exit does (a successor already
        spawned under the name is left alone)."""
        with self._lock:
            if self._local.get(host.name) is not host:
                return
            del self._local[host.name]
            self._supervisors.pop(host.name, None)
            self._dead.add(host.name)
        if host.relay is not None:
            self._ray.kill(host.relay, no_restart=True)

    def _watch(self) -> None:
        """Every ``monitor_s``: ask each actor this runtime spawned for its status;
        one whose call fails has lost its process (its node died, or the worker).

        What the other backends' supervision does for a crash, done for a lost
        process: the name is marked gone (asks fail at once with
        ActorUnavailable), its supervisor gets ``actor.failed`` with
        ``restarted: False``, and every other actor is told (``peer_lost``),
        so a behaviour waiting on it can fail its callers instead of waiting
        for their timeouts.
        """
        ray = self._ray
        while not self._stopping.wait(self._monitor_s):
            with self._lock:
                watched = {name: handle for name, handle in self._handles.items() if name not in self._dead}
            if not watched:
                continue
            probes = {handle.status.remote(): name for name, handle in watched.items()}
            try:
                ready, _busy = ray.wait(list(probes), num_returns=len(probes), timeout=self._monitor_s)
            except Exception:  # noqa: BLE001 - the driver is disconnecting: stop watching
                return
            gone = []
            for ref in ready:
                try:
                    ray.get(ref, timeout=0)
                except Exception:  # noqa: BLE001 - the actor's process is gone
                    gone.append(probes[ref])
            for name in sorted(gone):
                self._process_lost(name)

    def _process_lost(self, name: str) -> None:
        with self._lock:
            if name in self._dead or name not in self._handles:
                return
            self._dead.add(name)
            self._handles.pop(name, None)
            supervisor = self._supervisors.pop(name, None)
            survivors = {n: h for n, h in self._handles.items() if n not in self._dead}
            local = list(self._local.values())
            self.lost.append(name)
        log.error("actor %r lost its process", name)
        if supervisor is not None and (supervisor in survivors or any(h.name == supervisor for h in local)):
            notice = {"type": "actor.failed", "actor": name, "error": "ProcessLost: its process died", "restarted": False}
            try:
                self.lookup(supervisor).tell(notice)
            except ActorUnavailable:
                log.error("supervisor %r is gone too; %r's loss goes unreported to it", supervisor, name)
        for handle in survivors.values():
            handle.peer_lost.remote(name)
        for host in local:
            host.peer_lost(name)

    def _kill_by_name(self, name: str) -> None:
        with contextlib.suppress(ValueError):  # already gone
            self._ray.kill(self._ray.get_actor(name, namespace=self._namespace), no_restart=True)

    def lookup(self, name: str) -> _Ref:
        with self._lock:
            if name in self._dead:
                raise ActorUnavailable(f"no running actor named {name!r}")
            host = self._local.get(name)
            if host is not None:
                return _Ref(self, name, host)
            handle = self._handles.get(name)
        if handle is None:
            try:
                handle = self._ray.get_actor(name, namespace=self._namespace)
            except ValueError as exc:
                raise ActorUnavailable(f"no running actor named {name!r}") from exc
            with self._lock:
                self._handles[name] = handle
                self._out.setdefault(name, 0)
        return _Ref(self, name, handle)

    def stop(self, name: str) -> None:
        with self._lock:
            handle = self._handles.pop(name, None)
            host = self._local.pop(name, None)
            self._supervisors.pop(name, None)
            self._dead.add(name)
        if host is not None:
            host.stop(f"actor {name!r} stopped before answering", self._ask_timeout_s)
            if host.relay is not None:
                self._ray.kill(host.relay, no_restart=True)
        if handle is None:
            return
        try:
            self._ray.get(handle.stop.remote(), timeout=self._ask_timeout_s)
        except Exception as exc:  # noqa: BLE001 - gone already, or stuck: kill it regardless
            log.debug("actor %r did not stop cleanly: %s", name, exc)
        self._ray.kill(handle, no_restart=True)

    def shutdown(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            names = [*self._local, *self._handles]
            local = list(self._local.values())
        self._stopping.set()
        # Every relay poller stops taking at once (each waits out its current take,
        # up to half a second): stopping them one after the other cost that per actor.
        for host in local:
            host.stop_polling()
        if self._monitor is not None:
            self._monitor.join(timeout=2 * self._monitor_s + 5.0)
        for name in names:
            self.stop(name)
        if self._connection is not None:
            self._connection.close()  # also stops a local cluster Ray started for it

    def node_ids(self) -> list[str]:
        """The cluster's live node ids (for ``spawn(..., placement=...)``)."""
        return [node["NodeID"] for node in self._ray.nodes() if node.get("Alive")]

    def wait_quiescent(self, timeout: float | None = None) -> None:
        """Wait until every message sent between actors (and from this driver) has been handled.

        Timers aside, as on threads. No process sees the whole system, so this
        compares counts: every sender numbers its messages per receiver, and
        every receiver knows how many of each sender's it has handled in order.
        The system is quiet when, in two snapshots one after the other, every
        pair of live actors matches, no driver-hosted actor has work queued,
        and nothing changed in between (Mattern's four-counter rule: a message
        in flight shows in the counts of one snapshot or the other). Raises
        :class:`~gliding_actors.errors.Timeout` after ``timeout`` seconds
        (default: the runtime's ask timeout).
        """
        limit = self._ask_timeout_s if timeout is None else timeout
        deadline = time.monotonic() + limit
        last: dict[str, Any] | None = None
        while True:
            snapshot = self._counts(max(0.1, deadline - time.monotonic()))
            if snapshot is not None and snapshot == last:
                return
            last = snapshot
            if time.monotonic() >= deadline:
                raise Timeout(f"messages still in flight between Ray actors after {limit:g} s")
            time.sleep(0.005)

    @property
    def deterministic(self) -> bool:
        """False: actors run in processes of their own."""
        return False

    def known_quiescent(self) -> bool:
        """False: only asking every actor can tell (:meth:`is_quiescent`, :meth:`wait_quiescent`)."""
        return False

    def recent_messages(self) -> tuple[str, ...]:
        """Empty: deliveries happen in other processes."""
        return ()

    def message_log(self) -> None:
        """None: deliveries happen in other processes."""

    def is_quiescent(self) -> bool:
        """True if two snapshots one after the other find every message handled
        and nothing changed (see :meth:`wait_quiescent`; timers aside)."""
        first = self._counts(self._ask_timeout_s)
        return first is not None and first == self._counts(self._ask_timeout_s)

    def next_timer(self) -> float | None:
        """When the earliest timer of a driver-hosted actor falls due on a VirtualClock, or None."""
        return None if self._timers is None else self._timers.next_deadline()

    def _counts(self, timeout: float) -> dict[str, Any] | None:
        """Every live actor's counts, or None if some message is visibly unhandled."""
        with self._lock:
            handles = {n: h for n, h in self._handles.items() if n not in self._dead}
            local = list(self._local.values())
            driver_out = dict(self._out)
        refs = {name: handle.status.remote() for name, handle in handles.items()}
        statuses: dict[str, dict[str, Any]] = {}
        for name, ref in refs.items():
            try:
                statuses[name] = self._ray.get(ref, timeout=timeout)
            except Exception:  # noqa: BLE001, S112 - its process is gone: the monitor reports it
                continue
        for host in local:
            statuses[host.name] = host.status()
        outs = {(self._sender, to): n for to, n in driver_out.items()}
        for name, status in statuses.items():
            if status["pending"]:
                return None
            outs.update({(name, to): n for to, n in status["out"].items()})
        for (sender, receiver), sent in outs.items():
            held = statuses.get(receiver)
            if held is not None and held["in"].get(sender, 0) != sent:
                return None
        counts: dict[str, Any] = {name: (st["out"], st["in"]) for name, st in sorted(statuses.items())}
        counts["@driver"] = driver_out
        return counts

    def status(self, name: str) -> dict[str, Any]:
        """``{alive, dead_letters, held, cpu_s, out, in, pending}`` of one actor's
        host (held: early arrivals awaiting a gap; cpu_s: CPU seconds its worker
        process has used; out / in / pending: see :meth:`wait_quiescent`)."""
        target = self.lookup(name)._handle
        if isinstance(target, DriverHost):
            return target.status()
        result: dict[str, Any] = self._ray.get(target.status.remote(), timeout=self._ask_timeout_s)
        return result

    # -- message path ------------------------------------------------------
    def _is_alive(self, name: str) -> bool:
        with self._lock:
            host = self._local.get(name)
            if host is not None:
                return host.alive
            return name in self._handles and name not in self._dead

    def _submit(self, name: str, handle: Any, message: Message, *, ask: bool) -> ThreadFuture[Any]:
        future: ThreadFuture[Any] = ThreadFuture(self._ask_timeout_s, name)
        try:
            payload = pack(message)
        except InvalidInput as exc:
            future.set_exception(exc)
            return future
        with self._lock:
            if name in self._dead or self._closed:
                future.set_exception(ActorUnavailable(f"no running actor named {name!r}"))
                return future
            if isinstance(handle, DriverHost):
                handle.post(None, payload, future if ask else None)
                if not ask:
                    future.set_result(None)
                return future
            seq = self._out.get(name, 0)
            self._out[name] = seq + 1
            method = handle.ask if ask else handle.tell
            ref = method.remote(self._sender, seq, payload)
        if not ask:
            future.set_result(None)
            return future
        ref.future().add_done_callback(lambda done: self._settle(name, future, done))
        return future

    def _settle(self, name: str, future: ThreadFuture[Any], done: Any) -> None:
        try:
            reply = done.result()
        except Exception as exc:  # noqa: BLE001 - the host process died or was killed
            self._process_lost(name)
            future.set_exception(ActorUnavailable(f"actor {name!r} is gone: {describe_exception(exc)}"))
            return
        *answer, still_running = reply
        if not still_running:
            with self._lock:
                self._dead.add(name)
        try:
            future.set_result(decode_reply(answer))
        except GlidingError as error:
            future.set_exception(error)


_REMOTE_CLASSES: dict[tuple[int, type], Any] = {}


def _remote_class(ray: Any, cls: type) -> Any:
    """``ray.remote(cls)``, made once per imported Ray."""
    key = (id(ray), cls)
    remote = _REMOTE_CLASSES.get(key)
    if remote is None:
        remote = _REMOTE_CLASSES[key] = ray.remote(cls)
    return remote
