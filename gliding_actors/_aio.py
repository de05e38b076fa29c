"""The asyncio face of an agent handle: ``await agent.aio.read(iri)``.

One convention everywhere: :attr:`Agent.aio <gliding_actors.agent.Agent.aio>`
is an :class:`AsyncAgent` whose every method is the awaitable twin of the
blocking method of the same name, with the same arguments and result. Each is
built on the handle's ``submit_*`` method, so validation, permissions and
recording are exactly those of the blocking call.

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
``threads`` runtime; deterministic tests use ``sim`` with the blocking API or
scenario replay.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import itertools
import math
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from gliding_actors.errors import InvalidInput, Timeout

if TYPE_CHECKING:
    from gliding_actors.agent import Agent, ReadResult, WriteResult

__all__ = ["AsyncAgent", "wrap_future"]

T = TypeVar("T")


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


class AsyncAgent:
    """Awaitable twins of every :class:`~gliding_actors.agent.Agent` method (module docstring).

    Get one with ``agent.aio``; it is a thin view (make as many as you like)
    and may be used from any event loop, one loop per await.
    """

    def __init__(self, agent: Agent) -> None:
        runtime = agent.system.runtime
        if runtime.kind != "threads":
            raise InvalidInput(
                f"the async API needs the threads runtime, not {runtime.kind!r}: on sim nothing moves "
                "unless a blocking call drives the simulator (use the blocking API or scenario replay there)"
            )
        self._agent = agent
        self._ask_timeout_s = runtime.ask_timeout_s

    @property
    def agent(self) -> Agent:
        """The blocking handle this view belongs to."""
        return self._agent

    @property
    def id(self) -> str:
        return self._agent.id

    @property
    def role(self) -> str:
        return self._agent.role

    async def _wait(self, submit: Callable[[], Any], timeout: float | None, extra_s: float = 0.0) -> Any:
        loop = asyncio.get_running_loop()
        waiter = wrap_future(submit(), loop)
        limit = (self._ask_timeout_s if timeout is None else timeout) + extra_s
        if not waiter.done():
            _bridge(loop).expire_after(limit, waiter)
        try:
            return await waiter
        except _Expired:
            raise Timeout(f"no answer within {limit:g} s") from None

    # -- lines ---------------------------------------------------------------
    async def read(self, iri: str, *, timeout: float | None = None) -> ReadResult:
        """Awaitable :meth:`Agent.read` (a hit completes without suspending on a message)."""
        result: ReadResult = await self._wait(lambda: self._agent.submit_read(iri), timeout)
        return result

    async def get(self, iri: str, *, timeout: float | None = None) -> dict[str, Any] | None:
        return (await self.read(iri, timeout=timeout))["value"]

    async def write(
        self,
        iri: str,
        value: dict[str, Any],
        *,
        tags: Iterable[str] | None = None,
        graph: str | None = None,
        timeout: float | None = None,
    ) -> WriteResult:
        result: WriteResult = await self._wait(
            lambda: self._agent.submit_write(iri, value, tags=tags, graph=graph), timeout
        )
        return result

    async def cas(
        self,
        iri: str,
        version: int,
        value: dict[str, Any],
        *,
        tags: Iterable[str] | None = None,
        graph: str | None = None,
        timeout: float | None = None,
    ) -> WriteResult:
        result: WriteResult = await self._wait(
            lambda: self._agent.submit_cas(iri, version, value, tags=tags, graph=graph), timeout
        )
        return result

    async def delete(self, iri: str, *, timeout: float | None = None) -> int:
        result = await self._wait(lambda: self._agent.submit_delete(iri), timeout)
        return int(result["version"])

    async def evict(self, iri: str, *, timeout: float | None = None) -> None:
        await self._wait(lambda: self._agent.submit_evict(iri), timeout)

    async def query(
        self, sparql: str, bindings: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> dict[str, Any]:
        result: dict[str, Any] = await self._wait(lambda: self._agent.submit_query(sparql, bindings), timeout)
        return result

    # -- blackboard ------------------------------------------------------------
    async def heartbeat(
        self, status: str | None = None, operation: str | None = None, *, timeout: float | None = None
    ) -> None:
        await self._wait(lambda: self._agent.submit_heartbeat(status, operation), timeout)

    async def lock(
        self, resource: str, mode: str = "write", timeout_s: float = 0.0, *, timeout: float | None = None
    ) -> int | None:
        """Awaitable :meth:`Agent.lock`: the await lasts up to ``timeout_s`` plus ``timeout``."""
        result = await self._wait(lambda: self._agent.submit_lock(resource, mode, timeout_s), timeout, timeout_s)
        return int(result["token"]) if result["granted"] else None

    async def unlock(self, resource: str, *, timeout: float | None = None) -> None:
        await self._wait(lambda: self._agent.submit_unlock(resource), timeout)

    async def create_task(
        self, task: str, *, parent: str | None = None, depends_on: Iterable[str] = (), timeout: float | None = None
    ) -> None:
        request = {"t": "task.create", "task": task, "parent": parent, "depends_on": list(depends_on)}
        await self._wait(lambda: self._agent.submit_task(request), timeout)

    async def depend(self, task: str, on: str, *, timeout: float | None = None) -> None:
        await self._wait(lambda: self._agent.submit_task({"t": "task.depend", "task": task, "on": on}), timeout)

    async def task_layers(self, task: str | None = None, *, timeout: float | None = None) -> list[list[str]]:
        result = await self._wait(lambda: self._agent.submit_task({"t": "task.layers", "task": task}), timeout)
        return [list(layer) for layer in result["layers"]]

    async def complete_task(
        self, task: str, status: str = "completed", *, timeout: float | None = None
    ) -> list[str]:
        result = await self._wait(lambda: self._agent.submit_complete_task(task, status), timeout)
        return list(result["ready"])

    async def attach_to_task(self, task: str, iris: Iterable[str], *, timeout: float | None = None) -> None:
        await self._wait(lambda: self._agent.submit_attach_task(task, iris), timeout)

    # -- MemoryBus -------------------------------------------------------------
    async def subscribe(self, topic: str, *, timeout: float | None = None) -> None:
        await self._wait(lambda: self._agent.submit_subscribe(topic), timeout)

    async def unsubscribe(self, topic: str, *, timeout: float | None = None) -> None:
        await self._wait(lambda: self._agent.submit_unsubscribe(topic), timeout)

    async def publish(self, topic: str, message: dict[str, Any], *, timeout: float | None = None) -> int:
        result = await self._wait(lambda: self._agent.submit_publish(topic, message), timeout)
        return int(result["seq"])

    async def inbox(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self._wait(self._agent.submit_inbox, timeout)
        return result

    async def messages(
        self, topic: str, since_seq: int = 0, limit: int | None = None, *, timeout: float | None = None
    ) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self._wait(
            lambda: self._agent.submit_messages(topic, since_seq, limit), timeout
        )
        return result

    # -- L1 session --------------------------------------------------------------
    async def turn(
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
        result: dict[str, Any] = await self._wait(
            lambda: self._agent.submit_turn(
                summary,
                thought=thought,
                content=content,
                role=role,
                supplement=supplement,
                relevance=relevance,
                tokens=tokens,
                cites=cites,
                embedding=embedding,
            ),
            timeout,
        )
        return result

    async def session(self, *, timeout: float | None = None) -> dict[str, Any]:
        result: dict[str, Any] = await self._wait(self._agent.submit_session, timeout)
        return result

    async def session_messages(self, *, timeout: float | None = None) -> list[dict[str, str]]:
        result: list[dict[str, str]] = await self._wait(self._agent.submit_session_messages, timeout)
        return result

    async def handoff(self, *, timeout: float | None = None) -> dict[str, Any]:
        result: dict[str, Any] = await self._wait(self._agent.submit_handoff, timeout)
        return result

    async def set_query(
        self, embedding: Iterable[float] | None = None, *, text: str | None = None, timeout: float | None = None
    ) -> list[str]:
        result = await self._wait(lambda: self._agent.submit_set_query(embedding, text=text), timeout)
        return list(result["evicted"])

    async def close_session(self, *, timeout: float | None = None) -> dict[str, Any]:
        result: dict[str, Any] = await self._wait(self._agent.submit_close_session, timeout)
        return result

    async def reload(self, iri: str) -> dict[str, Any]:
        """Awaitable :meth:`Agent.reload`: one LevelDB read by key (microseconds), done in place."""
        return self._agent.reload(iri)

    # -- L3 --------------------------------------------------------------------------
    async def project(
        self,
        frame: str | None = None,
        task: str | None = None,
        max_tokens: int | None = None,
        *,
        query: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        result: dict[str, Any] = await self._wait(
            lambda: self._agent.submit_project(frame, task, max_tokens, query), timeout
        )
        return result

    # -- hyperspace (hybrid search) -------------------------------------------------
    async def search(
        self, text: str, k: int = 10, filters: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> dict[str, Any]:
        result: dict[str, Any] = await self._wait(lambda: self._agent.submit_search(text, k, filters), timeout)
        return result

    # -- context assembly and prefetch -------------------------------------------------
    async def set_task(self, task: str | None) -> None:
        """Awaitable :meth:`Agent.set_task`: a local note, done in place."""
        self._agent.set_task(task)

    async def context(
        self,
        query: str | None = None,
        max_tokens: int = 2000,
        *,
        task: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        result: dict[str, Any] = await self._wait(
            lambda: self._agent.submit_context(query, max_tokens, task=task), timeout
        )
        return result

    async def intent(self, entities: Iterable[str]) -> None:
        """Awaitable :meth:`Agent.intent`: like it, returns once the prefetch is asked for, not done."""
        self._agent.intent(entities)

    def __repr__(self) -> str:
        return f"<AsyncAgent {self._agent.id!r} role={self._agent.role}>"
