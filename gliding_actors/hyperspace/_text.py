"""What of a node is text, and how text is cut into words.

One tokeniser serves the hash embedder and the BM25 scorer, so a word the
lexical score sees is a word the hash embedder hashed. Both only need to be
deterministic and language-neutral: lower-cased Unicode word characters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_TEXT_CHARS", "node_text", "node_types", "words"]

#: A node's text is cut here: an embedding of a megabyte says no more than one
#: of its first pages, and the cost of embedding and indexing stays bounded.
MAX_TEXT_CHARS = 8_000

_WORD = re.compile(r"\w+", re.UNICODE)
#: keys whose values are addresses or machinery, not meaning
_SKIP_KEYS = frozenset({"@id", "@context", "@vocab", "@base", "@language", "@direction"})


def words(text: str) -> list[str]:
    """The lower-cased word tokens of ``text``, in order."""
    return _WORD.findall(text.lower())


def node_text(value: Mapping[str, Any] | None) -> str:
    """The text a node means: its string values (and ``@type`` names), keys sorted.

    Keys are walked in sorted order so that two equal values give the same
    text, whatever order their writer used. IRIs in ``@id`` are skipped: they
    are identifiers, and words of an identifier would make every node of a
    namespace look alike.
    """
    if value is None:
        return ""
    parts: list[str] = []
    _collect(value, parts, 0)
    text = " ".join(p for p in parts if p)
    return text[:MAX_TEXT_CHARS]


def _collect(value: Any, parts: list[str], depth: int) -> None:
    if depth > 32:
        return
    if isinstance(value, str):
        parts.append(value)
    elif isinstance(value, Mapping):
        for key in sorted(value, key=str):
            if key in _SKIP_KEYS:
                continue
            if key == "@value" and isinstance(value.get("@type"), str) and value["@type"] == "@json":
                continue  # a JSON literal is data, not prose
            _collect(value[key], parts, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _collect(item, parts, depth + 1)


def node_types(value: Mapping[str, Any] | None) -> list[str]:
    """The node's ``@type`` names, sorted, no duplicates (as written: compact
    terms are not expanded, like L0's type index)."""
    if value is None:
        return []
    raw = value.get("@type")
    if isinstance(raw, str):
        return [raw] if raw else []
    if isinstance(raw, (list, tuple)):
        return sorted({t for t in raw if isinstance(t, str) and t})
    return []
