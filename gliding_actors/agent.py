"""The handle an orchestrator holds for one agent.

Every operation comes in two forms: a blocking method (``publish``) that waits
with a timeout, and a ``submit_*`` method returning a
:class:`~gliding_actors.runtime.Future` without waiting, which scenario replay
uses to issue several ops at once and which the asyncio bridge builds on.
Input is checked here, before anything is sent, so bad input is refused with
:class:`~gliding_actors.errors.InvalidInput` and changes nothing.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from gliding_actors.bus import BUS_ACTOR
from gliding_actors.errors import InvalidInput
from gliding_actors.runtime import Future

if TYPE_CHECKING:
    from gliding_actors.system import MemorySystem

__all__ = ["ROLES", "Agent"]

ROLES = ("SA", "PA", "DA", "CA", "AA", "system")
"""SA schedules and watches, PA plans, DA does, CA checks, AA decides; ``system`` may do anything."""


def _check_topic(topic: object) -> str:
    if not isinstance(topic, str) or not topic:
        raise InvalidInput(f"a topic is a non-empty string, not {topic!r}")
    return topic


def _check_object(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidInput(f"{what} must be a JSON object, not {type(value).__name__}")
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{what} is not JSON-serialisable: {exc}") from exc
    return value


class Agent:
    """One agent's view of the memory. Get one from :meth:`MemorySystem.agent`."""

    def __init__(self, system: MemorySystem, agent_id: str, role: str) -> None:
        self._system = system
        self._id = agent_id
        self._role = role

    @property
    def id(self) -> str:
        return self._id

    @property
    def role(self) -> str:
        return self._role

    @property
    def system(self) -> MemorySystem:
        return self._system

    def _ask(self, actor: str, message: dict[str, Any]) -> Future[Any]:
        return self._system.runtime.lookup(actor).ask(message)

    # -- coordination (MemoryBus) -------------------------------------------
    def submit_subscribe(self, topic: str) -> Future[None]:
        return self._ask(
            BUS_ACTOR,
            {"type": "subscribe", "topic": _check_topic(topic), "subscriber": self._id, "mode": "mailbox"},
        )

    def subscribe(self, topic: str, *, timeout: float | None = None) -> None:
        """Receive, in this agent's inbox, every message later published on ``topic``."""
        self.submit_subscribe(topic).get(timeout)

    def submit_unsubscribe(self, topic: str) -> Future[None]:
        return self._ask(BUS_ACTOR, {"type": "unsubscribe", "topic": _check_topic(topic), "subscriber": self._id})

    def unsubscribe(self, topic: str, *, timeout: float | None = None) -> None:
        self.submit_unsubscribe(topic).get(timeout)

    def submit_publish(self, topic: str, message: dict[str, Any]) -> Future[dict[str, int]]:
        return self._ask(
            BUS_ACTOR,
            {
                "type": "publish",
                "topic": _check_topic(topic),
                "message": _check_object(message, "a published message"),
                "publisher": self._id,
            },
        )

    def publish(self, topic: str, message: dict[str, Any], *, timeout: float | None = None) -> int:
        """Publish ``message`` (a JSON object) on ``topic``; returns its sequence number.

        When this returns, every current subscriber's inbox holds the message.
        """
        result: dict[str, int] = self.submit_publish(topic, message).get(timeout)
        return result["seq"]

    def submit_inbox(self) -> Future[list[dict[str, Any]]]:
        return self._ask(BUS_ACTOR, {"type": "drain", "subscriber": self._id})

    def inbox(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        """Take every message delivered to this agent, in publish order.

        Each item is ``{"type": "bus.event", "topic", "seq", "publisher", "message"}``.
        """
        events: list[dict[str, Any]] = self.submit_inbox().get(timeout)
        return events

    def __repr__(self) -> str:
        return f"<Agent {self._id!r} role={self._role}>"
