"""Okapi BM25 over a corpus that changes one document at a time.

Why not a library: ``rank_bm25`` and ``bm25s`` (both checked) build a static
index from the whole corpus — ``bm25s`` precomputes every (term, document)
score into a sparse matrix, ``rank_bm25`` keeps per-document dictionaries and
has no way to remove one. The memory's corpus changes with every write, and
re-indexing the whole corpus per write (or per search after a write) is the
cost this engine exists to avoid. An inverted index with per-term postings
updates in O(words of the document) and scores only the documents that share
a word with the query; the formula is the textbook one (Robertson & Zaragoza,
2009) with the ``log(1 + (N - df + 0.5) / (df + 0.5))`` IDF, which is never
negative.
"""

from __future__ import annotations

import math
from collections import Counter

__all__ = ["BM25Index"]


class BM25Index:
    """Postings ``term -> {doc: term frequency}`` plus document lengths. Not thread-safe."""

    def __init__(self, *, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        self._postings: dict[str, dict[str, int]] = {}
        self._lengths: dict[str, int] = {}
        self._terms: dict[str, tuple[str, ...]] = {}
        self._total = 0

    def __len__(self) -> int:
        return len(self._lengths)

    def __contains__(self, doc: object) -> bool:
        return doc in self._lengths

    def add(self, doc: str, tokens: list[str]) -> None:
        """Index ``doc`` as ``tokens`` (replacing what it was)."""
        self.remove(doc)
        counts = Counter(tokens)
        for term, tf in counts.items():
            self._postings.setdefault(term, {})[doc] = tf
        self._lengths[doc] = len(tokens)
        self._terms[doc] = tuple(counts)
        self._total += len(tokens)

    def remove(self, doc: str) -> bool:
        terms = self._terms.pop(doc, None)
        if terms is None:
            return False
        for term in terms:
            posting = self._postings[term]
            del posting[doc]
            if not posting:
                del self._postings[term]
        self._total -= self._lengths.pop(doc)
        return True

    def idf(self, term: str) -> float:
        n = len(self._lengths)
        df = len(self._postings.get(term, ()))
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))

    def scores(self, tokens: list[str]) -> dict[str, float]:
        """BM25 of every document sharing a word with the query (others score 0, omitted)."""
        n = len(self._lengths)
        if n == 0:
            return {}
        avgdl = self._total / n if self._total else 1.0
        k1, b = self.k1, self.b
        k1_plus_1, one_minus_b = k1 + 1.0, 1.0 - b
        lengths = self._lengths
        out: dict[str, float] = {}
        get = out.get
        for term, qtf in Counter(tokens).items():
            posting = self._postings.get(term)
            if not posting:
                continue
            weight = qtf * self.idf(term)
            # The textbook formula, evaluated in the same order as written out (the same floats).
            for doc, tf in posting.items():
                out[doc] = get(doc, 0.0) + weight * tf * k1_plus_1 / (tf + k1 * (one_minus_b + b * lengths[doc] / avgdl))
        return out
