"""The ``threads`` backend: every actor is a Pykka ``ThreadingActor``.

Pykka gives each actor a thread and a FIFO inbox; this module adds what the
runtime interface promises on top — names, deferred replies, supervision,
timers on the injected clock — and nothing above ``runtime/`` imports pykka.
Per-pair FIFO holds because a Pykka inbox is one FIFO queue and a sender
enqueues in program order.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pykka

from gliding_actors.clock import Clock, SystemClock, VirtualClock
from gliding_actors.errors import ActorUnavailable, InvalidInput, Timeout, show
from gliding_actors.runtime._cell import Cell, Effects, check_actor_name, check_in_process_placement
from gliding_actors.runtime._future import ThreadFuture
from gliding_actors.runtime._interface import BackendBase, Behaviour, Message

__all__ = ["ThreadsRuntime", "Timers"]

log = logging.getLogger("gliding_actors.runtime")


class _PykkaHost(pykka.ThreadingActor):
    """The Pykka actor hosting one :class:`Cell`; all logic lives in the runtime."""

    use_daemon_thread = True

    def __init__(self, runtime: ThreadsRuntime, cell: Cell) -> None:
        super().__init__()
        self._runtime = runtime
        self._cell = cell

    def on_start(self) -> None:
        self._runtime._carry_out(self._cell, self._cell.start())

    def on_receive(self, message: Any) -> None:
        sender, payload, request_id = message
        try:
            self._runtime._carry_out(self._cell, self._cell.deliver(sender, payload, request_id))
        finally:
            self._runtime._handled()


class _Ref:
    """An :class:`ActorRef` on the threads backend."""

    __slots__ = ("_cell", "_runtime")

    def __init__(self, runtime: ThreadsRuntime, cell: Cell) -> None:
        self._runtime = runtime
        self._cell = cell

    @property
    def name(self) -> str:
        return self._cell.name

    def is_alive(self) -> bool:
        return self._cell.alive

    def tell(self, message: Message) -> None:
        self._runtime._post(None, self._cell.name, message, None)

    def ask(self, message: Message) -> ThreadFuture[Any]:
        return self._runtime._ask(self._cell.name, message)

    def __repr__(self) -> str:
        return f"<ActorRef {self._cell.name!r} threads>"


class ThreadsRuntime(BackendBase):
    """Actors on Pykka threads, in this process.

    ``trace`` keeps the last ``trace`` deliveries (sender, receiver, message) in
    a ring buffer for failure reports; 0 (the default) keeps none and costs
    nothing on the hot path.
    """

    kind = "threads"

    def __init__(self, clock: Clock | None = None, *, ask_timeout_s: float = 10.0, trace: int = 0) -> None:
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._ask_timeout_s = ask_timeout_s
        self._hosts: dict[str, tuple[Cell, Any]] = {}
        self._futures: dict[int, ThreadFuture[Any]] = {}
        #: request ids addressed to each actor and not yet answered
        self._open: dict[str, set[int]] = {}
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        self._closed = False
        self.dead_letters = 0
        self.trace: collections.deque[tuple[str | None, str, Message]] | None = (
            collections.deque(maxlen=trace) if trace else None
        )
        #: messages posted and not yet fully handled (for wait_quiescent)
        self._inflight_count = 0
        self._inflight_lock = threading.Lock()
        self._timers = Timers(self._clock, lambda to, msg: self._post("@timer", to, msg, None))

    # -- interface ---------------------------------------------------------
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
        check_in_process_placement(placement, "threads")
        with self._lock:
            if self._closed:
                raise ActorUnavailable("the runtime is shut down")
            if name in self._hosts and self._hosts[name][0].alive:
                raise InvalidInput(f"an actor named {show(name)} is already running")
            cell = Cell(name, factory, self._clock, supervisor=supervisor, restart=restart)
            self._open[name] = set()
            host = _PykkaHost.start(self, cell)
            self._hosts[name] = (cell, host)
        return _Ref(self, cell)

    def lookup(self, name: str) -> _Ref:
        entry = self._hosts.get(name)
        if entry is None or not entry[0].alive:
            raise ActorUnavailable(f"no running actor named {name!r}")
        return _Ref(self, entry[0])

    def stop(self, name: str) -> None:
        with self._lock:
            entry = self._hosts.pop(name, None)
        if entry is None:
            return
        cell, host = entry
        leftover = cell.stop()
        try:
            host.stop(block=True, timeout=self._ask_timeout_s)
        except pykka.ActorDeadError:
            pass
        except pykka.Timeout:  # its thread is stuck in a handler: leave it, fail its callers
            log.warning("actor %r did not stop within %.1f s", name, self._ask_timeout_s)
        self._forget_unhandled(host)
        self._fail_open(name, leftover)

    def _forget_unhandled(self, host: Any) -> None:
        """Messages left in a stopped actor's inbox will never be handled."""
        inbox = getattr(host, "actor_inbox", None)
        left = inbox.qsize() if inbox is not None else 0
        for _ in range(left):
            self._handled()

    def shutdown(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            names = list(self._hosts)
        self._timers.close()
        for name in names:
            self.stop(name)

    # -- message paths -----------------------------------------------------
    def _ask(self, name: str, message: Message) -> ThreadFuture[Any]:
        rid = next(self._ids)
        future: ThreadFuture[Any] = ThreadFuture(self._ask_timeout_s, name)
        entry = self._hosts.get(name)
        if entry is None or not entry[0].alive:
            future.set_exception(ActorUnavailable(f"no running actor named {name!r}"))
            return future
        open_ids = self._open.get(name)
        if open_ids is None:
            future.set_exception(ActorUnavailable(f"actor {name!r} is stopping"))
            return future
        self._futures[rid] = future
        open_ids.add(rid)
        self._posted()
        try:
            entry[1].tell((None, message, rid))
        except pykka.ActorDeadError:
            self._handled()
            self._futures.pop(rid, None)
            open_ids.discard(rid)
            future.set_exception(ActorUnavailable(f"actor {name!r} stopped"))
        return future

    def _post(self, sender: str | None, to: str, message: Message, request_id: int | None) -> None:
        entry = self._hosts.get(to)
        if entry is None or not entry[0].alive:
            self.dead_letters += 1
            log.debug("dead letter from %r to %r: %r", sender, to, message)
            return
        if self.trace is not None:
            self.trace.append((sender, to, message))
        self._posted()
        try:
            entry[1].tell((sender, message, request_id))
        except pykka.ActorDeadError:
            self._handled()
            self.dead_letters += 1

    def _posted(self) -> None:
        with self._inflight_lock:
            self._inflight_count += 1

    def _handled(self) -> None:
        with self._inflight_lock:
            self._inflight_count -= 1

    def _inflight(self) -> int:
        return self._inflight_count

    @property
    def deterministic(self) -> bool:
        """False: actors run on their own threads."""
        return False

    def known_quiescent(self) -> bool:
        return self.is_quiescent()

    def recent_messages(self) -> tuple[str, ...]:
        """The last messages sent, when opened with ``trace=`` (empty otherwise)."""
        if self.trace is None:
            return ()
        return tuple(f"{src} -> {dst}: {msg!r}" for src, dst, msg in self.trace)[-16:]

    def message_log(self) -> None:
        """None: threads keep no complete record (see ``trace``)."""

    def wait_quiescent(self, timeout: float | None = None) -> None:
        """Wait until every posted message has been handled (timers aside).

        Polls every millisecond (it is a test and replay tool, not a hot path);
        raises :class:`~gliding_actors.errors.Timeout` after ``timeout`` seconds
        (default: the runtime's ask timeout).
        """
        limit = self._ask_timeout_s if timeout is None else timeout
        deadline = time.monotonic() + limit
        while self._inflight() > 0:
            if time.monotonic() >= deadline:
                raise Timeout(f"still {self._inflight()} messages in flight after {limit:g} s")
            time.sleep(0.001)

    def is_quiescent(self) -> bool:
        return self._inflight() <= 0

    def next_timer(self) -> float | None:
        """When the earliest pending timer falls due (clock time), or None."""
        return self._timers.next_deadline()

    def _carry_out(self, cell: Cell, effects: Effects) -> None:
        """Do what one handler run asked for: sends, timers, crash handling, replies.

        Replies go last so an asker that wakes finds the handler's messages
        already posted (and the actor thread is about to block, not competing
        for the GIL).
        """
        for to, message in effects.sends:
            self._post(cell.name, to, message, None)
        for delay, message in effects.timers:
            self._timers.add(delay, cell.name, message)
        self._answer(cell, effects.replies)
        if effects.crash is not None:
            self._crashed(cell, effects.crash)

    def _answer(self, cell: Cell, replies: list[tuple[int, bool, Any]]) -> None:
        for rid, ok, value in replies:
            future = self._futures.pop(rid, None)
            open_ids = self._open.get(cell.name)
            if open_ids is not None:
                open_ids.discard(rid)
            if future is None:
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

    def _crashed(self, cell: Cell, notice: dict[str, Any]) -> None:
        log.error("actor %r crashed: %s", cell.name, notice["error"])
        if cell.supervisor is not None:
            self._post(cell.name, cell.supervisor, notice, None)
        if not cell.alive:
            with self._lock:
                entry = self._hosts.get(cell.name)
                if entry is not None and entry[0] is cell:
                    del self._hosts[cell.name]
                    entry[1].stop(block=False)
            self._fail_open(cell.name, [])

    def _fail_open(self, name: str, extra: list[int]) -> None:
        open_ids = self._open.pop(name, set()) | set(extra)
        for rid in sorted(open_ids):
            future = self._futures.pop(rid, None)
            if future is not None and not future.done():
                future.set_exception(ActorUnavailable(f"actor {name!r} stopped before answering"))


class Timers:
    """Timer messages on a runtime's clock: ``fire(target, message)`` when each falls due.

    With a :class:`VirtualClock` timers fire when the clock is moved (in the
    mover's thread; firing only enqueues a message). With any other clock a
    daemon thread sleeps until the earliest deadline. The threads runtime's
    timers, and the Ray runtime's driver-hosted ones on a VirtualClock.
    """

    def __init__(self, clock: Clock, fire: Callable[[Any, Message], None]) -> None:
        self._clock = clock
        self._fire = fire
        self._heap: list[tuple[float, int, Any, Message]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None
        if isinstance(clock, VirtualClock):
            clock.on_change(lambda _now: self._fire_due())

    def add(self, delay: float, target: Any, message: Message) -> None:
        with self._cond:
            heapq.heappush(self._heap, (self._clock.now() + delay, next(self._seq), target, message))
            if not isinstance(self._clock, VirtualClock) and self._thread is None:
                self._thread = threading.Thread(target=self._run, name="gliding-timers", daemon=True)
                self._thread.start()
            self._cond.notify()
        if delay == 0:
            self._fire_due()

    def next_deadline(self) -> float | None:
        with self._cond:
            return self._heap[0][0] if self._heap else None

    def _fire_due(self) -> None:
        now = self._clock.now()
        due: list[tuple[Any, Message]] = []
        with self._cond:
            while self._heap and self._heap[0][0] <= now:
                _when, _seq, target, message = heapq.heappop(self._heap)
                due.append((target, message))
        for target, message in due:
            self._fire(target, message)

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._closed:
                    return
                wait = None if not self._heap else max(0.0, self._heap[0][0] - self._clock.now())
                self._cond.wait(timeout=wait if wait is None else min(wait, 1.0))
                if self._closed:
                    return
            self._fire_due()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
