"""Shaping a projection: CONSTRUCT triples → framed JSON-LD (pyld) → within a token budget.

Framing and compaction are pyld's (JSON-LD 1.1 framing), with a document
loader that refuses every URL: a frame or value naming a remote context
fails, it never reaches the network.

The result is a list of node objects without ``@context``: like every value
and query result of this library it is read with the default context
(``@vocab`` = the ontology namespace), and a budget of 12 tokens cannot
afford to repeat the context in each answer.

Budgets degrade in three steps (``docs/L3.md``):

1. **full** — the framed nodes, when they fit (or when there is no budget);
2. **truncated** — the frame's ``drop`` properties are removed (least
   important first, at every depth) until the result fits; then whole
   top-level nodes, least important first (nodes are listed by the frame's
   ``priority``, so this is dropping from the end), keeping at least one;
3. **reference** — one ``{"@id", "@type", "summary"}`` per node (a one-line
   summary), then fewer nodes, then without summaries, types; ``[]`` at
   worst. A result never exceeds its budget.

Token counts are one counter's (``counter`` is reported beside them).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import orjson
import pyoxigraph as ox
from pyld import jsonld  # type: ignore[import-untyped]

from gliding_actors.errors import InvalidInput, show
from gliding_actors.l1._tokens import TokenCounter
from gliding_actors.l2._jsonld import DEFAULT_CONTEXT, GENID_BASE, triples_to_jsonld

__all__ = ["MODES", "Shaped", "check_frame", "frame_nodes", "iris_of", "shape", "to_jsonld_nodes"]

MODES = ("full", "truncated", "reference")
#: the longest one-line summary reference mode keeps (characters)
SUMMARY_CHARS = 80


def _no_network(url: str, options: Any = None) -> Any:
    """pyld's document loader: every remote document is refused."""
    raise jsonld.JsonLdError(
        f"remote document {url!r} refused: projections never use the network",
        "jsonld.LoadDocumentError",
        {"url": url},
        code="loading document failed",
    )


_OPTIONS: dict[str, Any] = {
    "documentLoader": _no_network,
    "processingMode": "json-ld-1.1",
    "omitGraph": False,
    "omitDefault": True,
}


def _context_of(frame: Mapping[str, Any]) -> Any:
    own = frame.get("@context")
    if own is None:
        return dict(DEFAULT_CONTEXT)
    return [dict(DEFAULT_CONTEXT), *(own if isinstance(own, list) else [own])]


def check_frame(name: str, frame: object) -> dict[str, Any]:
    """Return a private copy of JSON-LD ``frame`` if pyld can frame with it; InvalidInput otherwise.

    The frame is tried on an empty document, with the refusing loader: a
    remote ``@context`` or a malformed keyword fails here, at registration.
    """
    if not isinstance(frame, Mapping):
        raise InvalidInput(f"frame {show(name)}: the JSON-LD frame is an object, not {show(frame)}", path=("frame",))
    try:
        private: dict[str, Any] = json.loads(json.dumps(frame, allow_nan=False))
    except (TypeError, ValueError, RecursionError) as exc:  # RecursionError: a deep frame (fuzzing found it)
        raise InvalidInput(f"frame {show(name)}: the JSON-LD frame is not JSON: {exc}", path=("frame",)) from None
    try:
        jsonld.frame({"@context": dict(DEFAULT_CONTEXT), "@graph": []}, {**private, "@context": _context_of(private)}, dict(_OPTIONS))
    except Exception as exc:  # noqa: BLE001 - pyld raises JsonLdError and plain errors alike
        raise InvalidInput(f"frame {show(name)}: invalid JSON-LD frame: {_pyld_message(exc)}", path=("frame",)) from None
    return private


def _pyld_message(exc: BaseException) -> str:
    parts = [str(exc)]
    cause = getattr(exc, "cause", None)
    while cause is not None and len(parts) < 4:
        parts.append(str(cause))
        cause = getattr(cause, "cause", None)
    return " / ".join(p for p in parts if p)


# --- triples → framed node objects ----------------------------------------------------------


def _unskolem(term: Any) -> Any:
    """A skolem IRI back to a blank node: nested objects print without a 60-character @id."""
    if type(term) is ox.NamedNode and term.value.startswith(GENID_BASE):
        return ox.BlankNode(term.value[len(GENID_BASE) :].replace("/", "x"))
    return term


def to_jsonld_nodes(triples: Iterable[ox.Triple]) -> list[dict[str, Any]]:
    """CONSTRUCT output as flat node objects (default context), skolems as blank nodes."""
    # a triple two lines assert (in two graphs) is one statement: kept once
    plain = dict.fromkeys(ox.Triple(_unskolem(t.subject), t.predicate, _unskolem(t.object)) for t in triples)
    return triples_to_jsonld(plain)


def frame_nodes(nodes: list[dict[str, Any]], frame: Mapping[str, Any], priority: tuple[str, ...]) -> list[dict[str, Any]]:
    """Frame ``nodes`` with pyld and list the top-level results by ``priority``, then ``@id``."""
    if not nodes:
        return []
    document = {"@context": dict(DEFAULT_CONTEXT), "@graph": nodes}
    framed = jsonld.frame(document, {**frame, "@context": _context_of(frame)}, dict(_OPTIONS))
    graph = framed.get("@graph", [])
    out: list[dict[str, Any]] = [n for n in graph if isinstance(n, dict)]
    rank = {t: i for i, t in enumerate(priority)}

    def order(node: dict[str, Any]) -> tuple[int, str]:
        types = node.get("@type", [])
        listed = [rank[t] for t in (types if isinstance(types, list) else [types]) if t in rank]
        return (min(listed) if listed else len(rank), str(node.get("@id", "")))

    out.sort(key=order)
    # A node embedded whole in a more important one is not listed again on its own.
    kept: list[dict[str, Any]] = []
    shown: set[str] = set()
    for node in out:
        if node.get("@id") in shown:
            continue
        kept.append(node)
        _embedded_ids(node, shown)
    return kept


