"""Injected clocks.

Nothing in gliding_actors reads the wall clock directly: leases, heartbeat
timeouts, safe windows and timers all ask a :class:`Clock`. Production uses
:class:`SystemClock`; tests and scenario replay use :class:`VirtualClock`, which
moves only when told to, so a replay is the same run every time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "SystemClock", "VirtualClock"]


@runtime_checkable
class Clock(Protocol):
    """A source of time in seconds."""

    def now(self) -> float:
        """Seconds since the Unix epoch (virtual clocks start wherever they are told)."""
        ...


class SystemClock:
    """Real time: ``time.time()``."""

    def now(self) -> float:
        return time.time()

    def __repr__(self) -> str:
        return "SystemClock()"


class VirtualClock:
    """Time that moves only when :meth:`advance` or :meth:`set` is called.

    Listeners registered with :meth:`on_change` are called after every move, so
    a runtime can fire the timers that fell due; they run in the caller's
    thread and must not block.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)
        self._lock = threading.Lock()
        self._listeners: list[Callable[[float], None]] = []

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        """Move forward by ``seconds`` (≥ 0) and return the new time."""
        if seconds < 0:
            raise ValueError(f"a clock cannot go backwards (advance by {seconds})")
        return self.set(self._now + seconds)

    def set(self, when: float) -> float:
        """Move to ``when``, which must not be earlier than now."""
        with self._lock:
            if when < self._now:
                raise ValueError(f"a clock cannot go backwards ({when} < {self._now})")
            self._now = float(when)
            listeners = list(self._listeners)
        for listener in listeners:
            listener(self._now)
        return self._now

    def on_change(self, listener: Callable[[float], None]) -> None:
        """Call ``listener(now)`` after every move."""
        with self._lock:
            self._listeners.append(listener)

    def __repr__(self) -> str:
        return f"VirtualClock(now={self._now})"
