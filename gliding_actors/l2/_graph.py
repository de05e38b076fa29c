"""The graph store of the L2 blackboard: pyoxigraph plus a node cache.

Plain code (principle 1): no actor, no thread, no clock. The lead's L2 actor
hosts one :class:`GraphStore`; see ``docs/L2_GRAPH.md`` for the contract,
the default context and what the host must serialise.

Why the pieces look the way they do:

* Every line's value is turned into quads by :func:`~._jsonld.to_quads`
  (pyoxigraph's JSON-LD parser, default context, skolemised blank nodes) and
  the store remembers exactly which quads each line put. A rewrite diffs old
  against new and applies the difference as **one** pyoxigraph transaction, so
  a concurrent reader sees the old node or the new one, never a mix.
* Quads are reference-counted: two lines may assert the same triple in the
  same graph (``{"@id": "task:b", "status": "open"}`` nested in one line and
  written as line ``task:b`` itself); deleting one leaves the other's triple.
* Agent queries run on a dataset restricted to the graphs the agent may read
  (pyoxigraph's ``default_graph``/``named_graphs`` override any ``FROM``,
  ``FROM NAMED`` or ``GRAPH <iri>`` in the text). Bound values travel as RDF
  terms through pyoxigraph's ``substitutions``; no caller text is ever spliced
  into a query.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any, NamedTuple, Self

import pyoxigraph as ox

from gliding_actors.errors import InvalidInput, PermissionDenied, StorageError, show
from gliding_actors.l0 import is_importance
from gliding_actors.l2._jsonld import (
    GRAPH_BASE,
    VOCAB,
    described_elsewhere,
    graph_iri,
    is_plain,
    to_quads,
    triples_to_jsonld,
)

__all__ = ["QUERY_PREFIXES", "BindingValue", "GraphNode", "GraphStore"]

#: Prefixes every query and update may use without declaring them (a query's
#: own ``PREFIX`` declarations take precedence).
QUERY_PREFIXES: dict[str, str] = {
    "ga": VOCAB,
    "gag": GRAPH_BASE,
    "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
    "rdfs": "http://www.w3.org/2000/01/rdf-schema#",
    "xsd": "http://www.w3.org/2001/XMLSchema#",
}

#: What a binding may be: a JSON scalar (a literal typed as JSON-LD types it:
#: string, integer, double, boolean), ``{"@id": iri}`` for an IRI,
#: ``{"@value": v, "@language": tag}`` / ``{"@value": v, "@type": iri}`` for
#: other literals, or a pyoxigraph term.
BindingValue = str | int | float | bool | Mapping[str, Any] | ox.NamedNode | ox.Literal

_Rows = list[dict[str, str]]
_PREFIX_USES = tuple(name + ":" for name in QUERY_PREFIXES)


def prefixes_for(sparql: str) -> dict[str, str] | None:
    """The predeclared prefixes, or ``None`` when the text cannot use one
    (none of ``ga:``, ``xsd:``… occurs): passing them costs ~2 µs a query."""
    for use in _PREFIX_USES:
        if use in sparql:
            return QUERY_PREFIXES
    return None


class GraphNode(NamedTuple):
    """One line as the graph store holds it. ``value`` is the object exactly
    as written (``None`` for a tombstone); ``graph`` the graph name; ``tags``
    the line's tags as written (last, with a default, so that a node built
    from the first four fields still compares equal to one without tags)."""

    iri: str
    value: dict[str, Any] | None
    graph: str
    version: int
    tags: tuple[str, ...] = ()
    #: the importance the version's writer gave (None: none given; readers then default it)
    importance: float | None = None


class _Dataset(NamedTuple):
    """The graphs an agent may read, as pyoxigraph's dataset arguments."""

    default: list[ox.NamedNode | ox.BlankNode | ox.DefaultGraph]
    named: list[ox.NamedNode | ox.BlankNode]


class _Entry(NamedTuple):
    """A line in the node cache, with the quads it put. Immutable: a write
    swaps the whole entry, so a reader on another thread never sees the value
    of one version with the number of another."""

    value: dict[str, Any] | None
    graph: str
    version: int
    quads: tuple[ox.Quad, ...]
    tags: tuple[str, ...]
    importance: float | None


