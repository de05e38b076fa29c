"""The workload of ``bench scaling``: an agent and its cache in one actor, running a closed loop.

:class:`TeamMember` hosts a :class:`~gliding_actors.coherence._hosting.CacheActor`
in the agent's own actor, so a read hit is a dict lookup in the agent's own
process — no message, wherever the directory shards
(:class:`~gliding_actors.coherence._distributed.ShardRecipe`) run. It runs a
:class:`WorkloadSpec` with one op in flight and answers with what it measured.
It runs unchanged on every backend, so the benchmark compares runtimes on the
same workload.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import time
from typing import Any

from gliding_actors.clock import Clock
from gliding_actors.coherence._cache import CacheController
from gliding_actors.coherence._hosting import (
    CACHE_PREFIX,
    CacheActor,
    SnapshotBoard,
    cache_name,
    unpack_value,
)
from gliding_actors.coherence._messages import directory_shard
from gliding_actors.errors import ActorUnavailable, InvalidInput
from gliding_actors.metrics._counters import percentile
from gliding_actors.runtime import DEFERRED, RUNTIME_SENDER, Context, ReplyToken

__all__ = ["TeamMember", "WorkloadSpec"]


@dataclasses.dataclass(frozen=True)
class WorkloadSpec:
    """A closed-loop mix of reads and writes over ``lines`` IRIs, the same for every runtime."""

    ops: int = 500
    lines: int = 200
    read_fraction: float = 0.9
    seed: int = 0
    graph: str = "execution"

    def __post_init__(self) -> None:
        if self.ops < 1 or self.lines < 1 or not 0.0 <= self.read_fraction <= 1.0:
            raise InvalidInput(f"a workload needs ops >= 1, lines >= 1, 0 <= read_fraction <= 1: {self}")

    def plan(self, agent: str) -> list[tuple[str, str]]:
        """``(kind, iri)`` per op for ``agent``: deterministic from the seed and the agent."""
        rng = random.Random(f"{self.seed}:{agent}")
        return [
            ("read" if rng.random() < self.read_fraction else "write", f"urn:line:{rng.randrange(self.lines)}")
            for _ in range(self.ops)
        ]


class _OpContext:
    """What the hosted :class:`CacheActor` sees: the member's context, with the
    agent's own ops as asks from outside whose replies come back to the member."""

    __slots__ = ("_ctx", "_member", "_sender")

    def __init__(self, member: TeamMember, ctx: Context, sender: str | None) -> None:
        self._member = member
        self._ctx = ctx
        self._sender = sender

    @property
    def name(self) -> str:
        return self._ctx.name

    @property
    def sender(self) -> str | None:
        return self._sender

    @property
    def clock(self) -> Clock:
        return self._ctx.clock

    def send(self, to: str, message: Any) -> None:
        self._ctx.send(to, message)

    def defer_reply(self) -> ReplyToken:
        return ReplyToken(self._member._op_id)

    # The member's own ops have negative ids; a positive one is an outside ask
    # (a ``load`` sent to the member) whose answer goes back to its asker.
    def resolve(self, token: ReplyToken, value: Any) -> None:
        if token.request_id < 0:
            self._member._completed(token.request_id, None)
        else:
            self._ctx.resolve(token, value)

    def fail(self, token: ReplyToken, error: BaseException) -> None:
        if token.request_id < 0:
            self._member._completed(token.request_id, error)
        else:
            self._ctx.fail(token, error)

    def schedule(self, delay_s: float, message: Any) -> None:
        self._ctx.schedule(delay_s, message)


