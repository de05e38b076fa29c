"""The blackboard's requests as typed, frozen values, checked once at the actor's door.

A request travels as a plain object with one discriminator key, ``t`` (it may
cross processes and is recorded in traces). :func:`parse_request` turns it into
one of the classes here or refuses it with
:class:`~gliding_actors.errors.InvalidInput`, so a handler never meets a
missing or mistyped field and no agent's input can crash the blackboard. A
sender builds the same classes and sends :meth:`message`. The values
themselves (a known task, a lock mode, a status) are the DAG's, the lock
manager's and the registry's to judge; this module checks shapes.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

from gliding_actors.errors import InvalidInput, show
from gliding_actors.l2._awareness import KEEP, _Keep

__all__ = [
    "TASK_REQUESTS",
    "Agents",
    "BoardRequest",
    "Fence",
    "Heartbeat",
    "Lock",
    "Register",
    "TaskAttach",
    "TaskComplete",
    "TaskCreate",
    "TaskDepend",
    "TaskLayers",
    "TaskMembers",
    "TaskRelease",
    "TaskScope",
    "Tick",
    "Unlock",
    "parse_request",
]


@dataclasses.dataclass(frozen=True, slots=True)
class _Request:
    KIND: ClassVar[str]

    def message(self) -> dict[str, Any]:
        """The request as it travels: a plain object, ``t`` first."""
        out: dict[str, Any] = {"t": self.KIND}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is KEEP:
                continue  # left out: keep what the registry has
            out[field.name] = list(value) if isinstance(value, tuple) else value
        return out


@dataclasses.dataclass(frozen=True, slots=True)
class Register(_Request):
    KIND = "register"
    agent: str
    role: str


@dataclasses.dataclass(frozen=True, slots=True)
class Heartbeat(_Request):
    KIND = "heartbeat"
    agent: str
    status: str | None = None
    #: :data:`~gliding_actors.l2._awareness.KEEP` (left out of the message): keep the current operation
    operation: str | None | _Keep = KEEP


@dataclasses.dataclass(frozen=True, slots=True)
class Agents(_Request):
    KIND = "agents"


@dataclasses.dataclass(frozen=True, slots=True)
class Lock(_Request):
    KIND = "lock"
    agent: str
    resource: str
    mode: str
    timeout_s: float = 0.0


@dataclasses.dataclass(frozen=True, slots=True)
class Unlock(_Request):
    KIND = "unlock"
    agent: str
    resource: str


@dataclasses.dataclass(frozen=True, slots=True)
class Fence(_Request):
    KIND = "fence"
    resource: str
    token: int


@dataclasses.dataclass(frozen=True, slots=True)
class TaskCreate(_Request):
    KIND = "task.create"
    task: str
    parent: str | None = None
    depends_on: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class TaskDepend(_Request):
    KIND = "task.depend"
    task: str
    on: str


@dataclasses.dataclass(frozen=True, slots=True)
class TaskLayers(_Request):
    KIND = "task.layers"
    task: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class TaskAttach(_Request):
    KIND = "task.attach"
    task: str
    iris: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class TaskScope(_Request):
    KIND = "task.scope"
    task: str
    status: str = "completed"


@dataclasses.dataclass(frozen=True, slots=True)
class TaskComplete(_Request):
    KIND = "task.complete"
    task: str
    status: str = "completed"


@dataclasses.dataclass(frozen=True, slots=True)
class TaskRelease(_Request):
    KIND = "task.release"
    task: str


@dataclasses.dataclass(frozen=True, slots=True)
class TaskMembers(_Request):
    KIND = "task.members"
    task: str


@dataclasses.dataclass(frozen=True, slots=True)
class Tick(_Request):
    """The blackboard's own timer (leases, waits, heartbeats falling due)."""

    KIND = "tick"


BoardRequest = (
    Register | Heartbeat | Agents | Lock | Unlock | Fence | TaskCreate | TaskDepend | TaskLayers | TaskAttach
    | TaskScope | TaskComplete | TaskRelease | TaskMembers | Tick
)

_KINDS: dict[str, type[_Request]] = {
    cls.KIND: cls
    for cls in (
        Register, Heartbeat, Agents, Lock, Unlock, Fence, TaskCreate, TaskDepend, TaskLayers, TaskAttach,
        TaskScope, TaskComplete, TaskRelease, TaskMembers, Tick,
    )
}
#: the requests an agent may send as a task-DAG request (``Agent.submit_task``)
TASK_REQUESTS: frozenset[type[_Request]] = frozenset(
    {TaskCreate, TaskDepend, TaskLayers, TaskAttach, TaskComplete, TaskRelease}
)


def _text(message: dict[str, Any], key: str, kind: str) -> str:
    value = message.get(key)
    if not isinstance(value, str):
        raise InvalidInput(f"{kind}: {key} is a string, not {show(value)}", path=(key,))
    return value


def _text_or_none(message: dict[str, Any], key: str, kind: str) -> str | None:
    value = message.get(key)
    if value is not None and not isinstance(value, str):
        raise InvalidInput(f"{kind}: {key} is a string or null, not {show(value)}", path=(key,))
    return value


def _texts(message: dict[str, Any], key: str, kind: str) -> tuple[str, ...]:
    value = message.get(key)
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) for item in value):
        raise InvalidInput(f"{kind}: {key} is a list of strings, not {show(value)}", path=(key,))
    return tuple(value)


def _seconds(message: dict[str, Any], key: str, kind: str) -> float:
    value = message.get(key, 0.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value < 0:
        raise InvalidInput(f"{kind}: {key} is a number of seconds >= 0 (inf: no limit), not {show(value)}", path=(key,))
    return float(value)


def _integer(message: dict[str, Any], key: str, kind: str) -> int:
    value = message.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{kind}: {key} is an integer, not {show(value)}", path=(key,))
    return value


#: how a field of each declared type is checked (the annotations of the request classes)
_CHECKS = {
    "str": _text,
    "str | None": _text_or_none,
    "str | None | _Keep": _text_or_none,
    "tuple[str, ...]": _texts,
    "float": _seconds,
    "int": _integer,
}


def parse_request(message: object) -> BoardRequest:
    """The typed request ``message`` is, or InvalidInput naming what is wrong (nothing is changed).

    Each field is checked by its declared type; a field left out takes its
    default (``Heartbeat.operation``: :data:`KEEP`), and a field without one
    is required.
    """
    if not isinstance(message, dict):
        raise InvalidInput(f"blackboard requests are objects, not {type(message).__name__}")
    given = message.get("t")
    cls = _KINDS.get(given) if isinstance(given, str) else None
    if cls is None:
        raise InvalidInput(f"unknown blackboard request {show(given)}")
    values = {
        field.name: _CHECKS[str(field.type)](message, field.name, cls.KIND)
        for field in dataclasses.fields(cls)
        if field.name in message or field.default is dataclasses.MISSING
    }
    request: BoardRequest = cls(**values)  # type: ignore[assignment]
    return request
