"""Plain logic of the Prefetcher: which nodes an intent makes worth loading.

Breadth-first from each entity the agent now cares about, over the graph's
links in both directions (a step names its task, so the task's steps are
reached from the task only backwards), up to ``hops``. A node at distance
``h`` from a start entity earns ``decay ** h`` from it; its score is the sum
over the start entities (a node near several of them is a better bet than
one near a single one). The start entities themselves are not ranked: the
agent named them, it will read them anyway — and they are loaded with the rest.
Ties go to the IRI, so a plan is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

__all__ = ["plan_prefetch"]


def plan_prefetch(
    entities: Sequence[str],
    neighbours: Callable[[str], Iterable[str]],
    *,
    hops: int = 2,
    decay: float = 0.5,
    top_k: int = 5,
    eligible: Callable[[str], bool] = lambda _iri: True,
) -> list[tuple[str, float]]:
    """The ``top_k`` best ``(iri, score)`` reachable within ``hops`` of ``entities``, best first.

    ``neighbours(iri)`` lists the IRIs linked to ``iri`` (either direction);
    ``eligible(iri)`` says whether a node may be loaded (a line that exists
    and that the agent may read). An ineligible node still carries the walk
    on — a link through a node the agent may not load still says its
    neighbours are related — it just is not ranked.
    """
    starts = list(dict.fromkeys(entities))
    start_set = set(starts)
    scores: dict[str, float] = {}
    for start in starts:
        seen = {start}
        frontier = [start]
        for hop in range(1, hops + 1):
            nxt: list[str] = []
            for node in frontier:
                for other in sorted(set(neighbours(node))):
                    if other in seen:
                        continue
                    seen.add(other)
                    nxt.append(other)
                    if other not in start_set:
                        scores[other] = scores.get(other, 0.0) + decay**hop
            frontier = nxt
            if not frontier:
                break
    ranked = sorted(((iri, s) for iri, s in scores.items() if eligible(iri)), key=lambda kv: (-kv[1], kv[0]))
    return ranked[:top_k]
