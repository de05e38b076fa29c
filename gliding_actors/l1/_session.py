"""One agent's summary chain under a token budget, with two-phase eviction.

This is the plain logic of L1: no actor, no L0, no threads, no wall clock
(time comes from an injected :class:`~gliding_actors.clock.Clock`). The actor
(``_actor.py``) archives each turn's thought and content to L0 and then hands
the turn's summary to :meth:`Session.add`; tests and the bench drive the class
directly.

**Eviction** (scenario spec, the ``l1`` paragraph) runs whenever the chain's
total exceeds the budget — after an add, and after a turn grew because it
became stale:

1. *hard threshold*: every non-supplement turn whose relevance is below
   ``relevance_threshold`` and whose age exceeds ``safe_window_s`` goes;
2. if still over budget, the turn with the **lowest** score
   ``beta·rel + (1−beta)·(w_recency/(1+age_s) + w_cost/(1+tokens))`` goes —
   supplements included — one at a time until the total fits. Ties go to the
   older turn.

``rel`` — in both phases — is the turn's cosine to the session's query
embedding when a query is set and the turn has an embedding, else its given
relevance score. High relevance keeps a turn.

**No turn is protected in phase 2** (the spec's phase 2 includes supplements
and names no exception), so after every add the total is at most the budget:
a turn whose own cost exceeds the whole budget is archived and evicted by its
own add (its IRI is in that add's ``evicted`` and in ``weak_refs``, and
``reload`` brings it back). Phase 1's protections (supplements, the safe
window) only decide what phase 1 may take.

**Staleness**: a turn may cite lines (IRI → the version it saw). When a cited
line changes past that version (:meth:`Session.line_changed`, fed from the
bus topic ``line.changed``), the turn is marked stale and renders with a note
naming the changed lines; the note's tokens count towards the budget, so a
stale turn can push the chain over it and trigger eviction. A stale turn is
*not* reloaded: its archive holds the same, equally old thought and content;
the note tells the LLM to re-read the lines instead.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from gliding_actors.clock import Clock
from gliding_actors.errors import EmbeddingError, InvalidInput, show
from gliding_actors.l0 import is_valid_iri
from gliding_actors.l1._policy import EvictionPolicy, cosine
from gliding_actors.l1._tokens import TokenCounter, default_counter

__all__ = [
    "DEFAULT_RELEVANCE",
    "AddResult",
    "Embedder",
    "Session",
    "Turn",
    "check_cites",
    "check_embedding",
    "check_text",
    "render_turn",
]

#: Relevance of a turn added without one (and without a query to compare it
#: to): above the default hard threshold, so an unscored turn is never
#: hard-evicted, and below a turn marked relevant.
DEFAULT_RELEVANCE = 0.5


@runtime_checkable
class Embedder(Protocol):
    """Turns one text into a vector.

    A session built with one embeds every turn's summary (unless the turn
    brings its own embedding) and every query text; without one, relevance is
    the given score unless a caller passes embeddings explicitly.
    :meth:`MemorySystem.agent` starts each session with the memory's own
    embedder (:class:`~gliding_actors.hyperspace.TextEmbedder`), so turns and
    queries share the vector space search uses. It may raise
    :class:`~gliding_actors.errors.EmbeddingError`: a turn is then kept
    without an embedding (scored by its given relevance), a query text fails.
    """

    def embed(self, text: str) -> Sequence[float]: ...


@dataclasses.dataclass(frozen=True)
class Turn:
    """One entry of the chain: the summary in context, the rest in L0 at ``archive_iri``."""

    #: 1-based number of the turn in its agent's history (the block number)
    seq: int
    #: the LLM message role it renders with (``assistant``, ``user``, ...)
    role: str
    summary: str
    archive_iri: str
    #: cost in the chain: ``base_tokens`` plus the stale note's tokens, if any
    tokens: int
    #: the given (or overridden) cost of the fresh turn
    base_tokens: int
    #: the given relevance score (0..1; :data:`DEFAULT_RELEVANCE` when not given)
    relevance: float
    supplement: bool
    created_at: float
    embedding: tuple[float, ...] | None = None
    #: cited line IRI -> version the turn saw (0: unknown, any change counts)
    cites: Mapping[str, int] = dataclasses.field(default_factory=dict)
    #: cited lines that changed since, sorted
    stale: tuple[str, ...] = ()
    #: the caller gave ``relevance``: it stands even when a query is set
    relevance_given: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Plain data (the ``session`` op's ``turns`` items)."""
        return {
            "seq": self.seq,
            "role": self.role,
            "summary": self.summary,
            "archive_iri": self.archive_iri,
            "tokens": self.tokens,
            "relevance": self.relevance,
            "supplement": self.supplement,
            "created_at": self.created_at,
            "cites": sorted(self.cites),
            "stale": bool(self.stale),
            "stale_lines": list(self.stale),
        }


