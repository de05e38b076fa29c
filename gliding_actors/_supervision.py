"""Supervision: every actor a :class:`~gliding_actors.MemorySystem` spawns has one supervisor.

Lives beside ``system.py`` and ``bus.py``, not in ``runtime/``: the runtime
carries out the failure table (``runtime/_cell.py``: a crash fails the asker
and every deferred reply with ``ActorCrashed``, rebuilds the behaviour from its
factory, and sends the supervisor a notice), and stays ignorant of buses and
configuration. *Policy* — who supervises, how often an actor may restart, what
the team is told — is the system's, so it is written here once.

The model is Erlang/OTP's ``one_for_one`` supervisor with a restart intensity
(Akka's ``maxNrOfRetries`` / ``withinTimeRange``), adapted to this runtime:

* **Restarts happen where the crash is, at once.** The cell rebuilds the
  behaviour in the same step that crashed (its mailbox is kept, so requests
  queued behind the crash are served by the new behaviour rather than lost).
  The supervisor's decision therefore cannot wait for a message: it is made by
  :meth:`Supervision.supervise`'s factory wrapper, which the cell calls to
  rebuild. More than ``runtime.max_restarts`` crashes within
  ``runtime.restart_window_s`` seconds of the injected clock and the wrapper
  refuses to build (:class:`RestartLimitReached`): the cell stays down, its
  queued and deferred asks fail with ``ActorUnavailable``, ``lookup`` raises
  it at once, and the actor stays stopped for the life of the memory — a
  crash loop is turned into a fast, typed refusal instead of a spinning actor.
* **The supervisor actor** (``supervisor``) receives every crash notice
  (``{"type": "actor.failed", ...}``), keeps the record (:meth:`Supervision.summary`,
  also ``MemorySystem.supervision()``) and publishes ``actor.crashed`` on the
  bus (a system notification, not kept: ``{"actor", "error", "restarted",
  "crashes", "restarts"}``). It supervises itself: its own notice reaches its
  restarted self; its record lives in :class:`Supervision`, outside it.
* **Fault injection** for any supervised actor: ``{"t": "supervision.crash"}``
  sent from outside the actor system raises
  :class:`~gliding_actors.runtime.InjectedCrash` inside the actor
  (the asker gets ``ActorCrashed``); with ``"on": "next"`` it arms the actor
  instead, and the *next* message it handles crashes before the behaviour sees
  it — a request in flight when the actor dies. ``{"t": "supervision.ping"}``
  answers ``{"actor", "notes"}`` once the actor serves, ``notes`` being what
  its behaviour checked or repaired when it was rebuilt (``recovery_notes``).
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

from gliding_actors.bus import ACTOR_CRASHED, BUS_ACTOR
from gliding_actors.clock import Clock
from gliding_actors.errors import InvalidInput, show
from gliding_actors.runtime import Behaviour, Context, InjectedCrash

__all__ = [
    "CRASH_TOPIC",
    "SUPERVISOR_ACTOR",
    "ActorRecord",
    "RemoteSupervised",
    "RestartLimitReached",
    "Supervision",
    "SupervisorActor",
]

SUPERVISOR_ACTOR = "supervisor"
"""The registered name of the supervisor actor in a :class:`~gliding_actors.MemorySystem`."""

#: The bus topic of crash events (a system notification: pushed and mailed, never kept).
CRASH_TOPIC = ACTOR_CRASHED

_CRASH = "supervision.crash"
_PING = "supervision.ping"


class RestartLimitReached(RuntimeError):
    """Raised by a supervised factory that may not rebuild: the actor stays stopped.

    Not a ``GlidingError``: it never reaches a caller (the cell catches it and
    leaves the actor down; callers see ``ActorUnavailable``).
    """


@dataclasses.dataclass
class ActorRecord:
    """What the supervisor knows about one actor."""

    name: str
    #: crash notices received
    crashes: int = 0
    #: times the behaviour was rebuilt after a crash
    restarts: int = 0
    #: ``"Type: message"`` of the latest crash
    last_error: str | None = None
    #: injected-clock time of the latest crash the restart gate saw
    last_crash_at: float | None = None
    #: True once the restart intensity was exceeded (for good)
    stopped: bool = False
    #: crash times inside the current window (the restart intensity's memory)
    recent: collections.deque[float] = dataclasses.field(default_factory=collections.deque)
    #: gated in another process (:class:`RemoteSupervised`): restarts and the stop
    #: are learnt from the crash notices, not from this process's gate
    remote: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "crashes": self.crashes,
            "restarts": self.restarts,
            "last_error": self.last_error,
            "last_crash_at": self.last_crash_at,
            "status": "stopped" if self.stopped else "running",
        }


class Supervision:
    """The supervisor's record and restart policy, shared by its actor and the factories.

    Thread-safe: a factory wrapper runs on the crashed actor's thread, the
    supervisor actor on its own, readers anywhere.
    """

    def __init__(self, clock: Clock, *, max_restarts: int, window_s: float) -> None:
        if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < 0:
            raise InvalidInput(f"max_restarts is an integer >= 0, not {show(max_restarts)}")
        if isinstance(window_s, bool) or not isinstance(window_s, (int, float)) or not window_s > 0:
            raise InvalidInput(f"window_s is a number > 0, not {show(window_s)}")
        self._clock = clock
        self.max_restarts = max_restarts
        self.window_s = float(window_s)
        self._lock = threading.Lock()
        self._records: dict[str, ActorRecord] = {}

    def supervise(self, name: str, factory: Callable[[], Behaviour]) -> Callable[[], Behaviour]:
        """Wrap ``factory``: every build hosts the behaviour in a :class:`_Supervised`
        shell; every build after the first is a restart, allowed by the intensity gate."""
        with self._lock:
            self._records.setdefault(name, ActorRecord(name))
        built = 0

        def build() -> Behaviour:
            nonlocal built
            if built:
                self._admit_restart(name)
            behaviour = _Supervised(name, factory())
            built += 1
            return behaviour

        return build

    def _admit_restart(self, name: str) -> None:
        now = self._clock.now()
        with self._lock:
            record = self._records[name]
            record.last_crash_at = now
            recent = record.recent
            recent.append(now)
            while recent and recent[0] <= now - self.window_s:
                recent.popleft()
            if record.stopped or len(recent) > self.max_restarts:
                record.stopped = True
                raise RestartLimitReached(
                    f"{name}: {len(recent)} crashes within {self.window_s:g} s "
                    f"(at most {self.max_restarts} restarts allowed): stopped"
                )
            record.restarts += 1

    def supervise_remote(self, name: str, factory: Callable[[], Behaviour]) -> RemoteSupervised:
        """Like :meth:`supervise` for an actor built in another process: the
        returned wrapper is picklable (if ``factory`` is) and gates its restarts
        there, with this policy and that process's clock; this record learns of
        each restart, and of the stop, from the crash notices."""
        with self._lock:
            self._records.setdefault(name, ActorRecord(name, remote=True)).remote = True
        return RemoteSupervised(name, factory, self.max_restarts, self.window_s)

    def noted(self, notice: dict[str, Any]) -> dict[str, Any] | None:
        """Record one crash notice; returns the ``actor.crashed`` event to publish."""
        name = notice.get("actor")
        if not isinstance(name, str):
            return None
        with self._lock:
            record = self._records.setdefault(name, ActorRecord(name))
            record.crashes += 1
            record.last_error = str(notice.get("error"))
            if record.remote:
                record.last_crash_at = self._clock.now()
                if notice.get("restarted"):
                    record.restarts += 1
                else:
                    record.stopped = True
            return {
                "actor": name,
                "error": record.last_error,
                "restarted": bool(notice.get("restarted")),
                "crashes": record.crashes,
                "restarts": record.restarts,
            }

    def records(self) -> dict[str, dict[str, Any]]:
        """Every supervised actor's record, by name (sorted)."""
        with self._lock:
            return {name: self._records[name].to_dict() for name in sorted(self._records)}

    def summary(self) -> dict[str, Any]:
        """Totals and the per-actor record: what ``bench reliability`` prints."""
        actors = self.records()
        return {
            "supervised": len(actors),
            "crashes": sum(r["crashes"] for r in actors.values()),
            "restarts": sum(r["restarts"] for r in actors.values()),
            "stopped": sorted(name for name, r in actors.items() if r["status"] == "stopped"),
            "max_restarts": self.max_restarts,
            "restart_window_s": self.window_s,
            "actors": actors,
        }


