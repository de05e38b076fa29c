"""What every backend does with one delivered message, written once.

A :class:`Cell` hosts one behaviour. ``deliver`` runs the handler with a
:class:`_Ctx`, then hands back an :class:`Effects` record — messages to send,
timers to set, asks to answer — which the backend carries out in its own way
(pykka tells, simulator queues). Keeping this logic here is what makes the
threads runtime and the simulator behave the same, refusals and crashes
included.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from typing import Any

from gliding_actors.clock import Clock
from gliding_actors.errors import ActorCrashed, ActorUnavailable, GlidingError, InvalidInput, show
from gliding_actors.runtime._interface import (
    DEFERRED,
    DRIVER_ONLY,
    IN_DRIVER,
    Behaviour,
    Message,
    ReplyToken,
)

__all__ = ["Cell", "Effects", "check_actor_name", "check_in_process_placement", "describe_exception"]


def check_actor_name(name: object) -> None:
    """Actor names are non-empty strings; a leading '@' is reserved for the runtime."""
    if not isinstance(name, str) or not name or name.startswith("@"):
        raise InvalidInput(f"actor names are non-empty strings not starting with '@': {show(name)}")


def check_in_process_placement(placement: object, backend: str) -> None:
    """A backend whose actors all run in this process honours only None and
    IN_DRIVER / DRIVER_ONLY; a node id is refused rather than silently ignored."""
    if placement is not None and placement not in (IN_DRIVER, DRIVER_ONLY):
        raise InvalidInput(
            f"the {backend} runtime runs every actor in this process; placement {show(placement)} "
            f"(a node) needs runtime='ray' (None, {show(IN_DRIVER)} or {show(DRIVER_ONLY)} are accepted)"
        )


def describe_exception(exc: BaseException) -> str:
    """``"Type: message"``: how a crash cause travels (plain text crosses processes)."""
    return f"{type(exc).__name__}: {exc}"


@dataclasses.dataclass
class Effects:
    """What one handler run asks the backend to do, in order."""

    #: (to, message) in send order
    sends: list[tuple[str, Message]] = dataclasses.field(default_factory=list)
    #: (delay_s, message) to deliver back to this actor
    timers: list[tuple[float, Message]] = dataclasses.field(default_factory=list)
    #: (request_id, ok, value-or-exception)
    replies: list[tuple[int, bool, Any]] = dataclasses.field(default_factory=list)
    #: set when the handler crashed: the supervisor notice to send
    crash: dict[str, Any] | None = None


class _Ctx:
    """The :class:`~gliding_actors.runtime.Context` handed to a behaviour."""

    __slots__ = ("_answered", "_cell", "_current", "_deferred", "_effects", "_sender")

    def __init__(self, cell: Cell) -> None:
        self._cell = cell
        self._sender: str | None = None
        self._current: int | None = None
        self._deferred = False
        self._effects = Effects()
        self._answered: set[int] = set()

    @property
    def name(self) -> str:
        return self._cell.name

    @property
    def sender(self) -> str | None:
        return self._sender

    @property
    def clock(self) -> Clock:
        return self._cell.clock

    def send(self, to: str, message: Message) -> None:
        self._effects.sends.append((to, message))

    def defer_reply(self) -> ReplyToken:
        if self._current is None:
            raise RuntimeError("defer_reply() outside an ask: this message expects no reply")
        self._deferred = True
        return ReplyToken(self._current)

    def resolve(self, token: ReplyToken, value: Any) -> None:
        self._answer(token, True, value)

    def fail(self, token: ReplyToken, error: BaseException) -> None:
        self._answer(token, False, error)

    def _answer(self, token: ReplyToken, ok: bool, value: Any) -> None:
        rid = token.request_id
        if rid in self._answered:
            raise RuntimeError(f"reply token {rid} answered twice")
        self._answered.add(rid)
        if rid == self._current and self._deferred:
            self._deferred = False  # answered within the same handler
            self._current = None
        elif rid not in self._cell.deferred:
            raise RuntimeError(f"reply token {rid} is not pending (answered twice?)")
        self._effects.replies.append((rid, ok, value))

    def schedule(self, delay_s: float, message: Message) -> None:
        if delay_s < 0:
            raise ValueError(f"timer delay must be >= 0, got {delay_s}")
        self._effects.timers.append((float(delay_s), message))


class Cell:
    """Hosts one behaviour and turns each delivery into :class:`Effects`."""

    def __init__(
        self,
        name: str,
        factory: Callable[[], Behaviour],
        clock: Clock,
        *,
        supervisor: str | None,
        restart: bool,
    ) -> None:
        self.name = name
        self.factory = factory
        self.clock = clock
        self.supervisor = supervisor
        self.restart = restart
        self.alive = True
        #: asks this actor deferred and has not answered yet
        self.deferred: set[int] = set()
        self.behaviour: Behaviour = factory()
        self.failures = 0

    def start(self) -> Effects:
        """Run the optional ``on_start(ctx)`` hook (it may send and set timers)."""
        ctx = _Ctx(self)
        hook = getattr(self.behaviour, "on_start", None)
        if hook is not None:
            try:
                hook(ctx)
            except Exception as exc:  # noqa: BLE001 - a failing start is a crash
                return self._crashed(ctx, exc, None)
        return ctx._effects

    def stop(self) -> list[int]:
        """Mark stopped, run ``on_stop()``, return the deferred asks left unanswered."""
        self.alive = False
        hook = getattr(self.behaviour, "on_stop", None)
        if hook is not None:
            with contextlib.suppress(Exception):  # stopping goes on regardless
                hook()
        pending = sorted(self.deferred)
        self.deferred.clear()
        return pending

    def deliver(self, sender: str | None, message: Message, request_id: int | None) -> Effects:
        """Run the handler for one message and collect what it wants done."""
        if not self.alive:
            effects = Effects()
            if request_id is not None:
                effects.replies.append(
                    (request_id, False, ActorUnavailable(f"actor {self.name!r} is not running"))
                )
            return effects
        ctx = _Ctx(self)
        ctx._sender = sender
        ctx._current = request_id
        try:
            result = self.behaviour.receive(message, ctx)
        except GlidingError as exc:
            # A refusal changes nothing: drop what the handler had queued.
            effects = Effects()
            if request_id is not None:
                effects.replies.append((request_id, False, exc))
            return effects
        except Exception as exc:  # noqa: BLE001 - any other exception is a crash
            return self._crashed(ctx, exc, request_id)
        effects = ctx._effects
        for rid, _ok, _value in effects.replies:
            self.deferred.discard(rid)
        if request_id is not None:
            if ctx._deferred:
                if result is not DEFERRED:
                    bug = RuntimeError("receive() called defer_reply() but returned a value")
                    return self._crashed(ctx, bug, request_id)
                self.deferred.add(request_id)
            elif ctx._current is None:
                pass  # deferred and answered within this same handler
            elif result is DEFERRED:
                bug = RuntimeError("receive() returned DEFERRED without calling defer_reply()")
                return self._crashed(ctx, bug, request_id)
            else:
                effects.replies.append((request_id, True, result))
        return effects

    def _crashed(self, ctx: _Ctx, exc: BaseException, request_id: int | None) -> Effects:
        cause = describe_exception(exc)
        self.failures += 1
        effects = Effects()
        doomed = sorted(self.deferred | ({request_id} if request_id is not None else set()))
        self.deferred.clear()
        for rid in doomed:
            effects.replies.append((rid, False, ActorCrashed(self.name, cause)))
        restarted = False
        if self.restart:
            try:
                self.behaviour = self.factory()
                restarted = True
            except Exception:  # noqa: BLE001 - cannot rebuild: stay down
                restarted = False
        if not restarted:
            self.alive = False
        effects.crash = {
            "type": "actor.failed",
            "actor": self.name,
            "error": cause,
            "restarted": restarted,
        }
        if restarted:
            start = self.start()
            effects.sends.extend(start.sends)
            effects.timers.extend(start.timers)
        _ = ctx  # the crashed handler's sends and timers are dropped with ctx
        return effects
