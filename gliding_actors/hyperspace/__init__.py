"""The hyperspace vector engine: embeddings, index and hybrid search (docs/HYPERSPACE.md)."""

from __future__ import annotations

from gliding_actors.hyperspace._bm25 import BM25Index
from gliding_actors.hyperspace._embedders import (
    EMBEDDERS,
    Embedder,
    EmbedderChain,
    HashEmbedder,
    OnnxEmbedder,
    OpenAIEmbedder,
    TextEmbedder,
    build_embedder,
)
from gliding_actors.hyperspace._engine import Doc, HyperspaceEngine, SearchFilters, parse_filters
from gliding_actors.hyperspace._index import VectorIndex
from gliding_actors.hyperspace._poincare import (
    PoincareEmbedding,
    hierarchy_edges,
    poincare_distance,
    reconstruction_metrics,
    transitive_closure,
)
from gliding_actors.hyperspace._service import HYPERSPACE_ACTOR, HyperspaceService

__all__ = [
    "EMBEDDERS",
    "HYPERSPACE_ACTOR",
    "BM25Index",
    "Doc",
    "Embedder",
    "EmbedderChain",
    "HashEmbedder",
    "HyperspaceEngine",
    "HyperspaceService",
    "OnnxEmbedder",
    "OpenAIEmbedder",
    "PoincareEmbedding",
    "SearchFilters",
    "TextEmbedder",
    "VectorIndex",
    "build_embedder",
    "hierarchy_edges",
    "parse_filters",
    "poincare_distance",
    "reconstruction_metrics",
    "transitive_closure",
]
