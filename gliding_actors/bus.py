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
Topics are matched exactly. A subscription delivers what is published after
it; what came before is read back from the **history**.

**Keyed topics deliver by interest.** A topic the bus is built with a key for
(``keyed={"line.changed": ("iri", "version")}``: the message field naming what
changed, and the field numbering its changes) accepts *keyed* push
subscribers, who receive only the events for the keys they registered
(``interest {topic, subscriber, add: {key: version seen}, remove: [keys]}``).
So an event costs a message per interested subscriber, not per subscriber: an
L1 session hears of the lines its turns cite, however many agents there are.
The bus remembers the newest version it published of each key of a keyed
topic, and registering a key with an older version seen pushes that newest
event at once: a change that reached the bus before the interest did is not
missed (the bus is where both are ordered).

The history:

* A publish with ``keep: true`` (every ``Agent.publish``; not the system's own
  notifications such as ``line.changed``, ``task.events``, ``agent.stale``)
  also becomes a node of the L2 graph, in named graph ``shared``, at
  ``urn:gliding-actors:message:<seq>`` — an IRI made from the bus's own
  number, never from user text. The node is ``{"@type": "Message", "topic",
  "seq", "publisher", "publishedAt", "payload"}``; ``publishedAt`` is the
  injected clock's seconds; the payload is a JSON literal (``@json``,
  ``rdf:JSON``), so whatever it holds — ``@id``, ``@graph``, ``@context``,
  ``@reverse`` — is data, never JSON-LD: it cannot put a triple anywhere but
  on its own node. SPARQL finds messages by topic, seq, publisher and time
  (and ``CONTAINS`` over the payload's JSON text).
* The node is written before the message is delivered or acknowledged, in the
  same handler, so a publish either happened everywhere (history, mailboxes,
  push) or, refused with ``InvalidInput``, nowhere: its ``seq`` is not used.
* The nodes never change, so they need no coherence: the bus writes them
  straight into the graph under the graph lock the directories use. They are
  not written to L0 — the history lives as long as L2 does (the memory is
  open); a message worth keeping durably is written as a line.
* ``history {topic, since_seq, limit}`` lists a topic's kept messages with
  ``seq > since_seq`` in publish order, read from the nodes the bus wrote
  (its own per-topic index of seqs, the values from the graph's node cache):
  a triple some line asserts about a message IRI cannot change what a late
  reader is told. Agents ask through ``Agent.messages``.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import msgpack

from gliding_actors.errors import InvalidInput, show
from gliding_actors.runtime import Context

if TYPE_CHECKING:
    from gliding_actors.l2._graph import GraphStore

__all__ = [
    "ACTOR_CRASHED",
    "AGENT_STALE",
    "BUS_ACTOR",
    "HISTORY_GRAPH",
    "LINE_CHANGED",
    "MESSAGE_IRI_PREFIX",
    "SYSTEM_TOPICS",
    "TASK_EVENTS",
    "BusState",
    "MemoryBus",
    "message_iri",
]

BUS_ACTOR = "bus"
"""The registered name of the bus actor in a :class:`~gliding_actors.MemorySystem`."""

#: a line's write or delete completed: ``{iri, version, agent, graph}`` (keyed by ``iri``, scoped by ``graph``)
LINE_CHANGED = "line.changed"
#: a task finished, or became ready (the blackboard's task DAG)
TASK_EVENTS = "task.events"
#: an agent missed its heartbeats; its locks were released
AGENT_STALE = "agent.stale"
#: a system actor crashed (its supervisor's record)
ACTOR_CRASHED = "actor.crashed"
#: Topics only the system publishes on. Agents may subscribe to them; a
#: publish on one by an agent is refused, so what they say can be trusted.
SYSTEM_TOPICS = frozenset({LINE_CHANGED, TASK_EVENTS, AGENT_STALE, ACTOR_CRASHED})

#: Kept messages live in this named graph (everyone reads it).
HISTORY_GRAPH = "shared"
#: Kept message ``seq`` is node ``MESSAGE_IRI_PREFIX + str(seq)``; lines may not use the prefix.
MESSAGE_IRI_PREFIX = "urn:gliding-actors:message:"


def message_iri(seq: int) -> str:
    """The IRI of kept message number ``seq``."""
    return MESSAGE_IRI_PREFIX + str(int(seq))


def _private_copy(value: Any) -> Any:
    """A deep copy through msgpack: what the bus keeps is never the caller's object."""
    try:
        return msgpack.unpackb(msgpack.packb(value, use_bin_type=True), raw=False)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidInput(f"a published message must be plain data: {exc}") from None


@dataclasses.dataclass
class BusState:
    """What the bus knows that its actor must not forget when it crashes.

    The :class:`~gliding_actors.MemorySystem` keeps one and hands it to every
    :class:`MemoryBus` its supervisor builds, as a directory's home outlives
    the directory actor: a crash is an exception in the bus's code, not the
    loss of the process, so subscriptions, undrained mailboxes and the ``seq``
    counter carry over. It is memory: a process crash loses it (docs/RELIABILITY.md).
    """

    #: topic -> subscriber -> mode ("mailbox" | "push"), in subscription order
    subscribers: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    mailboxes: dict[str, collections.deque[dict[str, Any]]] = dataclasses.field(default_factory=dict)
    #: mailbox subscriber -> events dropped from its full mailbox since its last drain
    dropped: dict[str, int] = dataclasses.field(default_factory=dict)
    #: the last seq handed out
    seq: int = 0
    #: keyed topics: topic -> keyed push subscriber -> the keys it wants
    interests: dict[str, dict[str, set[str]]] = dataclasses.field(default_factory=dict)
    #: keyed topics: topic -> key -> the subscribers that want it (the index publish reads)
    wanted_by: dict[str, dict[str, dict[str, None]]] = dataclasses.field(default_factory=dict)
    #: keyed topics: topic -> key -> (newest version published, that event's message)
    newest: dict[str, dict[str, tuple[int, dict[str, Any]]]] = dataclasses.field(default_factory=dict)
    #: an agent's mailbox subscriber -> its role (scoped topics show it only what its role may read)
    roles: dict[str, str] = dataclasses.field(default_factory=dict)


def _topic(message: dict[str, Any]) -> str:
    topic = message.get("topic")
    if not isinstance(topic, str) or not topic:
        raise InvalidInput(f"a topic is a non-empty string, not {show(topic)}")
    return topic


class MemoryBus:
    """Behaviour of the bus actor. Messages (all plain dicts, key ``type``):

    - ``subscribe`` ``{topic, subscriber, mode: "mailbox"|"push", keyed?: bool, role?}`` → ``None``;
      an agent's mailbox (or an agent's keyed subscriber: its session) names its role: on a *scoped*
      topic (``scoped={"line.changed": "graph"}``) it is shown only the events about graphs its role
      may read (``may_read(role, graph)``)
      (``keyed``: a push subscriber of a keyed topic, pushed only its keys' events)
    - ``interest`` ``{topic, subscriber, add?: {key: version seen}, remove?: [key]}`` → ``None``
    - ``unsubscribe`` ``{topic, subscriber}`` → ``None``
    - ``publish`` ``{topic, message: object, publisher, keep?}`` → ``{"seq", "delivered"}``
    - ``drain`` ``{subscriber}`` → list of events (publish order), mailbox emptied
    - ``history`` ``{topic, since_seq?, limit?}`` → kept events with ``seq >
      since_seq``, publish order, each with ``published_at``

    ``graph`` (and the lock every writer of it holds) is where kept messages
    go; a bus without one keeps no history (``keep`` is ignored). A bus built
    over a graph that already holds messages (its actor restarted) rebuilds its
    index from them and numbers on from the last one.

    ``keyed`` maps a topic to ``(key field, version field)`` of its messages
    (see the module docstring). ``state`` (a :class:`BusState`) is where
    subscriptions, interests, mailboxes and ``seq`` live; a bus rebuilt by its supervisor over the same state serves
    on where the crashed one stopped. Rebuilding checks it against the graph:
    ``seq`` is raised to the newest kept message (a crash between writing a
    message node and counting it cannot make a seq be used twice), every
    mailbox subscriber has a mailbox; ``recovery_notes`` says what was found.
    A publish whose handler crashed may have reached some subscribers and not
    others (its caller got ``ActorCrashed``); it never reuses a seq.
    """

    def __init__(
        self,
        graph: GraphStore | None = None,
        graph_lock: threading.Lock | None = None,
        state: BusState | None = None,
        keyed: Mapping[str, tuple[str, str]] | None = None,
        scoped: Mapping[str, str] | None = None,
        may_read: Callable[[str, str], bool] | None = None,
        max_inbox: int = 10_000,
    ) -> None:
        rebuilt = state is not None and (state.seq > 0 or bool(state.subscribers))
        self.state = state if state is not None else BusState()
        self._subscribers = self.state.subscribers
        self._mailboxes = self.state.mailboxes
        self._keyed = dict(keyed or {})
        #: scoped topics: topic -> the message field naming the graph an event is about
        self._scoped = dict(scoped or {})
        self._may_read = may_read
        #: a mailbox holds at most this many events; past it the oldest is dropped and counted
        self._max_inbox = max_inbox
        self._graph = graph
        self._graph_lock = graph_lock if graph_lock is not None else threading.Lock()
        #: topic -> seqs of its kept messages, ascending
        self._history: dict[str, list[int]] = {}
        if graph is not None:
            self._recover(graph)
        for subscribers in self._subscribers.values():
            for subscriber, mode in subscribers.items():
                if mode == "mailbox":
                    self._mailboxes.setdefault(subscriber, collections.deque())
        #: what this build found in the state it took over (the supervisor's ping reports it)
        self.recovery_notes: list[str] = []
        if rebuilt:
            waiting = sum(len(box) for box in self._mailboxes.values())
            kept = sum(len(seqs) for seqs in self._history.values())
            self.recovery_notes.append(
                f"bus: seq {self.state.seq}, {sum(len(s) for s in self._subscribers.values())} subscriptions,"
                f" {waiting} events waiting in {len(self._mailboxes)} mailboxes, {kept} kept messages re-indexed"
            )

    def _recover(self, graph: GraphStore) -> None:
        with self._graph_lock:
            kept = [graph.node(iri) for iri in graph.iris_in(HISTORY_GRAPH) if iri.startswith(MESSAGE_IRI_PREFIX)]
        for node in kept:
            if node is None or node.value is None:
                continue
            seq = int(node.value["seq"])
            self._history.setdefault(str(node.value["topic"]), []).append(seq)
            self.state.seq = max(self.state.seq, seq)
        for seqs in self._history.values():
            seqs.sort()

    def receive(self, message: Any, ctx: Context) -> Any:
        if not isinstance(message, dict):
            raise InvalidInput(f"bus messages are objects, not {type(message).__name__}")
        kind = message.get("type")
        if kind == "publish":
            return self._publish(message, ctx)
        if kind == "subscribe":
            return self._subscribe(message)
        if kind == "interest":
            return self._interest(message, ctx)
        if kind == "unsubscribe":
            topic = _topic(message)
            subscriber = str(message.get("subscriber"))
            self._subscribers.get(topic, {}).pop(subscriber, None)
            for key in self.state.interests.get(topic, {}).pop(subscriber, set()):
                self._forget(topic, key, subscriber)
            return None
        if kind == "drain":
            subscriber = str(message.get("subscriber"))
            events = list(self._mailboxes.get(subscriber, ()))
            self._mailboxes[subscriber] = collections.deque()
            dropped = self.state.dropped.pop(subscriber, 0)
            if dropped:  # said first: what came after the gap follows
                gap = {"dropped": dropped, "max_inbox": self._max_inbox}
                events.insert(0, {"type": "bus.dropped", "topic": None, "seq": None, "publisher": None, "message": gap})
            return events
        if kind == "history":
            return self._read_history(message)
        raise InvalidInput(f"unknown bus message type {show(kind)}")

    def _subscribe(self, message: dict[str, Any]) -> None:
        topic = _topic(message)
        subscriber = message.get("subscriber")
        mode = message.get("mode", "mailbox")
        if not isinstance(subscriber, str) or not subscriber:
            raise InvalidInput(f"a subscriber is a non-empty string, not {show(subscriber)}")
        if mode not in ("mailbox", "push"):
            raise InvalidInput(f"subscription mode is 'mailbox' or 'push', not {show(mode)}")
        keyed = message.get("keyed", False)
        if type(keyed) is not bool:
            raise InvalidInput(f"subscribe: keyed is true or false, not {show(keyed)}")
        if keyed and (mode != "push" or topic not in self._keyed):
            raise InvalidInput(f"only a push subscription of a keyed topic can be keyed ({show(topic)}, {show(mode)})")
        if keyed:
            self.state.interests.setdefault(topic, {}).setdefault(subscriber, set())
        else:
            for key in self.state.interests.get(topic, {}).pop(subscriber, set()):
                self._forget(topic, key, subscriber)
        self._subscribers.setdefault(topic, {})[subscriber] = mode
        if mode == "mailbox":
            self._mailboxes.setdefault(subscriber, collections.deque())
        role = message.get("role")
        if role is not None:
            if not isinstance(role, str) or not (mode == "mailbox" or keyed):
                raise InvalidInput(
                    f"subscribe: role is an agent's role (for a mailbox or a keyed subscription), not {show(role)}"
                )
            self.state.roles[subscriber] = role

    def _shown(self, topic: str, subscriber: str, body: dict[str, Any]) -> bool:
        """Whether ``subscriber`` may see an event of ``topic`` (a scoped topic: only its role's graphs)."""
        field = self._scoped.get(topic)
        role = self.state.roles.get(subscriber)
        if field is None or role is None:
            return True
        graph = body.get(field)
        return isinstance(graph, str) and self._may_read is not None and self._may_read(role, graph)

    def _interest(self, message: dict[str, Any], ctx: Context) -> None:
        """Add and remove a keyed subscriber's keys; an added key already newer than seen is pushed now."""
        topic = _topic(message)
        subscriber = message.get("subscriber")
        keys = self.state.interests.get(topic, {}).get(subscriber) if isinstance(subscriber, str) else None
        if keys is None:
            raise InvalidInput(f"interest: {show(subscriber)} has no keyed subscription to {show(topic)}")
        add = message.get("add") or {}
        remove = message.get("remove") or []
        if not isinstance(add, Mapping) or not all(
            isinstance(k, str) and type(v) is int for k, v in add.items()
        ):
            raise InvalidInput("interest: add maps keys (strings) to the version seen (integers)")
        if not isinstance(remove, list) or not all(isinstance(k, str) for k in remove):
            raise InvalidInput("interest: remove is a list of keys (strings)")
        assert isinstance(subscriber, str)
        for key in remove:
            if key in keys and key not in add:
                keys.discard(key)
                self._forget(topic, key, subscriber)
        newest = self.state.newest.get(topic, {})
        for key, seen in add.items():
            if key not in keys:
                keys.add(key)
                self.state.wanted_by.setdefault(topic, {}).setdefault(key, {})[subscriber] = None
            known = newest.get(key)
            if known is not None and known[0] > seen and self._shown(topic, subscriber, known[1]):
                # changed before this interest reached the bus: say so now, as of the last seq
                event = {"type": "bus.event", "topic": topic, "seq": self.state.seq, "publisher": None, "message": known[1]}
                ctx.send(subscriber, event)

    def _forget(self, topic: str, key: str, subscriber: str) -> None:
        wanting = self.state.wanted_by.get(topic, {}).get(key)
        if wanting is not None:
            wanting.pop(subscriber, None)
            if not wanting:
                del self.state.wanted_by[topic][key]

    def _publish(self, message: dict[str, Any], ctx: Context) -> dict[str, int]:
        topic = _topic(message)
        body = message.get("message")
        if not isinstance(body, dict):
            raise InvalidInput(f"a published message is an object, not {type(body).__name__}")
        keep = message.get("keep", False)
        if type(keep) is not bool:
            raise InvalidInput(f"publish: keep is true or false, not {show(keep)}")
        publisher = message.get("publisher")
        if publisher is not None and not isinstance(publisher, str):
            raise InvalidInput(f"a publisher is an agent id or null, not {show(publisher)}")
        seq = self.state.seq + 1
        if keep and self._graph is not None:
            self._keep(self._graph, seq, topic, publisher, ctx.clock.now(), body)  # raises having written nothing
        self.state.seq = seq
        event = {
            "type": "bus.event",
            "topic": topic,
            "seq": seq,
            "publisher": publisher,
            "message": body,
        }
        subscribers = self._subscribers.get(topic, {})
        keyed = self.state.interests.get(topic, {})
        delivered = 0
        for subscriber, mode in subscribers.items():
            if subscriber in keyed or not self._shown(topic, subscriber, body):
                continue
            if mode == "push":
                ctx.send(subscriber, event)
            else:
                box = self._mailboxes[subscriber]
                if len(box) >= self._max_inbox:
                    box.popleft()
                    self.state.dropped[subscriber] = self.state.dropped.get(subscriber, 0) + 1
                box.append(event)
            delivered += 1
        fields = self._keyed.get(topic)
        if fields is not None:
            key, version = body.get(fields[0]), body.get(fields[1])
            if isinstance(key, str) and type(version) is int:
                newest = self.state.newest.setdefault(topic, {})
                known = newest.get(key)
                if known is None or version > known[0]:
                    newest[key] = (version, dict(body))
                for subscriber in self.state.wanted_by.get(topic, {}).get(key, {}):
                    if self._shown(topic, subscriber, body):
                        ctx.send(subscriber, event)
                        delivered += 1
        return {"seq": seq, "delivered": delivered}

    # -- history -----------------------------------------------------------------
    def _keep(
        self, graph: GraphStore, seq: int, topic: str, publisher: str | None, now: float, body: dict[str, Any]
    ) -> None:
        """Write message ``seq`` as a node of the history graph (see the module docstring)."""
        node: dict[str, Any] = {
            "@type": "Message",
            "topic": topic,
            "seq": seq,
            "publishedAt": now,
            # A JSON literal: the payload is data, never read as JSON-LD.
            "payload": {"@value": _private_copy(body), "@type": "@json"},
        }
        if publisher is not None:
            node["publisher"] = publisher
        with self._graph_lock:
            graph.put_node(message_iri(seq), node, HISTORY_GRAPH, 1)
        self._history.setdefault(topic, []).append(seq)

    def _read_history(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        topic = _topic(message)
        since = message.get("since_seq", 0)
        limit = message.get("limit")
        if isinstance(since, bool) or not isinstance(since, int) or since < 0:
            raise InvalidInput(f"since_seq is an integer >= 0, not {show(since)}")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise InvalidInput(f"limit is an integer >= 0 or null, not {show(limit)}")
        graph = self._graph
        if graph is None:
            return []
        seqs = self._history.get(topic, [])
        start = bisect.bisect_right(seqs, since)
        chosen = seqs[start:] if limit is None else seqs[start : start + limit]
        events: list[dict[str, Any]] = []
        for seq in chosen:
            node = graph.node(message_iri(seq))
            if node is None or node.value is None:
                continue
            value = node.value
            events.append(
                {
                    "type": "bus.event",
                    "topic": topic,
                    "seq": seq,
                    "publisher": value.get("publisher"),
                    # a private copy: the node's value is never handed out
                    "message": _private_copy(value["payload"]["@value"]),
                    "published_at": value["publishedAt"],
                }
            )
        return events
