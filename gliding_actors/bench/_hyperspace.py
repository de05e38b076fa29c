"""``gliding-actors bench hyperspace``: the vector index against exact search, and the Poincaré figures.

* ``real`` — the figures that say what the index gives users: embeddings of
  real text (60,000 docstring paragraphs of the installed Python, the default
  embedder), beside exact search and the peers hnswlib and usearch at the
  same recall, with the recall / speed curves (``docs/img/hyperspace_real.png``
  on a full run). See :mod:`gliding_actors.bench._hyperspace_real`; the
  vectors are cached under ``$XDG_CACHE_HOME/gliding-actors`` (``~/.cache``),
  so only the first run spends minutes embedding.

The rest is a **stress case, not a target**. Data: ``n`` = 100,000 (``--quick``: 5,000) random unit vectors of 384
dimensions (i.i.d. Gaussian, normalised; seed 0) and 200 held-out queries from
the same distribution. Exact search is numpy brute force in the same run, one
query at a time (a matrix-vector product and an ``argpartition``), which is
also the ground truth.

* ``recall_at_10`` / ``qps_vs_exact`` — :class:`VectorIndex` with the
  library's default settings (``hyperspace.hnsw_*``): every vector in the
  HNSW graph, exact rescoring of the graph's candidates. ``build_s`` is the
  time the adds and the graph's inserts took, ``exact_ms`` / ``index_ms`` the
  mean latency.
* ``sweep`` — the same graph at other ``expansion_search`` values: the
  recall / speed trade-off, so the default is seen in context.
* ``filtered_recall_at_10`` / ``filtered_qps_vs_exact`` — a filter keeping a
  random 10% of the vectors (an allow-list, what tag and graph filters
  produce): answered by exact search over the allowed rows
  (``exact_limit``), compared with the exact top-10 among those rows.
* ``structured`` — the same figures for vectors with the shape of real text
  embeddings: a 16-dimensional latent factor space embedded in 384
  dimensions plus isotropic noise (30% of the norm). I.i.d. random vectors in
  384 dimensions are the worst case for any approximate index — every point
  is almost equally far from every query, so the true top 10 are barely
  closer than the 1,000th — and the figures there say what the index costs,
  not what it gives on data that has neighbourhoods.
* ``poincare_*`` / ``gensim_*`` — from :mod:`gliding_actors.bench._hyperspace_poincare`
  (``run_poincare``) when present.
"""

from __future__ import annotations

import importlib
import time
from typing import Any

import numpy as np
import numpy.typing as npt

from gliding_actors.bench._hyperspace_real import built_index, exact_top, run_real
from gliding_actors.bench._progress import say
from gliding_actors.config import HyperspaceConfig

__all__ = ["run"]

_DIM = 384
_K = 10


def _unit(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float32]:
    y = x.astype(np.float32)
    out: npt.NDArray[np.float32] = y / np.linalg.norm(y, axis=1, keepdims=True)
    return out


def _iid(rng: np.random.Generator, n: int) -> npt.NDArray[np.float32]:
    return _unit(rng.standard_normal((n, _DIM)))


def _structured(rng: np.random.Generator, basis: npt.NDArray[np.float64], n: int) -> npt.NDArray[np.float32]:
    latent = rng.standard_normal((n, basis.shape[1]))
    signal = latent @ basis.T
    noise = rng.standard_normal((n, _DIM)) * (0.3 * np.sqrt(basis.shape[1] / _DIM))
    return _unit(signal + noise)


def _measure(
    data: npt.NDArray[np.float32], queries: npt.NDArray[np.float32], config: HyperspaceConfig, seed: int
) -> dict[str, Any]:
    n = data.shape[0]
    # exact, one query at a time (the ground truth too)
    start = time.perf_counter()
    truth = [set(exact_top(data, q, _K).tolist()) for q in queries]
    exact_s = (time.perf_counter() - start) / len(queries)

    index, key_row, build_s = built_index(data, config)
    keys = list(key_row)

    def run(expansion: int) -> tuple[float, float]:
        index.expansion_search = expansion
        hits = 0
        t0 = time.perf_counter()
        answers = [index.search(q, _K) for q in queries]
        elapsed = (time.perf_counter() - t0) / len(queries)
        for answer, want in zip(answers, truth, strict=True):
            hits += len({key_row[key] for key, _ in answer} & want)
        return hits / (len(queries) * _K), elapsed

    recall, index_s = run(config.hnsw_expansion_search)
    sweep = []
    for expansion in (16, 32, 64, 128):
        r, s = run(expansion)
        sweep.append({"expansion_search": expansion, "recall_at_10": round(r, 4), "qps_vs_exact": round(exact_s / s, 2)})
    index.expansion_search = config.hnsw_expansion_search

    # a filter keeping 10%: an allow-list, answered exactly over its rows
    rng = np.random.default_rng(seed + 1)
    kept = np.sort(rng.choice(n, size=n // 10, replace=False))
    allow = {keys[i] for i in kept}
    sub = data[kept]
    filtered_truth = [set(kept[exact_top(sub, q, _K)].tolist()) for q in queries]
    t0 = time.perf_counter()
    answers = [index.search(q, _K, allow=allow) for q in queries]
    filtered_s = (time.perf_counter() - t0) / len(queries)
    filtered_hits = sum(
        len({key_row[key] for key, _ in answer} & want) for answer, want in zip(answers, filtered_truth, strict=True)
    )
    return {
        "recall_at_10": round(recall, 4),
        "qps_vs_exact": round(exact_s / index_s, 2),
        "filtered_recall_at_10": round(filtered_hits / (len(queries) * _K), 4),
        "filtered_qps_vs_exact": round(exact_s / filtered_s, 2),
        "exact_ms": round(exact_s * 1000, 3),
        "index_ms": round(index_s * 1000, 3),
        "build_s": round(build_s, 2),
        "sweep": sweep,
    }


def run(quick: bool = False, embedder: str | None = None) -> dict[str, Any]:
    """Every figure (module docstring); ``embedder`` embeds the real corpus (None: the default, onnx)."""
    config = HyperspaceConfig()
    n = 5_000 if quick else 100_000
    n_queries = 50 if quick else 200
    seed = 0
    rng = np.random.default_rng(seed)
    real = run_real(quick=quick, embedder=embedder or "onnx", seed=seed)
    say("hyperspace", "the i.i.d. and structured stress cases")
    iid = _measure(_iid(rng, n), _iid(rng, n_queries), config, seed)
    basis = np.linalg.qr(rng.standard_normal((_DIM, 16)))[0]
    structured = _measure(_structured(rng, basis, n), _structured(rng, basis, n_queries), config, seed)
    result: dict[str, Any] = {
        "vectors": n,
        "dim": _DIM,
        "queries": n_queries,
        "hnsw_connectivity": config.hnsw_connectivity,
        "hnsw_expansion_search": config.hnsw_expansion_search,
        "exact_limit": config.exact_limit,
        "real": real,
        **iid,
        "structured": structured,
        "targets": {
            "real.recall_at_10": 0.95, "real.qps_vs_exact": 10, "real.corpus_size": 50_000,
            "filtered_recall_at_10": 0.95,
        },
    }
    try:
        poincare = importlib.import_module("gliding_actors.bench._hyperspace_poincare")
    except ImportError:
        result["poincare"] = "gliding_actors.bench._hyperspace_poincare is not available"
    else:
        result.update(poincare.run_poincare(quick=quick, seed=seed))
    return result
