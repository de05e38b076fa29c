"""Keyword search (Okapi BM25) that does not walk the corpus: tantivy for the bulk, the last changes beside it.

Why tantivy: a search wants the best few documents, and a query's common
words ("the", "what") are in most of them. An inverted index that scores
every document sharing a word with the query (the hand-written one this
replaces, or SQLite FTS5's ``ORDER BY rank``, which computes ``bm25()`` for
every match) costs in proportion to the corpus: 53 ms a question at 50,000
LoCoMo lines for both, against 0.6 ms for tantivy, whose top-k collector
skips blocks that cannot enter the top (block-max WAND). Its index is on
disk, so reopening a memory does not re-tokenise it.

* **Bulk.** Documents committed to a tantivy index: one ``iri`` field (raw,
  indexed, for deleting by IRI), one ``body`` field holding the document's
  tokens (the project's own tokenizer,
  :func:`~gliding_actors.hyperspace._text.words`, joined by spaces and split
  on them again by tantivy's ``whitespace`` tokenizer, so both sides agree
  on what a word is) and one ``key`` field, an integer column ("fast
  field") naming the document: the hits are named by reading that column
  for all of them at once, not by decompressing a stored-document block per
  hit (a cost that grew with the corpus: 0.20 of 0.60 ms for 264 hits at
  10,000 documents).
* **Delta.** Documents added or removed since the last commit are kept here
  and scored exactly on every search with the same formula and the corpus
  statistics as they are now, so a document is findable the moment it is
  added and a removed one is gone at once; their bulk copies are ignored.
  A search that finds ``commit_at_search`` (32) changes or more folds them
  into tantivy first, in one commit (about 10 ms: as much as scoring a few
  hundred documents by hand, and the searches that follow no longer pay for
  them), so the delta scored by hand stays small; without searches, the
  delta is committed at ``commit_after`` (10,000) changes, a bound on its
  memory. A burst of writes (a catch-up of thousands of archived turns)
  costs one commit, not one per few hundred.
* **Groups.** Each document belongs to one group (the engine's named
  graph). A search may be confined to some groups: a filter clause of the
  query itself (a constant score of 0, so BM25 is unchanged), so the top k
  of a role that reads half the graphs costs no more than an unconfined one,
  instead of fetching and refusing the other half's best documents.
* **Determinism.** tantivy merges segments in background threads; every
  commit waits for those merges before the next write, so the same
  sequence of changes always leaves the same segments (and the same scores).
  Ties are broken by IRI: the bulk query is widened until the whole group
  tied at the cut is in hand.

Scores are BM25 with ``k1 = 1.2``, ``b = 0.75`` and the
``log(1 + (N - df + 0.5) / (df + 0.5))`` IDF, on both sides. tantivy stores
a document's length in one byte (exact below 40 words, within a few percent
above), so a long document's score moves slightly when its change is
committed; the order of clearly different scores does not.
"""

from __future__ import annotations

import math
import shutil
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

import tantivy

__all__ = ["KeywordIndex"]

_HEAP_BYTES = 15_000_000  # tantivy's minimum per indexing thread


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("iri", stored=False, tokenizer_name="raw", index_option="basic")
    builder.add_integer_field("key", stored=False, indexed=False, fast=True)
    builder.add_text_field("body", stored=False, tokenizer_name="whitespace", index_option="freq")
    builder.add_text_field("group", stored=False, tokenizer_name="raw", index_option="basic")
    return builder.build()


#: what :meth:`KeywordIndex.state` writes; a state of another format is not adopted (the index is rebuilt)
_STATE_FORMAT = 3
#: the corpus size from which a query's terms found in more than half of the documents are not
#: scored (see :meth:`KeywordIndex._discriminating`)
PRUNE_FROM = 1_000


