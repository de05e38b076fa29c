"""Input checks for the agent handle: every door's argument is checked here, once, before anything is sent.

Each check raises :class:`~gliding_actors.errors.InvalidInput` and changes
nothing; several exist because a deeper layer (L0, the graph, msgpack) would
otherwise refuse a value only after the write was acknowledged.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from typing import Any

import msgpack
import pyoxigraph as ox

from gliding_actors.bus import MESSAGE_IRI_PREFIX
from gliding_actors.errors import InvalidInput, show
from gliding_actors.l0 import is_valid_iri, is_valid_label
from gliding_actors.l0._canonical import JSON_ERRORS, canonical
from gliding_actors.l1._archive import ARCHIVE_PREFIX

__all__ = [
    "MAX_VALUE_DEPTH",
    "check_graph",
    "check_iri",
    "check_object",
    "check_size",
    "check_storable",
    "check_tags",
    "check_topic",
]


def check_iri(iri: object) -> str:
    if not isinstance(iri, str) or not is_valid_iri(iri):
        raise InvalidInput(f"not a valid IRI (scheme:rest, no spaces or control characters): {show(iri)}")
    try:
        # The graph (pyoxigraph) is stricter than L0's shape check (e.g. a '%'
        # not followed by two hex digits): a delete of such an IRI put a
        # tombstone home that the graph refused, mid-protocol, and the
        # directory answered nothing ever again (fuzzing found it).
        ox.NamedNode(iri)
    except ValueError as exc:
        raise InvalidInput(f"not a valid IRI: {show(iri)} ({exc})") from None
    if iri.startswith(MESSAGE_IRI_PREFIX):  # the bus's kept messages are immutable nodes, not lines
        raise InvalidInput(f"{show(iri)} is a published message (read it with messages()), not a line")
    if iri.startswith(ARCHIVE_PREFIX):  # L1's archived turns and sessions are immutable L0 nodes, not lines
        raise InvalidInput(f"{show(iri)} is an L1 session archive (read it with reload()), not a line")
    return iri


def check_tags(tags: Iterable[str] | None) -> list[str]:
    if tags is None:
        return []
    # L0's label rule (no control characters, no lone surrogates): a tag L0
    # would refuse at write-down must be refused here, before the write is
    # acknowledged, or the line could never be written down (fuzzing found it).
    if not isinstance(tags, (list, tuple, set, frozenset)) or not all(is_valid_label(t) for t in tags):
        raise InvalidInput(f"tags are a list of non-empty strings without control characters, not {show(tags)}")
    return sorted(set(tags))


def check_topic(topic: object) -> str:
    if not isinstance(topic, str) or not is_valid_label(topic):
        raise InvalidInput(f"a topic is a non-empty string without control characters, not {show(topic)}")
    return topic


#: Deepest nesting of objects and lists a value may have. Every layer walks
#: values recursively (the cache's private copy, msgpack, JSON-LD, framing,
#: indexing) and Python's recursion limit is ~1,000 frames: a value ~500 deep
#: crashed the agent's cache actor (fuzzing found it). 100 is far beyond any
#: real node and leaves every layer room.
MAX_VALUE_DEPTH = 100


def _depth_exceeds(value: object, limit: int) -> bool:
    """Whether ``value`` nests dicts/lists deeper than ``limit`` (iterative: no recursion to blow)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[object] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def check_object(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidInput(f"{what} must be a JSON object, not {type(value).__name__}")
    if _depth_exceeds(value, MAX_VALUE_DEPTH):
        raise InvalidInput(f"{what} nests objects and lists deeper than {MAX_VALUE_DEPTH} levels")
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInput(f"{what} is not JSON-serialisable: {exc}") from exc
    try:
        # Values travel and are stored as msgpack: integers must fit in 64 bits.
        msgpack.packb(value, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidInput(f"{what} cannot be stored (integers must fit in 64 bits, text must be valid UTF-8): {exc}") from exc
    return value


def check_storable(iri: str, value: dict[str, Any], max_bytes: int) -> None:
    """Refuse a line value L0 would refuse when it is written down.

    A write-back write is acknowledged long before L0 sees it; if L0 then
    refused the value (a top-level ``@id`` naming another node, a node over
    ``l0.max_node_bytes``), the flush, the task completion and the clean close
    would fail on it for ever, and a write-through write would never be
    acknowledged (fuzzing found both). So L0's rules are checked here, first.
    """
    if "@id" in value and value["@id"] != iri:
        raise InvalidInput(
            f"a line's top-level @id must be the line's own IRI {show(iri)} (or absent), not {show(value['@id'])}",
            path=("value", "@id"),
        )
    try:
        size = len(canonical(value))
    except JSON_ERRORS as exc:
        raise InvalidInput(f"a line's value is not JSON L0 can store: {exc}", path=("value",)) from exc
    if size > max_bytes:
        raise InvalidInput(
            f"a line's value is {size} bytes of JSON; the limit (l0.max_node_bytes) is {max_bytes}",
            path=("value",),
        )


def check_size(value: dict[str, Any], what: str, max_bytes: int) -> None:
    """Refuse ``value`` when its JSON is over ``max_bytes`` (``l0.max_node_bytes``: it becomes a node).

    Measured as :func:`check_object` serialises it (``json``, which also
    takes the non-string keys a published message may have), not L0's
    canonical form, which refuses them.
    """
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise InvalidInput(f"{what} is {size} bytes of JSON; the limit (l0.max_node_bytes) is {max_bytes}")


def check_graph(graph: object) -> str | None:
    if graph is None:
        return None
    if not isinstance(graph, str) or not is_valid_label(graph) or any(c.isspace() for c in graph):
        raise InvalidInput(f"a named graph is a non-empty string without spaces or control characters, not {show(graph)}")
    return graph


def check_ttl(ttl_s: object) -> float | None:
    """A time to live ``ttl_s`` as seconds (None: none); InvalidInput unless a finite number > 0."""
    if ttl_s is None:
        return None
    if isinstance(ttl_s, bool) or not isinstance(ttl_s, (int, float)) or not math.isfinite(ttl_s) or ttl_s <= 0:
        raise InvalidInput(f"ttl_s is a finite number of seconds > 0 (or None), not {show(ttl_s)}")
    return float(ttl_s)


def is_utf8_path(path: str) -> bool:
    """Whether ``path`` is one LevelDB can open: UTF-8 text (it names files by UTF-8), not empty, without NUL."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return bool(path) and "\x00" not in path


def line_value_check(max_bytes: int, graph_check: Callable[[str, dict[str, Any]], None]) -> Callable[[str, dict[str, Any]], None]:
    """Every rule a written line value passes at the handle, as one function: for a value made
    where the line is owned (a modify's), which no handle saw. Raises InvalidInput."""

    def check(iri: str, value: dict[str, Any]) -> None:
        check_object(value, "the value a modify made")
        check_storable(iri, value, max_bytes)
        graph_check(iri, value)

    return check
