"""One definition per agent operation; the blocking, future and awaitable faces derived from it.

An operation is written once, as a method of the handle that checks its
arguments, sends its request and returns a :class:`Call`: the runtime future
of the answer, how the answer becomes the caller's result, and how long a
caller may wait. Decorated with :func:`operation`, it gives the handle

* ``agent.x(...)``: waits (``timeout=``, default the runtime's ask timeout)
  and returns the result;
* ``agent.submit_x(...)`` (declared ``submit_x = x.submit``): the runtime
  future of the answer, at once, for callers that overlap many operations;
* ``agent.aio.x(...)`` (declared ``x = Agent.x.awaitable`` on the async view):
  the same result, awaited without blocking the event loop.

Validation, permissions and the request are in the definition alone, so the
faces cannot disagree; bad input raises before anything is sent, from every
face (from the awaitable one at the ``await``). A recorder observes every
operation at one point, :attr:`Call` creation through ``handle._trace``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar, cast, overload

from gliding_actors._aio import settle
from gliding_actors.runtime import Future

__all__ = ["AtOnce", "Call", "Operation", "Tracer", "forget_faces", "not_at_once", "operation", "same"]

P = ParamSpec("P")
S = TypeVar("S")  # what the runtime future answers
R = TypeVar("R")  # what the caller gets
H = TypeVar("H")  # the handle the operation belongs to
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
H_co = TypeVar("H_co", covariant=True)

#: An operation's answer without a message: ``at_once(handle, otherwise, *args, **kwargs)``
#: returns it when there is one (a read hit), else ``otherwise(*args, **kwargs)``.
AtOnce = Callable[Concatenate[H, Callable[P, Any], P], R | None]


def same(value: T) -> T:
    """The finishing step of an operation whose result is the answer itself."""
    return value


class Call(Generic[S, R]):
    """A sent operation: its answer's future, how the answer becomes the result, the wait bound.

    ``timeout`` None is the runtime's ask timeout; an operation that itself
    waits in the memory (a lock with ``timeout_s``) adds that wait here.
    (A plain class with slots: one is made per operation, on the hot path.)
    """

    __slots__ = ("finish", "future", "timeout")

    def __init__(self, future: Future[S], finish: Callable[[S], R], timeout: float | None = None) -> None:
        self.future = future
        self.finish = finish
        self.timeout = timeout


class Tracer(Protocol):
    """Observes every operation of a handle (the trace recorder): it runs ``send`` and may wrap its future."""

    def __call__(
        self, name: str, send: Callable[..., Call[Any, Any]], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Call[Any, Any]: ...


class _AsyncView(Protocol[H_co]):
    @property
    def agent(self) -> H_co: ...

    @property
    def ask_timeout_s(self) -> float: ...


def _send(op: Operation[Any, Any, S, R], handle: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Call[S, R]:
    tracer: Tracer | None = handle._trace
    if tracer is None or not op.recorded:
        return op.define(handle, *args, **kwargs)
    call: Call[S, R] = tracer(op.submit_name, functools.partial(op.define, handle), args, kwargs)
    return call


class Operation(Generic[H, P, S, R]):
    """The descriptor :func:`operation` makes: reading it off a handle gives the blocking face."""

    def __init__(
        self,
        define: Callable[Concatenate[H, P], Call[S, R]],
        *,
        recorded: bool = True,
        at_once: AtOnce[H, P, R] | None = None,
    ) -> None:
        self.define = define
        self.recorded = recorded
        #: the result without a message when there is one (a read hit), else ``otherwise``'s; not
        #: used by a recorded handle
        self.at_once = at_once
        self.name = define.__name__
        self.submit_name = f"submit_{self.name}"
        self.__doc__ = define.__doc__
        self.__wrapped__ = define  # inspect.signature(Agent.x) and help() show the definition's parameters
        self._signature = inspect.signature(define)
        #: the future face, for the handle's class body: ``submit_x = x.submit``
        self.submit: SubmitFace[H, P, S] = SubmitFace(self)
        #: the awaitable face, for the async view's class body: ``x = Agent.x.awaitable``
        self.awaitable: AwaitableFace[H, P, R] = AwaitableFace(self)
        # what the faces show: no handle parameter, and the result is not the definition's Call
        self._unbound = self._signature.replace(
            parameters=list(self._signature.parameters.values())[1:], return_annotation=inspect.Signature.empty
        )

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self.name = name

    def __call__(self, handle: H, *args: P.args, **kwargs: P.kwargs) -> R:
        call = _send(self, handle, args, kwargs)
        return call.finish(call.future.get(call.timeout))

    @overload
    def __get__(self, handle: None, owner: type[Any]) -> Operation[H, P, S, R]: ...
    @overload
    def __get__(self, handle: H, owner: type[Any]) -> Callable[P, R]: ...
    def __get__(self, handle: H | None, owner: type[Any]) -> Operation[H, P, S, R] | Callable[P, R]:
        if handle is None:
            return self

        def blocking(*args: P.args, **kwargs: P.kwargs) -> R:
            call = _send(self, handle, args, kwargs)
            return call.finish(call.future.get(call.timeout))

        at_once = self.at_once
        if at_once is None or handle._trace is not None:  # type: ignore[attr-defined]
            return _bind(handle, self.name, blocking, self)
        # The hot path (a read hit: one dict lookup and a copy) in one frame, the handle's own:
        # a partial is no Python frame, and ``at_once`` makes the round trip itself on a miss.
        face = cast(Callable[P, R], functools.partial(at_once, handle, blocking))
        return _bind(handle, self.name, face, self)


def not_at_once(*args: Any, **kwargs: Any) -> None:
    """The ``otherwise`` of an at-once answer asked for alone: None, "no answer without a message"."""


def forget_faces(handle: Any) -> None:
    """Drop the faces bound on ``handle`` so far: the next use binds them again.

    For a recorder that starts tracing a handle: a face bound before that
    skipped the trace point on the at-once path.
    """
    for name in list(vars(handle)):
        if isinstance(getattr(type(handle), name, None), Operation):
            del vars(handle)[name]


def _bind(handle: Any, name: str, face: F, op: Operation[Any, Any, Any, Any]) -> F:
    """Keep the bound face on the handle: later lookups are one dict hit, and it introspects like a method."""
    face.__name__ = name
    face.__qualname__ = f"{type(handle).__name__}.{name}"
    face.__doc__ = op.__doc__
    face.__signature__ = op._unbound  # type: ignore[attr-defined]
    handle.__dict__[name] = face
    return face


class SubmitFace(Generic[H, P, S]):
    """``agent.submit_x(...)``: the runtime future of the raw answer, at once (``timeout=`` is not used)."""

    def __init__(self, op: Operation[H, P, S, Any]) -> None:
        self._op = op
        self._name = op.submit_name
        self.__doc__ = op.__doc__

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self._name = self._op.submit_name = name

    @overload
    def __get__(self, handle: None, owner: type[Any]) -> SubmitFace[H, P, S]: ...
    @overload
    def __get__(self, handle: H, owner: type[Any]) -> Callable[P, Future[S]]: ...
    def __get__(self, handle: H | None, owner: type[Any]) -> SubmitFace[H, P, S] | Callable[P, Future[S]]:
        if handle is None:
            return self
        op = self._op

        def submit(*args: P.args, **kwargs: P.kwargs) -> Future[S]:
            return _send(op, handle, args, kwargs).future

        return _bind(handle, self._name, submit, op)


class AwaitableFace(Generic[H, P, R]):
    """``agent.aio.x(...)``: the result, awaited on the running loop (see :mod:`gliding_actors._aio`)."""

    def __init__(self, op: Operation[H, P, Any, R]) -> None:
        self._op = op
        self.__doc__ = op.__doc__

    @overload
    def __get__(self, view: None, owner: type[Any]) -> AwaitableFace[H, P, R]: ...
    @overload
    def __get__(self, view: _AsyncView[H], owner: type[Any]) -> Callable[P, Coroutine[Any, Any, R]]: ...
    def __get__(
        self, view: _AsyncView[H] | None, owner: type[Any]
    ) -> AwaitableFace[H, P, R] | Callable[P, Coroutine[Any, Any, R]]:
        if view is None:
            return self
        op, handle, default_s = self._op, view.agent, view.ask_timeout_s

        at_once = op.at_once

        async def awaitable(*args: P.args, **kwargs: P.kwargs) -> R:
            if at_once is not None and handle._trace is None:  # type: ignore[attr-defined]
                done = at_once(handle, not_at_once, *args, **kwargs)
                if done is not None:
                    return done  # answered without suspending
            call = _send(op, handle, args, kwargs)  # bad input raises here, at the await
            answer = await settle(call.future, default_s if call.timeout is None else call.timeout)
            return call.finish(answer)

        return _bind(view, op.name, awaitable, op)


@overload
def operation(define: Callable[Concatenate[H, P], Call[S, R]]) -> Operation[H, P, S, R]: ...
@overload
def operation(*, recorded: bool) -> Callable[[Callable[Concatenate[H, P], Call[S, R]]], Operation[H, P, S, R]]: ...
@overload
def operation(
    *, at_once: AtOnce[H, P, R]
) -> Callable[[Callable[Concatenate[H, P], Call[S, R]]], Operation[H, P, S, R]]: ...
def operation(
    define: Callable[Concatenate[H, P], Call[S, R]] | None = None,
    *,
    recorded: bool = True,
    at_once: AtOnce[H, P, R] | None = None,
) -> Operation[H, P, S, R] | Callable[[Callable[Concatenate[H, P], Call[S, R]]], Operation[H, P, S, R]]:
    """Make ``define`` an operation of its handle's class (module docstring).

    ``recorded=False``: the operation is built on another one, and a
    recording shows that one (the trace format names the requests sent).
    ``at_once``: takes ``otherwise`` and then the same arguments, and returns
    the result when it needs no message (a read hit), else what
    ``otherwise(*args, **kwargs)`` returns (the blocking face passes its round
    trip, so a hit costs one frame; others pass :func:`not_at_once` and get
    None). The blocking and awaitable faces try it first, except on a
    recorded handle (every op is traced).
    """
    if define is not None:
        return Operation(define)
    return lambda fn: Operation(fn, recorded=recorded, at_once=at_once)