@dataclasses.dataclass
class RemoteSupervised:
    """The factory of a supervised actor built in another process (a Ray node).

    The restart decision cannot wait for a message (see the module docstring),
    and the :class:`Supervision` record lives in the process that opened the
    memory, so this wrapper carries the policy with it and keeps the window
    of recent crashes where the actor runs, on that process's monotonic clock
    (a clock cannot be shared between processes). The record is kept from the
    ``actor.failed`` notices the runtime sends the supervisor.
    """

    name: str
    factory: Callable[[], Behaviour]
    max_restarts: int
    window_s: float
    _built: int = dataclasses.field(default=0, init=False, repr=False)
    _recent: collections.deque[float] = dataclasses.field(default_factory=collections.deque, init=False, repr=False)

    def __call__(self) -> Behaviour:
        if self._built:
            now = time.monotonic()
            self._recent.append(now)
            while self._recent and self._recent[0] <= now - self.window_s:
                self._recent.popleft()
            if len(self._recent) > self.max_restarts:
                raise RestartLimitReached(
                    f"{self.name}: {len(self._recent)} crashes within {self.window_s:g} s "
                    f"(at most {self.max_restarts} restarts allowed): stopped"
                )
        behaviour = _Supervised(self.name, self.factory())
        self._built += 1
        return behaviour


