"""The session actor: hosts one agent's :class:`Session` and writes its archive to L0.

One actor per agent, ``l1:<agent id>``, spawned with the agent's handle
(``MemorySystem.agent``) and subscribed, in push mode, to the bus topic
``line.changed`` before the handle is returned — so no write that completes
after the agent exists can slip past its session.

Requests (plain dicts, key ``t``), from the agent's handle:

- ``turn {role, summary, thought, content, supplement?, relevance?, tokens?,
  cites?, embedding?}`` → ``{archive_iri, evicted, tokens, turn_tokens, seq,
  counter}``: the thought and content are archived first; a turn that cannot
  be archived never enters the chain;
- ``session`` → the chain (``Session.snapshot``);
- ``messages`` → the chain as LLM messages; ``handoff`` → a hand-off text;
- ``query {embedding? | text?}`` → ``{evicted}`` (neither: clear the query);
- ``resume {fresh?}`` → ``{turns, weak_refs, unreadable}``: rebuild the session
  left open in L0 (:meth:`SessionActor.resume`); ``fresh``: then close it;
- ``close`` → archives the session node, empties the chain, answers
  ``{session_iri, blocks, tokens, counter}``.

Bus events ``{"type": "bus.event", "topic": "line.changed", "message": {iri,
version}}`` mark citing turns stale. They arrive asynchronously, after the
write they announce completed: an op issued right after a write may not see
the mark yet (a scenario ``quiesce`` step, or any later op, will).

The chain lives in memory: a crash of this actor keeps it (the rebuilt actor
takes over the chain and block list, see :func:`start_session`); a reopened
memory rebuilds it from the archive (``resume``, which ``MemorySystem.agent``
asks for first), and numbering resumes after the highest block.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from gliding_actors.bus import BUS_ACTOR
from gliding_actors.clock import Clock
from gliding_actors.coherence._hosting import LINE_CHANGED
from gliding_actors.errors import InvalidInput, show
from gliding_actors.l0 import L0Store
from gliding_actors.l1._archive import JOURNAL_KEY, SessionArchive
from gliding_actors.l1._policy import EvictionPolicy
from gliding_actors.l1._session import (
    Embedder,
    Session,
    Turn,
    check_cites,
    check_embedding,
    check_text,
)
from gliding_actors.l1._tokens import TokenCounter, get_counter
from gliding_actors.runtime import Context

if TYPE_CHECKING:

    from gliding_actors.config import L1Config
    from gliding_actors.runtime import ActorRef

__all__ = ["SessionActor", "session_actor_name", "start_session", "turn_request"]

_ACTOR_PREFIX = "l1:"


def session_actor_name(agent: str) -> str:
    """The actor name of ``agent``'s session."""
    return _ACTOR_PREFIX + agent


def turn_request(
    *,
    summary: object,
    thought: object = "",
    content: object = "",
    role: object = "assistant",
    supplement: object = False,
    relevance: object = None,
    tokens: object = None,
    cites: object = None,
    embedding: object = None,
    version_of: Callable[[str], int] | None = None,
) -> dict[str, Any]:
    """Check a turn's arguments and build the ``turn`` request; InvalidInput before anything is sent.

    ``cites`` is a list of line IRIs or a mapping IRI → version seen. For a
    list, the version is ``version_of(iri)``, the newest completed write the
    agent may know of, so only a later write marks the turn stale; pass a
    mapping when the LLM read an older version.
    """
    request: dict[str, Any] = {
        "t": "turn",
        "role": check_text(role, "a turn's role", empty=False),
        "summary": check_text(summary, "a turn's summary", empty=False),
        "thought": check_text(thought, "a turn's thought"),
        "content": check_text(content, "a turn's content"),
    }
    if type(supplement) is not bool:
        raise InvalidInput(f"supplement is true or false, not {show(supplement)}")
    request["supplement"] = supplement
    if relevance is not None:
        if isinstance(relevance, bool) or not isinstance(relevance, (int, float)) or not 0.0 <= relevance <= 1.0:
            raise InvalidInput(f"relevance is a number in [0, 1], not {show(relevance)}")
        request["relevance"] = float(relevance)
    if tokens is not None:
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            raise InvalidInput(f"tokens is an integer >= 0, not {show(tokens)}")
        request["tokens"] = tokens
    if embedding is not None:
        request["embedding"] = list(check_embedding(embedding, "a turn's embedding"))
    if cites is not None:
        request["cites"] = _cites(cites, version_of)
    return request


