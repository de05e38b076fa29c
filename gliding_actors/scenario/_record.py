"""Recording what a live team did, one JSON line per operation (docs/RECORDING.md).

``MemorySystem.open(..., record="trace.jsonl")`` attaches a :class:`Recorder`.
It hooks in one place per handle: every operation of an agent handle (one
definition, three faces: :mod:`gliding_actors._operation`) passes the
handle's trace point, which the recorder sets when the handle is made; the
few plain ``submit_*`` methods, ``reload``, and the system's
``submit_inspect``, ``submit_flush`` and ``submit_team`` are wrapped by name.
So an operation added to :class:`~gliding_actors.agent.Agent` later is
recorded without anyone remembering to, under its ``submit_*`` name whether
it was called blocking, as a future or awaited, and exactly once: only the
outermost recorded call in a thread is recorded (``submit_task`` handing a
``task.complete`` to ``submit_complete_task`` is one op).

Each op line carries the scenario op it corresponds to (``op``, or null when
the format has none) and its arguments in scenario terms, two global sequence
numbers — ``issued`` (taken when the call was made) and ``completed`` (taken
the first time the outcome was seen: the runtime future's done callback, which
runs in the thread that answered it before that thread handles anything else,
or the caller's ``get`` if that came first) — the clock readings, and the
result or the error. Lines are written when an op completes, so a file lists
ops in completion order; ``gliding-actors convert`` (:mod:`._convert`) turns
it into a format-v1 scenario.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import json
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from gliding_actors._operation import Call, Tracer, forget_faces
from gliding_actors._version import __version__
from gliding_actors.clock import VirtualClock
from gliding_actors.errors import InvalidInput, Timeout

if TYPE_CHECKING:
    from gliding_actors.clock import Clock
    from gliding_actors.config import Config
    from gliding_actors.runtime import Runtime


class RecordedMemory(Protocol):
    """What a recording reads of the memory (its ``submit_inspect``, ``submit_flush`` and
    ``submit_team`` are wrapped by name)."""

    @property
    def clock(self) -> Clock: ...
    @property
    def runtime(self) -> Runtime: ...
    @property
    def config(self) -> Config: ...


class RecordedAgent(Protocol):
    """What a recording reads of an agent handle (it sets ``_trace``; plain ``submit_*`` methods are wrapped by name)."""

    @property
    def id(self) -> str: ...
    @property
    def role(self) -> str: ...

    #: the handle's one trace point: every operation goes through it when set
    _trace: Tracer | None

__all__ = ["TRACE_FORMAT", "Recorder", "TracedFuture", "scenario_call"]

#: the first line of every trace file names this format (bumped on a breaking change)
TRACE_FORMAT = "gliding-actors/trace@1"

#: system-level calls recorded, and the scenario op each is
_SYSTEM_CALLS = {"submit_inspect": "inspect", "submit_flush": "flush", "submit_team": "agents"}

_UNSET: Any = object()


def _plain(value: Any) -> Any:
    """JSON data: tuples and sets become lists, anything else unknown its repr."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(_plain(v) for v in value)
    return repr(value)