# --- network guard -------------------------------------------------------------------------
#
# pyoxigraph is built with an HTTP client: ``SERVICE <url>`` in a query and
# ``LOAD <url>`` in an update fetch from the network, and no query() option
# turns that off. Those keywords are refused before the text reaches
# pyoxigraph. The scan blanks out what the SPARQL grammar treats as data —
# string literals (with their escapes), IRI references and comments — and looks
# for the keyword in what is left. pyoxigraph decodes \u escapes (four hex digits) only
# inside strings and IRIs (outside them they are a syntax error), so an escape
# cannot spell the keyword. A false positive (a prefixed name such as
# ``ex:a.service``) is a refusal, never a leak.

_DATA = re.compile(
    r'"""(?:(?:"|"")?(?:[^"\\]|\\.))*"""'
    r"|'''(?:(?:'|'')?(?:[^'\\]|\\.))*'''"
    r'|"(?:[^"\\\n\r]|\\.)*"'
    r"|'(?:[^'\\\n\r]|\\.)*'"
    r'|<(?:[^<>"{}|^`\\\x00-\x20]|\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8})*>'
    r"|#[^\n\r]*",
    re.DOTALL,
)
_KEYWORDS = {
    name: re.compile(rf"(?<![\w:?$]){name}(?![\w:])", re.IGNORECASE) for name in ("SERVICE", "LOAD")
}


def refuse_network(text: str, keywords: tuple[str, ...]) -> None:
    lowered = text.lower()
    hits = [k for k in keywords if k.lower() in lowered]
    if not hits:
        return  # the common case: one lower() and a substring test
    code = _DATA.sub(" ", text)
    for keyword in hits:
        if _KEYWORDS[keyword].search(code):
            raise InvalidInput(
                f"SPARQL {keyword} is refused: the graph store never reaches the network",
                path=("sparql",),
            )


# --- terms ---------------------------------------------------------------------------------


def _named(iri: object, what: str) -> ox.NamedNode:
    if type(iri) is not str:
        raise InvalidInput(f"{what} must be a string IRI, not {type(iri).__name__}", path=(what,))
    try:
        return ox.NamedNode(iri)
    except ValueError as exc:
        raise InvalidInput(f"invalid {what} {show(iri)}: {exc}", path=(what,)) from None


def _binding_term(name: str, value: object) -> ox.NamedNode | ox.Literal:
    kind = type(value)
    if kind is str or kind is bool or kind is int or kind is float:
        try:
            return ox.Literal(value)  # type: ignore[arg-type]
        except (ValueError, OverflowError) as exc:  # a lone surrogate, an int beyond 64 bits (fuzzing found it)
            raise InvalidInput(f"binding {name}: {exc}", path=("bindings", name)) from None
    if kind is ox.NamedNode or kind is ox.Literal:
        return value  # type: ignore[return-value]
    if isinstance(value, Mapping):
        keys = set(value)
        if keys == {"@id"}:
            return _named(value["@id"], f"binding {name}")
        if "@value" in keys and keys <= {"@value", "@language", "@type"} and len(keys) < 3:
            lexical = value["@value"]
            if "@language" in keys:
                language = value["@language"]
                if type(lexical) is not str or type(language) is not str:
                    raise InvalidInput(
                        f"binding {name}: @value and @language must be strings",
                        path=("bindings", name),
                    )
                try:
                    return ox.Literal(lexical, language=language)
                except ValueError as exc:
                    raise InvalidInput(f"binding {name}: {exc}", path=("bindings", name)) from None
            if "@type" in keys:
                if type(lexical) is not str:
                    raise InvalidInput(
                        f"binding {name}: a typed @value must be a string", path=("bindings", name)
                    )
                datatype = _named(value["@type"], f"binding {name}")
                try:
                    return ox.Literal(lexical, datatype=datatype)
                except ValueError as exc:  # a lone surrogate in the text (fuzzing found it)
                    raise InvalidInput(f"binding {name}: {exc}", path=("bindings", name)) from None
            return _binding_term(name, lexical)
    raise InvalidInput(
        f"binding {name}: need a string, number, boolean, {{'@id': iri}} or a JSON-LD "
        f"value object, not {kind.__name__}",
        path=("bindings", name),
    )


