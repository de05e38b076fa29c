"""Plain logic of the MemoryScheduler: many ranked sources, one budget, one context.

No actor, no clock, no I/O: :func:`assemble` takes the candidates each source
proposes (already read and rendered by the service) and decides what goes in.

Why this shape
--------------
*One utility scale for every source.* Each source hands over a **ranking**
(the L1 chain newest first, the L3 projection in its frame's priority order,
the hybrid search best first). Rankings of different sources have no common
score — a cosine, a BM25 sum and "the frame lists Tasks first" cannot be
compared — but ranks can: an item's utility is its reciprocal-rank-fusion
score ``Σ_s 1 / (rrf_k + rank_s)`` over the sources that proposed it, with
the same ``rrf_k`` the search fuses with (``hyperspace.rrf_k``). An item two
sources agree on (a chain turn the search also found) is one item, worth more.

*The budget is split by marginal relevance per token, not by quotas.* Items
are taken greedily by ``marginal gain / tokens``, highest first, while they
fit. The gain of an item is its utility times the share of what it *covers*
that is not yet covered: a raw turn covers itself; a summary covers itself and
the turns it summarises (``summarizes``). So a turn already told by a chosen
summary adds nothing and is skipped, and a summary whose turns are all in
adds little — the dedup between layers falls out of the same rule. Each
source's share of the budget is whatever its items win; no constant says
"L1 gets 30 %".

*A summary is worth at least the best-placed turn it tells.* When the
search finds a turn and a summary of it, the summary (usually the shorter)
takes the turn's place in the order, and the turn, told by then, adds
nothing: the same facts for fewer tokens.

*An episode lifts its members.* Archived turns carry the L1 session they
belong to (``session``); what was said in one session hangs together — a
question answered two turns after it was asked, a plan and its outcome. So
the items are ranked once more, by how well their episode's best item does
(then by their own fusion score), and that ranking is fused with the others
like any source's: an item in the session of the best hit rises, an item
alone in its episode keeps its place. An item that belongs to no session is
an episode of its own.

*One heading per group, not a date per line.* Items may carry a ``group``
(an archived turn: the date of its session); within its section an item
sits under its group's heading, written once and paid for by the first
item of the group, so a context of many turns of a few sessions does not
spend a tenth of its budget repeating dates.

*Never over budget.* Item costs are counted one by one, but the prompt text
is the items joined, plus a heading per source; the final text is counted
again and the least valuable items dropped until it fits (a real BPE may
count a join differently from the sum of its parts).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SOURCES", "Assembled", "Candidate", "assemble", "group_heading", "rank_episodes", "render", "section_heading"]

#: the sources, in the order their sections appear in the prompt text
SOURCES: tuple[str, ...] = ("l1", "l3", "l2", "l0")

#: the heading of each source's section in the prompt text
_HEADINGS: Mapping[str, str] = {
    "l1": "## session",
    "l3": "## task",
    "l2": "## blackboard",
    "l0": "## archive",
}


@dataclass
class Candidate:
    """One thing that may go into the context."""

    #: the node it shows (an L2 line, an L0 archive, or an L1 chain turn's archive IRI)
    iri: str
    #: its rendered line in the prompt text
    text: str
    #: ``l1`` (the agent's chain), ``l3`` (the projection), ``l2`` (a line found by search), ``l0`` (an archive found by search)
    source: str
    #: rank in each ranking that proposed it (ranking name -> 1-based rank)
    ranks: dict[str, int] = field(default_factory=dict)
    #: what it tells: itself, plus the turns a summary summarises
    covers: frozenset[str] = frozenset()
    #: its counted tokens (set by :func:`assemble`)
    tokens: int = 0
    #: sort key of its line within its section (chain order, frame order, or time)
    order: tuple[Any, ...] = ()
    #: the heading its line sits under within its section ("": none), e.g. the date of a turn's session
    group: str = ""
    #: the episode it belongs to (an archived turn: its L1 session); None: an episode of its own
    episode: str | None = None


@dataclass
class Assembled:
    """What :func:`assemble` chose."""

    text: str
    tokens: int
    chosen: list[Candidate]
    #: per source: items, tokens (of their lines, headings excluded), how many it proposed and their tokens
    sources: dict[str, dict[str, int]]


def merge(candidates: Iterable[Candidate]) -> list[Candidate]:
    """One candidate per IRI: the ranks of every source that proposed it, the first proposer's text.

    Sources are listed in :data:`SOURCES` order by the caller, so a node the
    chain and the search both hold keeps the chain's rendering (its summary,
    already in the LLM's words) and both ranks.
    """
    by_iri: dict[str, Candidate] = {}
    for cand in candidates:
        held = by_iri.get(cand.iri)
        if held is None:
            by_iri[cand.iri] = Candidate(
                cand.iri,
                cand.text,
                cand.source,
                dict(cand.ranks),
                cand.covers or frozenset({cand.iri}),
                0,
                cand.order,
                cand.group,
                cand.episode,
            )
            continue
        if held.episode is None:
            held.episode = cand.episode
        for name, rank in cand.ranks.items():
            held.ranks[name] = min(rank, held.ranks.get(name, rank))
        held.covers = held.covers | cand.covers
    return list(by_iri.values())


def utility(cand: Candidate, rrf_k: int) -> float:
    """Reciprocal-rank fusion of the item's ranks (see the module docstring)."""
    return sum(1.0 / (rrf_k + rank) for rank in cand.ranks.values())


