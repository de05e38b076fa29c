"""The asyncio face of an agent handle: ``await agent.aio.read(iri)``.

One convention everywhere: :attr:`Agent.aio <gliding_actors.agent.Agent.aio>`
is an :class:`~gliding_actors.agent.AsyncAgent` whose every method is the
awaitable twin of the blocking method of the same name, with the same
arguments and result. Both are faces of one definition per operation
(:mod:`gliding_actors._operation`), so validation, permissions and recording
are exactly those of the blocking call.

How it waits without blocking the loop: the runtime future's done callback
(which runs in the actor thread that answered) takes the outcome there —
running any mapping step, such as a query's SPARQL after its recall, off the
loop — and hands it to the loop with ``loop.call_soon_threadsafe``. No thread
is made per call and the loop never waits on a lock or a condition. Input is
checked and the request sent synchronously in the calling coroutine (a few
microseconds; nothing there waits), so bad input raises
:class:`~gliding_actors.errors.InvalidInput` at the ``await`` and changes nothing.

Timeouts: ``timeout=`` bounds each await (default: the runtime's ask timeout,
``config.runtime.ask_timeout_s``), like the blocking call, and raises
:class:`~gliding_actors.errors.Timeout` — a ``TimeoutError``, so code written
for ``asyncio.wait_for`` catches it too; wrapping an await in
``asyncio.wait_for``/``asyncio.timeout`` works as usual.

Cancellation cancels the *wait*, never the operation: the request has already
been sent when the coroutine first suspends, and the memory carries it out or
refuses it exactly as if nobody had cancelled. Its outcome is dropped. So a
cancelled ``write`` may still complete — the line then holds the value at the
next version, other agents see it, and a write-through write is durable — or
not yet have completed; a cancelled ``cas`` may have won or lost. After a
cancel (or a timeout) the caller does not know which: read the line (or
``cas`` against the version it expects) to find out, as after a blocking
call's :class:`~gliding_actors.errors.Timeout`. Nothing is left half-done by
the cancel itself: the protocol runs to completion in the actors, the
handle's bookkeeping (ops in flight per line, the line's graph) is updated by
the future's own callbacks, and a lock granted after its waiter was cancelled
is held until ``unlock`` or its lease runs out.

On the ``sim`` runtime futures are answered only while someone drives the
simulator (a blocking ``get``); an event loop waiting on one would wait
forever. ``agent.aio`` therefore refuses ``sim`` with
:class:`~gliding_actors.errors.InvalidInput`: the async API is for the
runtimes whose actors run by themselves (``threads``, ``ray``); deterministic
tests use ``sim`` with the blocking API or scenario replay.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import itertools
import math
import threading
import weakref
from typing import Any

from gliding_actors.errors import Timeout
from gliding_actors.runtime._future import wait_bound

__all__ = ["settle", "wrap_future"]


#: outcomes delivered per loop callback
_BATCH = 8


class _Expired(Exception):
    """Set on a waiter whose deadline passed (turned into :class:`Timeout` by the await)."""


class _LoopBridge:
    """One per event loop: hands outcomes from runtime threads to the loop, and times waits out.

    Outcomes are queued and drained by one loop callback, scheduled with
    ``call_soon_threadsafe`` only when none is pending, so a burst of answers
    costs one wake-up of the loop, not one each. Deadlines sit in one heap
    served by a single loop timer set for the earliest, so an await does not
    make a timer of its own. Both keep the loop's per-op overhead (and, in
    asyncio debug mode, its traceback captures) to the waiter future itself.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._loop_thread = threading.get_ident()  # made on the loop, by the first await
        self._lock = threading.Lock()
        self._inbox: collections.deque[tuple[asyncio.Future[Any], bool, Any]] = collections.deque()
        self._scheduled = False
        self._deadlines: list[tuple[float, int, asyncio.Future[Any]]] = []
        self._order = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf

    @staticmethod
    def _deliver(waiter: asyncio.Future[Any], ok: bool, outcome: Any) -> None:
        if waiter.done():  # cancelled, or timed out: the outcome is dropped
            return
        if ok:
            waiter.set_result(outcome)
        else:
            waiter.set_exception(outcome)

    def post(self, waiter: asyncio.Future[Any], ok: bool, outcome: Any) -> None:
        """Answer ``waiter`` (any thread)."""
        if threading.get_ident() == self._loop_thread:
            self._deliver(waiter, ok, outcome)  # answered at once (a cache hit): no hop
            return
        with self._lock:
            self._inbox.append((waiter, ok, outcome))
            if self._scheduled:
                return
            self._scheduled = True
        try:
            self._loop.call_soon_threadsafe(self._drain)
        except RuntimeError:
            pass  # the loop is closed: nobody is waiting any more

    def _drain(self) -> None:
        """Deliver what has arrived, a bounded batch per loop callback (each
        delivery wakes a task, and the loop must stay responsive in between)."""
        with self._lock:
            batch = [self._inbox.popleft() for _ in range(min(_BATCH, len(self._inbox)))]
            more = bool(self._inbox)
            if not more:
                self._scheduled = False
        for waiter, ok, outcome in batch:
            self._deliver(waiter, ok, outcome)
        if more:
            self._loop.call_soon(self._drain)

    def expire_after(self, seconds: float, waiter: asyncio.Future[Any]) -> None:
        """Fail ``waiter`` with :class:`_Expired` unless answered within ``seconds`` (loop thread)."""
        when = self._loop.time() + seconds
        heapq.heappush(self._deadlines, (when, next(self._order), waiter))
        if when < self._timer_at:
            if self._timer is not None:
                self._timer.cancel()
            self._timer, self._timer_at = self._loop.call_at(when, self._expire), when

    def _expire(self) -> None:
        self._timer, self._timer_at = None, math.inf
        now = self._loop.time()
        heap = self._deadlines
        while heap and (heap[0][0] <= now or heap[0][2].done()):
            _when, _n, waiter = heapq.heappop(heap)
            if not waiter.done():
                waiter.set_exception(_Expired())
        if heap:
            self._timer, self._timer_at = self._loop.call_at(heap[0][0], self._expire), heap[0][0]


