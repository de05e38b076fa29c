"""The ``threads`` backend: every actor is a Pykka ``ThreadingActor``.

Pykka gives each actor a thread; this module adds what the runtime interface
promises on top — names, deferred replies, supervision, timers on the
injected clock — and nothing above ``runtime/`` imports pykka.

Each actor's messages wait in one FIFO queue of its own (a :class:`_Mailbox`),
and whichever thread *holds* the actor delivers them, one at a time, from the
head. Usually that is the actor's own Pykka thread, woken by a nudge. An actor
whose behaviour defines ``may_run_inline`` (the coherence protocol's caches and
directories: short handlers that never block) may instead be run by the
thread that posts to it, in that thread's own stack, when nobody holds it:
a miss then crosses caches and directories without waking a thread at each
hop. Why FIFO per pair and one message at a time still hold: docs/DESIGN.md,
"The threads backend".
"""

from __future__ import annotations

import asyncio
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

__all__ = ["INLINE_BATCH", "INLINE_DEPTH", "ThreadsRuntime", "Timers"]

log = logging.getLogger("gliding_actors.runtime")

#: messages a posting thread delivers to an actor it runs inline before it hands the rest to the
#: actor's own thread (a busy actor's queue does not hold its sender up for long)
INLINE_BATCH = 32
#: actors one thread may hold nested in its stack; past it, a message waits for the actor's thread
INLINE_DEPTH = 8

#: (sender, message, request id)
_Item = tuple[str | None, Message, int | None]


def _in_event_loop() -> bool:
    """Whether this thread runs an asyncio event loop: it never runs an actor inline (a handler
    may write to disk, and the loop must not wait for that)."""
    # asyncio's own test, which answers None rather than raising (get_running_loop()
    # raises in a thread without a loop, the common case here, at about a microsecond)
    return asyncio._get_running_loop() is not None


class _Mailbox:
    """One actor's queue and who holds it.

    ``busy``: a thread is delivering this actor's messages (its own Pykka
    thread, or a sender running it inline); only that thread delivers, so a
    handler runs one message at a time. ``nudged``: a wake-up is on its way
    to the Pykka thread. Both change only under ``mutex``, together with the
    queue, so a holder never lets go while a message waits unseen.
    """

    __slots__ = ("busy", "cell", "holder", "host", "idle", "inline", "mutex", "nudged", "queue")

    def __init__(self, cell: Cell) -> None:
        self.cell = cell
        self.host: Any = None
        self.queue: collections.deque[_Item] = collections.deque()
        self.mutex = threading.Lock()
        self.idle = threading.Condition(self.mutex)
        #: held from spawn until the actor's thread has run ``on_start``
        self.busy = True
        self.holder: int | None = None
        self.nudged = False
        #: the behaviour lets a sender deliver to it (``may_run_inline``)
        self.inline = callable(getattr(cell.behaviour, "may_run_inline", None))


