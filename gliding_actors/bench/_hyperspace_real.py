"""``bench hyperspace``'s ``real`` section: the vector index on embeddings of real text, beside exact search and peers.

Data (:mod:`gliding_actors.bench._text_corpus`): 60,000 docstring paragraphs
of the running Python's standard library and installed packages (``--quick``:
2,000), and 200 other paragraphs held apart as queries (``--quick``: 50),
embedded with the library's default embedder (``--embedder`` chooses
another) and cached under the cache folder.

Every system answers the same queries one at a time, top 10, on one thread:

* ``exact`` — numpy brute force (a matrix-vector product and an
  ``argpartition``): the ground truth and the speed baseline;
* ``gliding_actors`` — :class:`VectorIndex` as the library builds it (an
  int8 HNSW graph, usearch, with exact rescoring from the float32 vectors),
  at the default ``hnsw_expansion_search`` and along a sweep of it;
* the peers ``hnswlib`` and ``usearch`` (HNSW graphs; the ``bench`` extra),
  along a sweep of their search breadth (``ef`` / ``expansion_search``).

Timings alternate the systems in rounds (3; ``--quick``: 1) and report each
one's median. A peer's ``qps_at_recall`` is its speed at the cheapest setting
whose recall reaches the index's own recall at the default settings (the
same recall, so the speeds compare); ``None`` when no setting of the sweep
reaches it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from gliding_actors.bench._progress import say
from gliding_actors.bench._team_plots import IMG_DIR, pyplot
from gliding_actors.bench._text_corpus import (
    VectorCache,
    default_cache_dir,
    docstring_paragraphs,
    split_corpus,
)
from gliding_actors.config import HyperspaceConfig
from gliding_actors.errors import InvalidInput
from gliding_actors.hyperspace._index import VectorIndex

__all__ = ["PEER_SWEEP", "PLOT", "built_index", "exact_top", "run_real"]

_K = 10
#: the search breadths tried for each system (HNSW needs at least k)
PEER_SWEEP: tuple[int, ...] = (10, 16, 24, 32, 48, 64, 96, 128, 192, 256)
#: where a full run draws the recall / speed curves
PLOT = IMG_DIR / "hyperspace_real.png"
_PEER_HINT = "pip install 'gliding-actors[bench]'"

Search = Callable[[npt.NDArray[np.float32]], Sequence[int]]


@dataclass
class _Setting:
    system: str
    value: int | None  # the setting swept (None: exact)
    search: Search
    recall: float = 0.0
    times: list[float] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return statistics.median(self.times)


def exact_top(data: npt.NDArray[np.float32], q: npt.NDArray[np.float32], k: int) -> npt.NDArray[np.int64]:
    """The rows of ``data`` with the ``k`` highest cosines to ``q`` (unordered): brute force, the ground truth."""
    scores = data @ q
    top: npt.NDArray[np.int64] = np.argpartition(-scores, k)[:k]
    return top


def built_index(data: npt.NDArray[np.float32], config: HyperspaceConfig) -> tuple[VectorIndex, dict[str, int], float]:
    """:class:`VectorIndex` with ``config``'s settings over every row of ``data`` (key -> row), all in
    the graph; and the seconds the adds and the inserts took (one thread, in row order)."""
    n, dim = data.shape
    keys = [f"v{i:06d}" for i in range(n)]
    index = VectorIndex(
        dim,
        connectivity=config.hnsw_connectivity,
        expansion_add=config.hnsw_expansion_add,
        expansion_search=config.hnsw_expansion_search,
        index_after=config.index_after,
        exact_limit=config.exact_limit,
    )
    start = time.perf_counter()
    for key, vector in zip(keys, data, strict=True):
        index.add(key, vector)
    index.index_delta()
    return index, {key: i for i, key in enumerate(keys)}, time.perf_counter() - start


def _ours(data: npt.NDArray[np.float32], config: HyperspaceConfig) -> tuple[list[_Setting], float]:
    index, row, build_s = built_index(data, config)

    def at(expansion: int) -> Search:
        def search(q: npt.NDArray[np.float32]) -> list[int]:
            index.expansion_search = expansion
            return [row[key] for key, _ in index.search(q, _K)]

        return search

    values = sorted({*PEER_SWEEP, config.hnsw_expansion_search})
    return [_Setting("gliding_actors", v, at(v)) for v in values], build_s


def _peer(
    name: str,
    module: str,
    build: Callable[[Any, npt.NDArray[np.float32]], Any],
    query: Callable[[Any, int, npt.NDArray[np.float32]], Sequence[int]],
    data: npt.NDArray[np.float32],
) -> tuple[list[_Setting], float] | str:
    """A peer index over ``data`` (``build(library, data)``, timed) and one setting per breadth of
    :data:`PEER_SWEEP` (``query(index, breadth, q)``); why not, when its library is not installed."""
    try:
        library: Any = importlib.import_module(module)
    except ImportError:
        return f"{name} is not installed ({_PEER_HINT})"
    start = time.perf_counter()
    index = build(library, data)
    build_s = time.perf_counter() - start
    return [_Setting(name, b, functools.partial(query, index, b)) for b in PEER_SWEEP], build_s


def _hnswlib_build(hnswlib: Any, data: npt.NDArray[np.float32], seed: int = 0) -> Any:
    n, dim = data.shape
    index = hnswlib.Index(space="ip", dim=dim)  # inner product on unit vectors: cosine
    index.init_index(max_elements=n, M=16, ef_construction=200, random_seed=seed)
    index.set_num_threads(1)
    index.add_items(data, np.arange(n))
    return index


def _hnswlib_query(index: Any, ef: int, q: npt.NDArray[np.float32]) -> list[int]:
    index.set_ef(ef)
    labels, _ = index.knn_query(q, k=_K, num_threads=1)
    return [int(i) for i in labels[0]]


def _usearch_build(usearch: Any, data: npt.NDArray[np.float32]) -> Any:
    index = usearch.Index(ndim=data.shape[1], metric="cos", dtype="f32", connectivity=16, expansion_add=200)
    index.add(np.arange(len(data)), data, threads=1)
    return index


def _usearch_query(index: Any, expansion: int, q: npt.NDArray[np.float32]) -> list[int]:
    index.expansion_search = expansion  # honoured with threads=1; without it, a search used the default breadth
    return [int(i) for i in index.search(q, _K, threads=1).keys]


def _embedded(passages: list[str], queries: list[str], embedder_name: str, cache_dir: Path) -> tuple[
    npt.NDArray[np.float32], npt.NDArray[np.float32], int
]:
    from gliding_actors.hyperspace._embedders import Embedder, OnnxEmbedder, build_embedder

    embedder: Embedder = (
        OnnxEmbedder(threads=min(4, os.cpu_count() or 1))  # the default model, every core: minutes, once
        if embedder_name == "onnx"
        else build_embedder(embedder_name, HyperspaceConfig())
    )
    cache = VectorCache(cache_dir / "bench-hyperspace" / embedder.name.replace("/", "_"), embedder.name)
    fresh = cache.fill([*passages, *queries], embedder.embed, progress=lambda text: say("hyperspace", text))
    return cache.vectors_of(passages), cache.vectors_of(queries), fresh


def _digest(texts: Sequence[str]) -> str:
    h = hashlib.sha256()
    for text in texts:
        h.update(text.encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()[:16]


def run_real(
    *,
    quick: bool = False,
    size: int | None = None,
    n_queries: int | None = None,
    embedder: str = "onnx",
    cache_dir: str | Path | None = None,
    roots: Sequence[Path] | None = None,
    rounds: int | None = None,
    plot: str | Path | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """The ``real`` figures (module docstring); ``plot`` (None: :data:`PLOT` on a full run) gets the curves."""
    size = size if size is not None else (2_000 if quick else 60_000)
    n_queries = n_queries if n_queries is not None else (50 if quick else 200)
    rounds = rounds if rounds is not None else (1 if quick else 3)
    if size < _K + 1 or n_queries < 1 or rounds < 1:
        raise InvalidInput(f"size must be > {_K}, queries and rounds >= 1 (got {size}, {n_queries}, {rounds})")
    say("hyperspace", "collecting docstring paragraphs of the installed Python")
    paragraphs = docstring_paragraphs(roots, enough=4 * (size + n_queries) if quick else None)
    passages, queries = split_corpus(paragraphs, size, n_queries, seed)
    if len(passages) < _K + 1:
        raise InvalidInput(f"only {len(paragraphs)} docstring paragraphs found: too few for a corpus")
    say("hyperspace", f"{len(passages):,} passages and {len(queries)} queries (of {len(paragraphs):,} paragraphs)")
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    data, query_vectors, fresh = _embedded(passages, queries, embedder, cache)
    config = HyperspaceConfig()

    say("hyperspace", "exact ground truth")
    exact = _Setting("exact", None, lambda q: exact_top(data, q, _K).tolist(), recall=1.0)
    truth = [set(exact.search(q)) for q in query_vectors]

    say("hyperspace", "building the indexes")
    ours, our_build = _ours(data, config)
    built: dict[str, tuple[list[_Setting], float] | str] = {
        "hnswlib": _peer("hnswlib", "hnswlib", functools.partial(_hnswlib_build, seed=seed), _hnswlib_query, data),
        "usearch": _peer("usearch", "usearch.index", _usearch_build, _usearch_query, data),
    }
    peer_settings = [s for peer in built.values() if not isinstance(peer, str) for s in peer[0]]
    settings = [exact, *ours, *peer_settings]
    for setting in settings[1:]:  # the exact answers are the truth
        answers = [setting.search(q) for q in query_vectors]
        setting.recall = sum(len(set(a) & t) for a, t in zip(answers, truth, strict=True)) / (len(truth) * _K)
    for r in range(rounds):
        say("hyperspace", f"timing round {r + 1} of {rounds} ({len(settings)} settings, alternated)")
        for setting in settings:
            start = time.perf_counter()
            for q in query_vectors:
                setting.search(q)
            setting.times.append((time.perf_counter() - start) / len(query_vectors))

    exact_s = exact.seconds
    default = next(s for s in ours if s.value == config.hnsw_expansion_search)
    matched = default.recall

    def curve(points: list[_Setting]) -> list[dict[str, float | int | None]]:
        return [
            {"setting": s.value, "recall_at_10": round(s.recall, 4), "qps": round(1 / s.seconds, 1),
             "qps_vs_exact": round(exact_s / s.seconds, 2)}
            for s in points
        ]

    peers: dict[str, Any] = {}
    for name, peer in built.items():
        if isinstance(peer, str):
            peers[name] = {"missing": peer}
            continue
        points, build_s = peer
        reaching = [s for s in points if s.recall >= matched]
        best = min(reaching, key=lambda s: s.seconds) if reaching else None
        peers[name] = {
            "qps_at_recall": None if best is None else round(1 / best.seconds, 1),
            "qps_vs_exact_at_recall": None if best is None else round(exact_s / best.seconds, 2),
            "recall_at_setting": None if best is None else round(best.recall, 4),
            "setting": None if best is None else best.value,
            "build_s": round(build_s, 2),
            "curve": curve(points),
        }
    result: dict[str, Any] = {
        "corpus": "docstring paragraphs of the installed Python (stdlib + site-packages)",
        "corpus_size": len(passages),
        "corpus_digest": _digest(passages),
        "queries": len(queries),
        "paragraphs_found": len(paragraphs),
        "embedder": embedder,
        "embedded_now": fresh,
        "recall_at_10": round(default.recall, 4),
        "qps_vs_exact": round(exact_s / default.seconds, 2),
        "qps": round(1 / default.seconds, 1),
        "exact_qps": round(1 / exact_s, 1),
        "exact_ms": round(exact_s * 1000, 3),
        "index_ms": round(default.seconds * 1000, 3),
        "build_s": round(our_build, 2),
        "matched_recall": round(matched, 4),
        "rounds": rounds,
        "curve": curve(ours),
        "peers": peers,
    }
    target = Path(plot) if plot is not None else (None if quick else PLOT)
    if target is not None:
        result["plot"] = _plot(result, target)
    return result


def _plot(result: dict[str, Any], path: Path) -> str:
    """Recall against queries per second for each system; the path, or why there is none."""
    curves = {"gliding_actors (int8 HNSW + exact rescoring)": result["curve"]}
    curves.update({name: peer["curve"] for name, peer in result["peers"].items() if "curve" in peer})
    try:
        with pyplot(f"the recall / speed plot needs matplotlib: {_PEER_HINT}") as plt:
            _draw(plt, result, curves, path)
    except ImportError as exc:
        return f"no plot: {exc}"
    return str(path)


def _draw(plt: Any, result: dict[str, Any], curves: dict[str, list[dict[str, Any]]], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, points in curves.items():
        ax.plot([p["recall_at_10"] for p in points], [p["qps"] for p in points], marker="o", label=label)
    ax.axhline(result["exact_qps"], color="grey", linestyle="--", label="exact (numpy)")
    ax.axvline(0.95, color="grey", linestyle=":", linewidth=1)
    ax.set_yscale("log")
    ax.set_xlabel("recall@10")
    ax.set_ylabel("queries per second, one thread")
    ax.set_title(f"{result['corpus_size']:,} docstring passages, {result['embedder']} embeddings")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
