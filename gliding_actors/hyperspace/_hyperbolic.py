"""Poincaré-ball geometry: the distance, its gradient, and the scores built on it.

Kept apart from :mod:`._poincare` (the model and its training) because these
are pure numpy functions of points, with no state: the model, its tests and the
benchmark all measure with the same ones.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from gliding_actors.errors import InvalidInput

__all__ = ["poincare_distance", "reconstruction_metrics"]

_FloatArray = npt.NDArray[np.float64]


# --- geometry ------------------------------------------------------------------------------


def poincare_distance(x: npt.ArrayLike, y: npt.ArrayLike) -> _FloatArray:
    """Poincaré distance between points (last axis = coordinates), broadcast
    like numpy: ``arcosh(1 + 2‖x−y‖² / ((1−‖x‖²)(1−‖y‖²)))``.

    The ``arcosh`` argument is computed as ``1 + δ`` and evaluated with
    ``log1p`` so that nearby points keep their precision (``arccosh`` of a
    number a hair above 1 loses half its digits)."""
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    sq = np.sum((a - b) ** 2, axis=-1)
    denom = (1.0 - np.sum(a * a, axis=-1)) * (1.0 - np.sum(b * b, axis=-1))
    delta = 2.0 * sq / np.maximum(denom, 1e-300)
    # arcosh(1 + δ) = log(1 + δ + sqrt(δ(2 + δ)))
    out: _FloatArray = np.log1p(delta + np.sqrt(delta * (delta + 2.0)))
    return out


# --- evaluation ----------------------------------------------------------------------------


def reconstruction_metrics(
    vectors: npt.ArrayLike, pairs: Iterable[tuple[int, int]]
) -> dict[str, float]:
    """Mean rank and mean average precision of reconstructing ``pairs`` from
    ``vectors`` (rows = nodes, Poincaré distance), as in the paper.

    For every node ``u`` with partners ``N(u) = {v : (u, v) ∈ pairs}``, each
    ``v ∈ N(u)`` is ranked by ``d(u, v)`` among ``u``'s non-partners (every
    node but ``u`` and ``N(u)``): rank = 1 + the number of non-partners
    strictly closer. ``mean_rank`` averages over all pairs; ``map`` averages
    over nodes the average precision of the list of all nodes but ``u``
    sorted by distance, ``N(u)`` being the relevant ones. The same function
    scores every model, so a comparison never depends on whose evaluator ran.
    """
    points = np.asarray(vectors, dtype=np.float64)
    partners: dict[int, set[int]] = {}
    for u, v in pairs:
        if u != v:
            partners.setdefault(int(u), set()).add(int(v))
    if not partners:
        raise InvalidInput("no pairs to reconstruct", path=("pairs",))
    n = len(points)
    rank_sum = 0.0
    rank_count = 0
    ap_sum = 0.0
    for u, related in partners.items():
        dist = poincare_distance(points[u], points)
        relevant = np.zeros(n, dtype=bool)
        relevant[list(related)] = True
        negative = ~relevant
        negative[u] = False
        neg_sorted = np.sort(dist[negative])
        pos = np.sort(dist[relevant])
        closer = np.searchsorted(neg_sorted, pos, side="left")  # non-partners strictly closer
        rank_sum += float(closer.sum() + len(pos))
        rank_count += len(pos)
        # the i-th closest partner (1-based) sits at position closer_i + i
        hits = np.arange(1, len(pos) + 1)
        ap_sum += float(np.mean(hits / (closer + hits)))
    return {"mean_rank": rank_sum / rank_count, "map": ap_sum / len(partners)}