_BRIDGES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopBridge] = weakref.WeakKeyDictionary()


def _bridge(loop: asyncio.AbstractEventLoop) -> _LoopBridge:
    bridge = _BRIDGES.get(loop)
    if bridge is None:
        bridge = _BRIDGES[loop] = _LoopBridge(loop)
    return bridge


def wrap_future(future: Any, loop: asyncio.AbstractEventLoop) -> asyncio.Future[Any]:
    """An asyncio future on ``loop`` answered when the runtime ``future`` is (call it on the loop).

    The outcome is taken in the thread that answered ``future`` (so a mapping
    step runs there, not on the loop) and handed over through the loop's
    bridge; a cancelled asyncio future simply drops it.
    """
    waiter: asyncio.Future[Any] = loop.create_future()
    bridge = _bridge(loop)

    def on_done(_future: Any) -> None:  # in the answering thread
        try:
            value = future.get(0)  # answered: returns or raises at once
        except BaseException as exc:  # noqa: BLE001 - the op's error, re-raised by the await
            bridge.post(waiter, False, exc)
        else:
            bridge.post(waiter, True, value)

    future.add_done_callback(on_done)
    return waiter


async def settle(future: Any, limit: float) -> Any:
    """Await the runtime ``future`` on the running loop; :class:`Timeout` after ``limit`` seconds.

    Cancelling the await cancels the wait only (module docstring).
    """
    bound = wait_bound(limit)  # InvalidInput for a bad timeout, at the await; None: no limit
    loop = asyncio.get_running_loop()
    waiter = wrap_future(future, loop)
    if not waiter.done() and bound is not None:
        _bridge(loop).expire_after(bound, waiter)
    try:
        return await waiter
    except _Expired:
        raise Timeout(f"no answer within {limit:g} s") from None