def scenario_call(call: str, args: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """The scenario op (or None) and its args for a recorded handle call.

    ``args`` are the call's bound arguments, defaults applied. Arguments left
    at None are dropped (the format's optional args are absent, not null).
    """
    present = {k: v for k, v in args.items() if v is not None}
    if call == "submit_task":
        request = dict(present.get("request") or {})
        kind = request.pop("t", None)
        if kind == "task.create":
            out = {"task": request.get("task")}
            if request.get("parent") is not None:
                out["parent"] = request["parent"]
            if request.get("depends_on"):
                out["depends_on"] = list(request["depends_on"])
            return "task.create", out
        if kind == "task.depend":
            return "task.depend", {"task": request.get("task"), "on": request.get("on")}
        if kind == "task.layers" and request.get("task") is not None:
            return "task.layers", {"task": request["task"]}
        if kind == "task.complete":
            return "task.complete", {"task": request.get("task"), "status": request.get("status", "completed")}
        if kind == "task.release":
            return "task.release", {"task": request.get("task")}
        return None, {"request": _plain(args.get("request"))}
    if call == "submit_complete_task":
        return "task.complete", {"task": present.get("task"), "status": present.get("status", "completed")}
    if call == "submit_query":
        if present.get("bindings"):
            return None, dict(present)
        return "query", {"sparql": present.get("sparql")}
    if call == "submit_turn":
        if present.get("embedding") is not None:
            return None, dict(present)
        keys = ("role", "summary", "thought", "content", "supplement", "relevance", "tokens")
        return "turn", {k: present[k] for k in (*keys, "cites") if k in present}
    if call == "submit_lock":
        return "lock", {k: present[k] for k in ("resource", "mode", "timeout_s") if k in present}
    if call in _SYSTEM_CALLS:
        if call == "submit_flush" and present.get("iris") is not None:
            return None, dict(present)
        return _SYSTEM_CALLS[call], dict(present)
    name = call.removeprefix("submit_")
    if name in {
        "read", "write", "cas", "delete", "evict", "subscribe", "unsubscribe", "publish",
        "inbox", "heartbeat", "unlock", "session", "project", "search", "intent", "context", "update", "fold",
    }:
        return name, dict(present)
    return None, dict(present)


class TracedFuture:
    """A runtime future whose outcome is recorded once, the first time it is seen.

    The outcome is memoised, so the caller, the async bridge and the trace all
    see the very same value (a mapped step — e.g. a query's SPARQL after its
    recall — runs once, not once per reader).
    """

    def __init__(
        self, inner: Any, stamp: Callable[[], int], settled: Callable[[int, Any, BaseException | None], None]
    ) -> None:
        self._inner = inner
        self._stamp = stamp
        self._settled = settled
        self._lock = threading.Lock()
        self._value: Any = _UNSET
        self._error: BaseException | None = None
        self._has = False
        inner.add_done_callback(self._on_done)

    def _settle(self, value: Any, error: BaseException | None) -> None:
        with self._lock:
            if self._has:
                return
            # numbered before anyone can see the outcome: a caller that gets it
            # and issues its next op finds this op already ordered before it
            completed = self._stamp()
            self._value, self._error, self._has = value, error, True
        self._settled(completed, value, error)

    def _evaluate(self, timeout: float | None) -> None:
        try:
            value = self._inner.get(timeout)
        except Timeout as exc:
            if not self._inner.done():
                raise  # a wait that ran out, not the op's outcome
            self._settle(None, exc)
        except BaseException as exc:  # noqa: BLE001 - the op's error, kept and re-raised
            self._settle(None, exc)
        else:
            self._settle(value, None)

    def _on_done(self, _inner: Any) -> None:
        if not self._has:
            self._evaluate(0)

    def get(self, timeout: float | None = None) -> Any:
        if not self._has:
            self._evaluate(timeout)
        if self._error is not None:
            raise self._error
        return self._value

    def done(self) -> bool:
        return bool(self._inner.done())

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        self._inner.add_done_callback(lambda _inner: callback(self))


class Recorder:
    """Writes one JSON line per recorded op to a trace file (see the module docstring)."""

    def __init__(self, handle: IO[str], system: RecordedMemory) -> None:
        self._out = handle
        self._system = system
        self._clock = system.clock
        self._lock = threading.Lock()
        self._order = itertools.count(1)
        self._local = threading.local()
        self._closed = False
        self._pending: dict[int, dict[str, Any]] = {}
        self._signatures: dict[str, inspect.Signature] = {}
        self._t0 = self._clock.now()
        self._write(
            {
                "format": TRACE_FORMAT,
                "library": __version__,
                "runtime": system.runtime.kind,
                "seed": getattr(system.runtime, "seed", 0),
                "clock": "virtual" if isinstance(self._clock, VirtualClock) else "system",
                "t0": self._t0,
                "config": _plain(system.config.to_dict()),
            }
        )

    @classmethod
    def attach(cls, system: RecordedMemory, path: str | Path) -> Recorder:
        """Open ``path`` (truncated) and record ``system`` from now on."""
        try:
            handle = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed by close()
        except OSError as exc:
            raise InvalidInput(f"cannot record to {path}: {exc}") from exc
        recorder = cls(handle, system)
        for name in _SYSTEM_CALLS:
            recorder._wrap(system, name, None)
        return recorder

    # -- hooking -------------------------------------------------------------
    def agent_added(self, agent: RecordedAgent) -> None:
        """Record a new handle and observe its operations (called by ``MemorySystem.agent``).

        Operations (reads, writes, ...) are seen through the handle's one
        trace point; the few plain ``submit_*`` methods (and ``reload``) are
        wrapped by name.
        """
        self._write({"kind": "agent", "id": agent.id, "role": agent.role, "t": self._clock.now()})
        kind = type(agent)
        for name in dir(kind):
            if (name.startswith("submit_") or name == "reload") and inspect.isfunction(getattr(kind, name, None)):
                self._wrap(agent, name, agent.id)
        agent._trace = functools.partial(self._trace_operation, agent.id)
        forget_faces(agent)  # a face bound before now would skip the trace point on a hit

    def _trace_operation(
        self,
        agent_id: str,
        name: str,
        send: Callable[..., Call[Any, Any]],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Call[Any, Any]:
        """One operation of a handle, recorded under its ``submit_*`` name."""
        call: Call[Any, Any] | None = None

        def sent(*a: Any, **k: Any) -> Any:
            nonlocal call
            call = send(*a, **k)
            return call.future

        signature = self._signatures.get(name)
        if signature is None:
            signature = self._signatures[name] = inspect.signature(send)
        traced = self._traced(name, agent_id, sent, signature, args, kwargs)
        assert call is not None  # send ran (or raised, and so did _traced)
        return Call(traced, call.finish, call.timeout)

    def _wrap(self, target: Any, name: str, agent_id: str | None) -> None:
        original = getattr(target, name)
        signature = inspect.signature(original)

        @functools.wraps(original)
        def traced(*args: Any, **kwargs: Any) -> Any:
            return self._traced(name, agent_id, original, signature, args, kwargs)

        setattr(target, name, traced)

    def _traced(
        self,
        name: str,
        agent_id: str | None,
        original: Callable[..., Any],
        signature: inspect.Signature,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        local = self._local
        if getattr(local, "depth", 0) or self._closed:
            return original(*args, **kwargs)
        try:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            call_args = dict(bound.arguments)
            call_args.pop("timeout", None)  # how long the caller waits is not part of the op
        except TypeError:
            call_args = {"args": list(args), "kwargs": kwargs}
        if agent_id is None and scenario_call(name, call_args)[0] is None:
            # a system call the library makes for an op already recorded
            # (completing a task flushes its lines from a callback thread)
            return original(*args, **kwargs)
        entry = self._issue(name, agent_id, call_args)
        local.depth = 1
        try:
            out = original(*args, **kwargs)
        except BaseException as exc:
            self._complete(entry, self._next(), None, exc)
            raise
        finally:
            local.depth = 0
        if not callable(getattr(out, "add_done_callback", None)):
            self._complete(entry, self._next(), out, None)  # a synchronous op (reload)
            return out
        return TracedFuture(out, self._next, lambda n, value, error: self._complete(entry, n, value, error))

    # -- lines -----------------------------------------------------------------
    def _next(self) -> int:
        """The next number of the one global order of issues and completions."""
        with self._lock:
            return next(self._order)

    def _issue(self, call: str, agent_id: str | None, args: dict[str, Any]) -> dict[str, Any]:
        op, op_args = scenario_call(call, args)
        issued = self._next()
        entry = {
            "kind": "op",
            "op": op,
            "call": call,
            "agent": agent_id,
            "args": _plain(op_args),
            "issued": issued,
            "t_issued": self._clock.now(),
        }
        with self._lock:
            self._pending[issued] = entry
        return entry

    def _complete(self, entry: dict[str, Any], completed: int, value: Any, error: BaseException | None) -> None:
        with self._lock:
            if self._pending.pop(entry["issued"], None) is None:
                return
            line = dict(entry)
            line["completed"] = completed
        line["t_completed"] = self._clock.now()
        if error is not None:
            line["error"] = {"name": type(error).__name__, "message": str(error)}
        else:
            line["result"] = _plain(value)
        self._write(line)

    def _write(self, data: dict[str, Any]) -> None:
        text = json.dumps(data, sort_keys=True, allow_nan=False, default=repr) + "\n"
        with self._lock:
            if not self._closed:
                self._out.write(text)
                self._out.flush()

    def close(self) -> None:
        """Write the ops still pending (``pending: true``) and close the file; idempotent."""
        with self._lock:
            if self._closed:
                return
            pending = sorted(self._pending.values(), key=lambda e: e["issued"])
            self._pending.clear()
        for entry in pending:
            self._write({**entry, "pending": True})
        with self._lock:
            self._closed = True
            self._out.close()

    @property
    def closed(self) -> bool:
        return self._closed