@dataclasses.dataclass(frozen=True)
class AddResult:
    """What one add did: the turn, and what eviction removed, phase by phase."""

    turn: Turn
    #: phase 1 victims, in chain order
    phase1: tuple[Turn, ...]
    #: phase 2 victims, in the order they went
    phase2: tuple[Turn, ...]

    @property
    def evicted(self) -> list[str]:
        return [t.archive_iri for t in (*self.phase1, *self.phase2)]


def render_turn(summary: str, archive_iri: str, stale: Sequence[str] = ()) -> str:
    """The text of one turn in the LLM's context (what its tokens are counted on)."""
    body = f"{summary}\n[archive: {archive_iri}]"
    if stale:
        return f"{_stale_note(stale)}\n{body}"
    return body


def _stale_note(stale: Sequence[str]) -> str:
    return f"[stale: {', '.join(stale)} changed since this turn; re-read before relying on it]"


def check_embedding(value: object, what: str = "an embedding") -> tuple[float, ...]:
    """A non-empty sequence of finite numbers, as a tuple of floats; InvalidInput otherwise."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise InvalidInput(f"{what} is a list of numbers, not {type(value).__name__}")
    out: list[float] = []
    for x in value:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
            raise InvalidInput(f"{what} holds finite numbers only, not {show(x)}")
        out.append(float(x))
    if not out:
        raise InvalidInput(f"{what} is empty")
    return tuple(out)


def check_text(value: object, what: str, *, empty: bool = True) -> str:
    """``value`` if it is a string (a non-blank one unless ``empty``); InvalidInput otherwise."""
    if not isinstance(value, str):
        raise InvalidInput(f"{what} is a string, not {type(value).__name__}")
    if not empty and not value.strip():
        raise InvalidInput(f"{what} is empty")
    return value


def check_cites(cites: object) -> dict[str, int]:
    """IRI -> version seen (0 for a listed IRI), sorted; InvalidInput naming a bad IRI or version."""
    if cites is None:
        return {}
    if isinstance(cites, Mapping):
        pairs = list(cites.items())
    elif isinstance(cites, (str, bytes)) or not isinstance(cites, Iterable):
        raise InvalidInput(f"cites is a list of line IRIs or a mapping IRI -> version, not {show(cites)}")
    else:
        pairs = [(iri, 0) for iri in cites]
    out: dict[str, int] = {}
    for iri, version in pairs:
        if not is_valid_iri(iri):
            raise InvalidInput(f"cites: not a valid IRI: {show(iri)}")
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise InvalidInput(f"cites: the version of {iri} is an integer >= 0, not {show(version)}")
        out[iri] = max(version, out.get(iri, 0))
    return dict(sorted(out.items()))


@dataclasses.dataclass
class _Journal:
    """What changed in a session since its last archived block (see :meth:`Session.journal`)."""

    evicted: list[str] = dataclasses.field(default_factory=list)
    query_changed: bool = False
    query: dict[str, Any] | None = None
    stale: dict[str, list[str]] = dataclasses.field(default_factory=dict)


class Session:
    """The chain of one agent (see the module docstring). Not thread-safe: one actor owns it."""

    def __init__(
        self,
        agent: str,
        *,
        policy: EvictionPolicy | None = None,
        clock: Clock,
        counter: TokenCounter | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.agent = agent
        self.policy = policy if policy is not None else EvictionPolicy()
        self.clock = clock
        self.counter = counter if counter is not None else default_counter()
        self.embedder = embedder
        self._turns: list[Turn] = []
        self._total = 0
        self._weak_refs: list[str] = []
        #: every archive IRI this session has taken (a set: the check stays O(1) in history length)
        self._used: set[str] = set()
        self._query: tuple[float, ...] | None = None
        #: the embedding dimension, fixed by the first embedding or query seen
        self._dim: int | None = None
        #: turns kept without an embedding because the embedder failed on their summary
        self.embed_failures = 0
        #: how the query was given (``{"text"}`` or ``{"embedding"}``), None when there is none
        self._query_spec: dict[str, Any] | None = None
        self._journal: _Journal = _Journal()
        self.opened_at = clock.now()

    # -- reading ---------------------------------------------------------------
    @property
    def turns(self) -> tuple[Turn, ...]:
        """The chain, oldest first."""
        return tuple(self._turns)

    @property
    def total_tokens(self) -> int:
        return self._total

    @property
    def weak_refs(self) -> list[str]:
        """Archive IRIs of evicted turns, in eviction order (reload them from L0)."""
        return list(self._weak_refs)

    @property
    def query(self) -> tuple[float, ...] | None:
        return self._query

    def relevance_of(self, turn: Turn) -> float:
        """``rel``: the score the turn was given; else its cosine to the query when both exist; else the default."""
        if not turn.relevance_given and self._query is not None and turn.embedding is not None:
            return cosine(turn.embedding, self._query)
        return turn.relevance

    def score(self, turn: Turn, now: float | None = None) -> float:
        at = self.clock.now() if now is None else now
        return self.policy.score(self.relevance_of(turn), at - turn.created_at, turn.tokens)

    # -- changing ----------------------------------------------------------------
    def prepare(
        self,
        *,
        seq: int,
        role: str,
        summary: str,
        archive_iri: str,
        supplement: bool = False,
        relevance: float | None = None,
        tokens: int | None = None,
        embedding: Sequence[float] | None = None,
        cites: Iterable[str] | Mapping[str, int] | None = None,
    ) -> Turn:
        """Check a turn and build it, changing nothing (InvalidInput on bad input).

        The caller archives the turn between :meth:`prepare` and :meth:`commit`,
        so a turn that cannot be archived never enters the chain.
        """
        role = check_text(role, "a turn's role", empty=False)
        summary = check_text(summary, "a turn's summary", empty=False)
        if not is_valid_iri(archive_iri):
            raise InvalidInput(f"not a valid archive IRI: {show(archive_iri)}")
        if archive_iri in self._used:
            raise InvalidInput(f"archive IRI {archive_iri} is already used in this session")
        if type(supplement) is not bool:
            raise InvalidInput(f"supplement is true or false, not {show(supplement)}")
        if relevance is None:
            rel = DEFAULT_RELEVANCE
        elif isinstance(relevance, bool) or not isinstance(relevance, (int, float)) or not 0.0 <= relevance <= 1.0:
            raise InvalidInput(f"relevance is a number in [0, 1], not {show(relevance)}")
        else:
            rel = float(relevance)
        if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0):
            raise InvalidInput(f"tokens is an integer >= 0, not {show(tokens)}")
        if type(seq) is not int or seq < 1:
            raise InvalidInput(f"seq is an integer >= 1, not {show(seq)}")
        vector: tuple[float, ...] | None = None
        if embedding is not None:
            vector = check_embedding(embedding, "a turn's embedding")
            if self._dim is not None and len(vector) != self._dim:
                raise InvalidInput(f"a turn's embedding has {len(vector)} dimensions; this session's have {self._dim}")
        elif self.embedder is not None:
            vector = self._embed_summary(summary)
        cost = tokens if tokens is not None else self.counter.count(render_turn(summary, archive_iri))
        return Turn(
            seq=seq,
            role=role,
            summary=summary,
            archive_iri=archive_iri,
            tokens=cost,
            base_tokens=cost,
            relevance=rel,
            supplement=supplement,
            created_at=self.clock.now(),
            embedding=vector,
            cites=check_cites(cites),
            relevance_given=relevance is not None,
        )

    def _embed_summary(self, summary: str) -> tuple[float, ...] | None:
        """The summary's vector, or None when the embedder fails or its space is not this session's.

        A turn is never refused for its embedding: without one it is scored
        by its given relevance (a session whose caller passes embeddings of
        their own keeps their dimension).
        """
        assert self.embedder is not None
        try:
            vector = check_embedding(self.embedder.embed(summary), "the embedder's vector")
        except EmbeddingError:
            self.embed_failures += 1
            return None
        return None if self._dim is not None and len(vector) != self._dim else vector

    def commit(self, turn: Turn, *, now: float | None = None) -> AddResult:
        """Append a turn built by :meth:`prepare`, then evict while over budget.

        ``now``: the moment eviction scores ages at (default: the clock's);
        a resumed session replays its last turn at the time it was added.
        """
        if turn.embedding is not None and self._dim is None:
            self._dim = len(turn.embedding)
        self._turns.append(turn)
        self._used.add(turn.archive_iri)
        self._total += turn.tokens
        phase1, phase2 = self._evict(now)
        return AddResult(turn, phase1, phase2)

    def add(self, **kwargs: Any) -> AddResult:
        """:meth:`prepare` then :meth:`commit` (for callers that archive nothing)."""
        return self.commit(self.prepare(**kwargs))

    def set_query(self, embedding: Sequence[float] | None = None, *, text: str | None = None) -> list[str]:
        """Set (or clear, with neither argument) the query turns are compared to; evicts if needed.

        ``text`` needs an embedder. Returns the archive IRIs evicted (a new
        query changes ``rel``, and so what phase 1 and 2 would take, but only
        an over-budget chain is evicted from).
        """
        if embedding is not None and text is not None:
            raise InvalidInput("set_query takes an embedding or a text, not both")
        if text is not None:
            if self.embedder is None:
                raise InvalidInput("a query text needs an embedder; this session has none (pass an embedding)")
            vector: tuple[float, ...] | None = check_embedding(
                self.embedder.embed(check_text(text, "a query", empty=False)), "the embedder's vector"
            )
        elif embedding is not None:
            vector = check_embedding(embedding, "a query embedding")
        else:
            vector = None
        if vector is not None and self._dim is not None and len(vector) != self._dim:
            raise InvalidInput(
                f"the query has {len(vector)} dimensions; this session's embeddings have {self._dim}"
                + (" (its turns carry embeddings of their own: pass the query's embedding)" if text is not None else "")
            )
        self._query = vector
        if vector is not None and self._dim is None:
            self._dim = len(vector)
        if vector is None:
            self._query_spec = None
        else:
            self._query_spec = {"text": text} if text is not None else {"embedding": list(vector)}
        self._journal.query = self._query_spec
        self._journal.query_changed = True
        phase1, phase2 = self._evict()
        return [t.archive_iri for t in (*phase1, *phase2)]

    def set_policy(self, policy: EvictionPolicy) -> AddResult | None:
        """Switch to ``policy`` (a new budget, a role's numbers) and evict if the chain no longer fits.

        Returns what eviction removed (as an :class:`AddResult` without a new
        turn's meaning: ``turn`` is the newest turn), or None for an empty chain.
        """
        if not isinstance(policy, EvictionPolicy):
            raise InvalidInput(f"a policy is an EvictionPolicy, not {type(policy).__name__}")
        self.policy = policy
        if not self._turns:
            return None
        newest = self._turns[-1]
        phase1, phase2 = self._evict()
        return AddResult(newest, phase1, phase2)

    def line_changed(self, iri: str, version: int) -> tuple[list[str], list[str]]:
        """A line changed to ``version``: mark the turns citing an older version stale.

        Returns ``(newly stale archive IRIs, evicted archive IRIs)``. Events
        may arrive out of version order or twice; marking is idempotent.
        """
        stale: list[str] = []
        for i, turn in enumerate(self._turns):
            seen = turn.cites.get(iri)
            if seen is None or version <= seen or iri in turn.stale:
                continue
            lines = tuple(sorted((*turn.stale, iri)))
            note = _stale_note(lines)
            cost = turn.base_tokens + self.counter.count(note)
            self._total += cost - turn.tokens
            self._turns[i] = dataclasses.replace(turn, stale=lines, tokens=cost)
            self._journal.stale[turn.archive_iri] = list(lines)
            stale.append(turn.archive_iri)
        if not stale:
            return [], []
        phase1, phase2 = self._evict()
        return stale, [t.archive_iri for t in (*phase1, *phase2)]

    def marked_stale(self, turn: Turn, lines: Iterable[str]) -> Turn:
        """``turn`` marked stale on ``lines`` (none: unchanged), its cost grown by the note's tokens."""
        marked = tuple(sorted(set(lines)))
        if not marked:
            return turn
        return dataclasses.replace(turn, stale=marked, tokens=turn.base_tokens + self.counter.count(_stale_note(marked)))

    def fold(self, folded: Sequence[str], fact: Turn) -> None:
        """Replace the chain turns archived at ``folded`` by ``fact`` (built by :meth:`prepare`), where
        the oldest of them stood: a consolidation. InvalidInput, changing nothing, unless every IRI
        names a turn in the chain, once. The folded turns leave the chain but not the archive: the
        fact's own archived record names them (the caller writes it before this)."""
        wanted = list(folded)
        if not wanted or len(set(wanted)) != len(wanted):
            raise InvalidInput("a consolidation folds one or more distinct turns of the chain")
        positions = {t.archive_iri: i for i, t in enumerate(self._turns)}
        missing = [iri for iri in wanted if iri not in positions]
        if missing:
            raise InvalidInput(f"not a turn of this chain (evicted, or folded already): {missing[0]}")
        if fact.archive_iri in self._used:
            raise InvalidInput(f"archive IRI {fact.archive_iri} is already used in this session")
        at = min(positions[iri] for iri in wanted)
        gone = set(wanted)
        kept = [t for t in self._turns if t.archive_iri not in gone]
        self._turns = [*kept[:at], fact, *kept[at:]]
        self._used.add(fact.archive_iri)
        self._total = sum(t.tokens for t in self._turns)
        if fact.embedding is not None and self._dim is None:
            self._dim = len(fact.embedding)

    def reset(self) -> None:
        """Empty the chain and the weak references (a closed session's successor starts clean)."""
        self._turns = []
        self._total = 0
        self._weak_refs = []
        self._used = set()
        self._query = None
        self._query_spec = None
        self._dim = None
        self._journal = _Journal()
        self.opened_at = self.clock.now()

    # -- surviving a reopen --------------------------------------------------------
    def journal(self) -> dict[str, Any]:
        """What changed since the last :meth:`journal_written`: evictions, the query, stale marks.

        The session actor archives it with the next turn's block, so the
        chain can be rebuilt from L0 when the memory is reopened (:meth:`restore`).
        Plain data; empty keys left out.
        """
        j = self._journal
        out: dict[str, Any] = {}
        if j.evicted:
            out["evicted"] = list(j.evicted)
        if j.query_changed:
            out["query"] = j.query
        if j.stale:
            out["stale"] = {iri: list(lines) for iri, lines in j.stale.items()}
        return out

    def journal_written(self) -> None:
        """The journal is archived: start the next one."""
        self._journal = _Journal()

    def restore(
        self,
        turns: Sequence[Turn],
        weak_refs: Sequence[str],
        query: Mapping[str, Any] | None,
        stale: Mapping[str, Sequence[str]],
    ) -> None:
        """Take back a chain rebuilt from the archive, as it stood (no eviction runs).

        ``turns``: the chain, oldest first, fresh; ``stale``: turn IRI → the
        cited lines that had changed; ``query``: how it was given
        (``{"text"}`` is embedded again; one the embedder cannot embed now
        is dropped, and relevance falls back to the given scores).
        """
        self.reset()
        self._weak_refs = list(weak_refs)
        for turn in turns:
            turn = self.marked_stale(turn, stale.get(turn.archive_iri, ()))
            if turn.embedding is not None and self._dim is None:
                self._dim = len(turn.embedding)
            self._turns.append(turn)
            self._used.add(turn.archive_iri)
            self._total += turn.tokens
        self._used.update(self._weak_refs)
        if query is not None:
            try:
                if "text" in query:
                    self.set_query(text=str(query["text"]))
                else:
                    self.set_query(query.get("embedding"))
            except (InvalidInput, EmbeddingError):
                self.embed_failures += 1
        self._journal = _Journal()

    def _evict(self, now: float | None = None) -> tuple[tuple[Turn, ...], tuple[Turn, ...]]:
        policy = self.policy
        if self._total <= policy.token_budget:
            return (), ()
        if now is None:
            now = self.clock.now()
        phase1: list[Turn] = []
        kept: list[Turn] = []
        for turn in self._turns:
            if (
                not turn.supplement
                and self.relevance_of(turn) < policy.relevance_threshold
                and now - turn.created_at > policy.safe_window_s
            ):
                phase1.append(turn)
            else:
                kept.append(turn)
        total = self._total - sum(t.tokens for t in phase1)
        phase2: list[Turn] = []
        if total > policy.token_budget and kept:
            # Scores do not move within one eviction (one ``now``), so they are
            # computed once; each round takes the lowest (ties: the older turn).
            # Usually one or two rounds, so a min per round beats a sort.
            scored = [(self.score(t, now), t.seq, t) for t in kept]
            while total > policy.token_budget and scored:
                lowest = min(range(len(scored)), key=lambda i: scored[i][:2])
                victim = scored.pop(lowest)[2]
                phase2.append(victim)
                total -= victim.tokens
            kept = [entry[2] for entry in scored]
        self._turns = kept
        self._total = total
        self._weak_refs.extend(t.archive_iri for t in (*phase1, *phase2))
        self._journal.evicted.extend(t.archive_iri for t in (*phase1, *phase2))
        return tuple(phase1), tuple(phase2)

    # -- rendering -----------------------------------------------------------------
    def messages(self) -> list[dict[str, str]]:
        """The chain as LLM chat messages, oldest first: ``{"role", "content"}``.

        Each message's content is the turn's summary and its archive IRI (so
        the LLM can ask for the full turn); a stale turn starts with a note
        naming the lines that changed since.
        """
        return [{"role": t.role, "content": render_turn(t.summary, t.archive_iri, t.stale)} for t in self._turns]

    def handoff(self, *, role: str | None = None) -> dict[str, Any]:
        """A plain-text hand-off of this session for another agent, and its token cost.

        Lists the chain in order (stale turns marked), then how many turns
        were evicted and their IRIs, newest first, so the receiver can reload
        what it needs. ``counter`` names the counter of ``tokens``.
        """
        who = f"{self.agent} ({role})" if role else self.agent
        lines = [f"Hand-off from {who}: {len(self._turns)} turns in context, {len(self._weak_refs)} evicted."]
        for n, turn in enumerate(self._turns, start=1):
            mark = " (stale: " + ", ".join(turn.stale) + " changed)" if turn.stale else ""
            lines.append(f"{n}. {turn.summary}{mark} [{turn.archive_iri}]")
        if self._weak_refs:
            lines.append("Evicted, reload on demand: " + ", ".join(reversed(self._weak_refs)))
        text = "\n".join(lines)
        return {
            "text": text,
            "tokens": self.counter.count(text),
            "counter": self.counter.name,
            "iris": [t.archive_iri for t in self._turns],
            "weak_refs": list(self._weak_refs),
        }

    def snapshot(self) -> dict[str, Any]:
        """The ``session`` op's result keys (and a few more: counter, budget, query)."""
        return {
            "turns": [t.to_dict() for t in self._turns],
            "summaries": [t.summary for t in self._turns],
            "tokens": self._total,
            "weak_refs": list(self._weak_refs),
            "counter": self.counter.name,
            "budget": self.policy.token_budget,
            "query": self._query is not None,
        }