class _PykkaHost(pykka.ThreadingActor):
    """The Pykka actor giving one :class:`_Mailbox` its thread; all logic lives in the runtime."""

    use_daemon_thread = True

    def __init__(self, runtime: ThreadsRuntime, box: _Mailbox) -> None:
        super().__init__()
        self._runtime = runtime
        self._box = box

    def on_start(self) -> None:
        self._box.host = self.actor_ref  # before anyone may need to wake this thread
        self._runtime._started(self._box)

    def on_receive(self, message: Any) -> None:
        self._runtime._woken(self._box)


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
        self._hosts: dict[str, _Mailbox] = {}
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
        #: how many actors this thread holds nested in its stack (``depth``)
        self._stack = threading.local()
        #: deliveries made inline, in a sender's thread (for tests and diagnostics; threads bump it
        #: without a lock, so under contention it may count a few short)
        self.inline_deliveries = 0
        self._timers = Timers(self._clock, lambda to, msg: self._post("@timer", to, msg, None, inline=False))

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
            if name in self._hosts and self._hosts[name].cell.alive:
                raise InvalidInput(f"an actor named {show(name)} is already running")
            cell = Cell(name, factory, self._clock, supervisor=supervisor, restart=restart)
            self._open[name] = set()
            box = _Mailbox(cell)
            self._hosts[name] = box
            box.host = _PykkaHost.start(self, box)
        return _Ref(self, cell)

    def lookup(self, name: str) -> _Ref:
        box = self._hosts.get(name)
        if box is None or not box.cell.alive:
            raise ActorUnavailable(f"no running actor named {name!r}")
        return _Ref(self, box.cell)

    def stop(self, name: str) -> None:
        """Stop ``name``: no handler of it runs once this returns (unless one is running in this
        very thread), and the asks left unanswered fail."""
        with self._lock:
            box = self._hosts.pop(name, None)
        if box is None:
            return
        cell = box.cell
        leftover = cell.stop()
        try:
            box.host.stop(block=True, timeout=self._ask_timeout_s)
        except pykka.ActorDeadError:
            pass
        except pykka.Timeout:  # its thread is stuck in a handler: leave it, fail its callers
            log.warning("actor %r did not stop within %.1f s", name, self._ask_timeout_s)
        self._wait_released(box)
        self._drop_queued(box)
        self._fail_open(name, leftover)

    def _wait_released(self, box: _Mailbox) -> None:
        """Wait until no other thread delivers to ``box`` (one running it inline finishes its handler)."""
        me = threading.get_ident()
        with box.mutex:
            if not box.idle.wait_for(lambda: not box.busy or box.holder == me, timeout=self._ask_timeout_s):
                log.warning("actor %r was still being run by another thread after %.1f s", box.cell.name, self._ask_timeout_s)

    def _drop_queued(self, box: _Mailbox) -> None:
        """Messages left in a stopped actor's queue will never be handled: their asks fail."""
        with box.mutex:
            left = list(box.queue)
            box.queue.clear()
        for _sender, _message, rid in left:
            self._handled()
            if rid is not None:
                future = self._futures.pop(rid, None)
                if future is not None and not future.done():
                    future.set_exception(ActorUnavailable(f"actor {box.cell.name!r} stopped before answering"))

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
        box = self._hosts.get(name)
        if box is None or not box.cell.alive:
            future.set_exception(ActorUnavailable(f"no running actor named {name!r}"))
            return future
        open_ids = self._open.get(name)
        if open_ids is None:
            future.set_exception(ActorUnavailable(f"actor {name!r} is stopping"))
            return future
        self._futures[rid] = future
        open_ids.add(rid)
        self._posted()
        self._enqueue(box, (None, message, rid), True)
        return future

    def _post(
        self, sender: str | None, to: str, message: Message, request_id: int | None, *, inline: bool = True
    ) -> None:
        box = self._hosts.get(to)
        if box is None or not box.cell.alive:
            self.dead_letters += 1
            log.debug("dead letter from %r to %r: %r", sender, to, message)
            return
        if self.trace is not None:
            self.trace.append((sender, to, message))
        self._posted()
        self._enqueue(box, (sender, message, request_id), inline)

    def _enqueue(self, box: _Mailbox, item: _Item, inline: bool) -> None:
        """Queue ``item``; deliver it in this thread if ``box`` may run inline and nobody holds it."""
        run_here = False
        with box.mutex:
            box.queue.append(item)
            if box.busy:
                return  # the holder delivers it before letting go
            if inline and box.inline and getattr(self._stack, "depth", 0) < INLINE_DEPTH and not _in_event_loop():
                box.busy = True
                box.holder = threading.get_ident()
                run_here = True
            elif box.nudged:
                return
            else:
                box.nudged = True
        if run_here:
            stack = self._stack
            depth = getattr(stack, "depth", 0)
            stack.depth = depth + 1
            try:
                self._deliver_queued(box, INLINE_BATCH)
            finally:
                stack.depth = depth
        else:
            self._nudge(box)

    def _nudge(self, box: _Mailbox) -> None:
        """Wake the actor's own thread to deliver what waits."""
        try:
            box.host.tell(None)
        except pykka.ActorDeadError:  # its thread is gone: what waits will never be delivered
            self._drop_queued(box)

    def _started(self, box: _Mailbox) -> None:
        """On the actor's thread, first: run ``on_start``, then what was posted meanwhile."""
        box.holder = threading.get_ident()
        self._carry_out(box.cell, box.cell.start())
        self._deliver_queued(box, None)

    def _woken(self, box: _Mailbox) -> None:
        """On the actor's thread: deliver what waits, unless another thread holds the actor."""
        with box.mutex:
            box.nudged = False
            if box.busy:
                return  # the holder delivers it before letting go
            box.busy = True
            box.holder = threading.get_ident()
        self._deliver_queued(box, None)

    def _deliver_queued(self, box: _Mailbox, limit: int | None) -> None:
        """Deliver ``box``'s messages from the head until it is empty; the caller holds it.

        ``limit`` (a thread running the actor inline): after that many, or at
        a message the behaviour will not take inline, the rest is handed to
        the actor's own thread.
        """
        cell = box.cell
        delivered = 0
        try:
            while True:
                with box.mutex:
                    if not box.queue:
                        self._release(box)
                        return
                    head = box.queue[0]
                if limit is not None and (delivered >= limit or not self._takes_inline(cell, head[1])):
                    with box.mutex:
                        self._release(box)
                        if box.nudged:
                            return
                        box.nudged = True
                    self._nudge(box)
                    return
                with box.mutex:
                    box.queue.popleft()
                sender, message, request_id = head
                if limit is not None:
                    self.inline_deliveries += 1
                try:
                    self._carry_out(cell, cell.deliver(sender, message, request_id))
                finally:
                    self._handled()
                delivered += 1
        except BaseException:
            # Not a handler's exception (the cell turns those into effects): the runtime's own
            # failure. Let go, so the actor's thread can still deliver what waits.
            with box.mutex:
                if box.busy and box.holder == threading.get_ident():
                    self._release(box)
                    wake = bool(box.queue) and not box.nudged
                    box.nudged = box.nudged or wake
                else:
                    wake = False
            if wake:
                self._nudge(box)
            raise

    @staticmethod
    def _release(box: _Mailbox) -> None:
        """Let go of ``box`` (under its mutex)."""
        box.busy = False
        box.holder = None
        box.idle.notify_all()

    @staticmethod
    def _takes_inline(cell: Cell, message: Message) -> bool:
        hook = getattr(cell.behaviour, "may_run_inline", None)
        return hook is not None and bool(hook(message))

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
                box = self._hosts.get(cell.name)
                if box is not None and box.cell is cell:
                    del self._hosts[cell.name]
                    box.host.stop(block=False)
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