class _Supervised:
    """The shell a supervised behaviour runs in: fault injection and the readiness ping.

    Everything else goes straight to the behaviour, hooks included.
    """

    def __init__(self, name: str, inner: Behaviour) -> None:
        self._name = name
        self.inner = inner
        self._armed = False

    @property
    def receives_peer_lost(self) -> bool:
        """The runtime's ``peer.lost`` notices go to a behaviour that asks for them."""
        return bool(getattr(self.inner, "receives_peer_lost", False))

    @property
    def may_run_inline(self) -> Callable[[Any], bool] | None:
        """The behaviour's own consent to run in a sender's thread (threads runtime), if it gives one."""
        hook: Callable[[Any], bool] | None = getattr(self.inner, "may_run_inline", None)
        return hook

    def on_start(self, ctx: Context) -> None:
        hook = getattr(self.inner, "on_start", None)
        if hook is not None:
            hook(ctx)

    def on_stop(self) -> None:
        hook = getattr(self.inner, "on_stop", None)
        if hook is not None:
            hook()

    def receive(self, message: Any, ctx: Context) -> Any:
        if self._armed:
            self._armed = False
            raise InjectedCrash(
                f"{self._name} crashed on purpose while handling {_describe(message)}"
            )
        if isinstance(message, dict) and ctx.sender is None:
            kind = message.get("t")
            if kind == _CRASH:
                if message.get("on") == "next":
                    self._armed = True
                    return {"armed": True}
                raise InjectedCrash(f"{self._name} crashed on purpose")
            if kind == _PING:
                notes = getattr(self.inner, "recovery_notes", None)
                return {"actor": self._name, "notes": [str(n) for n in notes] if notes else []}
        return self.inner.receive(message, ctx)


def _describe(message: Any) -> str:
    if isinstance(message, dict):
        kind = message.get("t", message.get("type"))
        return f"a {kind!r} message" if kind is not None else "a message"
    return "a message"


class SupervisorActor:
    """Behaviour of ``supervisor``: records crash notices, publishes ``actor.crashed``.

    Requests from outside: ``{"t": "records"}`` → :meth:`Supervision.summary`.
    """

    def __init__(self, supervision: Supervision) -> None:
        self._supervision = supervision

    def receive(self, message: Any, ctx: Context) -> Any:
        if not isinstance(message, dict):
            raise InvalidInput(f"the supervisor takes objects, not {type(message).__name__}")
        if message.get("type") == "actor.failed":
            event = self._supervision.noted(message)
            if event is not None:
                ctx.send(
                    BUS_ACTOR,
                    {"type": "publish", "topic": CRASH_TOPIC, "message": event, "publisher": None},
                )
            return None
        if message.get("t") == "records":
            return self._supervision.summary()
        raise InvalidInput(f"unknown supervisor request {show(message)}")

