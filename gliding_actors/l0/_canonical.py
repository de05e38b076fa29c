"""Canonical JSON of node content (hashed into ``content_hash``) and the JSON checks.

The canonical form is orjson's: ``orjson.dumps(value, option=OPT_SORT_KEYS)``,
i.e. UTF-8, no insignificant whitespace, object keys sorted by code point,
non-ASCII characters written as themselves, floats in their shortest
round-trip form. It is what ``json.dumps(value, sort_keys=True,
separators=(",", ":"), ensure_ascii=False)`` gives, except for the spelling of
some floats (``1e-05`` is ``0.00001``, ``5e-07`` is ``5e-7``); see docs/L0.md.

orjson alone is not the whole check. It writes NaN and ±Infinity as ``null``
(JSON has no such numbers: we refuse them), stops at 254 levels of nesting
(json and msgpack go deeper: a slower path gives the same bytes there), and
serialises a few non-JSON types natively (``uuid.UUID``, ``enum.Enum``,
``orjson.Fragment``): those are refused by msgpack, which every caller of
:func:`canonical` runs on the same value (the record packs it, or
:func:`check_json` does).
"""

from __future__ import annotations

import math
from typing import Any

import msgpack
import orjson

__all__ = ["JSON_ERRORS", "canonical", "check_json"]

#: Errors that mean "this value is not JSON we store" (from orjson, the slow
#: path, the NaN check or msgpack).
JSON_ERRORS = (TypeError, ValueError, RecursionError, UnicodeEncodeError, OverflowError)

_SORTED = orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
_dumps = orjson.dumps
_EncodeError = orjson.JSONEncodeError
_packb = msgpack.packb


def _default(value: Any) -> Any:
    """Called by orjson for what it does not serialise itself: float subclasses
    (``numpy.float64``...) are floats to json.dumps and msgpack, so to us too;
    anything else (sets, bytes, dataclasses, datetimes, objects) is not JSON."""
    if isinstance(value, float):
        return float(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def canonical(value: Any) -> bytes:
    """The canonical JSON of ``value`` as UTF-8 bytes.

    Raises one of :data:`JSON_ERRORS` for what is not JSON: non-string object
    keys, integers outside [-2**63, 2**64), NaN/±Infinity, lone surrogates,
    cycles, sets, bytes and other objects.
    """
    try:
        text = _dumps(value, _default, _SORTED)
    except _EncodeError:
        # Deeper than orjson's limit, or not JSON at all: the slow path tells
        # the two apart (and raises for the latter).
        text = _slow_canonical(value)
    if b"null" in text and _has_non_finite(value):
        raise ValueError("Out of range float values (NaN, Infinity) are not JSON compliant")
    return text


def check_json(value: Any) -> None:
    """Raise one of :data:`JSON_ERRORS` unless ``value`` is JSON that msgpack
    can hold as it is (for metadata and contexts; node content gets the same
    checks from :func:`canonical` plus its record's packing)."""
    canonical(value)
    _packb(value)


def _slow_canonical(value: Any) -> bytes:
    """The bytes orjson would give without its nesting limit (one Python frame
    per level, so Python's recursion limit is the limit here)."""
    if isinstance(value, dict):
        parts = []
        for key in value:
            if type(key) is not str:
                raise TypeError("Dict key must be str")
        for key in sorted(value):
            parts.append(_dumps(key) + b":" + _slow_canonical(value[key]))
        return b"{" + b",".join(parts) + b"}"
    if isinstance(value, (list, tuple)):
        items = []
        for item in value:
            items.append(_slow_canonical(item))
        return b"[" + b",".join(items) + b"]"
    return _dumps(value, _default, _SORTED)


def _has_non_finite(value: Any) -> bool:
    """True if ``value`` holds a NaN or an infinity anywhere (orjson wrote them
    as ``null``; called only when the text has a ``null``)."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        for item in value.values():
            if _has_non_finite(item):
                return True
    elif isinstance(value, (list, tuple)):
        for item in value:
            if _has_non_finite(item):
                return True
    return False