def _embedded_ids(value: Any, into: set[str], top: bool = True) -> None:
    if isinstance(value, dict):
        node_id = value.get("@id")
        if not top and isinstance(node_id, str) and len(value) > 1:
            into.add(node_id)
        for key, item in value.items():
            if key not in ("@id", "@type"):
                _embedded_ids(item, into, False)
    elif isinstance(value, list):
        for item in value:
            _embedded_ids(item, into, False)


# --- budgets --------------------------------------------------------------------------------


class Shaped(NamedTuple):
    """A projection within its budget."""

    jsonld: list[dict[str, Any]]
    tokens: int
    mode: str
    #: what the full projection would have cost
    full_tokens: int


def _text(doc: Any) -> str:
    return orjson.dumps(doc).decode()


def _strip(value: Any, prop: str) -> None:
    if isinstance(value, dict):
        value.pop(prop, None)
        for item in value.values():
            _strip(item, prop)
    elif isinstance(value, list):
        for item in value:
            _strip(item, prop)


def _longest_prefix(items: list[Any], fits: Callable[[list[Any]], bool], least: int) -> int:
    """The largest k >= ``least`` with ``fits(items[:k])``, or ``least - 1`` if none.

    Binary search: costs grow with k (more text), so O(log n) counts. If a
    tokenizer ever made them non-monotonic the answer would still fit — only
    perhaps not be the largest.
    """
    lo, hi = least, len(items)
    best = least - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if fits(items[:mid]):
            best = mid
            lo = mid + 1
        else:
            hi = mid - 1
    return best


def _one_line(value: Any) -> str | None:
    if isinstance(value, list):
        value = value[0] if value else None
    if isinstance(value, dict):
        value = value.get("@value")
    if not isinstance(value, str):
        return None
    line = value.strip().splitlines()[0] if value.strip() else ""
    return line if len(line) <= SUMMARY_CHARS else line[: SUMMARY_CHARS - 1] + "…"


def _reference(node: Mapping[str, Any], *, summary: bool, types: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "@id" in node:
        out["@id"] = node["@id"]
    if types and "@type" in node:
        out["@type"] = node["@type"]
    if summary:
        line = _one_line(node.get("summary"))
        if line:
            out["summary"] = line
    return out


def shape(
    nodes: list[dict[str, Any]],
    *,
    drop: tuple[str, ...],
    max_tokens: int | None,
    counter: TokenCounter,
    summaries: Callable[[], Mapping[str, str]] | None = None,
) -> Shaped:
    """Fit ``nodes`` (framed, by priority) into ``max_tokens`` (None: no budget).

    Reference mode lists the top-level nodes; ``summaries`` (called only if
    that mode is reached) gives a node's summary when the frame did not
    select one (``reference_only`` selects none).
    """

    def cost(doc: Any) -> int:
        return counter.count(_text(doc))

    full = cost(nodes)
    if max_tokens is None or full <= max_tokens:
        return Shaped(nodes, full, "full", full)
    budget = max_tokens

    def fits(doc: list[Any]) -> bool:
        return cost(doc) <= budget

    # 2. truncated: drop the frame's properties, least important first, then nodes
    if nodes:
        work = copy.deepcopy(nodes)
        for prop in drop:
            _strip(work, prop)
            if fits(work):
                return Shaped(work, cost(work), "truncated", full)
        kept = _longest_prefix(work, fits, 1)
        if kept >= 1:
            doc = work[:kept]
            return Shaped(doc, cost(doc), "truncated", full)

    # 3. reference: ids, types and one-line summaries, fewer nodes, less per node
    known = summaries() if summaries is not None else {}
    source = [n if "summary" in n or n.get("@id") not in known else {**n, "summary": known[n["@id"]]} for n in nodes]
    best: list[dict[str, Any]] = []
    for summary, types in ((True, True), (False, True), (False, False)):
        refs = [r for r in (_reference(n, summary=summary, types=types) for n in source) if r]
        kept = _longest_prefix(refs, fits, 1)
        if kept > len(best):
            best = refs[:kept]
        if kept == len(refs):
            break
    return Shaped(best, cost(best), "reference", full)


def iris_of(doc: list[dict[str, Any]]) -> list[str]:
    """The IRIs of the nodes a projection shows: every top-level node, and every
    embedded node with more than its ``@id``; first-appearance order, no blank nodes."""
    seen: dict[str, None] = {}

    def visit(value: Any, top: bool) -> None:
        if isinstance(value, dict):
            node_id = value.get("@id")
            if isinstance(node_id, str) and not node_id.startswith("_:") and (top or len(value) > 1):
                seen.setdefault(node_id, None)
            for key, item in value.items():
                if key not in ("@id", "@type", "@context"):
                    visit(item, False)
        elif isinstance(value, list):
            for item in value:
                visit(item, False)

    for node in doc:
        visit(node, True)
    return list(seen)
