"""The canonical JSON hashed into content_hash: orjson's sorted form, the same
bytes from the slow path used past orjson's nesting limit, and json.dumps's
text wherever no float is spelt differently."""

from __future__ import annotations

import json
import math
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gliding_actors.l0._canonical import _slow_canonical, canonical

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet=st.characters(codec="utf-8")),  # no lone surrogates
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=30,
)


def _json_text(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _has_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_has_float(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_float(v) for v in value)
    return False


@given(value=JSON)
def test_the_slow_path_gives_orjsons_bytes(value: Any) -> None:
    expected = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    assert canonical(value) == expected
    assert _slow_canonical(value) == expected


@given(value=JSON)
def test_without_floats_the_text_is_json_dumps(value: Any) -> None:
    if not _has_float(value):
        assert canonical(value) == _json_text(value)
    # floats: the same number, perhaps spelt differently
    assert json.loads(canonical(value)) == json.loads(_json_text(value))


def test_past_orjsons_nesting_limit_the_slow_path_takes_over() -> None:
    deep: Any = {"x": [1.5, None, "é"]}
    for i in range(400):
        deep = {"d": deep, "a": i} if i % 2 else [deep, 1e-7]
    with pytest.raises(orjson.JSONEncodeError):
        orjson.dumps(deep, option=orjson.OPT_SORT_KEYS)
    text = canonical(deep)
    assert json.loads(text) == deep
    # the same bytes orjson gives for each of its subtrees it can still take
    inner = deep
    while isinstance(inner, (dict, list)) and len(_slow_canonical(inner)) > 2000:
        inner = inner["d"] if isinstance(inner, dict) else inner[0]
    assert _slow_canonical(inner) == orjson.dumps(inner, option=orjson.OPT_SORT_KEYS)


@pytest.mark.parametrize(
    "value",
    [
        math.nan,
        [math.inf],
        {"a": {"b": -math.inf}},
        {1: "int key"},
        {"s": {1}},
        {"b": b"x"},
        {"big": 2**64},
        {"surrogate": "\ud800"},
    ],
    ids=repr,
)
def test_what_is_not_json_is_refused(value: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        canonical(value)
    nested: Any = value
    for _ in range(300):  # and on the slow path too
        nested = [nested]
    with pytest.raises((TypeError, ValueError)):
        canonical(nested)


def test_null_is_not_mistaken_for_nan() -> None:
    assert canonical({"n": None, "s": "null"}) == b'{"n":null,"s":"null"}'