_Term = ox.NamedNode | ox.BlankNode | ox.Literal | ox.Triple


def _substitutions(bindings: Mapping[str, BindingValue] | None) -> dict[ox.Variable, _Term] | None:
    if bindings is not None and not isinstance(bindings, Mapping):  # fuzzing found .items() on a str
        raise InvalidInput(f"bindings are an object of variable -> value, not {type(bindings).__name__}", path=("bindings",))
    if not bindings:
        return None
    out: dict[ox.Variable, _Term] = {}
    for name, value in bindings.items():
        if type(name) is not str:
            raise InvalidInput("binding names must be strings", path=("bindings",))
        bare = name[1:] if name[:1] in ("?", "$") else name
        try:
            variable = ox.Variable(bare)
        except ValueError:
            raise InvalidInput(f"invalid variable name {show(name)}", path=("bindings", name)) from None
        out[variable] = _binding_term(name, value)
    return out


def _plain(term: Any) -> str:
    kind = type(term)
    if kind is ox.BlankNode:
        return "_:" + term.value  # type: ignore[no-any-return]
    if kind is ox.Triple:
        return str(term)
    return term.value  # type: ignore[no-any-return]


def _data_block(quads: Iterable[ox.Quad]) -> str:
    """Quad data for ``INSERT DATA``/``DELETE DATA``, grouped by graph.

    Every term is written by pyoxigraph itself (``str(term)`` is its
    N-Triples form, which SPARQL reads back to the same term: IRIs are
    validated, literals escaped); no term is ever a blank node (skolemised).
    """
    by_graph: dict[str, list[str]] = {}
    for q in quads:
        by_graph.setdefault(str(q.graph_name), []).append(f"{q.subject} {q.predicate} {q.object}")
    return " ".join(f"GRAPH {g} {{ {' . '.join(ts)} }}" for g, ts in by_graph.items())


def _tags(tags: object) -> tuple[str, ...]:
    """``tags`` as the tuple a node entry keeps; :class:`InvalidInput` unless
    it is a list or tuple of strings (a bare string would be split into
    one-letter tags, so it is refused too)."""
    if type(tags) is tuple:
        kept: tuple[object, ...] = tags
    elif type(tags) is list:
        kept = tuple(tags)
    else:
        raise InvalidInput(f"tags are a list or tuple of strings, not {type(tags).__name__}", path=("tags",))
    for n, tag in enumerate(kept):
        if type(tag) is not str:
            raise InvalidInput(f"a tag is a string, not {type(tag).__name__}", path=("tags", n))
    return kept  # type: ignore[return-value]  # every item checked to be a str just above


# --- the store -----------------------------------------------------------------------------

#: Never written: :meth:`GraphStore.check_query` parses queries against it.
_EMPTY = ox.Store()

#: an in-memory store is rebuilt once more than this many quads (and more than
#: twice its live quads) were deleted since the last rebuild (GraphStore._compact)
COMPACT_AFTER_DROPS = 20_000


