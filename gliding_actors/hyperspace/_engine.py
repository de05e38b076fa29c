"""The hybrid search engine: documents, filters, three rankings and their fusion.

Plain code — no actor, no thread, no clock. :class:`HyperspaceEngine` keeps
one :class:`Doc` per indexed node (a line or an L0-only node such as an L1
archive), a :class:`~gliding_actors.hyperspace._index.VectorIndex` per vector
space, a BM25 keyword index (:mod:`~gliding_actors.hyperspace._keywords`),
tag / graph / type inverted sets for the filters, and (optionally) a Poincaré
model of the type hierarchy.

A search ranks the documents that pass the filters three ways —

* **text**: cosine between the query's and the node's text embeddings (per
  vector space: a node embedded by a fallback embedder is compared with the
  query embedded by that same embedder);
* **lexical**: BM25 over the same words the hash embedder sees;
* **structure**: how close, in the Poincaré ball, the node (or its
  ``@type``) sits to the query's *anchors*: the types the filter names, the
  classes the query text names, else the node the text and lexical rankings
  agree on best (pseudo-relevance feedback);

— and fuses them: reciprocal-rank fusion (``Σ w / (rrf_k + rank)``, the
default: it needs no calibration between cosines, BM25 and distances) or a
weighted sum of min-max-normalised scores. Tags named ``should`` add a fourth
ranking (more matched tags first).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgpack
import numpy as np

from gliding_actors._progress import ProgressReporter
from gliding_actors.errors import EmbeddingError, InvalidInput, show
from gliding_actors.hyperspace._embedders import EmbedderChain, Matrix
from gliding_actors.hyperspace._importance import ImportanceRule, Use
from gliding_actors.hyperspace._index import VectorIndex
from gliding_actors.hyperspace._keywords import KeywordIndex
from gliding_actors.hyperspace._text import node_text, node_types, words
from gliding_actors.l0 import importance_of

if TYPE_CHECKING:
    from gliding_actors.config import HyperspaceConfig
    from gliding_actors.hyperspace._poincare import PoincareEmbedding

__all__ = ["Doc", "HyperspaceEngine", "SearchFilters", "parse_filters"]

#: how deep each ranking goes for ``k`` answers: ``max(3 k, 50)``. Deep enough for fusion to lift a
#: node several rankings agree on (four gave the same context recall within 0.004 on the development
#: LoCoMo file), and no deeper: a context's recall asks for 62 to 125 answers, and a ranking's cost
#: follows its depth on a large memory.
_DEPTH_PER_ANSWER = 3
_MIN_DEPTH = 50


#: The default context's vocabulary: ``@type: "Task"`` is ``VOCAB + "Task"`` in the graph.
VOCAB = "https://gliding-actors.dev/ns#"


def short_type(name: str) -> str:
    """A type as written in values (``Task``), whether given compact or expanded."""
    return name.removeprefix(VOCAB)


def full_type(name: str) -> str:
    """A compact type term expanded under the default vocabulary (IRIs stay as they are)."""
    return name if ":" in name else VOCAB + name


@dataclass(frozen=True)
class SearchFilters:
    """What a result must (or should) be. Empty tuples and None mean "no condition"."""

    #: every one of these tags
    tags_must: tuple[str, ...] = ()
    #: preferably these (a fourth ranking, more matched first); never excludes
    tags_should: tuple[str, ...] = ()
    #: none of these tags
    tags_not: tuple[str, ...] = ()
    #: any of these ``@type`` names (compact or expanded)
    types: tuple[str, ...] = ()
    #: only this named graph
    graph: str | None = None
    min_importance: float | None = None
    max_importance: float | None = None

    @property
    def restricts(self) -> bool:
        """Whether these filters list the documents they allow (``tags_should`` only reorders)."""
        return bool(
            self.tags_must or self.tags_not or self.types or self.graph is not None
            or self.min_importance is not None or self.max_importance is not None
        )


def _str_list(raw: Any, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str) or not isinstance(raw, (list, tuple)) or not all(isinstance(t, str) and t for t in raw):
        raise InvalidInput(f"search filter {where} is a list of non-empty strings, not {show(raw)}", path=(where,))
    return tuple(sorted(set(raw)))


def _bound(raw: Any, where: str) -> float | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw):
        raise InvalidInput(f"search filter {where} is a number, not {show(raw)}", path=(where,))
    return float(raw)


def parse_filters(raw: Mapping[str, Any] | SearchFilters | None) -> SearchFilters:
    """Filters from their plain-data form (the scenario op's ``filters``).

    ``tags`` is a list (all must match) or ``{must, should, not}``; ``types``
    a list; ``graph`` a name; ``min_importance`` / ``max_importance`` numbers.
    Anything else is :class:`InvalidInput` naming the key.
    """
    if raw is None:
        return SearchFilters()
    if isinstance(raw, SearchFilters):
        return raw
    if not isinstance(raw, Mapping):
        raise InvalidInput(f"search filters are an object, not {type(raw).__name__}")
    known = {"tags", "types", "graph", "min_importance", "max_importance"}
    unknown = sorted(str(k) for k in raw if k not in known)
    if unknown:
        raise InvalidInput(f"unknown search filter {show(unknown[0])} (known: {', '.join(sorted(known))})")
    tags = raw.get("tags")
    must: tuple[str, ...] = ()
    should: tuple[str, ...] = ()
    not_: tuple[str, ...] = ()
    if isinstance(tags, Mapping):
        bad = sorted(str(k) for k in tags if k not in ("must", "should", "not"))
        if bad:
            raise InvalidInput(f"search filter tags.{bad[0]}: tags take must, should and not")
        must = _str_list(tags.get("must"), "tags.must")
        should = _str_list(tags.get("should"), "tags.should")
        not_ = _str_list(tags.get("not"), "tags.not")
    else:
        must = _str_list(tags, "tags")
    graph = raw.get("graph")
    if graph is not None and (not isinstance(graph, str) or not graph):
        raise InvalidInput(f"search filter graph is a graph name, not {show(graph)}", path=("graph",))
    lo = _bound(raw.get("min_importance"), "min_importance")
    hi = _bound(raw.get("max_importance"), "max_importance")
    if lo is not None and hi is not None and lo > hi:
        raise InvalidInput(f"search filter min_importance {lo} is above max_importance {hi}")
    return SearchFilters(must, should, not_, _str_list(raw.get("types"), "types"), graph, lo, hi)


@dataclass
class Doc:
    """One indexed node: what the filters and the rankings read."""

    iri: str
    text: str
    tags: tuple[str, ...]
    graph: str
    types: tuple[str, ...]
    importance: float
    version: int
    #: sha256 of the text: an unchanged text is never embedded again
    text_hash: str
    #: the vector space (embedder name) of its text vector
    space: str
    #: ``line`` (coherent L2 line) or ``l0`` (an L0-only node, e.g. an L1 archive)
    source: str = "line"

    def to_plain(self) -> list[Any]:
        return [self.iri, self.text, list(self.tags), self.graph, list(self.types), self.importance,
                self.version, self.text_hash, self.space, self.source]

    @classmethod
    def from_plain(cls, row: list[Any]) -> Doc:
        iri, text, tags, graph, types, importance, version, text_hash, space, source = row
        return cls(str(iri), str(text), tuple(tags), str(graph), tuple(types), float(importance),
                   int(version), str(text_hash), str(space), str(source))


@dataclass
class _Ranked:
    name: str
    weight: float
    items: list[tuple[str, float]] = field(default_factory=list)


class HyperspaceEngine:
    """Documents and indexes of one memory (see the module docstring). Not thread-safe:
    the hyperspace actor owns it; only the indexes' own locks let the index worker insert."""

    def __init__(
        self,
        config: HyperspaceConfig,
        chain: EmbedderChain,
        clock: Callable[[], float] | None = None,
        *,
        keyword_path: Path | None = None,
    ) -> None:
        self.config = config
        self.chain = chain
        #: importance grown by use and faded by idleness (``_importance.py``), timed by the memory's clock
        self.importance_rule = ImportanceRule(config.importance_rise, config.importance_half_life_s)
        self._now = clock if clock is not None else (lambda: 0.0)
        #: each document's uses since open: searches that returned it, and when it was last used or written
        self.uses: dict[str, Use] = {}
        self.docs: dict[str, Doc] = {}
        self.spaces: dict[str, VectorIndex] = {}
        #: BM25 over the documents' words (tantivy under ``keyword_path``, in memory when None)
        self.keywords = KeywordIndex(keyword_path)
        self._by_tag: dict[str, set[str]] = {}
        self._by_graph: dict[str, set[str]] = {}
        self._by_type: dict[str, set[str]] = {}
        self.structure: PoincareEmbedding | None = None
        self._cache: OrderedDict[tuple[str, str], Matrix] = OrderedDict()
        #: embeddings computed (cache misses), for tests and stats
        self.embedded = 0
        #: documents with a text but no vector yet (``upsert(defer=True)``): iri -> text digest.
        #: They are found by words and filters meanwhile; :meth:`install` gives them their vector.
        self.waiting: dict[str, str] = {}
        #: waiting documents not yet handed to an embedder (:meth:`take_new_waiting`)
        self._new_waiting: dict[str, str] = {}
        #: texts every embedder refused (deferred embedding): indexed by words only
        self.embed_failures = 0
        #: vectors made for a line before it is indexed at that text: iri -> (space, digest, vector).
        #: Kept per line, not in the bounded cache, so a backlog larger than ``embed_cache`` is not
        #: embedded twice; one per line, dropped when the line is indexed or removed.
        self._ahead: dict[str, tuple[str, str, Matrix]] = {}

    # -- vectors -------------------------------------------------------------------------
    def space(self, name: str, dim: int) -> VectorIndex:
        index = self.spaces.get(name)
        if index is None:
            c = self.config
            index = self.spaces[name] = VectorIndex(
                dim,
                connectivity=c.hnsw_connectivity,
                expansion_add=c.hnsw_expansion_add,
                expansion_search=c.hnsw_expansion_search,
                index_after=c.index_after,
                exact_limit=c.exact_limit,
            )
        return index

    def _cached(self, digest: str) -> tuple[str, Matrix] | None:
        for embedder in self.chain.embedders:
            hit = self._cache.get((embedder.name, digest))
            if hit is not None:
                self._cache.move_to_end((embedder.name, digest))
                return embedder.name, hit
        return None

    def embed_text(self, text: str) -> tuple[str, Matrix]:
        """``(space, vector)`` of ``text`` from the chain, through a small cache by text hash."""
        digest = _digest(text)
        hit = self._cached(digest)
        if hit is not None:
            return hit
        name, rows = self.chain.embed([text])
        self.embedded += 1
        self._remember(name, digest, rows[0])
        return name, rows[0]

    def _remember(self, space: str, digest: str, vector: Matrix) -> None:
        self._cache[(space, digest)] = vector
        while len(self._cache) > self.config.embed_cache:
            self._cache.popitem(last=False)

    def has_vector_for(self, iri: str, digest: str) -> bool:
        """Whether line ``iri`` at the text with ``digest`` would get its vector without embedding:
        the line is indexed at that text with a vector, one was made ahead for it, or one is
        remembered for the text."""
        if self._vector_kept(iri, digest):
            return True
        ahead = self._ahead.get(iri)
        if ahead is not None and ahead[1] == digest:
            return True
        return any((embedder.name, digest) in self._cache for embedder in self.chain.embedders)

    def _vector_kept(self, iri: str, digest: str) -> bool:
        """Whether line ``iri`` is indexed at the text with ``digest`` and has its vector (a rewrite
        of the same text keeps it)."""
        doc = self.docs.get(iri)
        return doc is not None and doc.text_hash == digest and doc.space in self.spaces and iri in self.spaces[doc.space]

    def warm(self, iri: str, value: Mapping[str, Any] | None) -> None:
        """Embed the text of line ``iri``'s value ahead of time (a write still in an agent's cache), for
        its indexing to use; no document changes."""
        text = node_text(value)
        if text.strip():
            with contextlib.suppress(EmbeddingError):  # indexing it will raise it where it matters
                space, vector = self.embed_text(text)
                self._keep_ahead(iri, space, _digest(text), vector)

    def _keep_ahead(self, iri: str, space: str, digest: str, vector: Matrix) -> None:
        doc = self.docs.get(iri)
        if doc is None or doc.text_hash != digest:  # not indexed at this text yet
            self._ahead[iri] = (space, digest, vector)

    def _take_ahead(self, iri: str, digest: str) -> tuple[str, Matrix] | None:
        """The vector made ahead for line ``iri`` at this text, taken; one made for a newer text stays."""
        ahead = self._ahead.get(iri)
        if ahead is None or ahead[1] != digest:
            return None
        del self._ahead[iri]
        return ahead[0], ahead[2]

    # -- documents ------------------------------------------------------------------------
    def upsert(
        self,
        iri: str,
        value: Mapping[str, Any],
        *,
        version: int,
        tags: Iterable[str] = (),
        graph: str,
        importance: float | None = None,
        source: str = "line",
        defer: bool = False,
    ) -> Doc:
        """Index node ``iri`` at ``version``. Embeds first: an :class:`EmbeddingError` changes nothing.

        ``defer``: a text not embedded before (no cached vector) is not
        embedded now; the document is indexed at once without a vector and
        waits in :attr:`waiting` for :meth:`install` (an embedder running
        elsewhere) or :meth:`embed_waiting`. A node with no text at all (only
        IRIs and numbers) is indexed without a text vector: filters, BM25
        (nothing) and structure still find it.
        """
        text = node_text(value)
        digest = _digest(text)
        old = self.docs.get(iri)
        vector: Matrix | None = None
        space = ""
        ahead = self._take_ahead(iri, digest)
        if text.strip():
            if old is not None and self._vector_kept(iri, digest):
                space = old.space  # same text: the vector it has is the vector it would get
            elif ahead is not None:
                space, vector = ahead  # made for this line while it was on its way home
            elif defer:
                space, vector = self._cached(digest) or ("", None)
            else:
                space, vector = self.embed_text(text)
        doc = Doc(
            iri,
            text,
            tuple(sorted(set(tags))),
            graph,
            tuple(node_types(value)),
            importance_of(value) if importance is None else importance,
            version,
            digest,
            space,
            source,
        )
        self._unlink(iri)
        if vector is not None or not space:  # a new vector, or none: the old one goes
            for other in self.spaces.values():
                other.remove(iri)
        if vector is not None:
            self.space(space, int(vector.shape[0])).add(iri, vector, graph)
        elif space:
            self.spaces[space].regroup(iri, graph)  # same vector; the line may have moved to another graph
        self.docs[iri] = doc
        use = self.uses.get(iri)
        self.uses[iri] = Use(0 if use is None else use.count, self._now())  # a write is a use: idle from now
        self._link(doc)
        self.keywords.add(iri, words(text), graph)
        self.waiting.pop(iri, None)
        self._new_waiting.pop(iri, None)
        if text.strip() and not space:
            self.waiting[iri] = self._new_waiting[iri] = digest
        return doc

    # -- deferred embedding -------------------------------------------------------------------
    def take_new_waiting(self) -> list[tuple[str, str, str]]:
        """``(iri, digest, text)`` of each document that began waiting since the last call."""
        fresh = [(iri, digest, self.docs[iri].text) for iri, digest in self._new_waiting.items()]
        self._new_waiting.clear()
        return fresh

    def install(self, space: str, rows: Iterable[tuple[str, str, Matrix]]) -> int:
        """Vectors computed elsewhere: ``(iri, text digest, vector)`` in ``space``.

        Each is remembered by digest (a later write of the same text costs
        nothing); a document still waiting for exactly that text gets it. A
        vector for a text the document no longer has is only remembered.
        Returns how many documents got their vector.
        """
        got = 0
        for iri, digest, vector in rows:
            self._remember(space, digest, vector)
            if self.waiting.get(iri) != digest:
                self._keep_ahead(iri, space, digest, vector)
                continue
            self.space(space, int(vector.shape[0])).add(iri, vector, self.docs[iri].graph)
            self.docs[iri].space = space
            del self.waiting[iri]
            self._new_waiting.pop(iri, None)
            self.embedded += 1
            got += 1
        return got

    def embed_waiting(self, limit: int | None = None) -> int:
        """Embed up to ``limit`` waiting documents here, in one batch; returns how many got a vector.

        A text every embedder refuses stops waiting (counted in
        :attr:`embed_failures`): it stays findable by words and filters.
        """
        todo = list(self.waiting.items())[:limit]
        if not todo:
            return 0
        texts = {digest: self.docs[iri].text for iri, digest in todo}
        got = 0
        for space, digest, vector in embed_batch(self.chain, texts):
            got += self.install(space, [(iri, d, vector) for iri, d in todo if d == digest])
        for iri, digest in todo:
            self.refuse(iri, digest)
        return got

    def refuse(self, iri: str, digest: str) -> None:
        """Every embedder refused ``iri``'s text ``digest``: it stops waiting (counted in
        :attr:`embed_failures`) and stays findable by words and filters. A document whose text
        changed since is still waiting for its new text, so it is left alone."""
        if self.waiting.get(iri) != digest:
            return
        del self.waiting[iri]
        self._new_waiting.pop(iri, None)
        self.embed_failures += 1

    def importance(self, iri: str) -> float:
        """Document ``iri``'s effective importance now (its written one, grown by use, faded by idleness)."""
        doc = self.docs[iri]
        use = self.uses.get(iri)
        if use is None:
            return doc.importance
        return self.importance_rule.effective(doc.importance, use.count, self._now() - use.last)

    def used(self, iris: Iterable[str]) -> None:
        """``iris`` were returned by a search: each counts one more use, now."""
        now = self._now()
        for iri in iris:
            use = self.uses.get(iri)
            if use is None:
                self.uses[iri] = Use(1, now)
            else:
                use.count += 1
                use.last = now

    def remove(self, iri: str) -> bool:
        self.waiting.pop(iri, None)
        self._ahead.pop(iri, None)
        self.uses.pop(iri, None)
        self._new_waiting.pop(iri, None)
        if iri not in self.docs:
            return False
        self._unlink(iri)
        del self.docs[iri]
        self.keywords.remove(iri)
        for index in self.spaces.values():
            index.remove(iri)
        return True

    def _link(self, doc: Doc) -> None:
        for tag in doc.tags:
            self._by_tag.setdefault(tag, set()).add(doc.iri)
        self._by_graph.setdefault(doc.graph, set()).add(doc.iri)
        for t in doc.types:
            self._by_type.setdefault(short_type(t), set()).add(doc.iri)

    def _unlink(self, iri: str) -> None:
        doc = self.docs.get(iri)
        if doc is None:
            return
        for tag in doc.tags:
            _discard(self._by_tag, tag, iri)
        _discard(self._by_graph, doc.graph, iri)
        for t in doc.types:
            _discard(self._by_type, short_type(t), iri)

    def graphs(self) -> list[str]:
        """The named graphs holding at least one document, sorted (kept by ``_link``: no scan)."""
        return sorted(self._by_graph)

    # -- filters ----------------------------------------------------------------------------
    def readable_set(self, graphs: Iterable[str] | None) -> set[str] | None:
        """The graphs of ``graphs`` that hold documents, or None when that is every such graph."""
        if graphs is None:
            return None
        readable = set(graphs)
        return None if readable.issuperset(self._by_graph) else readable & self._by_graph.keys()

    def _narrow(self, readable: set[str]) -> bool:
        """Whether the documents of ``readable`` are few enough to list (a quarter of all at most,
        and no more than an exact vector pass takes): a predicate over a wide set costs less, and
        the vector index asks its graph wider when a predicate eats its answers."""
        count = sum(len(self._by_graph[g]) for g in readable)
        return count * 4 <= len(self.docs) and count <= self.config.exact_limit

    def candidates(self, filters: SearchFilters, graphs: Iterable[str] | None) -> set[str] | None:
        """The documents passing ``filters`` in ``graphs`` (None: every graph); None = every document."""
        sets: list[set[str]] = []
        readable = self.readable_set(graphs)
        if readable is not None:
            sets.append(set[str]().union(*(self._by_graph[g] for g in readable)))
        if filters.graph is not None:
            sets.append(self._by_graph.get(filters.graph, set()))
        for tag in filters.tags_must:
            sets.append(self._by_tag.get(tag, set()))
        if filters.types:
            by_type = self._by_type
            sets.append(set[str]().union(*(by_type.get(short_type(t), ()) for t in filters.types)))
        out: set[str] | None = None
        if sets:
            sets.sort(key=len)
            out = set(sets[0])
            for s in sets[1:]:
                out &= s
        if filters.tags_not:
            if out is None:
                out = set(self.docs)
            for tag in filters.tags_not:
                out -= self._by_tag.get(tag, set())
        lo, hi = filters.min_importance, filters.max_importance
        if lo is not None or hi is not None:
            pool = self.docs if out is None else {i: self.docs[i] for i in out}
            importance = self.importance
            out = {
                i for i in pool
                if (lo is None or importance(i) >= lo) and (hi is None or importance(i) <= hi)
            }
        return out

    # -- search -------------------------------------------------------------------------------
    def search(
        self,
        text: str,
        k: int,
        filters: SearchFilters | None = None,
        *,
        graphs: Iterable[str] | None = None,
        visible: Callable[[str], bool] | None = None,
    ) -> list[tuple[str, float]]:
        """The ``k`` best ``(iri, score)`` for ``text``, best first (ties by IRI).

        Scores lie in [0, 1] on every path: with a text (or ``should`` tags),
        the fused score divided by that of a node first in every ranking the
        search ran; without, the listing's importance.

        ``graphs``: the named graphs the asker may read (None: all);
        ``visible``: a last per-node check (the asker's permission on the line).
        """
        filters = filters or SearchFilters()
        if k <= 0 or not self.docs:
            return []
        # The graphs a role may read restrict by a document's graph. Listed as an allow-list only
        # when they are narrow or other filters list documents anyway; otherwise each ranking asks
        # the predicate about the few documents it would return, so a search does not walk the
        # corpus (nor call ``visible`` on every document) to learn what it may show.
        readable = self.readable_set(graphs)
        if readable is not None and (filters.restricts or self._narrow(readable)):
            allow = self.candidates(filters, readable)
            readable = None
        else:
            allow = self.candidates(filters, None)
        if allow is not None and visible is not None:
            allow = {i for i in allow if visible(i)}  # listed anyway: check each once, not per ranking
            visible = None
        if allow is not None and not allow:
            return []
        docs = self.docs
        verdicts: dict[str, bool] = {}  # each ranking asks about its own best few; a document is asked once

        def ok(iri: str) -> bool:
            verdict = verdicts.get(iri)
            if verdict is None:
                verdict = verdicts[iri] = (
                    (allow is None or iri in allow)
                    and (readable is None or docs[iri].graph in readable)
                    and (visible is None or visible(iri))
                )
            return verdict

        c = self.config
        depth = max(_DEPTH_PER_ANSWER * k, _MIN_DEPTH)
        rankings: list[_Ranked] = []
        if text.strip():
            rankings.append(self._text_ranking(text, depth, allow, ok, readable))
            lexical = _Ranked("lexical", c.w_lexical)
            lexical.items = self.keywords.top(words(text), depth, ok, readable)
            rankings.append(lexical)
        if filters.tags_should:
            should = _Ranked("tags", c.w_tags)
            wanted = set(filters.tags_should)
            counts: dict[str, float] = {}
            # with a text, a preference reorders what the text found; alone, it ranks
            found = {i for r in rankings for i, _ in r.items} if text.strip() else None
            for tag in wanted:
                for iri in self._by_tag.get(tag, ()):
                    if ok(iri) and (found is None or iri in found):
                        counts[iri] = counts.get(iri, 0.0) + 1.0
            should.items = _top(list(counts.items()), depth)
            rankings.append(should)
        if not any(r.items for r in rankings):
            if text.strip():
                return []  # a text that matches nothing finds nothing (no filler ranked above real hits)
            # no text and no preference: the filtered set by importance, then IRI
            pool = list(self.docs) if allow is None else list(allow)
            return top_passing({i: self.importance(i) for i in pool}, k, ok, positive=False)
        structural = self._structure_ranking(text, filters, rankings, ok, depth)
        if structural is not None:
            rankings.append(structural)
        best = _best_fused(rankings, c.fusion, c.rrf_k)
        fused = _fuse(rankings, c.fusion, c.rrf_k)
        return [(iri, min(1.0, score / best)) for iri, score in _top(list(fused.items()), k)]

    def _text_ranking(
        self, text: str, depth: int, allow: set[str] | None, ok: Callable[[str], bool], graphs: set[str] | None
    ) -> _Ranked:
        ranked = _Ranked("text", self.config.w_text)
        found: dict[str, float] = {}
        for name, index in sorted(self.spaces.items()):
            if not len(index):
                continue
            embedder = self.chain.by_name(name)
            if embedder is None:
                continue  # vectors of an embedder this process cannot run
            digest = _digest(text)
            cached = self._cache.get((name, digest))
            if cached is None:
                try:
                    cached = embedder.embed([text])[0]
                except EmbeddingError:
                    continue
                self._remember(name, digest, cached)
            floor = self.config.min_similarity
            if floor is None:
                floor = getattr(embedder, "min_similarity", 0.0)
            hits = index.search(cached, depth, allow=allow if allow is not None else ok, groups=graphs)
            for iri, score in hits:
                if ok(iri) and score >= floor:
                    found[iri] = max(score, found.get(iri, -2.0))
        ranked.items = _top(list(found.items()), depth)
        return ranked

    def _structure_ranking(
        self,
        text: str,
        filters: SearchFilters,
        rankings: list[_Ranked],
        ok: Callable[[str], bool],
        depth: int,
    ) -> _Ranked | None:
        model = self.structure
        if model is None or not len(model) or self.config.w_structure <= 0:
            return None
        known = set(model.nodes())
        anchors = {full_type(t) for t in filters.types} & known
        if not anchors and text.strip():
            by_name = {short_type(n).lower(): n for n in known if n.startswith(VOCAB)}
            anchors = {by_name[w] for w in words(text) if w in by_name}
        if not anchors:
            fused = _fuse(rankings, self.config.fusion, self.config.rrf_k)
            best = _top(list(fused.items()), 1)
            if best:
                anchors = set(self._points_of(best[0][0], known))
        if not anchors:
            return None
        pool: set[str] = set()
        for r in rankings:
            pool.update(i for i, _ in r.items)
        if not text.strip():  # no text to find candidates: the filter's types are the pool
            for t in filters.types:
                pool.update(i for i in self._by_type.get(short_type(t), ()) if ok(i))
        scored: list[tuple[str, float]] = []
        for iri in pool:
            points = self._points_of(iri, known)
            if points:
                scored.append((iri, max(model.similarity(p, a) for p in points for a in anchors)))
        if not scored:
            return None
        ranked = _Ranked("structure", self.config.w_structure)
        ranked.items = _top(scored, depth)
        return ranked

    def _points_of(self, iri: str, known: set[str]) -> list[str]:
        """Where a node sits in the ball: its own point (an instance), else its types'."""
        if iri in known:
            return [iri]
        doc = self.docs.get(iri)
        if doc is None:
            return []
        return [full_type(t) for t in doc.types if full_type(t) in known]

    # -- persistence --------------------------------------------------------------------------
    def dump_docs(self) -> bytes:
        """The documents and the keyword index's state (committed first: the two describe one moment)."""
        packed: bytes = msgpack.packb(
            {"docs": [d.to_plain() for d in self.docs.values()], "keywords": self.keywords.state()},
            use_bin_type=True,
        )
        return packed

    def load_docs(self, data: bytes, progress: ProgressReporter | None = None) -> bool:
        """Restore documents (the vector spaces are loaded separately) and the filters' sets; True when
        the keyword index on disk is the one saved with them, else it is rebuilt from their texts
        (``progress`` hears of that as ``keywords``)."""
        saved = msgpack.unpackb(data, raw=False)
        rows, keywords = (saved, None) if isinstance(saved, list) else (saved["docs"], saved.get("keywords"))
        for row in rows:
            doc = Doc.from_plain(row)
            self.docs[doc.iri] = doc
            self._link(doc)
            if not doc.space and doc.text.strip():  # saved while it waited for its vector
                self.waiting[doc.iri] = self._new_waiting[doc.iri] = doc.text_hash
        docs = self.docs
        for index in self.spaces.values():
            if index.loaded_without_groups:  # saved before vectors had graphs: put each in its document's
                for iri, doc in docs.items():
                    index.regroup(iri, doc.graph)
                index.loaded_without_groups = False
        reporter = progress or ProgressReporter()
        return self.keywords.adopt(
            keywords,
            lambda: ((iri, words(d.text), d.graph) for iri, d in docs.items()),
            lambda done: reporter.report("keywords", done, len(docs)),
        )

    def close(self) -> None:
        """Let go of the files this engine holds open (the keyword index's writer)."""
        self.keywords.close()

    def stats(self) -> dict[str, Any]:
        return {
            "docs": len(self.docs),
            "embedded": self.embedded,
            "waiting_for_vectors": len(self.waiting),
            "vectors_ahead": len(self._ahead),
            "embed_failures": self.embed_failures,
            "spaces": {name: index.stats() for name, index in sorted(self.spaces.items())},
            "embedders": [e.name for e in self.chain.embedders],
            "skipped": [list(s) for s in self.chain.skipped],
            "structure_nodes": 0 if self.structure is None else len(self.structure),
        }


def embed_batch(chain: EmbedderChain, texts: Mapping[str, str]) -> list[tuple[str, str, Matrix]]:
    """``(space, digest, vector)`` for each ``digest -> text`` the chain can embed.

    One batch first; if the chain refuses it (one bad text fails a whole
    batch), each text alone, so one text no embedder takes costs only itself.
    Safe on any thread: it reads the chain only.
    """
    digests = list(texts)
    if not digests:
        return []
    try:
        space, rows = chain.embed([texts[d] for d in digests])
        return [(space, d, rows[i]) for i, d in enumerate(digests)]
    except EmbeddingError:
        out: list[tuple[str, str, Matrix]] = []
        for d in digests:
            with contextlib.suppress(EmbeddingError):
                space, rows = chain.embed([texts[d]])
                out.append((space, d, rows[0]))
        return out


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _discard(index: dict[str, set[str]], key: str, iri: str) -> None:
    members = index.get(key)
    if members is not None:
        members.discard(iri)
        if not members:
            del index[key]


def _top(items: list[tuple[str, float]], k: int) -> list[tuple[str, float]]:
    return sorted(items, key=lambda kv: (-kv[1], kv[0]))[:k]


def top_passing(
    scores: Mapping[str, float], k: int, ok: Callable[[str], bool], *, positive: bool = True
) -> list[tuple[str, float]]:
    """The ``k`` best ``(iri, score)`` of ``scores`` that ``ok`` passes (and score above 0 when
    ``positive``), best first, ties by IRI: what ``_top`` over the passing items gives.

    Selects instead of sorting the whole map: the ``m`` highest scores (every item tied with
    the ``m``-th included, so the answer does not depend on the map's order) by a partial sort,
    then ``ok`` on those only; ``m`` grows fourfold while the filter leaves fewer than ``k``.
    """
    if k <= 0 or not scores:
        return []
    iris = list(scores)
    values = np.fromiter(scores.values(), dtype=np.float64, count=len(iris))
    if positive:
        keep = np.flatnonzero(values > 0)
        if len(keep) < len(iris):
            iris = [iris[i] for i in keep.tolist()]
            values = values[keep]
    n = len(iris)
    m = min(n, max(2 * k, 64))
    while True:
        if m >= n:
            chosen: Iterable[int] = range(n)
        else:
            cut = float(np.partition(values, n - m)[n - m])  # the m-th highest score
            chosen = np.flatnonzero(values >= cut).tolist()
        ranked = sorted(((iris[i], float(values[i])) for i in chosen), key=lambda kv: (-kv[1], kv[0]))
        passing: list[tuple[str, float]] = []
        for kv in ranked:  # ``ok`` only until k pass: a crowd tied at the cut is sorted, not asked
            if ok(kv[0]):
                passing.append(kv)
                if len(passing) == k:
                    return passing
        if m >= n:
            return passing
        m = min(n, m * 4)


def _best_fused(rankings: list[_Ranked], how: str, rrf_k: int) -> float:
    """The fused score of a node first in every ranking the search ran (one that found nothing
    included): scores are divided by it, so a search's scores lie in [0, 1] like a listing's
    importances, and 1 means "first by every measure"."""
    weights = sum(r.weight for r in rankings if r.weight > 0)
    if weights <= 0:
        return 1.0
    return weights / (rrf_k + 1) if how == "rrf" else weights


def _fuse(rankings: list[_Ranked], how: str, rrf_k: int) -> dict[str, float]:
    fused: dict[str, float] = {}
    for r in rankings:
        if not r.items or r.weight <= 0:
            continue
        if how == "rrf":
            for rank, (iri, _score) in enumerate(r.items, start=1):
                fused[iri] = fused.get(iri, 0.0) + r.weight / (rrf_k + rank)
        else:  # weighted sum of min-max normalised scores
            values = np.array([s for _, s in r.items], dtype=np.float64)
            lo, hi = float(values.min()), float(values.max())
            span = hi - lo
            for iri, score in r.items:
                norm = 1.0 if span <= 0 else (score - lo) / span
                fused[iri] = fused.get(iri, 0.0) + r.weight * norm
    return fused


def merge_projection(
    projection: Mapping[str, Any],
    found: Mapping[str, Any],
    *,
    w_frame: float,
    w_search: float,
    rrf_k: int,
) -> dict[str, Any]:
    """A semantic projection: the frame's nodes and a search's hits in one ranking.

    The frame's order (``projection["iris"]``: what the frame put first) and
    the search's are fused by reciprocal rank with weights ``w_frame`` and
    ``w_search``. ``iris`` becomes the merged order — frame nodes the search
    also found rise, hits outside the frame join — while ``jsonld`` and
    ``tokens`` stay the frame's (the budget is the frame's business);
    ``ranking`` gives each IRI's fused score and both ranks, ``search`` the
    search's own answer.
    """
    frame_rank = {iri: r for r, iri in enumerate(projection.get("iris", []), start=1)}
    search_rank = {iri: r for r, iri in enumerate(found.get("iris", []), start=1)}
    fused: dict[str, float] = {}
    for ranks, weight in ((frame_rank, w_frame), (search_rank, w_search)):
        for iri, r in ranks.items():
            fused[iri] = fused.get(iri, 0.0) + weight / (rrf_k + r)
    order = _top(list(fused.items()), len(fused))
    merged = dict(projection)
    merged["iris"] = [iri for iri, _ in order]
    merged["ranking"] = [
        {"iri": iri, "score": round(score, 6), "frame_rank": frame_rank.get(iri), "search_rank": search_rank.get(iri)}
        for iri, score in order
    ]
    merged["search"] = {"iris": list(found.get("iris", [])), "scores": list(found.get("scores", []))}
    return merged
