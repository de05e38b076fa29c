"""JSON-LD ⇄ RDF for the L2 graph store: the default context, graph IRIs,
value → quads (skolemised) and CONSTRUCT triples → compact node objects.

The conversion is pyoxigraph's own JSON-LD parser (Rust), not pyld. It
implements the JSON-LD 1.1 to-RDF algorithm we need (embedded and array
contexts, ``@vocab``, ``@base``, type coercion, ``@list``, ``@json``,
``@reverse``, ``@language``/``@direction``, scoped contexts), it refuses
malformed keywords with a message, it has *no* document loader — a remote
context can never reach the network, it is refused — and it converts a small
node in ~15 µs, where pyld's pure-Python ``to_rdf`` costs about a millisecond.
See ``docs/L2_GRAPH.md`` for the evaluation.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, unquote

import orjson
import pyoxigraph as ox

from gliding_actors.errors import InvalidInput, show

__all__ = [
    "DEFAULT_CONTEXT",
    "GENID_BASE",
    "GRAPH_BASE",
    "VOCAB",
    "default_context",
    "described_elsewhere",
    "graph_iri",
    "graph_name_of",
    "is_plain",
    "to_quads",
    "triples_to_jsonld",
]

#: The project's ontology namespace: the default context's ``@vocab``.
VOCAB = "https://gliding-actors.dev/ns#"
#: Named graph ``name`` is ``GRAPH_BASE + percent-encoded name``.
GRAPH_BASE = "https://gliding-actors.dev/graph/"
#: Skolem IRIs replace the blank nodes of a value (see :func:`to_quads`).
GENID_BASE = "https://gliding-actors.dev/genid/"

#: The context every value is read with. Never mutate it; use
#: :func:`default_context` for a private copy.
DEFAULT_CONTEXT: dict[str, Any] = {"@vocab": VOCAB}

_XSD = "http://www.w3.org/2001/XMLSchema#"
_XSD_STRING = _XSD + "string"
_XSD_INTEGER = _XSD + "integer"
_XSD_DOUBLE = _XSD + "double"
_XSD_BOOLEAN = _XSD + "boolean"
_RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"

# Same rule as L0's named-graph labels: non-empty, no control characters, no
# lone surrogates.
_LABEL = re.compile(r"[^\x00-\x1f\x7f-\x9f\ud800-\udfff]+\Z")
_INTEGER = re.compile(r"[+-]?[0-9]+\Z")

_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def default_context() -> dict[str, Any]:
    """A fresh copy of the default context (``{"@vocab": VOCAB}``)."""
    return dict(DEFAULT_CONTEXT)


def graph_iri(name: str) -> str:
    """The IRI of named graph ``name``.

    The name is percent-encoded (every character outside RFC 3986's
    unreserved set), so any L0 graph label maps to a valid IRI and no two names
    share one — a graph name can never smuggle ``>`` or a space into an IRI.
    """
    if type(name) is not str or _LABEL.match(name) is None:
        raise InvalidInput(
            f"invalid named graph {show(name)}: need non-empty text without control characters",
            path=("graph",),
        )
    return GRAPH_BASE + quote(name, safe="")


def graph_name_of(iri: str) -> str:
    """The name of the named graph whose IRI is ``iri`` (:func:`graph_iri`'s inverse); InvalidInput
    for an IRI outside the memory's graphs."""
    if not iri.startswith(GRAPH_BASE) or len(iri) == len(GRAPH_BASE):
        raise InvalidInput(f"named graph {show(iri)} is not one of this memory's (they start with {GRAPH_BASE})")
    return unquote(iri[len(GRAPH_BASE) :])


class _Missing:
    """Marks an absent key (``None`` is a meaningful ``@context``)."""


_MISSING: Any = _Missing()


def _document(iri: str, value: dict[str, Any], graph: str, stored: bool = False) -> str:
    """The JSON text actually parsed: the value under the default context,
    wrapped as the content of named graph ``graph``.

    The value is not modified: a new object gets ``@context`` first (the
    default context, followed by the value's own context when it has one, so
    the value's terms win), ``@id`` = the line IRI when the value names no
    ``@id``, then the value's other keys; it becomes the ``@graph`` of a
    wrapper whose ``@id`` is the graph IRI, so the parser emits the quads
    already in the line's graph (no per-quad rebuild). A value that is itself
    a graph container (a top-level ``@graph``) is parsed unwrapped instead
    (``graph=""``).
    """
    own = value.get("@context", _MISSING)
    if own is _MISSING:
        context: Any = DEFAULT_CONTEXT
    elif type(own) is list:
        context = [DEFAULT_CONTEXT, *own]
    else:
        context = [DEFAULT_CONTEXT, own]
    inner: dict[str, Any] = {}
    if "@id" in value:
        node_id = value["@id"]
        if type(node_id) is not str:
            raise InvalidInput(
                f"@id must be a string, not {type(node_id).__name__}", path=("value", "@id")
            )
        if not node_id.startswith("_:"):
            try:
                ox.NamedNode(node_id)
            except ValueError as exc:
                raise InvalidInput(
                    f"@id {show(node_id)} is not an absolute IRI: {exc}", path=("value", "@id")
                ) from None
    elif graph:
        inner["@id"] = iri
    for key, item in value.items():
        if key != "@context":
            inner[key] = item
    if graph:
        doc: dict[str, Any] = {"@context": context, "@id": graph, "@graph": inner}
    else:
        doc = {"@context": context, **inner}
    if stored:
        try:
            return orjson.dumps(doc).decode()
        except orjson.JSONEncodeError:
            pass  # nested deeper than orjson goes: the encoder below decides
    try:
        return _JSON.encode(doc)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInput(f"value is not JSON: {exc}", path=("value",)) from None


def _skolem_prefix(iri: str) -> str:
    # A digest keeps skolem IRIs short and valid whatever the line IRI holds;
    # 128 bits make a collision between two lines negligible.
    return GENID_BASE + hashlib.sha256(iri.encode()).hexdigest()[:32] + "/b"


def described_elsewhere(iri: str, quads: Iterable[ox.Quad]) -> list[str]:
    """The nodes other than line ``iri`` that ``quads`` make statements about, sorted.

    A line describes itself, its own fragments (``iri#step``) and its blank
    nodes (skolemised under its own prefix); any other subject is another
    node's, however the JSON-LD reached it (a nested ``@id``, a context alias
    of ``@id``, ``@reverse``). Read from the quads, so no spelling escapes it.
    """
    own, fragment, skolem = iri, iri + "#", _skolem_prefix(iri)
    found = {
        subject.value
        for subject in (q.subject for q in quads)
        if isinstance(subject, ox.NamedNode)
        and subject.value != own
        and not subject.value.startswith((fragment, skolem))
    }
    return sorted(found)


#: a key the default context can only map to a term of its vocabulary (no keyword, no compact or
#: absolute IRI, no blank node label)
_PLAIN_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*\Z")
_INT64 = 2**63


def is_plain(value: object) -> bool:
    """Whether ``value`` is JSON-LD that :func:`to_quads` accepts and that describes only its own line.

    True for a JSON object whose keys, at every level, are plain terms
    (``_PLAIN_KEY``) and whose leaves are valid text, 64-bit integers, finite
    numbers, booleans or null. Under the default context each key is then a
    term of the vocabulary, each nested object a blank node (skolemised under
    the line), each list an RDF list: there is no keyword, no context and no
    ``@id``, so the parser accepts it and every subject is the line or one of
    its own nodes. Checking that costs a walk over the value instead of a
    parse. False means only "not known": :func:`to_quads` decides.
    """
    if type(value) is not dict:
        return False
    plain_key = _PLAIN_KEY.match
    pending: list[Any] = [value]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is dict:
            for key, inner in item.items():
                if type(key) is not str or plain_key(key) is None:
                    return False
                pending.append(inner)
        elif kind is list:
            pending.extend(item)
        elif kind is str:
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    return False
        elif kind is int:
            if not -_INT64 <= item < _INT64:
                return False
        elif kind is float:
            if not math.isfinite(item):
                return False
        elif item is not None and kind is not bool:
            return False
    return True


def to_quads(iri: str, value: dict[str, Any], graph: ox.NamedNode, *, stored: bool = False) -> tuple[ox.Quad, ...]:
    """The quads of line ``iri`` holding ``value``, in named graph ``graph``.

    ``stored``: the value was read back from L0, so it is plain JSON that was
    checked when it was written (no NaN, no lone surrogate, string keys, no
    object of another type). Its text is then made by orjson, several times
    faster than the standard encoder (a memory that opens re-reads every
    line); the two spell some floats differently (``1e-05``, ``0.00001``),
    which the parser reads as the same number, so the quads are the same.
    Any other value goes through the standard encoder, which refuses what is
    not JSON.

    Raises :class:`InvalidInput` (nothing else) when the value is not a JSON
    object, not JSON, or not valid JSON-LD — including any remote context
    (``"@context": "https://…"``, ``@import``, a scoped remote context), which
    pyoxigraph refuses because no document loader is set: the network is never
    used. A value holding named graphs (``@graph`` beside an ``@id``) is
    refused too: each line lives in exactly one named graph.

    Blank nodes (nested objects without ``@id``, lists) are *skolemised* into
    ``GENID_BASE + sha256(iri)[:32] + "/b<n>"``, ``n`` counting blank nodes in
    the parser's output order. Skolem IRIs are deterministic (the same value
    always gives the same quads, so a rewrite can be diffed and the store
    compared with the nodes), they never merge across lines, they come back
    from SELECT as plain strings, and — unlike blank nodes — they may appear in
    a SPARQL ``DELETE DATA``, which is what makes a rewrite one transaction.

    Duplicate triples (``"tags": ["a", "a"]``) are kept once.
    """
    if type(value) is not dict:
        raise InvalidInput(
            f"a value must be a JSON object, not {type(value).__name__}", path=("value",)
        )
    wrapped = "@graph" not in value
    text = _document(iri, value, graph.value if wrapped else "", stored)
    try:
        parsed = ox.parse(text, format=ox.RdfFormat.JSON_LD, base_iri=iri)
        quads = dict.fromkeys(parsed)
    except (SyntaxError, ValueError) as exc:
        raise InvalidInput(f"invalid JSON-LD: {exc}", path=("value",)) from None
    # The wrapper is the only named graph the text may hold: '@' is never
    # escaped by the encoder, so one "@graph" in the text is the wrapper's own
    # and no nested graph (or keyword alias of @graph) can exist.
    nested_graphs = text.count("@graph") > (1 if wrapped else 0)
    check_graph = nested_graphs or not wrapped
    blank_node = ox.BlankNode
    out: list[ox.Quad] | None = None  # only built once a quad must change
    blanks: dict[str, ox.NamedNode] = {}
    prefix = ""
    for index, q in enumerate(quads):
        if check_graph and (
            q.graph_name != graph if wrapped else type(q.graph_name) is not ox.DefaultGraph
        ):
            raise InvalidInput(
                "a value may not hold named graphs (@graph inside a line): each line lives "
                "in exactly one named graph",
                path=("value",),
            )
        s = q.subject
        o = q.object
        if wrapped and type(s) is not blank_node and type(o) is not blank_node:
            if out is not None:
                out.append(q)
            continue
        if out is None:
            out = list(itertools.islice(quads, index))
        if type(s) is blank_node or type(o) is blank_node:
            if not prefix:
                prefix = _skolem_prefix(iri)
            if type(s) is blank_node:
                s = blanks.get(s.value) or blanks.setdefault(
                    s.value, ox.NamedNode(prefix + str(len(blanks)))
                )
            if type(o) is blank_node:
                o = blanks.get(o.value) or blanks.setdefault(
                    o.value, ox.NamedNode(prefix + str(len(blanks)))
                )
        out.append(ox.Quad(s, q.predicate, o, graph))
    # Skolemising is injective (one IRI per blank node), so ``out`` has no
    # duplicates either.
    return tuple(quads) if out is None else tuple(out)


# --- CONSTRUCT results → JSON-LD ---------------------------------------------------------


def compact_vocab(iri: str) -> str:
    """``iri`` relative to the default context's ``@vocab`` when that reads back
    to the same IRI (no ``:``, not keyword-like, not empty), else unchanged."""
    if iri.startswith(VOCAB):
        local = iri[len(VOCAB) :]
        if local and ":" not in local and not local.startswith("@"):
            return local
    return iri


def _term_id(term: ox.NamedNode | ox.BlankNode | ox.Triple) -> str:
    if type(term) is ox.NamedNode:
        return term.value
    if type(term) is ox.BlankNode:
        return "_:" + term.value
    return str(term)


def json_object_of(term: Any) -> Any:
    """One object as JSON-LD's fromRdf with ``useNativeTypes`` would give it,
    compacted against the default context."""
    if type(term) is not ox.Literal:
        return {"@id": _term_id(term)}
    lexical: str = term.value
    language = term.language
    if language is not None:
        out: dict[str, Any] = {"@value": lexical, "@language": language}
        direction = term.direction
        if direction is not None:
            out["@direction"] = direction.value
        return out
    datatype = term.datatype.value
    if datatype == _XSD_STRING:
        return lexical
    if datatype == _XSD_BOOLEAN and lexical in ("true", "false"):
        return lexical == "true"
    if datatype == _XSD_INTEGER and _INTEGER.match(lexical):
        return int(lexical)
    if datatype == _XSD_DOUBLE:
        try:
            number = float(lexical)
        except ValueError:
            pass
        else:
            if math.isfinite(number):
                return number
    return {"@value": lexical, "@type": datatype}


def triples_to_jsonld(triples: Iterable[ox.Triple]) -> list[dict[str, Any]]:
    """CONSTRUCT/DESCRIBE output as a list of JSON-LD node objects, in the
    order subjects first appear.

    The form is what JSON-LD ``fromRdf`` (with native numbers and booleans)
    followed by compaction against the default context gives: keys and
    ``@type`` values in the ontology namespace are shortened to their local
    name, one value stays a scalar and several become a list, IRIs are
    ``{"@id": …}``. The objects carry no ``@context``: like stored values they
    are read with the default context. RDF lists stay as ``rdf:first``/
    ``rdf:rest`` nodes.
    """
    nodes: dict[str, dict[str, Any]] = {}
    for t in triples:
        sid = _term_id(t.subject)
        node = nodes.get(sid)
        if node is None:
            node = nodes[sid] = {"@id": sid}
        predicate = t.predicate.value
        obj = t.object
        if predicate == _RDF_TYPE and type(obj) is not ox.Literal:
            key = "@type"
            item: Any = compact_vocab(_term_id(obj))
        else:
            key = compact_vocab(predicate)
            item = json_object_of(obj)
        if key not in node:
            node[key] = item
        else:
            current = node[key]
            if type(current) is list:
                current.append(item)
            else:
                node[key] = [current, item]
    return list(nodes.values())
