"""The MemoryScheduler and the Prefetcher inside a :class:`~gliding_actors.MemorySystem`.

``memory.context`` holds the :class:`ContextService`. It spawns two actors:

* ``scheduler`` (:class:`SchedulerActor`) — assembles a context. The service
  first gathers, without waiting, what each layer has for the agent, after
  one recall of the dirty lines (so what follows is coherent): its L1 chain
  (the session actor), the L3 projection of its role's frame for its current
  task (the projection service) and a hybrid search (the hyperspace actor).
  When all have answered, one message carries them to the scheduler, which
  reads the hits' text from home or L0 (no actor, no lock: the recall already
  brought every line home) and runs :func:`~gliding_actors.context._assemble.assemble`.
  No actor waits on another (principle 2): the gathering is a chain of futures
  held by the caller.
* ``prefetch`` (:class:`PrefetcherActor`) — on an intent, walks the graph
  (:func:`~gliding_actors.context._prefetch.plan_prefetch`) and answers the
  plan; the service then sends one ``load`` per planned line to the agent's
  cache, exactly the message a read miss sends, so the line comes into L2 from
  L0 and into the agent's cache in S. Nobody waits for it: ``Agent.intent``
  returns at once.

**The current task** of an agent is, in order: the ``task`` argument of the
context call, else the last :meth:`ContextService.set_task` for the agent
(``Agent.set_task``), else none. A heartbeat's ``operation`` is free text
("implementing JWT"), not a task id, and the task of a lock or an attach is a
guess about which of several tasks the agent is on; an orchestrator knows, so
it says. Without a current task there is no projection and the L3 share of
the budget goes to recall (the L3 → L2 → L0 fallback, docs/CONTEXT.md).
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from gliding_actors._ports import MemoryPorts
from gliding_actors.coherence._hosting import cache_name
from gliding_actors.context._assemble import Candidate, assemble
from gliding_actors.context._intent import IntentWatcher
from gliding_actors.context._prefetch import plan_prefetch
from gliding_actors.errors import EmbeddingError, InvalidInput, show
from gliding_actors.hyperspace._embedders import TextEmbedder
from gliding_actors.hyperspace._text import node_text
from gliding_actors.l0 import is_valid_iri
from gliding_actors.l1._actor import session_actor_name
from gliding_actors.l1._archive import is_archive_iri
from gliding_actors.l1._tokens import TokenCounter, get_counter
from gliding_actors.l2._jsonld import GENID_BASE
from gliding_actors.l3 import default_frame
from gliding_actors.l3._gather import links_of
from gliding_actors.runtime import ChainedFuture, CompletedFuture, Context, Future, GatheredFuture

if TYPE_CHECKING:
    from gliding_actors.hyperspace._service import HyperspaceService
    from gliding_actors.l3._service import ProjectionService


class ContextPorts(MemoryPorts, Protocol):
    """What the scheduler and the prefetcher use of the memory: the common port,
    L3 (the task's projection) and hyperspace (recall by search)."""

    @property
    def l3(self) -> ProjectionService: ...
    @property
    def hyperspace(self) -> HyperspaceService: ...

__all__ = [
    "PREFETCH_ACTOR",
    "SCHEDULER_ACTOR",
    "ContextService",
    "PrefetcherActor",
    "SchedulerActor",
    "check_context_args",
    "check_entities",
]

SCHEDULER_ACTOR = "scheduler"
PREFETCH_ACTOR = "prefetch"

_INCOMING = "SELECT DISTINCT ?s ?o WHERE { GRAPH ?g { ?s ?p ?o } FILTER(isIRI(?s)) }"
_SPACE = re.compile(r"\s+")
#: the cheapest item worth a place (an id and a few words): when the hits run
#: out before the budget does, the search is asked again for as many as a
#: budget of such items could hold (a bound on the candidates, not a ranking knob)
_MIN_ITEM_TOKENS = 8
#: a typical recalled item (a line or an archived turn of a sentence or two):
#: the first search asks for as many hits as a budget of these holds. A
#: search's cost grows with the hits asked and, past the vector index's exact
#: range, with the memory, so the deep search is kept for the contexts it fills.
_TYPICAL_ITEM_TOKENS = 16
#: the scheduler is handed this many times the hits a budget holds: it ranks them again (by
#: episode; a summary in a turn's place), so the set that fits best is not always the first hits
_CHOICE = 2
_MAX_RECALL = 400


def check_context_args(query: object, max_tokens: object, task: object) -> tuple[str | None, int, str | None]:
    """Validate a context request before anything is sent: :class:`InvalidInput` naming the argument."""
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise InvalidInput(f"context max_tokens is an integer >= 1, not {show(max_tokens)}", path=("max_tokens",))
    if query is not None and (not isinstance(query, str) or not query.strip()):
        raise InvalidInput(f"context query is a non-empty string or None, not {show(query)}", path=("query",))
    return query, max_tokens, _check_task(task)


def _check_task(task: object) -> str | None:
    if task is None:
        return None
    if not isinstance(task, str) or not is_valid_iri(task):
        raise InvalidInput(f"a task id is an IRI-like string without spaces, not {show(task)}", path=("task",))
    return task


def check_entities(entities: object) -> list[str]:
    """An intent's entities: a non-empty list of IRIs (duplicates dropped, order kept)."""
    if isinstance(entities, str) or not isinstance(entities, (list, tuple)) or not entities:
        raise InvalidInput(f"intent entities are a non-empty list of IRIs, not {show(entities)}", path=("entities",))
    for item in entities:
        if not isinstance(item, str) or not is_valid_iri(item):
            raise InvalidInput(f"an intent entity is an IRI, not {show(item)}", path=("entities",))
    return list(dict.fromkeys(entities))


def _one_line(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def _archive_parts(node: Mapping[str, Any]) -> tuple[str, str]:
    """An archived turn or summary as one prompt line ``- who: what``, and the heading it sits under.

    The summary when there is one (it is what the agent chose to keep), else
    the content; never the thought. ``who:`` is left out when the text starts
    with that name already (a summary says who did what). The heading is the
    date of the turn's session (``sessionDate``; "" when it has none), written
    once for all the turns of that date. Where a line came from is in ``iris``.
    """
    body = _one_line(str(node.get("summary") or node.get("content") or node.get("thought") or ""))
    who = str(node.get("speaker") or node.get("agent") or "")
    named = bool(who) and re.match(re.escape(who) + r"(?!\w)", body) is not None
    line = "- " + (f"{who}: " if who and not named else "") + body
    return line, _one_line(str(node.get("sessionDate") or ""))


def _episode_of(node: Mapping[str, Any]) -> str | None:
    """The L1 session an archived turn belongs to (its ``session`` IRI), or None."""
    session = node.get("session")
    return session if isinstance(session, str) and session else None


def _summarized(node: Mapping[str, Any]) -> frozenset[str]:
    """The archive IRIs a summary node says it summarises (``summarizes``: IRIs or ``{"@id"}``)."""
    raw = node.get("summarizes")
    if not isinstance(raw, list):
        return frozenset()
    out = set()
    for item in raw:
        iri = item.get("@id") if isinstance(item, Mapping) else item
        if isinstance(iri, str) and iri:
            out.add(iri)
    return frozenset(out)


def _order_of(node: Mapping[str, Any], iri: str) -> tuple[Any, ...]:
    at = node.get("createdAt")
    return (float(at) if isinstance(at, (int, float)) and not isinstance(at, bool) else math.inf, iri)


class ContextService:
    """The scheduler and the prefetcher of one memory (see the module docstring)."""

    def __init__(self, memory: ContextPorts) -> None:
        self._memory = memory
        self.config = memory.config.context
        self.prefetch_config = memory.config.prefetch
        self.counter: TokenCounter = get_counter(self.config.counter)
        self._lock = threading.Lock()
        #: agent id -> its current task (set_task)
        self._tasks: dict[str, str] = {}
        #: intents planned and lines loaded, for stats and tests
        self.intents = 0
        self.loaded = 0
        #: contexts assembled and their tokens (MemorySystem.stats())
        self.assembled = 0
        self.tokens_assembled = 0
        #: agent id -> role, of every handle opened on this memory: who an intent change prefetches for
        self._agents: dict[str, str] = {}
        #: the intent-change rule's state (owned by the prefetcher actor)
        self._watcher = IntentWatcher(self.prefetch_config.intent_change_below)
        #: intents embedded in search's vector space (the same space as the lines)
        self._intent_embedder = TextEmbedder(memory.hyperspace.engine.chain)

    @classmethod
    def start(cls, memory: ContextPorts) -> ContextService:
        service = cls(memory)
        memory.spawn_supervised(SCHEDULER_ACTOR, lambda: SchedulerActor(service))
        memory.spawn_supervised(PREFETCH_ACTOR, lambda: PrefetcherActor(service))
        return service

    def note_agent(self, agent: str, role: str) -> None:
        """Agent ``agent`` (of ``role``) has a handle: an intent change prefetches for it too."""
        with self._lock:
            self._agents[agent] = role

    # -- intent changes --------------------------------------------------------------------------
    def intent_written(self, iri: str, value: Mapping[str, Any]) -> Future[dict[str, Any]] | None:
        """An intent line (written with ``prefetch.intent_tag``) was written: judge it, maybe prefetch.

        Called by the writer's handle once the write completed; returns at
        once. The prefetcher actor embeds the intent's text and applies the
        rule (:mod:`gliding_actors.context._intent`); on a change it plans,
        per role, around the intent, and the service loads each agent's plan
        (the intent line first) into its cache, as :meth:`submit_intent`
        does. The future answers ``{changed, similarity, loaded: {agent: [iris]}}``.
        """
        config = self.prefetch_config
        text = node_text(value)
        if not config.enabled or not config.intent_tag or not text.strip():
            return None
        memory = self._memory
        runtime = memory.runtime

        def judge(_moved: int) -> Future[dict[str, Any]]:
            # after the recall the graph holds the intent and what it links to (its puts may travel by message)
            asked: Future[dict[str, Any]] = runtime.lookup(PREFETCH_ACTOR).ask(
                {"t": "intent.written", "iri": iri, "text": text}
            )
            return asked

        judged: Future[dict[str, Any]] = ChainedFuture(memory.submit_recall(), judge)

        def load(verdict: dict[str, Any]) -> Future[dict[str, Any]]:
            plans: dict[str, list[str]] = verdict.get("loads") or {}
            loads = [
                runtime.lookup(cache_name(agent)).ask({"t": "load", "iri": line})
                for agent, lines in plans.items()
                for line in lines
            ]

            def done(_values: list[Any]) -> dict[str, Any]:
                with self._lock:
                    self.loaded += len(loads)
                return {"changed": verdict["changed"], "similarity": verdict.get("similarity"), "loaded": plans}

            return GatheredFuture(loads, done)

        return ChainedFuture(judged, load)

    def judge_intent(self, iri: str, text: str) -> dict[str, Any]:
        """The prefetcher actor's half: embed, apply the rule, and on a change plan per role."""
        try:
            vector = self._intent_embedder.embed(text)
        except EmbeddingError as exc:  # no verdict without a vector: the next intent is compared to the last one judged
            return {"changed": False, "similarity": None, "error": str(exc)}
        verdict = self._watcher.observe(vector)
        if not verdict.changed:
            return {"changed": False, "similarity": verdict.similarity}
        with self._lock:
            agents = dict(self._agents)
        plans: dict[str, list[str]] = {}
        memory = self._memory
        for role in sorted(set(agents.values())):
            planned = [line for line, _score in self.plan(role, [iri])]
            if role == "system" or memory.may_read(role, iri):
                planned.insert(0, iri)
            plans[role] = planned
        return {
            "changed": True,
            "similarity": verdict.similarity,
            "loads": {agent: plans[role] for agent, role in sorted(agents.items()) if plans[role]},
        }

    # -- the current task ----------------------------------------------------------------------
    def set_task(self, agent: str, task: str | None) -> None:
        checked = _check_task(task)
        with self._lock:
            if checked is None:
                self._tasks.pop(agent, None)
            else:
                self._tasks[agent] = checked

    def task_of(self, agent: str) -> str | None:
        with self._lock:
            return self._tasks.get(agent)

    # -- context -----------------------------------------------------------------------------------
    def submit_context(
        self, agent: str, role: str, query: str | None, max_tokens: int, task: str | None = None
    ) -> Future[dict[str, Any]]:
        """Gather the layers for ``agent`` (of ``role``) without waiting, then assemble on the scheduler actor.

        Dirty lines are recalled once, first; the projection and the search
        that follow read the graph that recall brought up to date instead of
        recalling again each.
        """
        checked_query, budget, checked_task = check_context_args(query, max_tokens, task)
        current = checked_task if checked_task is not None else self.task_of(agent)
        memory = self._memory
        first_k = min(_MAX_RECALL, max(10, _CHOICE * budget // _TYPICAL_ITEM_TOKENS))
        deep_k = min(_MAX_RECALL, max(10, _CHOICE * budget // _MIN_ITEM_TOKENS))

        def layers(_moved: int) -> Future[list[Any]]:
            parts: list[Future[Any]] = [memory.runtime.lookup(session_actor_name(agent)).ask({"t": "session"})]
            if current is not None:
                parts.append(memory.l3.submit(role, None, current, budget, recall=False))
            return GatheredFuture(parts, lambda values: values)

        def after_layers(values: list[Any]) -> Future[dict[str, Any]]:
            session = values[0]
            projection = values[1] if len(values) > 1 else None
            recall_query = checked_query
            if recall_query is None:
                # no query: the agent's latest summary says what it is doing now
                turns = session.get("turns") or []
                recall_query = str(turns[-1]["summary"]) if turns else None
            asks = recall_query is not None and bool(recall_query.strip())

            def search(k: int) -> Future[dict[str, Any]]:
                if not asks:
                    return CompletedFuture({"iris": [], "scores": []})
                return memory.hyperspace.submit_search(role, str(recall_query), k, recall=False)

            def assemble_now(hits: dict[str, Any]) -> Future[dict[str, Any]]:
                request = {
                    "t": "assemble",
                    "agent": agent,
                    "role": role,
                    "query": checked_query,
                    "recall_query": recall_query,
                    "max_tokens": budget,
                    "task": current,
                    "session": {"turns": session.get("turns") or []},
                    "projection": None
                    if projection is None
                    else {"jsonld": projection.get("jsonld") or [], "frame": projection.get("frame"), "mode": projection.get("mode")},
                    "hits": {"iris": list(hits.get("iris") or []), "scores": list(hits.get("scores") or [])},
                }
                future: Future[dict[str, Any]] = memory.runtime.lookup(SCHEDULER_ACTOR).ask(request)
                return future

            def first_round(hits: dict[str, Any]) -> Future[dict[str, Any]]:
                def deeper_if_dry(context: dict[str, Any]) -> Future[dict[str, Any]]:
                    # every hit asked for came back, yet they offered the scheduler less than its choice
                    # (_CHOICE budgets' worth): there are more, so ask as deep as the budget could use
                    sources = context["sources"]
                    offered = sources["l2"]["proposed_tokens"] + sources["l0"]["proposed_tokens"]
                    ran_dry = len(hits.get("iris") or []) >= first_k and offered < _CHOICE * budget
                    if first_k < deep_k and ran_dry:
                        return ChainedFuture(search(deep_k), assemble_now)
                    return CompletedFuture(context)

                return ChainedFuture(assemble_now(hits), deeper_if_dry)

            return ChainedFuture(ChainedFuture(search(first_k), first_round), self._delivered)

        return ChainedFuture(ChainedFuture(memory.submit_recall(), layers), after_layers)

    def _delivered(self, context: dict[str, Any]) -> Future[dict[str, Any]]:
        """Count a context handed to its agent (a first assembly redone deeper is not counted)."""
        with self._lock:
            self.assembled += 1
            self.tokens_assembled += int(context["tokens"])
        return CompletedFuture(context)

    def assemble_now(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The scheduler actor's half: read the hits, build the candidates, choose, render."""
        memory = self._memory
        role = str(request["role"])
        candidates: list[Candidate] = []
        # L1: the chain, newest first (what the agent did last matters most)
        turns = list(request["session"]["turns"])
        for rank, turn in enumerate(reversed(turns), start=1):
            iri = str(turn["archive_iri"])
            text = "- " + _one_line(str(turn["summary"]))
            if turn.get("stale"):
                lines = ", ".join(turn.get("stale_lines") or [])
                text += f" [stale: {lines} changed since; re-read]"
            candidates.append(Candidate(iri, text, "l1", {"l1": rank}, frozenset({iri}), 0, (int(turn.get("seq", 0)),)))
        # L3: the projection's nodes, in the frame's priority order
        projection = request.get("projection")
        frame = None
        l3_found = 0
        if projection is not None:
            frame = projection.get("frame")
            for rank, node in enumerate(projection.get("jsonld") or [], start=1):
                node_id = node.get("@id") if isinstance(node, Mapping) else None
                iri = node_id if isinstance(node_id, str) else f"_:l3-{rank}"
                text = "- " + json.dumps(node, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
                candidates.append(Candidate(iri, text, "l3", {"l3": rank}, frozenset({iri}), 0, (rank,)))
                l3_found += 1
        # recall: the hybrid search's hits; lines are L2, archives L0
        l2_found = l0_found = 0
        for rank, iri in enumerate(request["hits"]["iris"], start=1):
            iri = str(iri)
            if is_archive_iri(iri):
                entry = memory.l0.retrieve(iri, touch=False)
                if entry is None or not isinstance(entry.content, Mapping):
                    continue
                node = entry.content
                covers = frozenset({iri}) | _summarized(node)
                line, when = _archive_parts(node)
                candidates.append(
                    Candidate(iri, line, "l0", {"recall": rank}, covers, 0, _order_of(node, iri), when, _episode_of(node))
                )
                l0_found += 1
            else:
                if role != "system" and not memory.may_read(role, iri):
                    continue  # moved out of reach since the search confined it
                copy = memory.line_copy(iri)
                if copy is None or copy[0] is None:
                    continue
                shown = {"@id": iri, **copy[0]}
                text = "- " + json.dumps(shown, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
                candidates.append(Candidate(iri, text, "l2", {"recall": rank}, frozenset({iri}), 0, (rank,)))
                l2_found += 1
        budget = int(request["max_tokens"])
        chosen = assemble(candidates, budget, self.counter.count, rrf_k=memory.config.hyperspace.rrf_k)
        return {
            "text": chosen.text,
            "tokens": chosen.tokens,
            "iris": [c.iri for c in chosen.chosen],
            "counter": self.counter.name,
            "max_tokens": budget,
            "task": request.get("task"),
            "frame": frame if frame is not None else default_frame(role),
            "query": request.get("query"),
            "recall_query": request.get("recall_query"),
            "sources": chosen.sources,
            # the L3 -> L2 -> L0 path: what each layer had for this request
            "path": [
                {"layer": "l3", "found": l3_found, "skipped": "no current task" if projection is None else None},
                {"layer": "l2", "found": l2_found},
                {"layer": "l0", "found": l0_found},
            ],
            "items": [{"iri": c.iri, "source": c.source, "tokens": c.tokens} for c in chosen.chosen],
        }

    # -- prefetch ----------------------------------------------------------------------------------
    def neighbours(self, role: str, iri: str) -> list[str]:
        """IRIs linked to line ``iri`` either way, through graphs ``role`` may read."""
        memory = self._memory
        out: set[str] = set()
        may_read_here = role == "system" or memory.may_read(role, iri)
        graphs = None if role == "system" else memory.readable_graphs(role)  # takes the graph lock itself
        with memory.graph_lock:
            if may_read_here:
                out |= links_of(memory.graph.quads_of(iri))  # as L3 reads links
            rows = memory.graph.query(
                _INCOMING, graphs=graphs, bindings={"o": {"@id": iri}}, role_is_system=role == "system"
            )["rows"]
        for row in rows:
            subject = row.get("s")
            if isinstance(subject, str) and not subject.startswith(GENID_BASE) and subject != iri:
                out.add(subject)
        out.discard(iri)
        return sorted(out)

    def plan(self, role: str, entities: list[str]) -> list[tuple[str, float]]:
        """The prefetch plan for ``entities`` (the prefetcher actor's job)."""
        memory = self._memory
        c = self.prefetch_config

        def eligible(iri: str) -> bool:
            if memory.line_graphs.known(iri) is None or is_archive_iri(iri):
                return False
            return role == "system" or memory.may_read(role, iri)

        return plan_prefetch(
            entities,
            lambda iri: self.neighbours(role, iri),
            hops=c.hops,
            decay=c.decay,
            top_k=c.top_k,
            eligible=eligible,
        )

    def submit_intent(self, agent: str, role: str, entities: Iterable[str]) -> Future[dict[str, Any]]:
        """Plan on the prefetcher, then load each planned line into ``agent``'s cache; nobody waits.

        Answers ``{prefetched, scores, entities}`` once the loads are done.
        With ``prefetch.enabled`` false it answers ``prefetched: []`` at once.
        """
        checked = check_entities(entities)
        if not self.prefetch_config.enabled:
            return CompletedFuture({"prefetched": [], "scores": [], "entities": checked})
        runtime = self._memory.runtime
        cache = cache_name(agent)
        planned = runtime.lookup(PREFETCH_ACTOR).ask({"t": "intent", "role": role, "entities": checked})

        def load(plan: dict[str, Any]) -> Future[dict[str, Any]]:
            iris = [str(i) for i in plan["iris"]]
            loads = [runtime.lookup(cache).ask({"t": "load", "iri": iri}) for iri in iris]

            def done(_values: list[Any]) -> dict[str, Any]:
                with self._lock:
                    self.loaded += len(iris)
                return {"prefetched": iris, "scores": list(plan["scores"]), "entities": checked}

            return GatheredFuture(loads, done)

        return ChainedFuture(planned, load)

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                "intents": self.intents,
                "intents_written": self._watcher.observed,
                "intent_changes": self._watcher.changes,
                "loaded": self.loaded,
                "assembled": self.assembled,
                "tokens_assembled": self.tokens_assembled,
                "counter": self.counter.name,
            }


class SchedulerActor:
    """Behaviour of ``scheduler``: ``assemble`` (see :meth:`ContextService.assemble_now`)."""

    def __init__(self, service: ContextService) -> None:
        self._service = service

    def receive(self, message: Any, ctx: Context) -> Any:
        if not isinstance(message, dict) or message.get("t") != "assemble":
            raise InvalidInput(f"the scheduler takes assemble requests, not {show(message)}")
        return self._service.assemble_now(message)


class PrefetcherActor:
    """Behaviour of ``prefetch``: ``intent`` answers the plan ``{iris, scores}``; ``intent.written``
    judges an intent line (:meth:`ContextService.judge_intent`)."""

    def __init__(self, service: ContextService) -> None:
        self._service = service

    def receive(self, message: Any, ctx: Context) -> Any:
        if isinstance(message, dict) and message.get("t") == "intent.written":
            iri, text = message.get("iri"), message.get("text")
            if not isinstance(iri, str) or not isinstance(text, str):
                raise InvalidInput(f"intent.written takes an iri and a text, not {show(message)}")
            return self._service.judge_intent(iri, text)
        if not isinstance(message, dict) or message.get("t") != "intent":
            raise InvalidInput(f"the prefetcher takes intent requests, not {show(message)}")
        service = self._service
        plan = service.plan(str(message["role"]), [str(e) for e in message["entities"]])
        with service._lock:
            service.intents += 1
        return {"iris": [iri for iri, _ in plan], "scores": [round(score, 6) for _, score in plan]}