def rank_episodes(pool: Sequence[Candidate], rrf_k: int) -> None:
    """Give every candidate its place in the ``episode`` ranking (see the module docstring).

    Ordered by the best fusion score among the candidates of its episode,
    then by its own score, then by IRI; run before the scores are fused, on
    the ranks the sources gave.
    """
    own = {c.iri: utility(c, rrf_k) for c in pool}
    best: dict[tuple[str, str], float] = {}
    for c in pool:
        key = _episode_key(c)
        best[key] = max(best.get(key, 0.0), own[c.iri])
    ordered = sorted(pool, key=lambda c: (-best[_episode_key(c)], -own[c.iri], c.iri))
    for position, c in enumerate(ordered, start=1):
        c.ranks["episode"] = position


def _episode_key(cand: Candidate) -> tuple[str, str]:
    return ("episode", cand.episode) if cand.episode is not None else ("item", cand.iri)


def section_heading(source: str) -> str:
    """The line a source's section opens with."""
    return _HEADINGS[source]


def group_heading(group: str) -> str:
    """The line a group's items sit under."""
    return "### " + group


def render(chosen: Sequence[Candidate], header: str = "") -> str:
    """The prompt text: an optional header line, then one section per source in :data:`SOURCES` order.

    Within a section, lines are in their ``order``; lines of one group come
    together under the group's heading, the groups in the order of their first line.
    """
    if not chosen:
        return ""
    lines: list[str] = [header] if header else []
    for source in SOURCES:
        items = sorted((c for c in chosen if c.source == source), key=lambda c: (c.order, c.iri))
        if not items:
            continue
        lines.append(section_heading(source))
        first: dict[str, int] = {}
        for index, c in enumerate(items):
            first.setdefault(c.group, index)
        group = ""
        for c in sorted(items, key=lambda c: first[c.group]):  # stable: each group keeps its order
            if c.group and c.group != group:
                lines.append(group_heading(c.group))
            group = c.group
            lines.append(c.text)
    return "\n".join(lines)


def assemble(
    candidates: Iterable[Candidate],
    max_tokens: int,
    count: Callable[[str], int],
    *,
    rrf_k: int = 60,
    header: str = "",
) -> Assembled:
    """Choose, within ``max_tokens`` counted by ``count``, the candidates of most marginal relevance per token."""
    pool = merge(candidates)
    proposed: dict[str, int] = {}
    proposed_tokens: dict[str, int] = {}
    for cand in pool:
        cand.tokens = max(1, count(cand.text))
        proposed[cand.source] = proposed.get(cand.source, 0) + 1
        proposed_tokens[cand.source] = proposed_tokens.get(cand.source, 0) + cand.tokens
    # headings are paid for when their section (or group) opens: charge the first item of it
    heading_cost = {s: count(section_heading(s)) for s in SOURCES}
    group_cost = {c.group: count(group_heading(c.group)) for c in pool if c.group}
    budget = max_tokens - (count(header) if header else 0)
    rank_episodes(pool, rrf_k)
    # the rankings fused into one order; the item at position p is worth 1/p
    # (relevance falls with rank like a Zipf law: no fitted constant), and a
    # summary at least as much as the best-placed turn it tells
    fused = sorted(pool, key=lambda x: (-utility(x, rrf_k), x.iri))
    worth = {cand.iri: 1.0 / position for position, cand in enumerate(fused, start=1)}
    for cand in pool:
        for told in cand.covers:
            if told in worth and worth[told] > worth[cand.iri]:
                worth[cand.iri] = worth[told]
    covered: set[str] = set()
    opened: set[str] = set()
    opened_groups: set[tuple[str, str]] = set()
    chosen: list[Candidate] = []
    gains: dict[str, float] = {}
    spent = 0

    def gain(cand: Candidate) -> float:
        fresh = len(cand.covers - covered)
        return worth[cand.iri] * fresh / len(cand.covers)

    def cost(cand: Candidate) -> int:
        section = 0 if cand.source in opened else heading_cost[cand.source]
        group = 0 if not cand.group or (cand.source, cand.group) in opened_groups else group_cost[cand.group]
        return cand.tokens + section + group

    # lazy greedy: a popped item's gain and cost are recomputed; if it still
    # beats the next best it is taken, else pushed back (gains only shrink,
    # costs only shrink as sections open, so a stale key is an upper bound
    # only for the gain; the recompute handles both).
    heap = [(-gain(c) / cost(c), c.iri, i) for i, c in enumerate(pool)]
    heapq.heapify(heap)
    while heap and spent < budget:
        _key, iri, i = heapq.heappop(heap)
        cand = pool[i]
        g = gain(cand)
        if g <= 0.0:
            continue
        c = cost(cand)
        density = g / c
        if heap and density < -heap[0][0] - 1e-15:
            heapq.heappush(heap, (-density, iri, i))
            continue
        if spent + c > budget:
            continue  # does not fit; smaller items may
        chosen.append(cand)
        gains[cand.iri] = g
        covered |= cand.covers
        opened.add(cand.source)
        opened_groups.add((cand.source, cand.group))
        spent += c
    text = render(chosen, header)
    tokens = count(text) if text else 0
    while tokens > max_tokens and chosen:
        # the join counted more than its parts: drop the least valuable item
        worst = min(chosen, key=lambda x: (gains[x.iri] / x.tokens, x.iri))
        chosen.remove(worst)
        text = render(chosen, header)
        tokens = count(text) if text else 0
    sources = {
        s: {"items": 0, "tokens": 0, "proposed": proposed.get(s, 0), "proposed_tokens": proposed_tokens.get(s, 0)}
        for s in SOURCES
    }
    for cand in chosen:
        sources[cand.source]["items"] += 1
        sources[cand.source]["tokens"] += cand.tokens
    order = {s: i for i, s in enumerate(SOURCES)}
    chosen.sort(key=lambda x: (order[x.source], x.order, x.iri))
    return Assembled(text, tokens, chosen, sources)