class TeamMember:
    """One agent and its cache in one actor (named ``cache:<agent>``).

    ``{"t": "run", "workload": {...WorkloadSpec fields}}`` runs the agent's
    plan, one op at a time, and answers ``{ops, hits, misses, writes,
    errors, miss_us, write_us, elapsed_s}`` (latencies: medians in µs).
    Reads that hit are served from the snapshot the cache publishes, in this
    process; misses and writes are the cache's protocol with the directories.
    Other outside requests (``load``, ``store``, ``state``, ``states``) go to
    the cache as they are, answered as the cache answers them.
    """

    #: on Ray, the runtime tells this actor when a peer's process died (``peer.lost``)
    receives_peer_lost = True

    def __init__(self, agent: str, directories: tuple[str, ...], *, cache_lines: int = 1024) -> None:
        if not directories:
            raise InvalidInput("a team member needs at least one directory shard")
        self.agent = agent
        self._directories = directories
        #: a directory or peer cache whose process died: the protocol state may wait on it for ever
        self._lost: str | None = None
        board = SnapshotBoard()
        home_of = functools.partial(directory_shard, shards=directories)
        controller = CacheController(cache_name(agent), home_of, cache_lines)
        self._cache = CacheActor(agent, controller, board)
        self._view = board.view(agent)
        self._plan: list[tuple[str, str]] = []
        self._next = 0
        self._graph = "execution"
        self._op_id = 0
        #: (op id, kind, started ns) of the op in flight
        self._current: tuple[int, str, int] | None = None
        self._token: ReplyToken | None = None
        self._started_ns = 0
        self._counts = {"hits": 0, "misses": 0, "writes": 0, "errors": 0}
        self._miss_ns: list[int] = []
        self._write_ns: list[int] = []

    def on_start(self, ctx: Context) -> None:
        self._cache.on_start(ctx)

    def receive(self, message: Any, ctx: Context) -> Any:
        if ctx.sender == RUNTIME_SENDER and isinstance(message, dict) and message.get("t") == "peer.lost":
            self._peer_lost(str(message.get("actor")), ctx)
            return None
        if ctx.sender is None and isinstance(message, dict) and message.get("t") == "run":
            if self._lost is not None:
                raise ActorUnavailable(f"agent {self.agent} waits on {self._lost}, whose process died")
            if self._token is not None:
                raise InvalidInput(f"agent {self.agent} is already running a workload")
            spec = WorkloadSpec(**message.get("workload", {}))
            self._plan, self._next, self._graph = spec.plan(self.agent), 0, spec.graph
            self._token = ctx.defer_reply()
            self._started_ns = time.perf_counter_ns()
            self._advance(ctx)
            return DEFERRED
        if ctx.sender is None:
            return self._cache.receive(message, ctx)
        self._cache.receive(message, _OpContext(self, ctx, ctx.sender))
        self._advance(ctx)
        return None

    def _peer_lost(self, actor: str, ctx: Context) -> None:
        """A directory shard or another agent's cache lost its process. An op in
        flight may wait on it for ever (the protocol's recovery assumes a crashed
        actor's mailbox survives; a lost process's does not), so the run stops
        now with ActorUnavailable instead of at its caller's timeout, and later
        runs are refused the same way."""
        if actor not in self._directories and not actor.startswith(CACHE_PREFIX):
            return
        self._lost = actor
        self._plan, self._next = [], 0  # nothing of this plan runs on, whatever arrives late
        if self._token is not None:
            token, self._token = self._token, None
            self._current = None
            ctx.fail(token, ActorUnavailable(f"{actor} lost its process; agent {self.agent} stopped its run"))

    def _advance(self, ctx: Context) -> None:
        """Issue ops until one is waiting on the protocol or the plan is done."""
        while self._current is None and self._next < len(self._plan):
            kind, iri = self._plan[self._next]
            self._next += 1
            if kind == "read":
                hit = self._view.get(iri)
                if hit is not None:
                    unpack_value(hit[1])  # the private copy a reader gets
                    self._counts["hits"] += 1
                    continue
                request: dict[str, Any] = {"t": "load", "iri": iri}
            else:
                value = {"by": self.agent, "n": self._next}
                request = {"t": "store", "iri": iri, "value": value, "tags": [], "graph": self._graph}
            self._op_id -= 1  # negative: never a runtime's request id
            self._current = (self._op_id, kind, time.perf_counter_ns())
            self._cache.receive(request, _OpContext(self, ctx, None))
        if self._current is None and self._token is not None and self._next >= len(self._plan):
            token, self._token = self._token, None
            ctx.resolve(token, self._report())

    def _completed(self, op_id: int, error: BaseException | None) -> None:
        if self._current is None or self._current[0] != op_id:
            return
        _op, kind, started = self._current
        self._current = None
        took = time.perf_counter_ns() - started
        if error is not None:
            self._counts["errors"] += 1
        elif kind == "read":
            self._counts["misses"] += 1
            self._miss_ns.append(took)
        else:
            self._counts["writes"] += 1
            self._write_ns.append(took)

    def _report(self) -> dict[str, Any]:
        def median_us(samples: list[int]) -> float | None:
            return round(percentile(sorted(samples), 50) / 1000.0, 1) if samples else None

        return {
            "ops": len(self._plan),
            **self._counts,
            "miss_us": median_us(self._miss_ns),
            "write_us": median_us(self._write_ns),
            "elapsed_s": (time.perf_counter_ns() - self._started_ns) / 1e9,
        }