def _cites(cites: object, version_of: Callable[[str], int] | None) -> dict[str, int]:
    checked = check_cites(cites)
    if isinstance(cites, Mapping) or version_of is None:
        return checked
    return {iri: version_of(iri) for iri in checked}


class SessionActor:
    """Behaviour of ``l1:<agent>`` (see the module docstring)."""

    def __init__(
        self,
        agent: str,
        role: str,
        *,
        store: L0Store,
        clock: Clock,
        policy: EvictionPolicy,
        counter: TokenCounter,
        embedder: Embedder | None = None,
    ) -> None:
        self.agent = agent
        self.role = role
        self.archive = SessionArchive(store, agent)
        self.session = Session(agent, policy=policy, clock=clock, counter=counter, embedder=embedder)
        #: every block archived since the session opened (the chain and the evicted)
        self.blocks: list[str] = []
        #: the lines this session told the bus it wants ``line.changed`` of: those its chain cites
        self.interest: set[str] = set()

    # -- plain methods (the actor's handlers; tests and the bench call them directly) --
    def turn(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        session = self.session
        thought = check_text(msg.get("thought", ""), "a turn's thought")
        content = check_text(msg.get("content", ""), "a turn's content")
        iri = self.archive.next_block_iri()
        turn = session.prepare(
            seq=self.archive.next_block,
            role=msg.get("role", "assistant"),
            summary=msg.get("summary", ""),  # prepare checks it
            archive_iri=iri,
            supplement=msg.get("supplement", False),
            relevance=msg.get("relevance"),
            tokens=msg.get("tokens"),
            embedding=msg.get("embedding"),
            cites=msg.get("cites"),
        )
        record: dict[str, Any] = {
            "agent": self.agent,
            "agentRole": self.role,
            "session": self.archive.next_session_iri(),
            "seq": turn.seq,
            "role": turn.role,
            "summary": turn.summary,
            "thought": thought,
            "content": content,
            "supplement": turn.supplement,
            "relevance": turn.relevance,
            "relevanceGiven": turn.relevance_given,
            "tokens": turn.tokens,
            "counter": session.counter.name,
            "createdAt": turn.created_at,
            "cites": [{"iri": i, "version": v} for i, v in turn.cites.items()],
        }
        if msg.get("embedding") is not None and turn.embedding is not None:
            # the caller's own vector is kept; one the session's embedder made is made again from the summary
            record["embedding"] = list(turn.embedding)
        journal = session.journal()
        if journal:
            record[JOURNAL_KEY] = journal
        written = self.archive.write_block(record)  # raises having written nothing
        assert written == iri
        session.journal_written()
        self.blocks.append(iri)
        result = session.commit(turn)
        return {
            "archive_iri": iri,
            "evicted": result.evicted,
            "tokens": session.total_tokens,
            "turn_tokens": turn.tokens,
            "seq": turn.seq,
            "counter": session.counter.name,
        }

    def close(self) -> dict[str, Any]:
        session = self.session
        handoff = session.handoff(role=self.role)
        record = {
            "agent": self.agent,
            "agentRole": self.role,
            "openedAt": session.opened_at,
            "closedAt": session.clock.now(),
            "blocks": list(self.blocks),
            "chain": [t.archive_iri for t in session.turns],
            "weakRefs": session.weak_refs,
            "tokens": session.total_tokens,
            "counter": session.counter.name,
            "handoff": handoff["text"],
        }
        iri = self.archive.write_session(record)
        blocks = list(self.blocks)
        session.reset()
        self.blocks = []
        return {"session_iri": iri, "blocks": blocks, "tokens": record["tokens"], "counter": record["counter"]}

    def resume(self) -> dict[str, Any]:
        """Rebuild the chain of the session still open in L0 (its blocks not yet closed into a session node).

        Each block carries the journal of what changed before it (evictions,
        the query, stale marks): the chain before the last block is the open
        blocks minus every eviction, and the last block is added again at the
        time it was first added, so eviction decides as it did. Answers
        ``{"turns", "weak_refs"}`` (counts); a memory with nothing open
        answers zeros.
        """
        records = self.archive.open_blocks()
        if not records:
            return {"turns": 0, "weak_refs": 0}
        session = self.session
        weak: list[str] = []
        query: dict[str, Any] | None = None
        stale: dict[str, list[str]] = {}
        for record in records:
            journal = record.get(JOURNAL_KEY) or {}
            weak.extend(journal.get("evicted") or ())
            if "query" in journal:
                query = journal["query"]
            stale.update(journal.get("stale") or {})
        gone = set(weak)
        *before, last = records
        turns = [self._turn_of(r) for r in before if r["@id"] not in gone]
        session.restore([t for t in turns if t is not None], weak, query, stale)
        newest = self._turn_of(last)
        if newest is not None:
            session.commit(newest, now=newest.created_at)
        self.blocks = [r["@id"] for r in records]
        unreadable = turns.count(None) + (newest is None)
        return {"turns": len(session.turns), "weak_refs": len(session.weak_refs), "unreadable": unreadable}

    def _turn_of(self, record: Mapping[str, Any]) -> Turn | None:
        """A fresh chain turn from its archived block (its own vector, or the embedder's again).

        None for a block that does not read as a turn (written by another
        version, or damaged): it stays archived, out of the chain.
        """
        try:
            return self._parse_turn(record)
        except (InvalidInput, KeyError, TypeError, ValueError):
            return None

    def _parse_turn(self, record: Mapping[str, Any]) -> Turn:
        given = bool(record.get("relevanceGiven"))
        turn = self.session.prepare(
            seq=int(record["seq"]),
            role=str(record["role"]),
            summary=str(record["summary"]),
            archive_iri=str(record["@id"]),
            supplement=bool(record.get("supplement")),
            relevance=float(record["relevance"]) if given else None,
            tokens=int(record["tokens"]),
            embedding=record.get("embedding"),
            cites={c["iri"]: int(c["version"]) for c in record.get("cites") or ()},
        )
        return dataclasses.replace(turn, created_at=float(record["createdAt"]))

    def query(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        embedding = msg.get("embedding")
        text = msg.get("text")
        if text is not None:
            text = check_text(text, "a query", empty=False)
        return {"evicted": self.session.set_query(embedding, text=text)}

    def line_changed(self, event: Mapping[str, Any]) -> None:
        iri = event.get("iri")
        version = event.get("version")
        if isinstance(iri, str) and isinstance(version, int) and not isinstance(version, bool):
            self.session.line_changed(iri, version)

    # -- the actor ---------------------------------------------------------------
    def _update_interest(self, ctx: Context, cited_now: Mapping[str, int]) -> None:
        """Tell the bus which lines' changes this session wants: those its chain cites.

        ``cited_now`` is what a new turn cites, with the versions it saw: sent
        even for a line already wanted, so a change the bus published before
        this turn was recorded marks it stale too.
        """
        cited = {iri for turn in self.session.turns for iri in turn.cites}
        add = {iri: version for iri, version in cited_now.items() if iri in cited}
        remove = sorted(self.interest - cited)
        if not add and not remove:
            return
        self.interest = (self.interest - set(remove)) | set(add)
        ctx.send(
            BUS_ACTOR,
            {"type": "interest", "topic": LINE_CHANGED, "subscriber": session_actor_name(self.agent), "add": add, "remove": remove},
        )

    def receive(self, message: Any, ctx: Context) -> Any:
        if not isinstance(message, dict):
            raise InvalidInput(f"session requests are objects, not {type(message).__name__}")
        if message.get("type") == "bus.event":
            if message.get("topic") == LINE_CHANGED and isinstance(message.get("message"), dict):
                self.line_changed(message["message"])
                self._update_interest(ctx, {})  # a stale turn may have been evicted
            return None
        kind = message.get("t")
        if kind == "resume":
            resumed = self.resume()
            self._update_interest(ctx, {iri: v for turn in self.session.turns for iri, v in turn.cites.items()})
            if message.get("fresh"):  # the caller starts anew: the interrupted session is closed as it stood
                resumed["closed"] = self.close() if self.blocks else None
                self._update_interest(ctx, {})
            return resumed
        if kind == "turn":
            answer = self.turn(message)
            turn = self.session.turns[-1] if self.session.turns else None
            cites = turn.cites if turn is not None and turn.archive_iri == answer["archive_iri"] else {}
            self._update_interest(ctx, cites)
            return answer
        if kind == "session":
            return self.session.snapshot()
        if kind == "messages":
            return self.session.messages()
        if kind == "handoff":
            return self.session.handoff(role=self.role)
        if kind == "query":
            evicted = self.query(message)
            self._update_interest(ctx, {})
            return evicted
        if kind == "close":
            closed = self.close()
            self._update_interest(ctx, {})
            return closed
        raise InvalidInput(f"unknown session request {show(kind)}")


def start_session(
    agent: str,
    role: str,
    *,
    config: L1Config,
    store: L0Store,
    clock: Clock,
    spawn: Callable[[str, Callable[[], Any]], None],
    bus: ActorRef[Any],
    embedder: Embedder | None = None,
) -> None:
    """Spawn ``agent``'s session actor and subscribe it to ``line.changed`` (waits for the bus).

    Its collaborators are passed in: the ``l1`` section of the configuration,
    L0 (where turns are archived), the clock,
    ``spawn`` (the system's supervised spawn) and the bus.

    ``embedder`` (see :class:`~gliding_actors.l1.Embedder`): what the session
    embeds summaries and query texts with; :meth:`MemorySystem.agent` passes
    the memory's own (the vector engine's chain). None: relevance is the score
    each turn gives (or cosine to explicit embeddings) and a query *text* is
    refused with ``InvalidInput``.
    """
    policy = EvictionPolicy.from_config(config, role)
    counter = get_counter(config.counter)
    name = session_actor_name(agent)

    previous: list[SessionActor] = []

    def build() -> SessionActor:
        """A session actor; rebuilt after a crash, it keeps the chain it had.

        The chain (``Session``) and the list of archived blocks outlive the
        actor, as a directory's home does: ``turn`` archives a block, then
        commits it to the chain, and raises having changed neither if the
        archive refuses. The archive's numbering is re-read from L0, its
        durable truth, so a block archived by a handler that crashed before
        the commit keeps its number (never reused) and stays out of the chain.
        """
        actor = SessionActor(
            agent, role, store=store, clock=clock, policy=policy, counter=counter, embedder=embedder
        )
        if previous:
            actor.session, actor.blocks, actor.interest = previous[0].session, previous[0].blocks, previous[0].interest
        previous[:] = [actor]
        return actor

    spawn(name, build)
    # keyed: pushed only the changes of lines its turns cite (see _update_interest)
    # with the agent's role: the bus pushes only changes of lines the agent may read
    bus.ask(
        {"type": "subscribe", "topic": LINE_CHANGED, "subscriber": name, "mode": "push", "keyed": True, "role": role}
    ).get()
