"""The counters behind ``MemorySystem.stats()``: cheap to bump, read from any thread.

Why they look the way they do:

* **A read hit must stay a board lookup.** An agent's hit is served by its
  handle from the published cache view with no message and no lock
  (``Agent._hit``). Its accounting is one dict ``get`` on the handle's own
  tally map, an identity test and one attribute increment: no lock, no
  message, nothing shared with another handle. Each :class:`AgentCounters`
  is written by its agent's handle (the hit path) and by the done-callbacks
  of that agent's loads (the miss path); readers only read.
* **Tokens saved are counted once per version, never on the hit path.** A hit
  saves the tokens of the artifact an orchestrator would have re-sent, i.e.
  of the version the hit served. Hits are tallied per line *copy* (a
  :class:`LineTally` per IRI, keyed by the identity of the packed value the
  board published, which changes exactly when a new version arrives); the
  tokens of that copy are counted lazily — when the copy is replaced (its
  hits settle into the totals) or when ``stats()`` reads a live tally — and
  memoised per ``(iri, version)``, so a version is tokenised at most once
  whatever the number of agents or hits.
* **Protocol messages are counted where they are sent**, by the actor that
  sends them (:class:`ActorTally`, one per cache or directory, single
  writer), so no counter is shared between threads.

Under concurrent use of *one* handle by several threads an increment may
be lost (a ``+=`` is not atomic); a count is never doubled, because a tally
is settled once, by whoever replaces it. Figures are exact with one thread
per handle and on the simulator.
"""

from __future__ import annotations

import collections
import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import msgpack

if TYPE_CHECKING:  # the l1 package imports coherence, which imports this module
    from gliding_actors.l1._tokens import TokenCounter

__all__ = ["MAX_TALLIES", "ActorTally", "AgentCounters", "LineTally", "SystemCounters", "line_text", "percentile"]

#: how many recent miss latencies the percentiles are computed over
LATENCY_WINDOW = 4096
#: how many (iri, version) token counts are memoised
_TOKEN_MEMO = 8192
#: how many live line tallies one agent keeps (each holds its copy's packed value
#: alive); past it the oldest is settled into the totals, which stay exact. Four
#: times the default cache: a tally beyond what the cache can hold is of a line
#: already evicted, which only a re-read would touch again.
MAX_TALLIES = 4096


