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

__all__ = ["SOURCES", "Assembled", "Candidate", "assemble", "render"]

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


@dataclass
class Assembled:
    """What :func:`assemble` chose."""

    text: str
    tokens: int
    chosen: list[Candidate]
    #: per source: items, tokens (of their lines, headings excluded) and how many it proposed
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
                cand.iri, cand.text, cand.source, dict(cand.ranks), cand.covers or frozenset({cand.iri}), 0, cand.order
            )
            continue
        for name, rank in cand.ranks.items():
            held.ranks[name] = min(rank, held.ranks.get(name, rank))
        held.covers = held.covers | cand.covers
    return list(by_iri.values())


def utility(cand: Candidate, rrf_k: int) -> float:
    """Reciprocal-rank fusion of the item's ranks (see the module docstring)."""
    return sum(1.0 / (rrf_k + rank) for rank in cand.ranks.values())


def render(chosen: Sequence[Candidate], header: str = "") -> str:
    """The prompt text: an optional header line, then one section per source in :data:`SOURCES` order."""
    if not chosen:
        return ""
    lines: list[str] = [header] if header else []
    for source in SOURCES:
        items = sorted((c for c in chosen if c.source == source), key=lambda c: (c.order, c.iri))
        if items:
            lines.append(_HEADINGS[source])
            lines.extend(c.text for c in items)
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
    for cand in pool:
        cand.tokens = max(1, count(cand.text))
        proposed[cand.source] = proposed.get(cand.source, 0) + 1
    # headings are paid for when their section opens: charge the first item of a source for it
    heading_cost = {s: count(_HEADINGS[s]) for s in SOURCES}
    budget = max_tokens - (count(header) if header else 0)
    # the sources' rankings fused into one order; the item at position p is
    # worth 1/p (relevance falls with rank like a Zipf law: no fitted constant)
    fused = sorted(pool, key=lambda x: (-utility(x, rrf_k), x.iri))
    worth = {cand.iri: 1.0 / position for position, cand in enumerate(fused, start=1)}
    covered: set[str] = set()
    opened: set[str] = set()
    chosen: list[Candidate] = []
    gains: dict[str, float] = {}
    spent = 0

    def gain(cand: Candidate) -> float:
        fresh = len(cand.covers - covered)
        return worth[cand.iri] * fresh / len(cand.covers)

    def cost(cand: Candidate) -> int:
        return cand.tokens + (0 if cand.source in opened else heading_cost[cand.source])

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
        spent += c
    text = render(chosen, header)
    tokens = count(text) if text else 0
    while tokens > max_tokens and chosen:
        # the join counted more than its parts: drop the least valuable item
        worst = min(chosen, key=lambda x: (gains[x.iri] / x.tokens, x.iri))
        chosen.remove(worst)
        text = render(chosen, header)
        tokens = count(text) if text else 0
    sources = {s: {"items": 0, "tokens": 0, "proposed": proposed.get(s, 0)} for s in SOURCES}
    for cand in chosen:
        sources[cand.source]["items"] += 1
        sources[cand.source]["tokens"] += cand.tokens
    order = {s: i for i, s in enumerate(SOURCES)}
    chosen.sort(key=lambda x: (order[x.source], x.order, x.iri))
    return Assembled(text, tokens, chosen, sources)
