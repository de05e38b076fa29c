"""The L3 projection service: a worker-actor pool, a view actor, and the handle-side entry point.

Actors (thin hosts of the plain code in ``_gather``, ``_shape`` and ``_views``):

* ``l3:worker:<i>`` (``config.l3.workers`` of them) — ``{"t": "project", …}``
  → the projection: gather the scope into a scratch store, run the frame,
  frame the JSON-LD, fit the budget, keep the view. On the threads runtime
  each worker is a thread, and pyoxigraph releases the GIL while it queries,
  so two workers really use two cores for query-heavy frames.
* ``l3:views`` — subscribed (push) to the bus topic ``line.changed``; each
  event bumps the changed node in the :class:`ViewCache` and finds what the
  line now links to. ``{"t": "stats"}`` → the cache's counters.

The handle-side entry point (:meth:`ProjectionService.submit`, what
``Agent.submit_project`` calls) checks the arguments — bad input is
:class:`~gliding_actors.errors.InvalidInput` before anything is sent — then
looks the view up **without a message**; on a miss it stamps the projection,
recalls every dirty line home and asks the blackboard for the task's subtree
(both at once), then sends the work to the next worker, round robin. No
actor waits on another: the steps are chained futures.
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import pyoxigraph as ox

from gliding_actors._ports import MemoryPorts
from gliding_actors.bus import BUS_ACTOR
from gliding_actors.coherence._hosting import LINE_CHANGED, unpack_value
from gliding_actors.errors import ActorUnavailable, GlidingError, InvalidInput, show
from gliding_actors.l0 import is_valid_label
from gliding_actors.l1._tokens import TokenCounter, get_counter
from gliding_actors.l2._blackboard import BLACKBOARD_ACTOR
from gliding_actors.l2._board_requests import Agents, TaskMembers
from gliding_actors.l2._jsonld import GRAPH_BASE, to_quads
from gliding_actors.l3._framer import (
    FRAME,
    FRAMED,
    FRAMER_PREFIX,
    FramerRecipe,
    decode_failure,
    frame_to_plain,
    run_frame,
)
from gliding_actors.l3._frames import Frame, FrameRegistry, default_frame
from gliding_actors.l3._gather import Gathered, gather, links_of, live_triples
from gliding_actors.l3._views import ViewCache, ViewKey
from gliding_actors.runtime import (
    DEFERRED,
    IN_DRIVER,
    RUNTIME_SENDER,
    ChainedFuture,
    CompletedFuture,
    Context,
    Future,
    GatheredFuture,
    ReplyToken,
)

if TYPE_CHECKING:
    from gliding_actors.hyperspace._service import HyperspaceService


class ProjectionPorts(MemoryPorts, Protocol):
    """What L3 uses of the memory: the common port, and hyperspace (semantic projections)."""

    @property
    def hyperspace(self) -> HyperspaceService: ...

__all__ = ["VIEWS_ACTOR", "WORKER_PREFIX", "ProjectionPorts", "ProjectionService", "ProjectionWorker", "ViewsActor"]

WORKER_PREFIX = "l3:worker:"
VIEWS_ACTOR = "l3:views"

_CHECK_GRAPH = ox.NamedNode(GRAPH_BASE + "l3")


#: the largest token budget a projection takes (beyond any model's context; it must fit the wire's integers)
MAX_BUDGET = 1_000_000_000


def _check_task(task: object) -> str | None:
    if task is None:
        return None
    if not isinstance(task, str) or not is_valid_label(task) or any(c.isspace() for c in task):
        raise InvalidInput(
            f"a task id is a non-empty string without spaces, control characters or lone surrogates, not {show(task)}",
            path=("task",),
        )
    return task


def _check_budget(max_tokens: object) -> int | None:
    if max_tokens is None:
        return None
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not 1 <= max_tokens <= MAX_BUDGET:
        raise InvalidInput(
            f"max_tokens is an integer in [1, {MAX_BUDGET:,}] (or none for no budget), not {show(max_tokens)}",
            path=("max_tokens",),
        )
    return max_tokens


def _iri_roots(ids: Iterable[str]) -> list[str]:
    """The ids that are IRIs (a DAG task id like ``design`` cannot be linked to)."""
    out: list[str] = []
    for i in sorted(set(ids)):
        try:
            ox.NamedNode(i)
        except ValueError:
            continue
        out.append(i)
    return out


class ProjectionService:
    """L3 of one :class:`~gliding_actors.MemorySystem`: frames, views, workers.

    Use :meth:`start`; ``memory.l3`` holds it. :meth:`register_frame` adds a
    user frame; :meth:`submit` is what ``Agent.submit_project`` calls.
    """

    def __init__(self, memory: ProjectionPorts) -> None:
        config = memory.config.l3
        self._memory = memory
        self.frames = FrameRegistry()
        self.counter: TokenCounter = get_counter(config.counter)
        self.views = ViewCache(config.max_views, resolver=self._links_now)
        self.workers = tuple(f"{WORKER_PREFIX}{i}" for i in range(config.workers))
        #: with ``l3.framers``: worker i sends its gathered scopes to framer i (docs/L3.md)
        self.framers = tuple(f"{FRAMER_PREFIX}{i}" for i in range(config.workers)) if config.framers else ()
        self._next = itertools.count()
        self._next_lock = threading.Lock()

    @classmethod
    def start(cls, memory: ProjectionPorts) -> ProjectionService:
        """Spawn the workers and the view actor, subscribe it to ``line.changed``
        and the cache to the line registry (waits for the bus)."""
        service = cls(memory)
        runtime = memory.runtime
        for i, name in enumerate(service.workers):
            framer = service.framers[i] if service.framers else None
            if framer is not None:
                # on Ray, on the cluster's nodes round robin (a picklable recipe)
                memory.spawn_supervised(framer, FramerRecipe(service.counter.name), placement=memory.node_for(i))
            # a worker with a framer hears back from it: on Ray, reachable from the cluster
            placement = IN_DRIVER if framer is not None else None
            memory.spawn_supervised(name, functools.partial(ProjectionWorker, service, framer), placement=placement)
        memory.spawn_supervised(VIEWS_ACTOR, lambda: ViewsActor(service.views))
        runtime.lookup(BUS_ACTOR).ask(
            {"type": "subscribe", "topic": LINE_CHANGED, "subscriber": VIEWS_ACTOR, "mode": "push"}
        ).get()
        memory.line_graphs.add_listener(service._recorded)
        return service

    # -- frames ---------------------------------------------------------------------------
    def register_frame(
        self,
        name: str,
        sparql: str,
        frame: Mapping[str, Any],
        *,
        description: str = "",
        priority: Iterable[str] = (),
        drop: Iterable[str] = (),
        live: bool = False,
    ) -> Frame:
        """Add a user frame (see :meth:`FrameRegistry.register`); InvalidInput, nothing registered, if any part is bad."""
        return self.frames.register(
            name, sparql, frame, description=description, priority=priority, drop=drop, live=live
        )

    # -- changes ----------------------------------------------------------------------------
    def _recorded(self, iri: str, version: int, forced: bool) -> None:
        """The line registry's listener: a write completed (or a crash reset a line)."""
        self.views.changed(iri, version, None, forced=forced)

    def _links_now(self, iri: str, version: int, agent: str | None) -> set[str] | None:
        """What line ``iri`` links to at ``version`` or newer; None while no copy that new is visible.

        Looks at home (the graph) and in the writer's published cache
        snapshot (``agent``, which the bus event names; the registry's call
        does not know it, and its line waits for the event or for the value
        to come home — a recall, which every cold projection makes). Called
        with the view cache's lock held: reads only, never blocks, takes no
        other lock.
        """
        if version <= 0:
            return set()
        memory = self._memory
        node = memory.graph.node(iri)
        if node is not None and node.version >= version:
            return set() if node.value is None else links_of(memory.graph.quads_of(iri))
        hit = memory.board.lookup(agent, iri) if agent is not None else None
        if hit is None or hit[2] < version:
            return None
        value = unpack_value(hit[1])
        if value is None:
            return set()
        try:
            return links_of(to_quads(iri, value, _CHECK_GRAPH))
        except GlidingError:
            return set()

    # -- projections ----------------------------------------------------------------------------
    def submit(
        self,
        role: str,
        frame: str | None = None,
        task: str | None = None,
        max_tokens: int | None = None,
        query: str | None = None,
        *,
        recall: bool = True,
    ) -> Future[dict[str, Any]]:
        """Project ``frame`` (None: the role's default) of ``task`` for ``role`` within ``max_tokens``.

        Answers ``{tokens, iris, jsonld, cached, mode, counter, frame, task,
        max_tokens, full_tokens}``. A valid cached view is answered at once,
        without a message. With ``query`` (a *semantic projection*), a hybrid
        search for it runs at the same time and ``iris`` is the two rankings
        merged (``hyperspace.project_w_frame`` / ``project_w_search``; see
        :func:`gliding_actors.hyperspace._engine.merge_projection`).
        ``recall=False``: the caller has just recalled the dirty lines, so a
        computed projection does not recall them again.
        """
        if query is not None:
            return self._semantic(role, frame, task, max_tokens, query)
        name = default_frame(role) if frame is None else frame
        chosen = self.frames.get(name)
        checked_task = _check_task(task)
        budget = _check_budget(max_tokens)
        key: ViewKey = (checked_task or "", chosen.name, role, budget or 0)
        if not chosen.live:
            hit = self.views.lookup(key)
            if hit is not None:
                hit["cached"] = True
                return CompletedFuture(hit)
        stamp = self.views.stamp()
        memory = self._memory
        board = memory.runtime.lookup(BLACKBOARD_ACTOR)
        parts: list[Any] = [memory.submit_recall() if recall else CompletedFuture(0)]
        parts.append(
            board.ask(TaskMembers(checked_task).message()) if checked_task is not None else CompletedFuture(None)
        )
        parts.append(board.ask(Agents().message()) if chosen.live else CompletedFuture(None))
        with self._next_lock:
            worker = self.workers[next(self._next) % len(self.workers)]
        request: dict[str, Any] = {
            "t": "project",
            "role": role,
            "frame": chosen.name,
            "task": checked_task,
            "max_tokens": budget,
            "stamp": stamp,
        }
        runtime = memory.runtime

        def send(values: list[Any]) -> Future[dict[str, Any]]:
            _moved, scope, team = values
            request["scope"] = scope
            request["team"] = None if team is None else team["agents"]
            future: Future[dict[str, Any]] = runtime.lookup(worker).ask(request)
            return future

        return ChainedFuture(GatheredFuture(parts, lambda values: values), send)

    def _semantic(
        self, role: str, frame: str | None, task: str | None, max_tokens: int | None, query: str
    ) -> Future[dict[str, Any]]:
        from gliding_actors.hyperspace._engine import merge_projection

        config = self._memory.config.hyperspace
        hyperspace = self._memory.hyperspace
        found = hyperspace.submit_search(role, query, config.project_k)  # checks query first
        projected = self.submit(role, frame, task, max_tokens)
        return GatheredFuture(
            [projected, found],
            lambda both: merge_projection(
                both[0], both[1], w_frame=config.project_w_frame, w_search=config.project_w_search, rrf_k=config.rrf_k
            ),
        )

    def compute(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """One projection (a worker's job): gather, frame, fit, keep. Reads only the stores."""
        job = self.gather(request)
        return self.keep(job, run_frame(job.gathered.query, job.frame, job.budget, self.counter))

    def gather(self, request: Mapping[str, Any]) -> Job:
        """The half of a projection that reads the blackboard: the scope's scratch store."""
        memory = self._memory
        role = str(request["role"])
        frame = self.frames.get(request["frame"])
        task: str | None = request.get("task")
        budget: int | None = request.get("max_tokens")
        scope: Mapping[str, Any] | None = request.get("scope")
        roots: list[str] | None = None
        statuses: Mapping[str, str] = {}
        if task is not None:
            ids = [task, *(scope or {}).get("tasks", ()), *(scope or {}).get("nodes", ())]
            roots = _iri_roots(ids)
            statuses = dict((scope or {}).get("statuses", {}))
        extra: list[ox.Triple] = []
        extra_members: list[str] = []
        if frame.live:
            # a task whose line the role may not read is not shown, not even its DAG status
            statuses = {t: st for t, st in statuses.items() if memory.may_read(role, t)}
            extra, extra_members = live_triples(request.get("team"), statuses)
            extra_members += [t for t in _iri_roots(statuses)]
        gathered = gather(
            memory.graph,
            memory.l0,
            graphs=memory.readable_graphs(role),
            graph_of=memory.line_graphs.graph_of,
            roots=roots,
            extra=extra,
            extra_members=extra_members,
        )
        return Job(role, frame, task, budget, int(request["stamp"]), gathered)

    def keep(self, job: Job, framed: Mapping[str, Any]) -> dict[str, Any]:
        """The projection's answer from the framing half's (:func:`run_frame`), its view kept."""
        result: dict[str, Any] = {
            "tokens": framed["tokens"],
            "iris": framed["iris"],
            "jsonld": framed["jsonld"],
            "cached": False,
            "mode": framed["mode"],
            "counter": self.counter.name,
            "frame": job.frame.name,
            "task": job.task,
            "max_tokens": job.budget,
            "full_tokens": framed["full_tokens"],
            "lines_read": job.gathered.lines_read,
        }
        if not job.frame.live:
            key: ViewKey = (job.task or "", job.frame.name, job.role, job.budget or 0)
            gathered = job.gathered
            self.views.insert(key, result, stamp=job.stamp, deps=gathered.deps, watch=gathered.watch)
        return result

    def stats(self) -> dict[str, Any]:
        """The view cache's counters, the workers and the counter name."""
        return {**self.views.stats(), "workers": len(self.workers), "counter": self.counter.name}


class Job(NamedTuple):
    """A projection between its halves: what was asked, and the gathered scope."""

    role: str
    frame: Frame
    task: str | None
    budget: int | None
    stamp: int
    gathered: Gathered


class ProjectionWorker:
    """Behaviour of ``l3:worker:<i>``: computes one projection per request.

    With a ``framer`` (``l3.framers``) it gathers, sends the scope to the
    framer and answers its caller when the framed result comes back
    (:mod:`gliding_actors.l3._framer`); if the framer's process is lost, the
    jobs in flight fail with ``ActorUnavailable`` and it frames by itself.
    """

    #: on Ray, the runtime tells this actor when a peer's process died (``peer.lost``)
    receives_peer_lost = True

    def __init__(self, service: ProjectionService, framer: str | None = None) -> None:
        self._service = service
        self._framer = framer
        #: job id -> (the caller's reply, the gathered job)
        self._framing: dict[int, tuple[ReplyToken, Job]] = {}

    def receive(self, message: Any, ctx: Context) -> Any:
        kind = message.get("t") if isinstance(message, dict) else None
        if ctx.sender == RUNTIME_SENDER:
            if kind == "peer.lost" and message.get("actor") == self._framer:
                self._framer_lost(ctx)
            return None
        if ctx.sender is not None and ctx.sender == self._framer and kind == FRAMED:
            self._framed(message, ctx)
            return None
        if kind != "project" or ctx.sender is not None:
            raise InvalidInput(f"an L3 worker computes {{'t': 'project'}} requests, not {show(message)}")
        if self._framer is None:
            return self._service.compute(message)
        job = self._service.gather(message)
        token = ctx.defer_reply()
        self._framing[token.request_id] = (token, job)
        ctx.send(
            self._framer,
            {
                "t": FRAME,
                "id": token.request_id,
                "frame": frame_to_plain(job.frame),
                "nquads": job.gathered.store.dump(format=ox.RdfFormat.N_QUADS),
                "graphs": [g.value for g in job.gathered.data_graphs],
                "max_tokens": job.budget,
            },
        )
        return DEFERRED

    def _framed(self, message: dict[str, Any], ctx: Context) -> None:
        waiting = self._framing.pop(message.get("id"), None)  # type: ignore[arg-type]
        if waiting is None:
            return  # answered already (its framer was taken for lost)
        token, job = waiting
        if message.get("ok"):
            ctx.resolve(token, self._service.keep(job, message["value"]))
        else:
            ctx.fail(token, decode_failure(message.get("error"), str(self._framer)))

    def _framer_lost(self, ctx: Context) -> None:
        lost, self._framer = self._framer, None
        for token, _job in self._framing.values():
            ctx.fail(token, ActorUnavailable(f"{lost} lost its process while framing a projection"))
        self._framing.clear()


class ViewsActor:
    """Behaviour of ``l3:views``: applies ``line.changed`` events to the view cache."""

    def __init__(self, views: ViewCache) -> None:
        self._views = views

    def receive(self, message: Any, ctx: Context) -> Any:
        if not isinstance(message, dict):
            raise InvalidInput(f"the L3 view actor takes objects, not {type(message).__name__}")
        if message.get("type") == "bus.event":
            event = message.get("message")
            if message.get("topic") == LINE_CHANGED and isinstance(event, dict):
                iri, version, agent = event.get("iri"), event.get("version"), event.get("agent")
                if isinstance(iri, str) and type(version) is int:
                    self._views.changed(iri, version, agent if isinstance(agent, str) else None)
                    self._views.drain()
            return None
        if message.get("t") == "stats":
            return self._views.stats()
        raise InvalidInput(f"unknown L3 view request {show(message)}")