class KeywordIndex:
    """BM25 over documents given as token lists (module docstring). Not thread-safe: one owner.

    ``path``: the directory of the tantivy index (None: in memory). An index
    found there is opened as it is; :meth:`adopt` tells this object which
    documents it holds (their lengths), :meth:`state` is what to save for that.
    """

    def __init__(
        self,
        path: Path | None = None,
        *,
        commit_after: int = 10_000,
        commit_at_search: int = 32,
        k1: float = 1.2,
        b: float = 0.75,
    ):
        self.commit_after = commit_after
        self.commit_at_search = commit_at_search
        self.k1 = k1
        self.b = b
        self._schema = _schema()
        try:
            self._index, self._writer = self._open(path)
        except (ValueError, OSError):  # damaged files: the documents are elsewhere, rebuilt by ``adopt``
            assert path is not None  # an index in memory cannot be damaged
            self.wipe(path)
            self._index, self._writer = self._open(path)
        #: every document's length in tokens (the corpus statistics, and what this index holds)
        self._lengths: dict[str, int] = {}
        self._total = 0
        #: every document's group (what :meth:`top`'s ``groups`` filter keeps)
        self._groups: dict[str, str] = {}
        #: changes since the last commit: tokens, or None for a removal
        self._delta: dict[str, list[str] | None] = {}
        #: each committed document's ``key`` in tantivy, and back (a document keeps its key when replaced)
        self._keys: dict[str, int] = {}
        self._doc_of_key: dict[int, str] = {}
        self._next_key = 0

    def _open(self, path: Path | None) -> tuple[Any, Any]:
        if path is not None:
            path.mkdir(parents=True, exist_ok=True)
        index = tantivy.Index(self._schema, path=None if path is None else str(path), reuse=True)
        return index, index.writer(heap_size=_HEAP_BYTES, num_threads=1)

    # -- contents ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._lengths)

    def __contains__(self, doc: object) -> bool:
        return doc in self._lengths

    def add(self, doc: str, tokens: list[str], group: str = "") -> None:
        """Index ``doc`` as ``tokens`` in ``group`` (replacing what it was); searchable at once."""
        self._forget(doc)
        self._groups[doc] = group
        self._lengths[doc] = len(tokens)
        self._total += len(tokens)
        self._delta[doc] = list(tokens)
        self._maybe_commit()

    def remove(self, doc: str) -> bool:
        if not self._forget(doc):
            return False
        self._delta[doc] = None
        self._maybe_commit()
        return True

    def _forget(self, doc: str) -> bool:
        length = self._lengths.pop(doc, None)
        if length is None:
            return False
        del self._groups[doc]
        self._total -= length
        return True

    def _maybe_commit(self) -> None:
        if len(self._delta) >= self.commit_after:
            self.commit()

    def commit(self, *, force: bool = False) -> None:
        """Fold the delta into tantivy (one commit; waits for the merges it starts)."""
        if not self._delta and not force:
            return
        writer, keys = self._writer, self._keys
        for doc, tokens in self._delta.items():
            writer.delete_documents_by_term("iri", doc)
            if tokens is None:
                self._doc_of_key.pop(keys.pop(doc, -1), None)
                continue
            key = keys.get(doc)
            if key is None:
                key = keys[doc] = self._next_key
                self._doc_of_key[key] = doc
                self._next_key += 1
            writer.add_document(tantivy.Document(iri=doc, key=key, body=" ".join(tokens), group=self._groups[doc]))
        writer.commit()
        writer.wait_merging_threads()  # same changes, same segments: see the module docstring
        self._writer = self._index.writer(heap_size=_HEAP_BYTES, num_threads=1)
        self._index.reload()
        self._delta.clear()

    # -- persistence -------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """What a save keeps beside the tantivy files (after a :meth:`commit`): the documents and their lengths."""
        self.commit()
        return {
            "format": _STATE_FORMAT,
            "opstamp": int(self._writer.commit_opstamp),
            "lengths": dict(self._lengths),
            "groups": dict(self._groups),
            "keys": dict(self._keys),
        }

    def adopt(
        self,
        state: Mapping[str, Any] | None,
        texts: Mapping[str, tuple[list[str], str]] | Callable[[], Iterable[tuple[str, list[str], str]]],
        progress: Callable[[int], None] | None = None,
    ) -> bool:
        """Take the documents of a saved :meth:`state`; True when the tantivy files match it.

        When they do not (no state, a commit after the save, damaged files, a
        state of an older format), the index is rebuilt from ``texts`` (``doc
        -> (tokens, group)``, or a function giving ``(doc, tokens, group)``):
        slower, and only after a crash, a first open or an upgrade; ``progress`` is
        told how many documents it has put back so far.
        """
        if state is not None:
            try:
                matches = state["format"] == _STATE_FORMAT and int(state["opstamp"]) == int(self._writer.commit_opstamp)
                lengths = {str(k): int(v) for k, v in dict(state["lengths"]).items()}
                groups = {str(k): str(v) for k, v in dict(state["groups"]).items()}
                keys = {str(k): int(v) for k, v in dict(state["keys"]).items()}
                doc_of_key = {key: doc for doc, key in keys.items()}
                matches = matches and groups.keys() == lengths.keys() == keys.keys() and len(doc_of_key) == len(keys)
            except (KeyError, TypeError, ValueError):
                matches = False
            if matches:
                self._lengths, self._groups, self._keys, self._doc_of_key = lengths, groups, keys, doc_of_key
                self._next_key = max(doc_of_key, default=-1) + 1
                self._total = sum(lengths.values())
                self._delta.clear()
                return True
        triples = ((d, t, g) for d, (t, g) in texts.items()) if isinstance(texts, Mapping) else texts()
        self._rebuild(triples, progress)
        return False

    def _rebuild(self, triples: Iterable[tuple[str, list[str], str]], progress: Callable[[int], None] | None) -> None:
        self._writer.delete_all_documents()
        self._lengths, self._groups, self._total, self._delta = {}, {}, 0, {}
        self._keys, self._doc_of_key, self._next_key = {}, {}, 0
        for doc, tokens, group in triples:
            self._lengths[doc] = len(tokens)
            self._groups[doc] = group
            self._total += len(tokens)
            self._delta[doc] = list(tokens)
            if progress is not None:
                progress(len(self._lengths))
        self.commit(force=True)  # one commit: the deletion of everything and the documents again

    def close(self) -> None:
        """Commit what is pending and let go of the index's writer lock."""
        self.commit()
        self._writer.wait_merging_threads()

    @staticmethod
    def wipe(path: Path) -> None:
        """Remove an index directory (a damaged one is rebuilt from the documents)."""
        shutil.rmtree(path, ignore_errors=True)

    # -- search ---------------------------------------------------------------------------------
    def top(
        self, tokens: list[str], k: int, ok: Callable[[str], bool], groups: Collection[str] | None = None
    ) -> list[tuple[str, float]]:
        """The ``k`` best ``(doc, BM25)`` of ``groups`` (None: all) that ``ok`` passes, best first, ties
        by document. The groups are a filter of the query itself, so a search confined to a few
        groups does not fetch and refuse the documents of the others."""
        counts = Counter(tokens)
        if k <= 0 or not self._lengths or not counts or (groups is not None and not groups):
            return []
        if len(self._delta) >= self.commit_at_search:
            self.commit()  # one commit now costs less than scoring this delta by hand on every search
        searcher = self._index.searcher()
        delta_tfs = {doc: Counter(toks) for doc, toks in self._delta.items() if toks is not None}
        counts = self._discriminating(counts, searcher, delta_tfs)
        in_groups = self._groups
        found = {
            doc: score
            for doc, score in self._delta_scores(counts, searcher, delta_tfs).items()
            if (groups is None or in_groups[doc] in groups) and ok(doc)
        }
        query = tantivy.Query.boolean_query(
            [
                (tantivy.Occur.Should, tantivy.Query.boost_query(tantivy.Query.term_query(self._schema, "body", t), qtf))
                for t, qtf in sorted(counts.items())
            ]
        )
        if groups is not None:
            confine = tantivy.Query.term_set_query(self._schema, "group", sorted(groups))
            # the group filter adds nothing to a score: BM25 of the words alone, as without it
            query = tantivy.Query.boolean_query(
                [(tantivy.Occur.Must, query), (tantivy.Occur.Must, tantivy.Query.const_score_query(confine, 0.0))]
            )
        delta, doc_of_key = self._delta, self._doc_of_key  # bulk copies of the delta's are stale: skipped
        seen: set[tuple[int, int]] = set()
        limit = k + 16  # the k-th best is then almost always above the last hit: one round
        while True:
            hits = searcher.search(query, limit, count=False).hits
            fresh = [(score, address) for score, address in hits if (address.segment_ord, address.doc) not in seen]
            seen.update((address.segment_ord, address.doc) for _, address in fresh)
            keys = searcher.fast_field_values("key", [address for _, address in fresh]) if fresh else []
            for (score, _address), key in zip(fresh, keys, strict=True):
                doc = doc_of_key.get(key) if isinstance(key, int) else None
                if doc is not None and doc not in delta and ok(doc):
                    found[doc] = float(score)
            if len(hits) < limit:
                break  # the bulk has no more
            last = float(hits[-1][0])
            if sum(1 for score in found.values() if score > last) >= k:
                break  # k beat every hit not fetched, ties at the cut included
            limit *= 4
        return sorted(found.items(), key=lambda kv: (-kv[1], kv[0]))[:k]

    def _doc_freq(self, term: str, searcher: Any, delta_tfs: dict[str, Counter[str]]) -> int:
        """How many documents hold ``term``: tantivy's count (which counts a replaced or deleted
        document until a merge drops it) plus the delta's holders, capped at the corpus size."""
        held = sum(1 for tfs in delta_tfs.values() if term in tfs)
        return min(len(self._lengths), int(searcher.doc_freq("body", term)) + held)

    def _discriminating(
        self, counts: Counter[str], searcher: Any, delta_tfs: dict[str, Counter[str]]
    ) -> Counter[str]:
        """In a corpus of at least ``PRUNE_FROM`` documents, the query's terms found in at most half
        of them (all of the query's terms when none is); else the query as it is.

        A term in more than half of the documents counts against a document
        in BM25's original weight (its Robertson-Sparck Jones IDF is below
        zero); the IDF used here, kept positive, gives it the least weight of
        any. Scoring it walks most of the corpus ("the", "and", "to" are in
        60-80 % of conversation turns), which made the keyword side of a
        search grow with the memory. A small corpus costs nothing to score
        whole, and there such a term may be all that matches a document.
        ``delta_tfs``: each delta document's term counts (see :meth:`_doc_freq`).
        """
        total = len(self._lengths)
        if total < PRUNE_FROM:
            return counts
        kept: Counter[str] = Counter()
        for term, n in counts.items():
            df = self._doc_freq(term, searcher, delta_tfs)
            if 0 < df and 2 * df <= total:
                kept[term] = n
        return kept or counts

    def _delta_scores(
        self, counts: Counter[str], searcher: Any, delta_tfs: dict[str, Counter[str]]
    ) -> dict[str, float]:
        """Exact BM25 of the delta's documents (``delta_tfs``: their term counts), with the corpus
        statistics as they are now: document frequencies as :meth:`_doc_freq` counts them, close,
        not exact, for the few documents changed since the last commit.
        """
        if not delta_tfs:
            return {}
        n = len(self._lengths)
        avgdl = self._total / n if self._total else 1.0
        k1, b = self.k1, self.b
        out: dict[str, float] = {}
        for term, qtf in counts.items():
            holders = {doc: tfs[term] for doc, tfs in delta_tfs.items() if term in tfs}
            if not holders:
                continue
            df = self._doc_freq(term, searcher, delta_tfs)
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            for doc, tf in holders.items():
                norm = k1 * (1.0 - b + b * self._lengths[doc] / avgdl)
                out[doc] = out.get(doc, 0.0) + qtf * idf * tf * (k1 + 1.0) / (tf + norm)
        return out
