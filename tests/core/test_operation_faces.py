"""An operation's faces: the blocking one answers a hit in the handle's own frame, and a recorder sees every op.

The blocking face of an operation with an at-once answer is the handle's
function itself behind a ``functools.partial``; whether the handle is traced
is decided when the face is bound, so a recorder that starts tracing a handle
drops the faces bound before (``forget_faces``).
"""

from __future__ import annotations

import inspect
from typing import Any

from gliding_actors._operation import Call, forget_faces, not_at_once, operation, same
from gliding_actors.runtime import CompletedFuture


class _Table:
    """A handle with one operation: ``get`` answers from ``known`` at once, else by a 'round trip'."""

    def __init__(self) -> None:
        self._trace: Any = None
        self.known = {"k": 1}
        self.sent: list[str] = []

    def _known(self, otherwise: Any, key: str, *, timeout: float | None = None) -> int | None:
        value = self.known.get(key)
        return value if value is not None else otherwise(key, timeout=timeout)

    @operation(at_once=_known)
    def get(self, key: str, *, timeout: float | None = None) -> Call[int, int]:
        """The value of ``key``."""
        self.sent.append(key)
        return Call(CompletedFuture(0), same, timeout)


def test_a_hit_is_answered_at_once_and_a_miss_makes_the_round_trip() -> None:
    table = _Table()
    assert table.get("k") == 1 and table.sent == []
    assert table.get("absent") == 0 and table.sent == ["absent"]
    assert table.get("absent", timeout=1.0) == 0 and table.sent == ["absent", "absent"]
    assert _Table._known(table, not_at_once, "absent") is None and table.sent == ["absent", "absent"]


def test_the_face_introspects_as_the_definition() -> None:
    table = _Table()
    assert table.get.__name__ == "get" and table.get.__qualname__ == "_Table.get"
    assert table.get.__doc__ == "The value of ``key``."
    assert list(inspect.signature(table.get).parameters) == ["key", "timeout"]


def test_a_recorder_that_starts_tracing_a_handle_sees_its_hits_though_a_face_was_bound_before() -> None:
    table = _Table()
    assert table.get("k") == 1  # binds the untraced face
    seen: list[tuple[str, tuple[Any, ...]]] = []

    def trace(name: str, send: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Call[Any, Any]:
        seen.append((name, args))
        call: Call[Any, Any] = send(*args, **kwargs)
        return call

    table._trace = trace
    forget_faces(table)
    assert table.get("k") == 0  # traced: every op makes the round trip the recorder observes
    assert seen == [("submit_get", ("k",))] and table.sent == ["k"]
