"""What crosses between processes on the ``ray`` backend, and in which order.

Shared by the Ray-hosted actors (:mod:`._ray`) and the driver-hosted ones
(:mod:`._ray_driver`): msgpack for messages and replies (errors as class,
args and attributes, raised again as the same class), and the per-sender
reorder buffer that restores each pair's FIFO order over Ray's calls.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import msgpack

import gliding_actors.errors as errors_module
from gliding_actors.errors import GlidingError, InvalidInput
from gliding_actors.runtime._cell import describe_exception

__all__ = ["DRIVER_PREFIX", "InOrder", "decode_reply", "encode_reply", "pack", "seen_as", "unpack"]

T = TypeVar("T")

#: prefix of a driver's sender id; a cell sees such a sender as ``None`` (outside)
DRIVER_PREFIX = "@driver:"


def seen_as(sender: str) -> str | None:
    """The sender a cell is shown: None for a driver (a call from outside), else the actor's name."""
    return None if sender.startswith(DRIVER_PREFIX) else sender


def pack(value: Any) -> bytes:
    """msgpack bytes of ``value``; InvalidInput if it is not plain data."""
    try:
        return msgpack.packb(value, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidInput(f"not msgpack-serialisable, so it cannot cross to another process: {exc}") from exc


def unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False, strict_map_key=False)


def encode_reply(ok: bool, value: Any) -> tuple[Any, ...]:
    """A cell's answer as plain data: ``("ok", bytes)`` or ``("err", class, args, attrs)``."""
    if ok:
        try:
            return ("ok", pack(value))
        except InvalidInput as exc:
            value, ok = exc, False
    error: BaseException = value
    if not isinstance(error, GlidingError):
        error = errors_module.ActorCrashed("?", describe_exception(error))
    attrs: dict[str, Any] = {}
    for key, attr in vars(error).items():
        try:
            pack(attr)
        except InvalidInput:
            continue
        attrs[key] = attr
    args = [a if isinstance(a, (str, int, float, bool, type(None))) else str(a) for a in error.args]
    return ("err", type(error).__name__, args, attrs)


def decode_reply(reply: tuple[Any, ...] | list[Any]) -> Any:
    """The value of an encoded reply, or raise its error as the same class."""
    if reply[0] == "ok":
        return unpack(reply[1])
    _kind, class_name, args, attrs = reply
    cls = getattr(errors_module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, GlidingError)):
        raise GlidingError(f"{class_name}: {' '.join(str(a) for a in args)}")
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(attrs)
    raise error


class InOrder(Generic[T]):
    """Per-sender reorder buffer: items come back in their senders' sequence order.

    Each sender numbers its messages to one receiver 0, 1, 2, ...; an early
    arrival is held until the gap before it closes.
    """

    def __init__(self) -> None:
        self._expected: dict[str, int] = {}
        self._held: dict[str, dict[int, T]] = {}

    def arrive(self, sender: str, seq: int, item: T) -> list[T]:
        """The items now deliverable from ``sender``, in order (none if ``seq`` is early)."""
        expected = self._expected.get(sender, 0)
        if seq != expected:
            self._held.setdefault(sender, {})[seq] = item
            return []
        ready = [item]
        expected += 1
        held = self._held.get(sender)
        while held and expected in held:
            ready.append(held.pop(expected))
            expected += 1
        self._expected[sender] = expected
        return ready

    def forget(self, sender: str) -> None:
        """Drop ``sender``'s numbering (its successor under that name starts at 0)."""
        self._expected.pop(sender, None)
        self._held.pop(sender, None)

    @property
    def held(self) -> int:
        return sum(len(h) for h in self._held.values())

    @property
    def expected(self) -> dict[str, int]:
        """Per sender, how many of its messages have come through in order (its next seq)."""
        return dict(self._expected)
