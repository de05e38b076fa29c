"""The MemoryBus: topic publish/subscribe, hosted as one actor.

Two kinds of subscriber, because the system has two kinds of listener:

* **actors** (L3 view caches, L1 sessions, the prefetcher) are *pushed* every
  event as a message ``{"type": "bus.event", "topic", "seq", "publisher",
  "message"}``;
* **agents** get a *mailbox* kept here and drained by ``inbox``: an LLM agent
  reads its messages when it next thinks, not on a callback thread.

One actor orders every publish, so "publish order" is one global order (the
``seq`` it hands out), and each subscriber receives events in that order — for
actors through the runtime's per-pair FIFO, for mailboxes by construction.
Topics are matched exactly. The bus keeps no history: a subscriber sees what is
published after it subscribed.
"""

from __future__ import annotations

from typing import Any

from gliding_actors.errors import InvalidInput
from gliding_actors.runtime import Context

__all__ = ["BUS_ACTOR", "MemoryBus"]

BUS_ACTOR = "bus"
"""The registered name of the bus actor in a :class:`~gliding_actors.MemorySystem`."""


def _topic(message: dict[str, Any]) -> str:
    topic = message.get("topic")
    if not isinstance(topic, str) or not topic:
        raise InvalidInput(f"a topic is a non-empty string, not {topic!r}")
    return topic


class MemoryBus:
    """Behaviour of the bus actor. Messages (all plain dicts, key ``type``):

    - ``subscribe`` ``{topic, subscriber, mode: "mailbox"|"push"}`` → ``None``
    - ``unsubscribe`` ``{topic, subscriber}`` → ``None``
    - ``publish`` ``{topic, message: object, publisher}`` → ``{"seq", "delivered"}``
    - ``drain`` ``{subscriber}`` → list of events (publish order), mailbox emptied
    """

    def __init__(self) -> None:
        #: topic -> subscriber -> mode ("mailbox" | "push"), in subscription order
        self._subscribers: dict[str, dict[str, str]] = {}
        self._mailboxes: dict[str, list[dict[str, Any]]] = {}
        self._seq = 0

    def receive(self, message: Any, ctx: Context) -> Any:
        if not isinstance(message, dict):
            raise InvalidInput(f"bus messages are objects, not {type(message).__name__}")
        kind = message.get("type")
        if kind == "publish":
            return self._publish(message, ctx)
        if kind == "subscribe":
            return self._subscribe(message)
        if kind == "unsubscribe":
            topic = _topic(message)
            self._subscribers.get(topic, {}).pop(str(message.get("subscriber")), None)
            return None
        if kind == "drain":
            subscriber = str(message.get("subscriber"))
            events = self._mailboxes.get(subscriber, [])
            self._mailboxes[subscriber] = []
            return events
        raise InvalidInput(f"unknown bus message type {kind!r}")

    def _subscribe(self, message: dict[str, Any]) -> None:
        topic = _topic(message)
        subscriber = message.get("subscriber")
        mode = message.get("mode", "mailbox")
        if not isinstance(subscriber, str) or not subscriber:
            raise InvalidInput(f"a subscriber is a non-empty string, not {subscriber!r}")
        if mode not in ("mailbox", "push"):
            raise InvalidInput(f"subscription mode is 'mailbox' or 'push', not {mode!r}")
        self._subscribers.setdefault(topic, {})[subscriber] = mode
        if mode == "mailbox":
            self._mailboxes.setdefault(subscriber, [])

    def _publish(self, message: dict[str, Any], ctx: Context) -> dict[str, int]:
        topic = _topic(message)
        body = message.get("message")
        if not isinstance(body, dict):
            raise InvalidInput(f"a published message is an object, not {type(body).__name__}")
        self._seq += 1
        event = {
            "type": "bus.event",
            "topic": topic,
            "seq": self._seq,
            "publisher": message.get("publisher"),
            "message": body,
        }
        subscribers = self._subscribers.get(topic, {})
        for subscriber, mode in subscribers.items():
            if mode == "push":
                ctx.send(subscriber, event)
            else:
                self._mailboxes[subscriber].append(event)
        return {"seq": self._seq, "delivered": len(subscribers)}
