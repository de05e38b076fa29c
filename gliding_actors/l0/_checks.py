"""Argument checks shared by L0's reads and writes (split out of ``_store.py``).

Pure functions refusing a bad IRI, label, version, bound or JSON value with InvalidInput.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from gliding_actors.errors import InvalidInput, show
from gliding_actors.l0 import _keys as K
from gliding_actors.l0._canonical import JSON_ERRORS, check_json

_label_match = K.label_match
_SEP = K.SEP
#: Validated labels remembered per namespace (label -> its index-key prefix);
#: the caches are emptied when they reach this size.
_LABEL_CACHE_MAX = 4096


def _iri_bytes(iri: object) -> bytes:
    if type(iri) is not str or K.iri_match(iri) is None:
        raise InvalidInput(f"invalid IRI {show(iri)}", path=("iri",))
    return iri.encode()


def _label(value: object, what: str) -> str:
    if type(value) is not str or K.label_match(value) is None:
        raise InvalidInput(
            f"invalid {what} {show(value)}: need non-empty text without control characters",
            path=(what,),
        )
    return value


def _tags_arg(tags: Any, what: str) -> Any:
    if isinstance(tags, (str, bytes, Mapping)):
        raise InvalidInput(
            f"{what} must be a list of strings, not {type(tags).__name__} {show(tags)}", path=(what,)
        )
    return tags


def _labels(
    values: Any, what: str, cache: dict[str, bytes] | None = None, ns: bytes = b""
) -> list[str]:
    """Validate a collection of labels; sorted without duplicates. With a
    ``cache`` (of the labels of namespace ``ns``), known labels skip the regex
    and new valid ones are remembered."""
    if type(values) is not list and type(values) is not tuple:
        if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
            raise InvalidInput(
                f"{what} must be a list of strings, not {type(values).__name__} {show(values)}",
                path=(what,),
            )
        values = list(values)
    for v in values:
        if type(v) is not str or (
            (cache is None or v not in cache)
            and (_label_match(v) is None if cache is None else not _learn(v, cache, ns))
        ):
            raise InvalidInput(
                f"invalid entry {show(v)} in {what}: need non-empty text without control characters",
                path=(what,),
            )
    n = len(values)
    if n == 2:
        a, b = values
        return [a, b] if a < b else [b, a] if b < a else [a]
    if n == 1:
        return list(values)
    return sorted(set(values))


def _learn(label: str, cache: dict[str, bytes], ns: bytes) -> bool:
    """Check a label not in ``cache``; remember it (with its index-key prefix)
    if it is valid."""
    if _label_match(label) is None:
        return False
    if len(cache) >= _LABEL_CACHE_MAX:
        cache.clear()
    cache[label] = ns + label.encode() + _SEP
    return True


def _check_json(value: Any, iri: str, what: str) -> None:
    try:
        check_json(value)
    except JSON_ERRORS as exc:
        raise InvalidInput(
            f"{what} of {iri} is not JSON-serialisable: {exc}", path=(what,)
        ) from exc


def _check_version_arg(value: object, what: str) -> None:
    if value is None:
        return
    if type(value) is not int or value < 0:
        raise InvalidInput(f"{what} must be a non-negative int, not {show(value)}", path=(what,))


def _bound(value: object, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise InvalidInput(f"{what} must be a number, not {show(value)}", path=(what,))
    return float(value)


def _is_int64(value: object) -> bool:
    return type(value) is int and -(2**63) <= value < 2**64
