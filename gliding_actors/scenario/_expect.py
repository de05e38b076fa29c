"""Checking an op's outcome against its ``expect:`` block (spec, "Expectations").

Comparison rule, applied recursively: a mapping in the expectation matches a
mapping in the result when every key it lists matches (keys it does not list
are not compared); a list matches a list of the same length whose items match
one by one; anything else must be equal (``1`` equals ``1.0``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

__all__ = ["Mismatch", "check_expectations", "matches"]


@dataclasses.dataclass(frozen=True)
class Mismatch:
    """One expectation that did not hold."""

    key: str
    expected: Any
    actual: Any
    note: str = ""

    def __str__(self) -> str:
        extra = f" ({self.note})" if self.note else ""
        return f"expected {self.key}: {self.expected!r}, got {self.actual!r}{extra}"


def matches(expected: Any, actual: Any) -> bool:
    """The recursive partial comparison described in the module docstring."""
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            return False
        return all(key in actual and matches(value, actual[key]) for key, value in expected.items())
    if isinstance(expected, list):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            return False
        return all(matches(e, a) for e, a in zip(expected, actual, strict=True))
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual
    return bool(expected == actual)


def _contains(items: Any, wanted: Any) -> bool:
    return isinstance(items, (list, tuple)) and any(matches(wanted, item) for item in items)


def check_expectations(
    expect: Mapping[str, Any],
    *,
    result: Mapping[str, Any] | None,
    error: BaseException | None,
    main_list: str | None,
    labels: Mapping[str, Mapping[str, Any]],
) -> list[Mismatch]:
    """Every way the outcome (``result`` or ``error``) misses ``expect``."""
    wanted_error = expect.get("error")
    if error is not None:
        name = type(error).__name__
        if wanted_error is None:
            return [Mismatch("error", None, name, f"the op failed: {error}")]
        if name != wanted_error:
            return [Mismatch("error", wanted_error, name, str(error))]
        return []
    if wanted_error is not None:
        return [Mismatch("error", wanted_error, None, "the op succeeded")]
    assert result is not None
    out: list[Mismatch] = []
    listed = result.get(main_list) if main_list is not None else None
    for key, want in expect.items():
        if key == "value_in":
            got = result.get("value")
            if not any(matches(option, got) for option in want):
                out.append(Mismatch(key, want, got))
        elif key == "state_in":
            got = result.get("state")
            if got not in want:
                out.append(Mismatch(key, want, got))
        elif key == "contains":
            missing = [item for item in want if not _contains(listed, item)]
            if missing:
                out.append(Mismatch(key, want, listed, f"missing {missing!r} from {main_list}"))
        elif key == "excludes":
            present = [item for item in want if _contains(listed, item)]
            if present:
                out.append(Mismatch(key, want, listed, f"{present!r} present in {main_list}"))
        elif key == "max_tokens":
            got = result.get("tokens")
            if not isinstance(got, (int, float)) or got > want:
                out.append(Mismatch(key, want, got, "tokens must be <= max_tokens"))
        elif key == "count":
            got_len = len(listed) if isinstance(listed, (list, tuple)) else None
            if got_len != want:
                out.append(Mismatch(key, want, got_len, f"length of {main_list}"))
        elif key == "at_least":
            for sub, bound in want.items():
                got = result.get(sub)
                size = len(got) if isinstance(got, (list, tuple)) else got
                if not isinstance(size, (int, float)) or isinstance(size, bool) or size < bound:
                    out.append(Mismatch(f"at_least.{sub}", bound, size))
        elif key == "same_as":
            earlier = labels.get(want)
            got = result.get("value")
            if earlier is None or not matches(earlier.get("value"), got) or not matches(got, earlier.get("value")):
                out.append(Mismatch(key, None if earlier is None else earlier.get("value"), got, f"value of {want!r}"))
        elif key in result:
            if not matches(want, result[key]):
                out.append(Mismatch(key, want, result[key]))
        else:
            out.append(Mismatch(key, want, None, "the op returned no such key"))
    return out
