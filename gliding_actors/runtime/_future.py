"""Futures shared by the backends: answered once, waited on with a timeout."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from gliding_actors.errors import InvalidInput, Timeout, show

__all__ = ["BaseFuture", "ChainedFuture", "CompletedFuture", "GatheredFuture", "MappedFuture", "ThreadFuture"]

T = TypeVar("T")

_UNSET: Any = object()


class BaseFuture(Generic[T]):
    """Holds one outcome (value or exception) and runs callbacks once it arrives."""

    def __init__(self, description: str = "") -> None:
        self._value: Any = _UNSET
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Any], None]] = []
        self._lock = threading.Lock()
        self.description = description

    def done(self) -> bool:
        return self._value is not _UNSET or self._error is not None

    def set_result(self, value: T) -> None:
        self._settle(value, None)

    def set_exception(self, error: BaseException) -> None:
        self._settle(_UNSET, error)

    def _settle(self, value: Any, error: BaseException | None) -> None:
        with self._lock:
            if self.done():
                raise RuntimeError(f"future {self.description or id(self)} answered twice")
            if error is not None:
                self._error = error
            else:
                self._value = value
            callbacks, self._callbacks = self._callbacks, []
            self._notify()
        for callback in callbacks:
            callback(self)

    def _notify(self) -> None:
        """Wake waiters (called with the lock held)."""

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        with self._lock:
            if not self.done():
                self._callbacks.append(callback)
                return
        callback(self)

    def result_now(self) -> T:
        """The outcome of an answered future (raises its error)."""
        if self._error is not None:
            raise self._error
        if self._value is _UNSET:
            raise RuntimeError("future is not answered yet")
        value: T = self._value
        return value

    def exception(self) -> BaseException | None:
        """The error of an answered future, or None."""
        return self._error


def wait_bound(timeout: object) -> float | None:
    """How long a wait may last, for a thread primitive: seconds, or None for no limit (``inf``).

    ``timeout`` is a number of seconds >= 0 or ``math.inf``; anything else
    (a string, a bool, NaN, a negative number) is InvalidInput, so a caller's
    bad timeout never reaches the thread library as a TypeError or OverflowError.
    """
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or math.isnan(timeout) or timeout < 0:
        raise InvalidInput(f"a timeout is a number of seconds >= 0 (inf: no limit), not {show(timeout)}"[:200])
    # beyond what the platform's waits can count (about 292 years): no limit, like inf
    return None if timeout >= threading.TIMEOUT_MAX else float(timeout)


class ThreadFuture(BaseFuture[T]):
    """A future answered from another thread; ``get`` waits on a condition.

    The condition is made by the first ``get`` that has to wait, under the
    future's lock (which answering holds too, so no wake-up is lost): most
    futures are answered before anyone asks, often in the asking thread
    itself, and then neither making one nor notifying it is paid for.
    """

    def __init__(self, default_timeout: float, description: str = "") -> None:
        super().__init__(description)
        self._cond: threading.Condition | None = None
        self._default_timeout = default_timeout

    def _notify(self) -> None:
        if self._cond is not None:
            self._cond.notify_all()

    def get(self, timeout: float | None = None) -> T:
        limit = self._default_timeout if timeout is None else timeout
        bound = wait_bound(limit)
        if not self.done():
            with self._lock:
                if self._cond is None:
                    self._cond = threading.Condition(self._lock)
                if not self.done() and not self._cond.wait_for(self.done, bound):
                    raise Timeout(
                        f"no answer within {limit:g} s" + (f" from {self.description!r}" if self.description else "")
                    )
        return self.result_now()


class CompletedFuture(BaseFuture[T]):
    """A future that is answered at creation (a cache hit needs no round trip)."""

    def __init__(self, value: T | None = None, error: BaseException | None = None) -> None:
        super().__init__()
        if error is not None:
            self._error = error
        else:
            self._value = value

    def get(self, timeout: float | None = None) -> T:
        if timeout is not None:
            wait_bound(timeout)  # nothing to wait for, but a bad timeout is refused as by any other future
        return self.result_now()


class MappedFuture(Generic[T]):
    """``fn`` applied to another future's value, keeping that future's way of waiting.

    On the simulator the inner future's ``get`` drives the simulation, so a
    mapped future must wait through it rather than on a condition of its own.
    """

    def __init__(self, inner: Any, fn: Callable[[Any], T]) -> None:
        self._inner = inner
        self._fn = fn

    def get(self, timeout: float | None = None) -> T:
        return self._fn(self._inner.get(timeout))

    def done(self) -> bool:
        return bool(self._inner.done())

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        self._inner.add_done_callback(lambda _inner: callback(self))


class GatheredFuture(Generic[T]):
    """One future over several: ``combine`` of all their values, once all are answered.

    Waiting goes through each inner future in turn (on the simulator each one
    drives the simulation), so the total wait is bounded by ``timeout`` per
    inner future; the first error raised is the gathered one's error.
    """

    def __init__(self, inner: list[Any], combine: Callable[[list[Any]], T]) -> None:
        self._inner = inner
        self._combine = combine

    def get(self, timeout: float | None = None) -> T:
        return self._combine([future.get(timeout) for future in self._inner])

    def done(self) -> bool:
        return all(future.done() for future in self._inner)

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        remaining = [len(self._inner)]
        lock = threading.Lock()
        if not self._inner:
            callback(self)
            return

        def one_done(_future: Any) -> None:
            with lock:
                remaining[0] -= 1
                last = remaining[0] == 0
            if last:
                callback(self)

        for future in self._inner:
            future.add_done_callback(one_done)


class ChainedFuture(Generic[T]):
    """``fn`` applied to another future's value, where ``fn`` returns a future (flatMap).

    ``ChainedFuture(recall, lambda _n: flush(iris))`` is a future of the flush
    that starts once the recall is answered, without anyone waiting in between:
    composite operations (recall → query → flush → complete) stay one future.

    The chain is eager, like every ask: the next step starts as soon as the
    inner future is answered, whether or not anyone waits — from the inner
    future's done callback, so on threads it runs on the actor thread that
    answered (on the simulator, inside the step that answered; nothing moves
    there until someone drives the simulation, e.g. ``get``). ``fn`` must
    therefore not block: it may read, compute and send asks, never wait on a
    future. ``get`` waits through the inner future (on the simulator that
    drives the simulation), then through the future ``fn`` returned, each wait
    bounded by ``timeout``; ``get`` and ``done`` also start the step if the
    callback has not yet, and it starts exactly once.

    An error of the inner future, or raised by ``fn``, is this future's error
    and ``fn``'s future is never made.
    """

    def __init__(self, inner: Any, fn: Callable[[Any], Any]) -> None:
        self._inner = inner
        self._fn = fn
        self._lock = threading.Lock()
        self._claimed = False
        self._chained = threading.Event()
        self._next: Any = None
        self._callbacks: list[Callable[[Any], None]] = []
        inner.add_done_callback(lambda _inner: self._advance())

    def _advance(self) -> Any:
        """The future ``fn`` returned (running ``fn`` once the inner future is
        answered), or None while the inner future is pending or another thread
        is running ``fn``."""
        if self._next is not None:
            return self._next
        if not self._inner.done():
            return None
        with self._lock:
            if self._claimed:
                return self._next
            self._claimed = True
        following: Any
        try:
            # answered already: ``get(0)`` only returns its value or raises its error
            following = self._fn(self._inner.get(0))
        except Exception as exc:  # noqa: BLE001 - the chain's error, raised by ``get``
            following = CompletedFuture(error=exc)
        with self._lock:
            self._next = following
            callbacks, self._callbacks = self._callbacks, []
        self._chained.set()
        for callback in callbacks:
            following.add_done_callback(lambda _f, cb=callback: cb(self))
        return following

    def get(self, timeout: float | None = None) -> T:
        self._inner.get(timeout)
        following = self._advance()
        if following is None:
            # another thread is running ``fn`` (which never blocks): wait for it
            self._chained.wait(None if timeout is None else wait_bound(timeout))
            following = self._next
            if following is None:
                raise Timeout(f"no answer within {timeout:g} s (a chained step is still starting)")
        value: T = following.get(timeout)
        return value

    def done(self) -> bool:
        following = self._advance()
        return following is not None and bool(following.done())

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        with self._lock:
            following = self._next
            if following is None:
                self._callbacks.append(callback)
        if following is not None:
            following.add_done_callback(lambda _f: callback(self))