def line_text(iri: str, value: Any) -> str:
    """The artifact as an orchestrator would paste it into a prompt: its JSON-LD node.

    The same rendering the context scheduler uses for a line (``@id`` first
    among sorted keys, compact separators), so "tokens saved" and "tokens
    assembled" are counted in the same currency. An absent line is empty.
    """
    if value is None:
        return ""
    shown = {"@id": iri, **value} if isinstance(value, dict) else {"@id": iri, "value": value}
    return json.dumps(shown, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile ``q`` (0..100) of already sorted values; 0.0 when empty."""
    if not sorted_values:
        return 0.0
    rank = max(1, -(-len(sorted_values) * q // 100))
    return sorted_values[min(len(sorted_values), int(rank)) - 1]


class LineTally:
    """Hits on one published copy (one version) of a line, for one agent.

    ``packed`` is the board's packed value of that copy: the hit path compares
    it by identity, so a new version (a new packed object) starts a new tally.
    ``fills`` is 1 when the copy arrived by a miss (its tokens were sent).
    """

    __slots__ = ("fills", "hits", "iri", "packed", "tokens", "version")

    def __init__(self, iri: str, packed: bytes, version: int, *, hits: int = 0, fills: int = 0) -> None:
        self.iri = iri
        self.packed = packed
        self.version = version
        self.hits = hits
        self.fills = fills
        #: counted lazily (None until someone needs it)
        self.tokens: int | None = None


class AgentCounters:
    """One agent's read figures. Written by its handle and its loads' callbacks."""

    def __init__(self, agent: str, system: SystemCounters) -> None:
        self.agent = agent
        self._system = system
        #: IRI -> the tally of the copy this agent last read (the hit path's one lookup)
        self.tallies: dict[str, LineTally] = {}
        #: hits and fills of copies already replaced, and their tokens
        self.settled_hits = 0
        self.settled_fills = 0
        self.settled_tokens_saved = 0
        self.settled_tokens_fetched = 0
        #: reads that went to the cache actor and needed protocol messages
        self.misses = 0
        #: reads that went to the cache actor (an op of this handle was in flight) but needed none
        self.local_hits = 0

    def now(self) -> float:
        """The latency clock's reading (``SystemCounters.now``), taken when a load is sent."""
        return self._system.now()

    def hit_new_copy(self, iri: str, packed: bytes, version: int) -> None:
        """A hit on a copy with no tally yet (its first hit, e.g. reading one's own write)."""
        self._replace(LineTally(iri, packed, version, hits=1))

    def load_done(self, iri: str, result: dict[str, Any], packed: bytes | None, started: float) -> None:
        """A load answered by the cache actor: a miss if it cost messages, else a local hit.

        ``packed`` is what the board holds for ``iri`` now (the copy the load
        brought in), None if the line is no longer readable here.
        """
        system = self._system
        if int(result.get("messages") or 0) == 0:
            self.local_hits += 1
            tally = self.tallies.get(iri)
            if packed is not None and tally is not None and tally.packed is packed:
                tally.hits += 1
            elif packed is not None:
                self._replace(LineTally(iri, packed, int(result.get("version") or 0), hits=1))
            else:  # nothing published to tally: settle it straight away
                self.settled_hits += 1
                self.settled_tokens_saved += system.tokens_of(iri, int(result.get("version") or 0), result.get("value"))
            return
        system.note_miss_latency(system.now() - started)
        self.misses += 1
        version = int(result.get("version") or 0)
        if packed is not None:
            self._replace(LineTally(iri, packed, version, fills=1))
        else:
            self.settled_fills += 1
            self.settled_tokens_fetched += system.tokens_of(iri, version, result.get("value"))

    def _replace(self, tally: LineTally) -> None:
        tallies = self.tallies
        old = tallies.pop(tally.iri, None)
        tallies[tally.iri] = tally  # newest last: the dict's order is the settling order
        if old is not None:
            self._settle(old)
        if len(tallies) > MAX_TALLIES:
            oldest = next(iter(tallies))
            self._settle(tallies.pop(oldest))

    def _settle(self, old: LineTally) -> None:
        hits, fills = old.hits, old.fills
        self.settled_hits += hits
        self.settled_fills += fills
        if hits or fills:
            tokens = self._system.tally_tokens(old)
            self.settled_tokens_saved += hits * tokens
            self.settled_tokens_fetched += fills * tokens

    def snapshot(self) -> dict[str, int]:
        """Hits, misses and tokens so far (live tallies included; their tokens counted now)."""
        hits, fills = self.settled_hits, self.settled_fills
        saved, fetched = self.settled_tokens_saved, self.settled_tokens_fetched
        for tally in list(self.tallies.values()):
            if tally.hits or tally.fills:
                tokens = self._system.tally_tokens(tally)
                hits += tally.hits
                fills += tally.fills
                saved += tally.hits * tokens
                fetched += tally.fills * tokens
        board_hits = hits - self.local_hits
        return {
            "reads": hits + self.misses,
            "hits": hits,
            "board_hits": board_hits,
            "local_hits": self.local_hits,
            "misses": self.misses,
            "fills": fills,
            "tokens_saved": saved,
            "tokens_fetched": fetched,
        }


class ActorTally:
    """What one cache or directory actor sent, by message kind; writes by policy (caches).

    Written only by the actor that owns it (and its restarted successor,
    after the old one is dead), read by ``stats()``.
    """

    def __init__(self) -> None:
        self.sent: dict[str, int] = {}
        self.writes: dict[str, int] = {}

    def count_sent(self, kind: str) -> None:
        self.sent[kind] = self.sent.get(kind, 0) + 1

    def count_write(self, policy: str) -> None:
        self.writes[policy] = self.writes.get(policy, 0) + 1


class SystemCounters:
    """Every counter one :class:`~gliding_actors.MemorySystem` keeps for ``stats()``.

    ``now`` is the clock miss latencies are measured with, in seconds:
    ``time.perf_counter`` by default, because a miss's cost is wall time spent
    in messages and actors, which the system's virtual clock (on ``sim``) does
    not see. Inject another to test the percentiles.
    """

    def __init__(self, counter: TokenCounter, *, now: Callable[[], float] = time.perf_counter) -> None:
        self.counter = counter
        self.now = now
        self._agents: dict[str, AgentCounters] = {}
        self._actors: dict[str, ActorTally] = {}
        self._lock = threading.Lock()  # creation of counters and the token memo; never the hit path
        self._latencies: collections.deque[float] = collections.deque(maxlen=LATENCY_WINDOW)
        self._memo: collections.OrderedDict[tuple[str, int], int] = collections.OrderedDict()
        self.tokenised = 0

    # -- registration (once per agent / actor) --------------------------------------------
    def agent(self, agent: str) -> AgentCounters:
        with self._lock:
            found = self._agents.get(agent)
            if found is None:
                found = self._agents[agent] = AgentCounters(agent, self)
            return found

    def actor(self, name: str) -> ActorTally:
        """The tally of actor ``name``; a restarted actor goes on counting in the same one."""
        with self._lock:
            found = self._actors.get(name)
            if found is None:
                found = self._actors[name] = ActorTally()
            return found

    # -- misses ------------------------------------------------------------------------------
    def note_miss_latency(self, seconds: float) -> None:
        self._latencies.append(seconds)  # deque.append is atomic

    def miss_latency_us(self) -> dict[str, float | int]:
        window = list(self._latencies)  # a C-level copy first: the deque may grow meanwhile
        window.sort()
        return {
            "p50": round(percentile(window, 50) * 1e6, 3),
            "p99": round(percentile(window, 99) * 1e6, 3),
            "samples": len(window),
        }

    # -- tokens ------------------------------------------------------------------------------
    def tokens_of(self, iri: str, version: int, value: Any) -> int:
        """Tokens of ``iri`` at ``version`` (memoised: a version is counted once)."""
        key = (iri, version)
        with self._lock:
            known = self._memo.get(key)
            if known is not None:
                self._memo.move_to_end(key)
                return known
        tokens = self.counter.count(line_text(iri, value))
        with self._lock:
            self.tokenised += 1
            self._memo[key] = tokens
            while len(self._memo) > _TOKEN_MEMO:
                self._memo.popitem(last=False)
        return tokens

    def tally_tokens(self, tally: LineTally) -> int:
        tokens = tally.tokens
        if tokens is None:
            key = (tally.iri, tally.version)
            with self._lock:
                tokens = self._memo.get(key)
            if tokens is None:
                value = msgpack.unpackb(tally.packed, raw=False)
                tokens = self.tokens_of(tally.iri, tally.version, value)
            tally.tokens = tokens
        return tokens

    # -- reading -----------------------------------------------------------------------------
    def agents(self) -> dict[str, AgentCounters]:
        with self._lock:
            return dict(self._agents)

    def actors(self) -> dict[str, ActorTally]:
        with self._lock:
            return dict(self._actors)

    def coherence(self, elsewhere: Mapping[str, Mapping[str, Mapping[str, int]]] | None = None) -> dict[str, Any]:
        """The coherence section of ``stats()``: reads per agent and in total, messages, writes.

        ``elsewhere``: ``{actor: {"sent", "writes"}}`` of actors that count in
        another process (directory shards on Ray), added to this process's tallies.
        """
        per_agent = {agent: c.snapshot() for agent, c in sorted(self.agents().items())}
        keys = ("reads", "hits", "board_hits", "local_hits", "misses", "fills", "tokens_saved", "tokens_fetched")
        total = {k: sum(a[k] for a in per_agent.values()) for k in keys}
        messages: collections.Counter[str] = collections.Counter()
        writes = collections.Counter({"write_back": 0, "write_through": 0})
        evictions = 0
        counted = [(name, dict(t.sent), dict(t.writes)) for name, t in sorted(self.actors().items())]  # C-level copies
        counted += [(name, dict(t["sent"]), dict(t["writes"])) for name, t in sorted((elsewhere or {}).items())]
        for name, sent, written in counted:
            messages.update(sent)
            if name.startswith("cache:"):
                evictions += sum(sent.get(k, 0) for k in ("PutS", "PutE", "PutM"))
            writes.update(written)
        return {
            "agents": per_agent,
            **total,
            "hit_rate": round(total["hits"] / total["reads"], 6) if total["reads"] else 0.0,
            "miss_latency_us": self.miss_latency_us(),
            "latency_clock": getattr(self.now, "__qualname__", repr(self.now)),
            "evictions": evictions,
            "messages": dict(sorted(messages.items())),
            "messages_total": sum(messages.values()),
            "writes": dict(writes),
        }
