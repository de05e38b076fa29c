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


#: the key under which a consolidation's fact names the turns it folded (PROV-O's ``prov:wasDerivedFrom``)
DERIVED_FROM = "http://www.w3.org/ns/prov#wasDerivedFrom"


def _derived_from(record: Mapping[str, Any]) -> list[str]:
    """The archive IRIs a fact's record says it was derived from (malformed entries skipped)."""
    found = record.get(DERIVED_FROM)
    if not isinstance(found, list):
        return []
    return [item["@id"] for item in found if isinstance(item, dict) and isinstance(item.get("@id"), str)]


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
        record = self._record(turn, thought, content)
        if msg.get("embedding") is not None and turn.embedding is not None:
            # the caller's own vector is kept; one the session's embedder made is made again from the summary
            record["embedding"] = list(turn.embedding)
        self._archive(iri, record)
        result = session.commit(turn)
        return {
            "archive_iri": iri,
            "evicted": result.evicted,
            "tokens": session.total_tokens,
            "turn_tokens": turn.tokens,
            "seq": turn.seq,
            "counter": session.counter.name,
        }

    def _record(self, turn: Turn, thought: str, content: str) -> dict[str, Any]:
        """A turn's archived block: what the chain knows of it, and its full text."""
        return {
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
            "tokens": turn.base_tokens,
            "counter": self.session.counter.name,
            "createdAt": turn.created_at,
            "cites": [{"iri": i, "version": v} for i, v in turn.cites.items()],
        }

    def _archive(self, iri: str, record: dict[str, Any]) -> None:
        """Write ``record`` as block ``iri`` with the session's journal; raises having written nothing."""
        journal = self.session.journal()
        if journal:
            record[JOURNAL_KEY] = journal
        written = self.archive.write_block(record)
        assert written == iri
        self.session.journal_written()
        self.blocks.append(iri)

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

    def fold(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        """Consolidate: the chain turns archived at ``msg["iris"]`` become one fact turn whose
        summary is ``msg["summary"]`` (the caller's summarizer wrote it, outside this actor).

        The fact is archived first, as a block like any turn's, naming every
        folded turn under :data:`DERIVED_FROM` (``prov:wasDerivedFrom``), so
        each stays reachable by IRI from the fact that replaced it; it cites
        what they cited (each line at the oldest version one of them saw) and
        is stale where one of them was. Nothing is archived when the IRIs do
        not all name turns of the chain.
        """
        session = self.session
        iris = msg.get("iris")
        if not isinstance(iris, list) or not iris or not all(isinstance(i, str) for i in iris):
            raise InvalidInput(f"fold: iris is a non-empty list of archive IRIs, not {show(iris)}")
        chain = {t.archive_iri: t for t in session.turns}
        if len(set(iris)) != len(iris) or any(i not in chain for i in iris):
            raise InvalidInput("fold: every IRI must name a distinct turn of the chain (one was evicted or folded since?)")
        folded = [chain[i] for i in iris]
        thought = check_text(msg.get("thought", ""), "a fact's thought")
        content = check_text(msg.get("content", ""), "a fact's content")
        cites: dict[str, int] = {}
        for turn in folded:
            for line, version in turn.cites.items():
                cites[line] = min(version, cites.get(line, version))
        roles = {t.role for t in folded}
        iri = self.archive.next_block_iri()
        fact = session.prepare(
            seq=self.archive.next_block,
            role=roles.pop() if len(roles) == 1 else "assistant",
            summary=msg.get("summary", ""),
            archive_iri=iri,
            supplement=all(t.supplement for t in folded),
            cites=cites,
        )
        fact = dataclasses.replace(fact, created_at=min(t.created_at for t in folded))
        stale = sorted({line for t in folded for line in t.stale})
        fact = session.marked_stale(fact, stale)
        record = self._record(fact, thought, content)
        record[DERIVED_FROM] = [{"@id": t.archive_iri} for t in folded]
        record["staleLines"] = stale
        self._archive(iri, record)
        session.fold(iris, fact)
        return {"fact": iri, "folded": list(iris), "tokens": session.total_tokens, "fact_tokens": fact.tokens}

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
        folded: set[str] = set()
        for record in records:
            journal = record.get(JOURNAL_KEY) or {}
            weak.extend(journal.get("evicted") or ())
            if "query" in journal:
                query = journal["query"]
            stale.update(journal.get("stale") or {})
            if record.get(DERIVED_FROM):  # a consolidation's fact: what it folded left the chain
                folded.update(_derived_from(record))
                if record.get("staleLines"):
                    stale.setdefault(record["@id"], list(record["staleLines"]))
        gone = set(weak) | folded
        *before, last = records
        # a fact's add evicted nothing, so it is restored as it stands rather than added again
        replayed = not last.get(DERIVED_FROM)
        turns = [self._turn_of(r) for r in (before if replayed else records) if r["@id"] not in gone]
        # a fact stands where the oldest turn it folded stood: the chain in time order, then by block
        chain = sorted((t for t in turns if t is not None), key=lambda t: (t.created_at, t.seq))
        session.restore(chain, weak, query, stale)
        newest = self._turn_of(last) if replayed and last["@id"] not in gone else None
        if newest is not None:
            session.commit(newest, now=newest.created_at)
        self.blocks = [r["@id"] for r in records]
        unreadable = turns.count(None) + (replayed and newest is None and last["@id"] not in gone)
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
        if kind == "fold":
            answer = self.fold(message)
            self._update_interest(ctx, {})
            return answer
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
