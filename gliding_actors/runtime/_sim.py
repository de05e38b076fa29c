"""The ``sim`` backend: a deterministic simulator of the actor system.

One FIFO queue per (sender, receiver) pair; at each step a seeded RNG — or a
chooser supplied by a test, such as a hypothesis strategy — picks which
non-empty queue delivers its head next. Time is a :class:`VirtualClock` that
moves only when the simulator (or its user) moves it. Every delivery, reply,
dead letter and crash is appended to a log and folded into a SHA-256, so the
same seed gives the same run byte for byte, and two runs can be compared by
one hash. FoundationDB's simulation testing is the model.

Everything runs in the caller's thread. ``Future.get`` on this backend *drives*
the simulation until the answer arrives: it delivers messages and, once the
system is quiescent, moves the clock to the next timer if that lies within the
(virtual) timeout.
"""

from __future__ import annotations

import collections
import hashlib
import heapq
import itertools
import random
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import msgpack

from gliding_actors.clock import VirtualClock
from gliding_actors.errors import ActorUnavailable, InvalidInput, Timeout, show
from gliding_actors.runtime._cell import (
    Cell,
    Effects,
    check_actor_name,
    check_in_process_placement,
    describe_exception,
)
from gliding_actors.runtime._future import BaseFuture, wait_bound
from gliding_actors.runtime._interface import BackendBase, Behaviour, Message

__all__ = ["Channel", "LogEntry", "SimFuture", "Simulator"]

Channel = tuple[str, str]
"""(sender, receiver); outside callers send as ``"@driver"``, timers as ``"@timer"``."""

Chooser = Callable[[Sequence[Channel]], int]
"""Given the non-empty channels (sorted), return the index of the one to deliver."""

DRIVER = "@driver"
TIMER = "@timer"


class LogEntry(NamedTuple):
    """One event of a run. ``kind``: deliver, reply, fail, dead, crash, timer."""

    seq: int
    time: float
    kind: str
    src: str
    dst: str
    message: Any

    def __str__(self) -> str:
        return f"#{self.seq} t={self.time:g} {self.kind} {self.src} -> {self.dst}: {self.message!r}"


class SimFuture(BaseFuture[Any]):
    """A future whose ``get`` runs the simulator until it is answered."""

    def __init__(self, sim: Simulator, description: str = "") -> None:
        super().__init__(description)
        self._sim = sim

    def get(self, timeout: float | None = None) -> Any:
        self._sim.run_until(self.done, timeout=timeout, what=self.description or "an ask")
        return self.result_now()


class _SimRef:
    __slots__ = ("_name", "_sim")

    def __init__(self, sim: Simulator, name: str) -> None:
        self._sim = sim
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def is_alive(self) -> bool:
        cell = self._sim._cells.get(self._name)
        return cell is not None and cell.alive

    def tell(self, message: Message) -> None:
        self._sim._enqueue(DRIVER, self._name, message, None)

    def ask(self, message: Message) -> SimFuture:
        return self._sim._ask(self._name, message)

    def __repr__(self) -> str:
        return f"<ActorRef {self._name!r} sim>"


