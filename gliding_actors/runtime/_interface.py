"""The runtime interface every backend implements.

An *actor* here is a plain object (a :class:`Behaviour`) hosted by a runtime.
It receives one message at a time through ``receive(message, ctx)`` and acts
only through its :class:`Context`: it sends messages (buffered and dispatched
after the handler returns), replies to asks now or later, and schedules timer
messages to itself on the runtime's clock. It never blocks, never sleeps,
never reads the wall clock and never asks another actor and waits: that is how
actor systems deadlock.

Messages are plain data that msgpack can serialise (dicts, lists, strings,
numbers, booleans, None, bytes). Actors are addressed by name, so a message can
name its reply-to actor and cross a process boundary (the Ray backend).

Failure semantics, the same on every backend:

* A :class:`~gliding_actors.errors.GlidingError` raised by ``receive`` is a
  refusal: the asker gets that error, the actor keeps running. The handler must
  have changed nothing before raising.
* Any other exception is a crash: the handler's buffered sends are dropped,
  the asker and every reply the actor had deferred fail with
  :class:`~gliding_actors.errors.ActorCrashed`, the actor stops (or is rebuilt
  from its factory when spawned with ``restart=True``), and its supervisor
  receives ``{"type": "actor.failed", "actor": NAME, "error": "...",
  "restarted": bool}``.
* Asking a stopped or unknown actor fails at once with
  :class:`~gliding_actors.errors.ActorUnavailable`; every wait has a timeout.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar

from gliding_actors.clock import Clock

__all__ = [
    "DEFERRED",
    "DRIVER_ONLY",
    "IN_DRIVER",
    "RUNTIME_SENDER",
    "ActorRef",
    "Behaviour",
    "Context",
    "Future",
    "InjectedCrash",
    "MessageLog",
    "ReplyToken",
    "Runtime",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

Message = Any
"""A msgpack-serialisable value."""


RUNTIME_SENDER = "@runtime"
"""The sender of the runtime's own notices to a behaviour (``peer.lost`` on Ray)."""

IN_DRIVER = "driver"
"""``spawn(..., placement=IN_DRIVER)`` on Ray: host the actor in the process that
opened the runtime (the agents' own), reachable from the cluster all the same."""

DRIVER_ONLY = "driver-only"
"""``spawn(..., placement=DRIVER_ONLY)`` on Ray: host the actor in the driver, as
:data:`IN_DRIVER`, but reachable only from the driver and its hosted actors (a
send from the cluster is a dead letter). It saves the relay, a Ray worker
process, for a service nothing on the cluster talks to."""


class InjectedCrash(RuntimeError):
    """Raised inside an actor on purpose: fault injection (a cache's or a
    directory's ``{"t": "crash"}``, any supervised actor's ``supervision.crash``).

    Not a :class:`~gliding_actors.errors.GlidingError`, so the runtime treats
    it as the real crash it simulates: deferred replies fail with
    ``ActorCrashed``, the supervisor is told, and the actor is rebuilt.
    """


class _Deferred:
    """Sentinel type of :data:`DEFERRED`."""

    _instance: _Deferred | None = None

    def __new__(cls) -> _Deferred:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "DEFERRED"


DEFERRED: Any = _Deferred()
"""Return this from ``receive`` after :meth:`Context.defer_reply` to answer later."""


@dataclasses.dataclass(frozen=True)
class ReplyToken:
    """Names one pending ask so the actor can answer it from a later message.

    Plain data (a request id), so it can be stored in protocol state and
    carried inside messages.
    """

    request_id: int


class Context(Protocol):
    """What a behaviour may do while handling one message."""

    @property
    def name(self) -> str:
        """This actor's registered name."""
        ...

    @property
    def sender(self) -> str | None:
        """Name of the actor that sent the current message (None from outside)."""
        ...

    @property
    def clock(self) -> Clock:
        """The runtime's clock; the only source of time an actor may read."""
        ...

    def send(self, to: str, message: Message) -> None:
        """Send ``message`` to actor ``to`` once this handler returns (FIFO per pair)."""
        ...

    def defer_reply(self) -> ReplyToken:
        """Keep the current ask open; answer it later with :meth:`resolve`.

        The handler must then return :data:`DEFERRED`.
        """
        ...

    def resolve(self, token: ReplyToken, value: Any) -> None:
        """Answer a deferred ask with ``value``."""
        ...

    def fail(self, token: ReplyToken, error: BaseException) -> None:
        """Answer a deferred ask with an error (re-raised in the asker)."""
        ...

    def schedule(self, delay_s: float, message: Message) -> None:
        """Deliver ``message`` to this actor once the clock has moved ``delay_s``."""
        ...


