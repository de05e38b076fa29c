"""The actor runtime: one interface, several backends.

``threads`` (Pykka threads in this process) is the default; ``sim`` is the
deterministic simulator used by tests and scenario replay; ``ray`` runs the
same actors on a Ray cluster (the ``ray`` extra). Backends are loaded
by name through :func:`create_runtime`; code above this package never imports
pykka (or ray).
"""

from __future__ import annotations

from gliding_actors.clock import Clock, VirtualClock
from gliding_actors.errors import InvalidInput, show
from gliding_actors.runtime._future import (
    BaseFuture,
    ChainedFuture,
    CompletedFuture,
    GatheredFuture,
    MappedFuture,
)
from gliding_actors.runtime._interface import (
    DEFERRED,
    DRIVER_ONLY,
    IN_DRIVER,
    RUNTIME_SENDER,
    ActorRef,
    Behaviour,
    Context,
    Future,
    InjectedCrash,
    Message,
    MessageLog,
    ReplyToken,
    Runtime,
)
from gliding_actors.runtime._sim import Channel, LogEntry, SimFuture, Simulator
from gliding_actors.runtime._threads import ThreadsRuntime

__all__ = [
    "BACKENDS",
    "DEFERRED",
    "DRIVER_ONLY",
    "IN_DRIVER",
    "RUNTIME_SENDER",
    "ActorRef",
    "BaseFuture",
    "Behaviour",
    "ChainedFuture",
    "Channel",
    "CompletedFuture",
    "Context",
    "Future",
    "GatheredFuture",
    "InjectedCrash",
    "LogEntry",
    "MappedFuture",
    "Message",
    "MessageLog",
    "ReplyToken",
    "Runtime",
    "SimFuture",
    "Simulator",
    "ThreadsRuntime",
    "create_runtime",
]

BACKENDS = ("threads", "sim")


def create_runtime(
    kind: str,
    *,
    clock: Clock | None = None,
    seed: int = 0,
    ask_timeout_s: float = 10.0,
    trace: int = 0,
    address: str | None = None,
) -> Runtime:
    """Start a runtime of the named backend.

    ``seed`` drives the simulator's scheduling; ``clock`` defaults to the system
    clock on ``threads`` and a fresh :class:`VirtualClock` on ``sim`` (which
    only accepts a virtual clock). ``address`` is the Ray cluster to join on
    ``ray`` (default: start a local one); Ray is imported only then.
    """
    if kind == "threads":
        return ThreadsRuntime(clock, ask_timeout_s=ask_timeout_s, trace=trace)
    if kind == "sim":
        if clock is not None and not isinstance(clock, VirtualClock):
            raise InvalidInput("the sim runtime runs on a VirtualClock only")
        return Simulator(seed, clock=clock, ask_timeout_s=ask_timeout_s)
    if kind == "ray":
        from gliding_actors.runtime._ray import RayRuntime

        return RayRuntime(address, clock=clock, ask_timeout_s=ask_timeout_s)
    raise InvalidInput(f"unknown runtime {show(kind)}; choose one of: {', '.join((*BACKENDS, 'ray'))}")