class Simulator(BackendBase):
    """Deterministic actor runtime (see the module docstring).

    ``keep_log`` keeps every :class:`LogEntry` (the hash is always kept) until
    :meth:`forget_log`, which a long replay calls once it has read them, so
    the log does not grow with the run; ``recent`` sizes the ring of last
    entries used in failure reports.
    """

    kind = "sim"
    _clock: VirtualClock

    def __init__(
        self,
        seed: int = 0,
        *,
        clock: VirtualClock | None = None,
        chooser: Chooser | None = None,
        ask_timeout_s: float = 10.0,
        keep_log: bool = True,
        recent: int = 64,
        max_steps: int = 10_000_000,
    ) -> None:
        self.seed = seed
        self._rng = random.Random(seed)
        self._random = self._rng.random
        self._packer = msgpack.Packer(use_bin_type=True)
        self._chooser = chooser
        self._clock = clock if clock is not None else VirtualClock()
        self._ask_timeout_s = ask_timeout_s
        self._cells: dict[str, Cell] = {}
        self._queues: dict[Channel, collections.deque[tuple[Message, int | None, bytes]]] = {}
        self._ready: list[Channel] = []
        self._ready_at: dict[Channel, int] = {}
        self._futures: dict[int, SimFuture] = {}
        self._open: dict[str, set[int]] = {}
        self._ids = itertools.count(1)
        self._timers: list[tuple[float, int, str, Message]] = []
        self._timer_seq = itertools.count()
        self._seq = 0
        self._hash = hashlib.sha256()
        self._closed = False
        self.keep_log = keep_log
        self.log: list[LogEntry] = []
        self.log_start = 0
        self.recent: collections.deque[LogEntry] = collections.deque(maxlen=recent)
        self.delivered = 0
        self.max_steps = max_steps
        #: channel -> delivery count before which the seeded choice skips it (a slow link)
        self._held: dict[Channel, int] = {}
        self._clock.on_change(lambda _now: self._release_timers())

    # -- interface ---------------------------------------------------------
    @property
    def clock(self) -> VirtualClock:
        return self._clock

    def spawn(
        self,
        name: str,
        factory: Callable[[], Behaviour],
        *,
        supervisor: str | None = None,
        restart: bool = False,
        placement: str | None = None,
    ) -> _SimRef:
        check_actor_name(name)
        check_in_process_placement(placement, "sim")
        if self._closed:
            raise ActorUnavailable("the simulator is shut down")
        existing = self._cells.get(name)
        if existing is not None and existing.alive:
            raise InvalidInput(f"an actor named {show(name)} is already running")
        cell = Cell(name, factory, self._clock, supervisor=supervisor, restart=restart)
        self._cells[name] = cell
        self._open[name] = set()
        self._carry_out(cell, cell.start())
        return _SimRef(self, name)

    def lookup(self, name: str) -> _SimRef:
        cell = self._cells.get(name)
        if cell is None or not cell.alive:
            raise ActorUnavailable(f"no running actor named {name!r}")
        return _SimRef(self, name)

    def stop(self, name: str) -> None:
        cell = self._cells.get(name)
        if cell is None or not cell.alive:
            return
        leftover = cell.stop()
        self._fail_open(name, leftover)

    def shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        for name in sorted(self._cells):
            self.stop(name)

    # -- running -----------------------------------------------------------
    def pending(self) -> int:
        """Messages queued and not yet delivered."""
        return sum(len(q) for q in self._queues.values())

    def channels(self) -> list[Channel]:
        """The non-empty channels, sorted."""
        return sorted(self._ready)

    def is_quiescent(self) -> bool:
        return not self._ready

    def step(self, channel: Channel | None = None) -> bool:
        """Deliver the head of one channel (chosen by the RNG or chooser, or given).

        Returns False when nothing was pending.
        """
        if not self._ready:
            return False
        if channel is None:
            if self._chooser is not None:
                ordered = sorted(self._ready)
                channel = ordered[self._chooser(ordered)]
            else:
                ready = self._ready
                if self._held:
                    ready = self._unheld()
                channel = ready[int(self._random() * len(ready))]
        queue = self._queues[channel]
        message, rid, packed = queue.popleft()
        if not queue:
            self._unready(channel)
        src, dst = channel
        self.delivered += 1
        self._record("deliver", src, dst, message, packed)
        cell = self._cells.get(dst)
        if cell is None:
            if rid is not None:
                self._answer(rid, False, ActorUnavailable(f"no actor named {dst!r}"), dst)
            return True
        self._carry_out(cell, cell.deliver(None if src == DRIVER else src, message, rid))
        return True

    # -- fault injection -------------------------------------------------------
    def inject(self, name: str, message: Message) -> None:
        """Hand ``message`` to actor ``name`` now, ahead of every queued message.

        For fault injection: ``{"t": "crash"}`` crashes a cache or a directory
        at this exact point of a run, with whatever is in flight staying in
        flight (its channels keep their messages for the restarted actor).
        Logged (kind ``inject``) and hashed like a delivery.
        """
        cell = self._cells.get(name)
        if cell is None or not cell.alive:
            raise ActorUnavailable(f"no running actor named {name!r}")
        self._record("inject", DRIVER, name, message)
        self._carry_out(cell, cell.deliver(None, message, None))

    def hold(self, channel: Channel, deliveries: int) -> None:
        """Delay ``channel``: the seeded choice skips it for the next ``deliveries`` deliveries.

        A slow link. FIFO within the channel is kept; when every non-empty
        channel is held, the held ones are chosen from anyway (time passes).
        An explicit ``step(channel)`` or a chooser ignores holds.
        """
        if deliveries < 0:
            raise InvalidInput(f"hold: deliveries must be >= 0, not {deliveries}")
        self._held[channel] = max(self._held.get(channel, 0), self.delivered + deliveries)
        self._record("hold", channel[0], channel[1], deliveries)

    def behaviour(self, name: str) -> Any:
        """The behaviour object actor ``name`` runs now (for test oracles; never for sending)."""
        cell = self._cells.get(name)
        if cell is None:
            raise ActorUnavailable(f"no actor named {name!r}")
        return cell.behaviour

    def _unheld(self) -> list[Channel]:
        now = self.delivered
        for channel in [c for c, until in self._held.items() if until <= now]:
            del self._held[channel]
        free = [c for c in self._ready if c not in self._held]
        return free or self._ready

    @property
    def deterministic(self) -> bool:
        """True: a seed replays the same run."""
        return True

    def known_quiescent(self) -> bool:
        return self.is_quiescent()

    def recent_messages(self) -> tuple[str, ...]:
        return tuple(str(entry) for entry in self.recent)[-16:]

    def message_log(self) -> Simulator:
        """This simulator: it keeps the record itself (``log``, ``log_hash``, ``delivered``)."""
        return self

    def wait_quiescent(self, timeout: float | None = None) -> None:
        """Deliver every message in flight now (virtual time: nothing to wait for)."""
        self.run_until_quiescent()

    def run_until_quiescent(self, max_steps: int | None = None) -> int:
        """Deliver messages until no channel holds one; returns how many were delivered.

        Timers are not fired: the clock does not move. Raises ``Timeout`` after
        ``max_steps`` deliveries (a livelock: actors that keep messaging forever).
        """
        limit = self.max_steps if max_steps is None else max_steps
        steps = 0
        while self._ready:
            if steps >= limit:
                raise Timeout(f"not quiescent after {steps} deliveries (a message loop?)")
            self.step()
            steps += 1
        return steps

    def run_until(self, condition: Callable[[], bool], *, timeout: float | None = None, what: str = "") -> None:
        """Deliver messages (and, when quiescent, fire timers due within ``timeout``
        virtual seconds) until ``condition()`` holds; ``Timeout`` otherwise."""
        limit = self._ask_timeout_s if timeout is None else timeout
        wait_bound(limit)  # InvalidInput for a bad timeout; inf: any timer may fire
        deadline = self._clock.now() + limit
        steps = 0
        while not condition():
            if self._ready:
                if steps >= self.max_steps:
                    raise Timeout(f"{what or 'wait'}: no answer after {steps} deliveries")
                self.step()
                steps += 1
                continue
            if self._timers and self._timers[0][0] <= deadline:
                self._clock.set(max(self._clock.now(), self._timers[0][0]))
                continue
            raise Timeout(
                f"{what or 'wait'}: no answer; the system is quiescent"
                f" and no timer falls due within {limit:g} virtual s"
            )

    # -- log ---------------------------------------------------------------
    def log_hash(self) -> str:
        """SHA-256 (hex) of every logged event so far, in order."""
        return self._hash.copy().hexdigest()

    def forget_log(self, before: int | None = None) -> None:
        """Drop the entries kept before position ``before`` of the whole record (None: all of them);
        ``log_start`` (where ``log[0]`` stands in the record) moves past them. The hash and ``recent``
        are unchanged."""
        end = self.log_start + len(self.log)
        cut = end if before is None else max(self.log_start, min(before, end))
        del self.log[: cut - self.log_start]
        self.log_start = cut

    def _record(self, kind: str, src: str, dst: str, message: Any, packed: bytes | None = None) -> None:
        """Append one event to the log and the hash (``packed``: the message, already packed)."""
        self._seq += 1
        now = self._clock.now()
        if packed is None:
            packed = self._pack(message, f"{kind} {src} -> {dst}")
        self._hash.update(self._packer.pack((self._seq, now, kind, src, dst)))
        self._hash.update(packed)
        entry = LogEntry(self._seq, now, kind, src, dst, message)
        self.recent.append(entry)
        if self.keep_log:
            self.log.append(entry)

    # -- internals ---------------------------------------------------------
    def _ask(self, name: str, message: Message) -> SimFuture:
        rid = next(self._ids)
        future = SimFuture(self, f"ask #{rid} to {name!r}")
        cell = self._cells.get(name)
        if cell is None or not cell.alive:
            future.set_exception(ActorUnavailable(f"no running actor named {name!r}"))
            return future
        self._futures[rid] = future
        self._open[name].add(rid)
        self._enqueue(DRIVER, name, message, rid)
        return future

    def _pack(self, value: Any, what: str) -> bytes:
        try:
            packed: bytes = self._packer.pack(value)
        except (TypeError, ValueError, OverflowError) as exc:
            self._packer.reset()
            raise TypeError(f"{what} carries data msgpack cannot serialise: {exc}") from exc
        return packed

    def _enqueue(self, src: str, dst: str, message: Message, rid: int | None) -> None:
        try:
            packed: bytes = self._packer.pack(message)
        except (TypeError, ValueError, OverflowError) as exc:
            self._packer.reset()
            raise InvalidInput(f"message from {src} to {dst} is not msgpack-serialisable: {exc}") from exc
        channel = (src, dst)
        queue = self._queues.get(channel)
        if queue is None:
            queue = self._queues[channel] = collections.deque()
        if not queue:
            self._ready_at[channel] = len(self._ready)
            self._ready.append(channel)
        queue.append((message, rid, packed))

    def _unready(self, channel: Channel) -> None:
        index = self._ready_at.pop(channel)
        last = self._ready.pop()
        if last != channel:
            self._ready[index] = last
            self._ready_at[last] = index

    def _carry_out(self, cell: Cell, effects: Effects) -> None:
        for rid, ok, value in effects.replies:
            self._answer(rid, ok, value, cell.name)
        for to, message in effects.sends:
            if to in self._cells:
                try:
                    self._enqueue(cell.name, to, message, None)
                except InvalidInput as exc:
                    self._record("crash", cell.name, cell.name, describe_exception(exc))
                    raise
            else:
                self._record("dead", cell.name, to, message)
        for delay, message in effects.timers:
            heapq.heappush(self._timers, (self._clock.now() + delay, next(self._timer_seq), cell.name, message))
        if effects.timers:
            self._release_timers()
        if effects.crash is not None:
            self._record("crash", cell.name, cell.supervisor or "-", effects.crash)
            if cell.supervisor is not None:
                self._enqueue(cell.name, cell.supervisor, effects.crash, None)
            if not cell.alive:
                self._fail_open(cell.name, [])

    def _answer(self, rid: int, ok: bool, value: Any, src: str) -> None:
        future = self._futures.pop(rid, None)
        self._open.get(src, set()).discard(rid)
        if ok:
            self._record("reply", src, DRIVER, [rid, value])
        else:
            self._record("fail", src, DRIVER, [rid, _error_name(value), str(value)])
        if future is None:
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def _fail_open(self, name: str, extra: list[int]) -> None:
        open_ids = self._open.get(name, set()) | set(extra)
        self._open[name] = set()
        for rid in sorted(open_ids):
            if rid in self._futures:
                self._answer(rid, False, ActorUnavailable(f"actor {name!r} stopped before answering"), name)

    def _release_timers(self) -> None:
        now = self._clock.now()
        while self._timers and self._timers[0][0] <= now:
            _when, _seq, target, message = heapq.heappop(self._timers)
            self._record("timer", TIMER, target, message)
            if target in self._cells and self._cells[target].alive:
                self._enqueue(TIMER, target, message, None)


def _error_name(error: Any) -> str:
    return type(error).__name__ if isinstance(error, BaseException) else str(error)

