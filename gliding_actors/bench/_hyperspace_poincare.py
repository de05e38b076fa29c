"""Poincaré embeddings against gensim's ``PoincareModel``: reconstruction of a tree.

Part of ``gliding-actors bench hyperspace`` (that suite merges these keys into
its report); runnable alone::

    python -m gliding_actors.bench._hyperspace_poincare [--quick]

**Data.** A deterministic balanced tree, branching 4, depth 5: 1,365 nodes,
1,364 edges, 6,372 pairs in the transitive closure (``--quick``: branching 3,
depth 4, 121 nodes). No taxonomy of that size ships with a dependency (gensim's
test hypernym files have < 100 lines), and a synthetic tree is fair: it is a
hierarchy with an exact answer and no noise, about the size of the WordNet
mammal subtree the paper and gensim's tutorial use (1,180 nodes, 6,540
closure pairs), and neither implementation has seen it. Both models train on
the same list of closure pairs (child, ancestor), as the paper does for
WordNet nouns, and are scored on reconstructing that list.

**Settings.** The same for both, gensim's defaults where they exist: 10
dimensions, 10 negatives per pair, learning rate 0.1, 10 burn-in epochs at
0.01 (both run the burn-in *before* the ``epochs``), batches of 10 pairs,
init uniform ±0.001, projection margin 1e-5, seed 0; gensim single-threaded
(``workers=1``) and with its own l2 regularisation left at its default (1.0;
ours has none). ``epochs`` = 50 (``--quick``: 10). Nothing was tuned on these
figures: the settings are the defaults of :class:`PoincareEmbedding`, which
are the paper's and gensim's.

**Figures.** ``poincare_map`` / ``poincare_mean_rank`` (ours) and
``gensim_map`` / ``gensim_mean_rank``, both from
:func:`~gliding_actors.hyperspace.reconstruction_metrics` run on each model's
vectors — the paper's protocol: every true ancestor of ``u`` ranked by
distance among ``u``'s non-ancestors (``u`` itself excluded); MAP over nodes.
``*_train_s`` is wall-clock training time (burn-in included).
``gensim_evaluator`` repeats the scoring with gensim's own
``ReconstructionEvaluation`` on both vector sets, as a cross-check that the
verdict does not depend on whose evaluator ran (gensim's counts ``u`` itself
as a non-neighbour at distance 0, so its ranks are one higher and its MAP
lower for both models). Target: ``poincare_map ≥ gensim_map``
(``poincare_map_ge_gensim``).

gensim is a benchmark-only dependency (``pip install 'gliding-actors[bench]'``),
imported lazily: without it the gensim figures are ``None`` and
``gensim_error`` says why.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from typing import Any

import numpy as np

from gliding_actors.hyperspace._poincare import (
    PoincareEmbedding,
    reconstruction_metrics,
    transitive_closure,
)

__all__ = ["balanced_tree", "run_poincare"]


def balanced_tree(branching: int, depth: int) -> list[tuple[str, str]]:
    """``(child, parent)`` edges of a complete ``branching``-ary tree of
    ``depth`` levels below the root ``n``; a node's name is its path
    (``n.2.0``), so the tree is the same on every run."""
    edges: list[tuple[str, str]] = []
    level = ["n"]
    for _ in range(depth):
        below = []
        for parent in level:
            for i in range(branching):
                child = f"{parent}.{i}"
                edges.append((child, parent))
                below.append(child)
        level = below
    return edges


def _gensim_figures(
    pairs: list[tuple[str, str]],
    settings: dict[str, Any],
    epochs: int,
    seed: int,
    ours: PoincareEmbedding,
) -> dict[str, Any]:
    try:
        from gensim.models.poincare import (
            PoincareModel,
            ReconstructionEvaluation,
        )
    except ImportError as exc:
        return {
            "gensim_available": False,
            "gensim_error": f"gensim is not installed ({exc}); pip install 'gliding-actors[bench]'",
            "gensim_map": None,
            "gensim_mean_rank": None,
            "gensim_train_s": None,
        }
    model = PoincareModel(
        pairs,
        size=settings["dim"],
        alpha=settings["lr"],
        negative=settings["negatives"],
        burn_in=settings["burn_in"],
        burn_in_alpha=settings["burn_in_lr"],
        epsilon=settings["epsilon"],
        init_range=(-settings["init_range"], settings["init_range"]),
        workers=1,
        seed=seed,
    )
    start = time.perf_counter()
    model.train(epochs=epochs, batch_size=settings["batch_size"], print_every=10**9)
    seconds = time.perf_counter() - start
    names = ours.nodes()
    theirs = np.array([model.kv[name] for name in names], dtype=np.float64)
    index = {name: i for i, name in enumerate(names)}
    scores = reconstruction_metrics(theirs, [(index[u], index[v]) for u, v in pairs])

    # gensim's own evaluator on both vector sets (it reads the pairs from a file)
    cross: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ga-poincare-") as tmp:
        path = os.path.join(tmp, "pairs.tsv")
        with open(path, "w", encoding="utf-8") as out:
            out.writelines(f"{u}\t{v}\n" for u, v in pairs)
        kv = model.kv
        cross["gensim"] = _rounded(ReconstructionEvaluation(path, kv).evaluate(max_n=None))
        for name in names:
            kv.vectors[kv.get_index(name)] = ours.vector(name)
        cross["poincare"] = _rounded(ReconstructionEvaluation(path, kv).evaluate(max_n=None))
    return {
        "gensim_available": True,
        "gensim_version": _gensim_version(),
        "gensim_map": round(scores["map"], 4),
        "gensim_mean_rank": round(scores["mean_rank"], 3),
        "gensim_train_s": round(seconds, 3),
        "gensim_evaluator": cross,
    }


def _gensim_version() -> str:
    import gensim

    return str(gensim.__version__)


def _rounded(scores: dict[str, Any]) -> dict[str, float]:
    return {key: round(float(value), 4) for key, value in scores.items()}


def run_poincare(*, quick: bool = False, seed: int = 0) -> dict[str, Any]:
    """Train ours and gensim's on the same tree closure; see the module docstring."""
    branching, depth = (3, 4) if quick else (4, 5)
    epochs = 10 if quick else 50
    edges = balanced_tree(branching, depth)
    pairs = transitive_closure(edges)
    # Ours gets the closure itself (transitive=False), so both models see the
    # very same list of pairs.
    ours = PoincareEmbedding(10, seed=seed, transitive=False)
    settings = ours.options()
    start = time.perf_counter()
    ours.fit(pairs, epochs=epochs)
    ours_s = time.perf_counter() - start
    index = {name: i for i, name in enumerate(ours.nodes())}
    scores = reconstruction_metrics(ours.vectors(), [(index[u], index[v]) for u, v in pairs])
    report: dict[str, Any] = {
        "poincare_tree": f"balanced, branching {branching}, depth {depth}",
        "poincare_nodes": len(ours.nodes()),
        "poincare_edges": len(edges),
        "poincare_pairs": len(pairs),
        "poincare_settings": {**settings, "epochs": epochs, "seed": seed},
        "poincare_map": round(scores["map"], 4),
        "poincare_mean_rank": round(scores["mean_rank"], 3),
        "poincare_train_s": round(ours_s, 3),
    }
    report.update(_gensim_figures(pairs, settings, epochs, seed, ours))
    gensim_map = report["gensim_map"]
    report["poincare_map_ge_gensim"] = (
        None if gensim_map is None else bool(report["poincare_map"] >= gensim_map)
    )
    return report


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    print(json.dumps(run_poincare(quick="--quick" in args), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