class GraphStore:
    """pyoxigraph store + node cache of the L2 blackboard.

    ``GraphStore()`` keeps everything in memory; ``GraphStore(path)`` keeps the
    RDF in a RocksDB directory (for graphs larger than memory). L2 is working
    memory rebuilt from L0, and which line put which quad is only known in
    memory, so a directory is **cleared when opened**: otherwise its quads
    would belong to no line and could never be replaced or deleted.

    Threading: the host serialises every write — :meth:`put_node`, :meth:`load_nodes`,
    :meth:`forget`, :meth:`update`, :meth:`close` — on one thread (the L2
    actor). :meth:`query`, :meth:`node` and :meth:`graph_of` may also run on
    other threads at the same time: pyoxigraph gives each query a snapshot and
    commits each write as one transaction, and a node-cache entry is swapped
    whole. Such a reader may see a write's quads a moment before its cache
    entry (the RDF commits first); coherence is the caller's (recall dirty
    lines, then query). The listing helpers (:meth:`lines`, :meth:`iris_in`,
    :meth:`graphs`, :meth:`dump`) iterate Python containers: call them on the
    writer's thread.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self._path = None if path is None else os.fspath(path)
        try:
            store = ox.Store() if self._path is None else ox.Store(self._path)
            if self._path is not None:
                store.clear()
        except OSError as exc:
            raise StorageError(f"cannot open the L2 graph store at {self._path!r}: {exc}") from exc
        self._store: ox.Store | None = store
        self._nodes: dict[str, _Entry] = {}
        self._by_graph: dict[str, set[str]] = {}
        self._live = 0
        self._refs: dict[ox.Quad, int] = {}
        self._graph_nodes: dict[str, ox.NamedNode] = {}
        self._datasets: dict[tuple[str, ...], _Dataset] = {}
        #: quads deleted since the in-memory store was last rebuilt (see _compact)
        self._dropped = 0
        #: how many times the in-memory store was rebuilt
        self.compactions = 0

    # -- lifecycle ----------------------------------------------------------------------

    @property
    def path(self) -> str | None:
        """The store directory, or ``None`` in memory."""
        return self._path

    @property
    def raw(self) -> ox.Store:
        """The pyoxigraph store itself, for benchmarks comparing with raw
        pyoxigraph on the same data. Read only: writing through it bypasses
        the per-line bookkeeping."""
        return self._open()

    def close(self) -> None:
        """Flush (on disk) and release the store; later calls raise StorageError."""
        store, self._store = self._store, None
        if store is not None and self._path is not None:
            try:
                store.flush()
            except OSError as exc:
                raise StorageError(f"cannot flush the L2 graph store: {exc}") from exc

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _open(self) -> ox.Store:
        store = self._store
        if store is None:
            raise StorageError("the L2 graph store is closed")
        return store

    # -- graph names --------------------------------------------------------------------

    def graph_node(self, graph: str) -> ox.NamedNode:
        """The pyoxigraph IRI of named graph ``graph`` (validated, cached)."""
        node = self._graph_nodes.get(graph) if type(graph) is str else None
        if node is None:
            node = ox.NamedNode(graph_iri(graph))  # graph_iri validates the name
            self._graph_nodes[graph] = node
        return node

    # -- writes -------------------------------------------------------------------------

    def check_value(self, iri: str, value: dict[str, Any]) -> None:
        """Raise :class:`InvalidInput` if ``put_node(iri, value, …)`` would, or if
        the value makes statements about another node; changes nothing. Lets a
        host refuse an agent's value before the write enters the coherence
        protocol: a line may refer to another node but not describe it (what
        lines already in L0 hold is loaded as it is)."""
        _named(iri, "iri")
        if is_plain(value):
            return  # it parses, into this line's own nodes only (is_plain says why): no parse needed
        others = described_elsewhere(iri, to_quads(iri, value, ox.NamedNode(GRAPH_BASE + "check")))
        if others:
            raise InvalidInput(
                f"a line may refer to another node ({show(others[0])}) but not describe it: "
                'write {"@id": ...} alone, or write that node\'s own line',
                path=("value",),
            )

    def put_node(
        self,
        iri: str,
        value: dict[str, Any] | None,
        graph: str,
        version: int,
        tags: tuple[str, ...] | list[str] = (),
        importance: float | None = None,
    ) -> bool:
        """Make line ``iri`` hold ``value`` (``None``: a tombstone) in ``graph``.

        The quads this line put before are replaced by exactly the quads of
        the new value, in one transaction, and the node cache is updated in the
        same call. Returns ``False`` and changes nothing when ``version`` is
        older than the version held (a late, stale write). Raises
        :class:`InvalidInput` on a bad IRI, graph name, version or JSON-LD —
        nothing changed — and :class:`StorageError` if pyoxigraph cannot write.

        ``value`` is kept by reference and never modified; readers get it back
        as written (callers treat values as immutable).

        ``tags`` (strings, kept as a tuple in the order given) ride along in
        the node entry and are not turned into quads: the entry is then a whole
        copy of the line — value, version, tags, graph — so a reader that
        cannot reach the directory homes (on Ray they live in other processes)
        answers from here (:meth:`MemorySystem.line_copy`). A tombstone keeps
        its version, graph and tags, so a deleted line is never mistaken for
        an older copy in L0. A tag that is not a string is
        :class:`InvalidInput`, nothing changed. ``importance`` (None, or a
        number in [0, 1]: the one the version's writer gave) rides along too.
        """
        self._open()
        graph_node, kept_tags = self._checked(iri, graph, version, tags, importance)
        old = self._nodes.get(iri)
        if old is not None and version < old.version:
            return False
        entry = self._entry(iri, value, graph, graph_node, version, kept_tags, importance)
        # Nothing has changed so far; the RDF transaction is the only step that
        # can still fail, and it either commits whole or not at all.
        self._replace(() if old is None else old.quads, entry.quads)
        self._install(iri, old, entry)
        return True

    def load_nodes(self, nodes: Iterable[GraphNode], *, stored: bool = False) -> int:
        """Put lines the store does not hold yet, as :meth:`put_node` would one by one; returns how many.

        For a memory opening: the quads of every line go to pyoxigraph in one
        transaction instead of one per line. ``stored``: the values were read
        back from L0 (plain JSON, checked when written; see
        :func:`~._jsonld.to_quads`). Raises as :meth:`put_node` does, and
        :class:`InvalidInput` for a line held already or given twice; then
        nothing was put.
        """
        return self._load(((node, None) for node in nodes), stored)

    def load_worked_out(self, lines: Iterable[tuple[GraphNode, tuple[ox.Quad, ...]]]) -> int:
        """:meth:`load_nodes` for lines given with their quads (read back from a snapshot of this
        store's lines), which are not parsed from the values again. The caller vouches that each
        line's quads are the ones its value makes (a later write replaces exactly those)."""
        return self._load(lines, True)

    def _load(self, lines: Iterable[tuple[GraphNode, tuple[ox.Quad, ...] | None]], stored: bool) -> int:
        store = self._open()
        fresh: dict[str, _Entry] = {}
        quads: list[ox.Quad] = []
        for node, known in lines:
            if node.iri in self._nodes or node.iri in fresh:
                raise InvalidInput(f"line {show(node.iri)} is held already or given twice", path=("iri",))
            graph_node, kept_tags = self._checked(node.iri, node.graph, node.version, node.tags, node.importance)
            entry = fresh[node.iri] = self._entry(
                node.iri, node.value, node.graph, graph_node, node.version, kept_tags, node.importance, stored, known
            )
            quads.extend(entry.quads)
        try:
            store.extend(quads)
        except OSError as exc:
            raise StorageError(f"cannot write the L2 graph store: {exc}") from exc
        refs = self._refs
        for q in quads:
            refs[q] = refs.get(q, 0) + 1
        for iri, entry in fresh.items():
            self._install(iri, None, entry)
        return len(fresh)

    def _checked(
        self, iri: str, graph: str, version: int, tags: tuple[str, ...] | list[str], importance: float | None
    ) -> tuple[ox.NamedNode, tuple[str, ...]]:
        """Raise :class:`InvalidInput` on a bad line IRI, graph, version, tag or importance; else the
        graph's node and the tags to keep."""
        _named(iri, "iri")
        graph_node = self.graph_node(graph)
        if type(version) is not int or version < 0:
            raise InvalidInput(f"version must be an int >= 0, not {show(version)}", path=("version",))
        kept_tags = _tags(tags)
        if importance is not None and not is_importance(importance):
            raise InvalidInput(f"importance is None or a number in [0, 1], not {show(importance)}", path=("importance",))
        return graph_node, kept_tags

    @staticmethod
    def _entry(
        iri: str,
        value: dict[str, Any] | None,
        graph: str,
        graph_node: ox.NamedNode,
        version: int,
        tags: tuple[str, ...],
        importance: float | None,
        stored: bool = False,
        known: tuple[ox.Quad, ...] | None = None,
    ) -> _Entry:
        """The node-cache entry of a checked line, with its quads: ``known``, or worked out from the
        value (InvalidInput on bad JSON-LD)."""
        if known is not None:
            quads = known
        else:
            quads = () if value is None else to_quads(iri, value, graph_node, stored=stored)
        return _Entry(value, graph, version, quads, tags, None if importance is None else float(importance))

    def _install(self, iri: str, old: _Entry | None, entry: _Entry) -> None:
        """Swap ``entry`` in for ``old`` in the node cache and the per-graph sets (its quads are in the store)."""
        self._nodes[iri] = entry
        if old is not None and old.value is not None:
            self._by_graph[old.graph].discard(iri)
            self._live -= 1
        if entry.value is not None:
            self._by_graph.setdefault(entry.graph, set()).add(iri)
            self._live += 1

    def forget(self, iri: str) -> bool:
        """Drop line ``iri`` entirely (its quads and its cache entry, tombstone
        included), e.g. when L2 evicts it. Returns whether it was held."""
        self._open()
        old = self._nodes.get(iri)
        if old is None:
            return False
        self._replace(old.quads, ())
        del self._nodes[iri]
        if old.value is not None:
            self._by_graph[old.graph].discard(iri)
            self._live -= 1
        return True

    def _replace(self, old: tuple[ox.Quad, ...], new: tuple[ox.Quad, ...]) -> None:
        if old == new:
            return
        store = self._open()
        refs = self._refs
        old_set = set(old)
        new_set = set(new)
        added = [q for q in new if q not in old_set]
        dropped = [q for q in old if q not in new_set]
        deleted = [q for q in dropped if refs[q] == 1]
        try:
            if deleted:
                update = "DELETE DATA { " + _data_block(deleted) + " }"
                if added:
                    update += " ; INSERT DATA { " + _data_block(added) + " }"
                store.update(update)
            elif added:
                store.extend(added)
        except OSError as exc:
            raise StorageError(f"cannot write the L2 graph store: {exc}") from exc
        for q in dropped:
            count = refs[q] - 1
            if count:
                refs[q] = count
            else:
                del refs[q]
        for q in added:
            refs[q] = refs.get(q, 0) + 1
        if deleted and self._path is None:
            self._dropped += len(deleted)
            if self._dropped > max(COMPACT_AFTER_DROPS, 2 * len(refs)):
                self._compact()

    def _compact(self) -> None:
        """Copy the live quads into a fresh in-memory store and drop the old one.

        pyoxigraph's in-memory store keeps every term it ever interned, so a
        line rewritten with new literals grows it forever (measured: about
        0.4 KB per replaced quad with a unique literal, 4.7 MB/min in the
        reliability soak). Rebuilding once the quads dropped outnumber twice
        the live ones bounds the store to a small multiple of what it holds,
        at an amortised cost of O(1) copies per dropped quad. A query already
        running keeps the old store (its own reference) and finishes on it.
        """
        store = self._open()
        fresh = ox.Store()
        try:
            fresh.extend(store)
        except OSError as exc:
            raise StorageError(f"cannot rebuild the L2 graph store: {exc}") from exc
        self._store = fresh
        self._dropped = 0
        self.compactions += 1

    # -- node cache reads ---------------------------------------------------------------

    def node(self, iri: str) -> GraphNode | None:
        """The line as held (a tombstone has ``value=None``), or ``None``."""
        entry = self._nodes.get(iri)
        if entry is None:
            return None
        return GraphNode(iri, entry.value, entry.graph, entry.version, entry.tags, entry.importance)

    def quads_of(self, iri: str) -> tuple[ox.Quad, ...]:
        """The quads line ``iri`` put, all in its named graph (empty for a
        tombstone or an unknown line). Safe from any thread: an entry is
        swapped whole, so the quads are one version's. L3 copies a task's
        lines into a projection's scratch store with it, without re-parsing."""
        entry = self._nodes.get(iri)
        return () if entry is None else entry.quads

    def lines(self) -> list[GraphNode]:
        """Every line held, tombstones included, sorted by IRI."""
        return [
            GraphNode(iri, e.value, e.graph, e.version, e.tags, e.importance) for iri, e in sorted(self._nodes.items())
        ]

    def quads_if_held(self, iri: str, version: int, graph: str) -> tuple[ox.Quad, ...] | None:
        """The quads of line ``iri`` if it is held live at ``version`` in ``graph``, else None."""
        entry = self._nodes.get(iri)
        if entry is None or entry.value is None or entry.version != version or entry.graph != graph:
            return None
        return entry.quads

    def live_versions(self) -> list[tuple[str, int]]:
        """``(iri, version)`` of every live line, in no order: :meth:`lines` without the tombstones,
        the values and the sort (an index comparing itself with the lines on open)."""
        return [(iri, e.version) for iri, e in self._nodes.items() if e.value is not None]

    def graph_of(self, iri: str) -> str | None:
        """The graph of a live line; ``None`` if absent or deleted."""
        entry = self._nodes.get(iri)
        return None if entry is None or entry.value is None else entry.graph

    def iris_in(self, graph: str) -> list[str]:
        """The live lines of ``graph``, sorted."""
        return sorted(self._by_graph.get(graph, ()))

    def graphs(self) -> list[str]:
        """Graph names holding at least one live line, sorted."""
        return sorted(name for name, iris in self._by_graph.items() if iris)

    def count(self) -> int:
        """Number of live lines (tombstones excluded)."""
        return self._live

    def quad_count(self) -> int:
        """Number of quads in the RDF store."""
        return len(self._open())

    def dump(self) -> list[str]:
        """Every quad as an N-Quads line, sorted: a full, comparable picture of
        the RDF store (tests compare it before and after a refused call)."""
        return sorted(f"{q} ." for q in self._open())

    # -- SPARQL -------------------------------------------------------------------------

    def _dataset(self, graphs: Collection[str]) -> _Dataset:
        if type(graphs) is str:
            raise InvalidInput("graphs must be a collection of names, not a string")
        key = graphs if type(graphs) is tuple else tuple(graphs)
        try:
            nodes = self._datasets.get(key)
        except TypeError:  # an unhashable name: graph_node says what is wrong
            nodes = None
        if nodes is None:
            named: list[ox.NamedNode | ox.BlankNode] = [self.graph_node(g) for g in key]
            default: list[ox.NamedNode | ox.BlankNode | ox.DefaultGraph] = list(named)
            nodes = _Dataset(default, named)
            if len(self._datasets) >= 1024:
                self._datasets.clear()
            self._datasets[key] = nodes
        return nodes

    def query(
        self,
        sparql: str,
        *,
        graphs: Collection[str] | None,
        bindings: Mapping[str, BindingValue] | None = None,
        role_is_system: bool = False,
    ) -> dict[str, Any]:
        """Run a SPARQL SELECT / ASK / CONSTRUCT (or DESCRIBE) query.

        The dataset is exactly the named graphs ``graphs``: their union is the
        default graph and they are the only graphs ``GRAPH`` can see. Any
        ``FROM`` / ``FROM NAMED`` / ``GRAPH <iri>`` naming another graph is
        inert (pyoxigraph's dataset arguments override the query's own), so it
        matches nothing — it is not an error. ``graphs=None`` (every graph,
        their union as default graph) is for the system role only.

        ``bindings`` pre-bind variables (``{"s": {"@id": "task:a"}}``,
        ``{"status": "open"}``) as RDF terms through pyoxigraph's
        ``substitutions``; in a SELECT a bound variable must be projected
        (``SELECT *`` or listed), as pyoxigraph requires.

        Returns ``{"rows": [{var: str}]}`` (IRIs and literals as plain strings,
        unbound variables left out), ``{"boolean": bool}`` or
        ``{"jsonld": [node objects]}``. A malformed query, an update, or
        ``SERVICE`` is :class:`InvalidInput`; nothing is ever written.
        """
        store = self._open()
        if type(sparql) is not str:
            raise InvalidInput("a SPARQL query must be a string", path=("sparql",))
        if graphs is None and not role_is_system:
            raise PermissionDenied("only the system role may query every graph")
        nodes = None if graphs is None else self._dataset(graphs)
        refuse_network(sparql, ("SERVICE",))
        substitutions = _substitutions(bindings) if bindings else None
        try:
            if nodes is None:
                result = store.query(
                    sparql,
                    prefixes=prefixes_for(sparql),
                    substitutions=substitutions,
                    use_default_graph_as_union=True,
                )
            else:
                result = store.query(
                    sparql,
                    prefixes=prefixes_for(sparql),
                    substitutions=substitutions,
                    default_graph=nodes.default,
                    named_graphs=nodes.named,
                )
            if type(result) is ox.QuerySolutions:
                names = [v.value for v in result.variables]
                rows: _Rows = []
                for solution in result:
                    row: dict[str, str] = {}
                    for name, term in zip(names, solution, strict=True):
                        if term is not None:
                            row[name] = _plain(term)
                    rows.append(row)
                return {"rows": rows}
            if type(result) is ox.QueryBoolean:
                return {"boolean": bool(result)}
            return {"jsonld": triples_to_jsonld(result)}
        except SyntaxError as exc:
            raise InvalidInput(f"invalid SPARQL query: {exc}", path=("sparql",)) from None
        except (RuntimeError, ValueError, TypeError) as exc:
            raise InvalidInput(f"SPARQL query refused: {exc}", path=("sparql",)) from None
        except OSError as exc:
            raise StorageError(f"cannot read the L2 graph store: {exc}") from exc

    def check_query(self, sparql: str, bindings: Mapping[str, BindingValue] | None = None) -> None:
        """Raise :class:`InvalidInput` if :meth:`query` would refuse ``sparql``/``bindings`` as text.

        Changes nothing and reads nothing: the text is parsed (and evaluated)
        against an empty store. A host runs it *before* a query's recall moves
        dirty lines home, so a refused query changes nothing (fuzzing found
        that a malformed query had recalled every dirty line first).
        """
        if type(sparql) is not str:
            raise InvalidInput("a SPARQL query must be a string", path=("sparql",))
        refuse_network(sparql, ("SERVICE",))
        substitutions = _substitutions(bindings) if bindings is not None else None
        try:
            _EMPTY.query(sparql, prefixes=prefixes_for(sparql), substitutions=substitutions)
        except SyntaxError as exc:
            raise InvalidInput(f"invalid SPARQL query: {exc}", path=("sparql",)) from None
        except (RuntimeError, ValueError, TypeError) as exc:
            raise InvalidInput(f"SPARQL query refused: {exc}", path=("sparql",)) from None

    def update(self, sparql: str, role_is_system: bool = False) -> None:
        """Run a SPARQL UPDATE — system role only (:class:`PermissionDenied`
        otherwise, checked first).

        The update is one transaction on the RDF as it is: it does not go
        through the node cache, so quads it inserts belong to no line and
        quads it deletes are not re-asserted until their line is rewritten.
        It is an administration tool, not a way to write lines. ``LOAD`` and
        ``SERVICE`` (network) are refused; a malformed update is
        :class:`InvalidInput`.
        """
        if not role_is_system:
            raise PermissionDenied("SPARQL UPDATE is for the system role only")
        store = self._open()
        if type(sparql) is not str:
            raise InvalidInput("a SPARQL update must be a string", path=("sparql",))
        refuse_network(sparql, ("SERVICE", "LOAD"))
        try:
            store.update(sparql, prefixes=prefixes_for(sparql))
        except SyntaxError as exc:
            raise InvalidInput(f"invalid SPARQL update: {exc}", path=("sparql",)) from None
        except (RuntimeError, ValueError) as exc:
            raise InvalidInput(f"SPARQL update refused: {exc}", path=("sparql",)) from None
        except OSError as exc:
            raise StorageError(f"cannot write the L2 graph store: {exc}") from exc