class Behaviour(Protocol):
    """A plain object an actor hosts. Optional hooks: ``on_start(ctx)``, ``on_stop()``."""

    def receive(self, message: Message, ctx: Context) -> Any:
        """Handle one message; the return value answers an ask (unless DEFERRED)."""
        ...


class Future(Protocol[T_co]):
    """The answer to an ask. Waiting always has a timeout."""

    def get(self, timeout: float | None = None) -> T_co:
        """Wait (at most ``timeout`` s, else the runtime default) and return or raise."""
        ...

    def done(self) -> bool:
        """True once answered (with a value or an error)."""
        ...

    def add_done_callback(self, callback: Callable[[Future[T_co]], None]) -> None:
        """Call ``callback(self)`` once answered (at once if already answered).

        The callback runs in whichever thread answers the future and must not
        block; it is the hook for bridging to asyncio.
        """
        ...


class ActorRef(Protocol, Generic[T_co]):
    """A handle on a running actor, usable from outside the actor system."""

    @property
    def name(self) -> str: ...

    def tell(self, message: Message) -> None:
        """Send ``message`` without waiting; the sender is ``None`` (outside)."""
        ...

    def ask(self, message: Message) -> Future[Any]:
        """Send ``message`` and return a future of the reply."""
        ...

    def is_alive(self) -> bool: ...


class MessageLog(Protocol):
    """A complete, ordered record of every delivery, as the simulator keeps it.

    What makes two replays comparable: the same seed gives the same log and
    the same :meth:`log_hash`.
    """

    #: False when only the recent deliveries are kept (``log`` stays empty)
    keep_log: bool
    #: deliveries made so far
    delivered: int
    #: where ``log[0]`` stands in the whole record (entries before it were forgotten)
    log_start: int

    @property
    def log(self) -> Sequence[Any]: ...

    def log_hash(self) -> str: ...

    def forget_log(self, before: int | None = None) -> None:
        """Drop the entries kept before position ``before`` (None: all; the hash still covers them);
        ``log_start`` moves past them."""
        ...


class BackendBase:
    """What the backends answer alike: their clock and default ask timeout (each ``__init__`` sets
    them), and no nodes to place actors on (Ray overrides :meth:`node_ids` with its cluster's)."""

    _clock: Clock
    _ask_timeout_s: float

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def ask_timeout_s(self) -> float:
        return self._ask_timeout_s

    def node_ids(self) -> list[str]:
        """None: every actor lives in this process."""
        return []


class Runtime(Protocol):
    """Spawns, addresses and stops actors; one implementation per backend."""

    @property
    def kind(self) -> str:
        """``"threads"``, ``"sim"`` or ``"ray"``."""
        ...

    @property
    def clock(self) -> Clock: ...

    @property
    def ask_timeout_s(self) -> float:
        """Default timeout of :meth:`Future.get`."""
        ...

    def spawn(
        self,
        name: str,
        factory: Callable[[], Behaviour],
        *,
        supervisor: str | None = None,
        restart: bool = False,
        placement: str | None = None,
    ) -> ActorRef[Any]:
        """Start an actor hosting ``factory()`` under a unique ``name``.

        ``placement`` says where it runs: None (the backend's choice),
        :data:`IN_DRIVER` (in the process that opened the runtime: every
        actor of ``threads`` and ``sim`` already is), :data:`DRIVER_ONLY` (there
        too, not reachable from a Ray cluster), or on ``ray`` a node id.
        A placement the backend cannot honour is refused with InvalidInput
        and nothing is started.
        """
        ...

    def lookup(self, name: str) -> ActorRef[Any]:
        """The running actor called ``name``; ActorUnavailable if there is none."""
        ...

    def stop(self, name: str) -> None:
        """Stop one actor; its pending asks fail with ActorUnavailable."""
        ...

    def node_ids(self) -> list[str]:
        """The nodes ``spawn(..., placement=...)`` may name; empty on a one-process backend."""
        ...

    @property
    def deterministic(self) -> bool:
        """True when a seed replays the same run (the simulator): no work may happen on a thread of its own."""
        ...

    def known_quiescent(self) -> bool:
        """True when the backend knows at once, asking no actor, that no message is in flight.

        False when one is, or when the backend cannot tell without asking its
        actors (Ray: use :meth:`wait_quiescent`).
        """
        ...

    def recent_messages(self) -> tuple[str, ...]:
        """The last deliveries kept for failure reports, oldest first (empty when none are kept)."""
        ...

    def message_log(self) -> MessageLog | None:
        """The complete record of deliveries when the backend keeps one (the simulator), else None."""
        ...

    def wait_quiescent(self, timeout: float | None = None) -> None:
        """Return once no message is in flight (``sim``: deliver them all now); Timeout after ``timeout``."""
        ...

    def shutdown(self) -> None:
        """Stop every actor and timer; idempotent."""
        ...
