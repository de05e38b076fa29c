"""Bad input: every refusal is a typed error and leaves the store exactly as it
was (a full dump of the database, every key and value, compared before/after)."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import math
import reprlib
import uuid
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from gliding_actors.config import L0Config
from gliding_actors.errors import ConflictError, GlidingError, InvalidInput
from gliding_actors.l0 import L0Entry, L0Store

IRI = "task:auth-refactor"


@pytest.fixture
def seeded(store: L0Store) -> L0Store:
    store.store(L0Entry(IRI, {"@type": "Task", "title": "auth"}, tags=["plan"], named_graph="plan"))
    store.store(L0Entry("memory:session-042/block-017", {"summary": "s"}, tags=["plan", "risk"]))
    store.retrieve(IRI)
    store.flush()
    return store


def refused(
    store: L0Store, call: Callable[[], Any], error: type[GlidingError] = InvalidInput
) -> GlidingError:
    """Assert ``call`` raises ``error`` and changes nothing on disk or in memory."""
    before = store.raw_items()
    before_entries = store.query()
    with pytest.raises(error) as info:
        call()
    assert store.raw_items() == before
    assert store.query() == before_entries
    assert store.verify() == []
    return info.value


BAD_IRIS: list[Any] = [
    "",
    "auth-refactor",  # no scheme
    ":auth",  # empty scheme
    "1task:auth",  # scheme must start with a letter
    "ta_sk:auth",  # "_" is not a scheme character
    "task:",  # nothing after the colon
    "task:auth refactor",
    "task:auth\trefactor",
    "task:auth\n",
    "task:a\x00b",
    "task:a\x7fb",
    "task:a\x85b",  # C1 control (NEL)
    "task:a\u00a0b",  # no-break space
    "task:a\u2028b",  # line separator
    "task:<a>",
    'task:"a"',
    "task:{a}",
    "task:a|b",
    "task:a\\b",
    "task:a^b",
    "task:a`b",
    "task:\ud800",  # lone surrogate
    None,
    5,
    b"task:auth",
]


@pytest.mark.parametrize("iri", BAD_IRIS, ids=repr)
def test_invalid_iris_are_refused_everywhere(seeded: L0Store, iri: Any) -> None:
    refused(seeded, lambda: seeded.store(L0Entry(iri, {"v": 1})))
    refused(seeded, lambda: seeded.store_jsonld_node({"@id": iri, "v": 1}))
    refused(seeded, lambda: seeded.retrieve(iri))
    refused(seeded, lambda: seeded.delete(iri))
    refused(seeded, lambda: seeded.delete(iri, version=9))
    refused(seeded, lambda: seeded.retrieve_version(iri))
    refused(seeded, lambda: seeded.annotate(iri, vector_id=1))


class Opaque:
    pass


class Colour(enum.Enum):
    RED = 1


class Level(enum.IntEnum):
    HIGH = 3


@dataclasses.dataclass
class Point:
    x: int = 1


class Real(float):
    pass


def _circular() -> dict[str, Any]:
    d: dict[str, Any] = {"a": 1}
    d["self"] = d
    return d


def _deep(n: int) -> dict[str, Any]:
    d: dict[str, Any] = {}
    for _ in range(n):
        d = {"d": d}
    return d


BAD_CONTENT: list[Any] = [
    ["not", "an", "object"],
    "a string",
    None,
    {"s": {1, 2}},
    {"b": b"bytes"},
    {"o": Opaque()},
    {"nan": math.nan},
    {"inf": math.inf},
    {"nested": [{"x": -math.inf}]},
    _circular(),
    {1: "int key"},
    {"nested": {None: "null key"}},
    {"deep": [[{"k": {2.5: "float key"}}]]},
    {("a", "b"): "tuple key"},
    {"surrogate": "\udc80"},
    {"big": 2**64},
    {"small": -(2**63) - 1},
    _deep(5_000),  # deeper than json or msgpack go
    # json.dumps refuses these, orjson serialises them (msgpack refuses them)
    {"uuid": uuid.UUID(int=1)},
    {"enum": [Colour.RED]},
    {"fragment": orjson.Fragment(b"1")},
    # json.dumps and orjson (with its passthrough options) refuse these
    {"dataclass": Point()},
    {"when": datetime.date(2024, 1, 1)},
    {"nan": Real("nan")},
]


@pytest.mark.parametrize("content", BAD_CONTENT, ids=lambda c: reprlib.repr(c)[:40])
def test_non_json_content_is_refused(seeded: L0Store, content: Any) -> None:
    err = refused(seeded, lambda: seeded.store(L0Entry(IRI, content)))
    assert isinstance(err, InvalidInput)


def test_json_edge_values_are_accepted(store: L0Store) -> None:
    content: dict[str, Any] = {
        "big": 2**64 - 1,
        "neg": -(2**63),
        "f": 1e308,
        "t": True,
        "n": None,
        "u": "ünï",
        "l": [[], {}],
        "deep": _deep(400),  # deeper than orjson goes (254): the same bytes, from a slower path
    }
    entry = store.store(L0Entry(IRI, content))
    assert store.retrieve_jsonld_node(IRI) == content
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert entry.content_size == len(text.encode())  # no float spelt differently here


def test_what_json_dumps_takes_as_numbers_is_accepted(store: L0Store) -> None:
    # float and int subclasses (numpy.float64 is one) are numbers to json.dumps and to msgpack
    stored = store.store(L0Entry(IRI, {"f": Real(1.5), "i": Level.HIGH}))
    assert stored.content_size == len(b'{"f":1.5,"i":3}')
    got = store.retrieve_jsonld_node(IRI)
    assert got == {"f": 1.5, "i": 3} and type(got["f"]) is float and type(got["i"]) is int


def test_bad_new_content_is_refused_even_when_the_merge_keeps_the_stored_one(
    seeded: L0Store,
) -> None:
    seeded.store(L0Entry(IRI, {"long": "x" * 200}))
    # shorter, so a merge would keep the stored content and never pack this one
    for bad in ({"u": uuid.UUID(int=1)}, {"e": Colour.RED}, {"nan": [math.nan]}):
        refused(seeded, lambda bad=bad: seeded.store(L0Entry(IRI, bad)))  # type: ignore[misc]


def test_oversized_nodes_are_refused(open_store: Callable[..., L0Store]) -> None:
    store = open_store(config=L0Config(max_node_bytes=1_000))
    store.store(L0Entry(IRI, {"s": "x" * 100}))
    err = refused(store, lambda: store.store(L0Entry(IRI, {"s": "x" * 1_000})))
    assert "l0.max_node_bytes" in str(err)
    # the content fits, the record (content + many tags) does not
    tags = [f"tag-{i:03d}" for i in range(120)]
    refused(store, lambda: store.store(L0Entry(IRI, {"s": "x" * 100}, tags=tags)))
    # a merge that would grow the record past the limit is refused as a whole
    store.store(L0Entry(IRI, {"s": "x" * 100}, tags=tags[:40]))
    refused(store, lambda: store.store(L0Entry(IRI, {"s": "y"}, tags=tags[40:])))


def test_the_default_limit_is_five_mebibytes(store: L0Store) -> None:
    assert store.config.max_node_bytes == 5 * 1024 * 1024
    store.store(L0Entry(IRI, {"s": "x" * (4 * 1024 * 1024)}))
    refused(store, lambda: store.store(L0Entry(IRI, {"s": "x" * (5 * 1024 * 1024)})))


@pytest.mark.parametrize("importance", [-0.1, 1.5, math.nan, math.inf, "0.5", True, None])
def test_importance_outside_0_1_is_refused(seeded: L0Store, importance: Any) -> None:
    refused(seeded, lambda: seeded.store(L0Entry(IRI, {"v": 1}, importance=importance)))


@pytest.mark.parametrize(
    "tags", ["plan", b"plan", ["ok", ""], ["a\x00b"], ["a\nb"], [1], [None], {"plan": 1}, 7]
)
def test_bad_tags_are_refused(seeded: L0Store, tags: Any) -> None:
    refused(seeded, lambda: seeded.store(L0Entry(IRI, {"v": 1}, tags=tags)))
    refused(seeded, lambda: seeded.query(tags=tags))


@pytest.mark.parametrize("graph", ["", "g\x00", "g\x1b", 3, b"g"])
def test_bad_named_graphs_are_refused(seeded: L0Store, graph: Any) -> None:
    refused(seeded, lambda: seeded.store(L0Entry(IRI, {"v": 1}, named_graph=graph)))
    refused(seeded, lambda: seeded.query(graph=graph))
    refused(seeded, lambda: seeded.delete_graph(graph))


@pytest.mark.parametrize("typ", [3, [3], ["ok", None], "", {"@id": "x"}, ["a\x00"]])
def test_bad_types_are_refused(seeded: L0Store, typ: Any) -> None:
    refused(seeded, lambda: seeded.store(L0Entry(IRI, {"@type": typ})))
    refused(
        seeded,
        lambda: seeded.store(L0Entry(IRI, {"v": 1}, jsonld_types=typ if typ != "" else [""])),
    )


@pytest.mark.parametrize(
    "field,value",
    [
        ("metadata", {"k": {1, 2}}),
        ("metadata", {3: "int key"}),
        ("metadata", {"n": math.nan}),
        ("metadata", {"u": uuid.UUID(int=1)}),
        ("jsonld_context", {"u": uuid.UUID(int=1)}),
        ("jsonld_context", {"inf": [math.inf]}),
        ("metadata", ["not", "a", "mapping"]),
        ("jsonld_context", {"bad": b"bytes"}),
        ("version", -1),
        ("version", "2"),
        ("version", 1.0),
        ("vector_id", "v1"),
        ("vector_id", True),
        ("vector_id", 2**64),
        ("mesi_state", "X"),
        ("mesi_state", None),
    ],
)
def test_bad_bookkeeping_fields_are_refused(seeded: L0Store, field: str, value: Any) -> None:
    refused(seeded, lambda: seeded.store(L0Entry(IRI, {"v": 1})._replace(**{field: value})))


def test_content_id_must_match_the_iri(seeded: L0Store) -> None:
    refused(seeded, lambda: seeded.store(L0Entry(IRI, {"@id": "task:other"})))
    refused(seeded, lambda: seeded.store(L0Entry(IRI, {"@id": 5})))
    seeded.store(L0Entry(IRI, {"@id": IRI, "v": 2}))  # the same @id is fine


def test_jsonld_nodes_need_an_id(seeded: L0Store) -> None:
    refused(seeded, lambda: seeded.store_jsonld_node({"@type": "Task", "title": "no id"}))
    refused(seeded, lambda: seeded.store_jsonld_node(["not", "a", "node"]))  # type: ignore[arg-type]
    refused(
        seeded, lambda: seeded.store_jsonld_node({"@id": "_:b0"})
    )  # blank nodes are not addressable


def test_not_an_entry_is_refused(seeded: L0Store) -> None:
    refused(seeded, lambda: seeded.store({"iri": IRI, "content": {}}))  # type: ignore[arg-type]
    refused(seeded, lambda: seeded.store_many([L0Entry(IRI, {"v": 1}), "nope"]))  # type: ignore[list-item]
    refused(seeded, lambda: seeded.store_many("task:x"))  # type: ignore[arg-type]


def test_one_bad_entry_refuses_the_whole_batch(seeded: L0Store) -> None:
    refused(
        seeded,
        lambda: seeded.store_many(
            [
                L0Entry("task:new", {"v": 1}, tags=["new"]),
                L0Entry(IRI, {"v": 2}),
                L0Entry("not an iri", {"v": 3}),
            ]
        ),
    )
    # a refusal found only while combining with the stored node (a conflict) too
    refused(
        seeded,
        lambda: seeded.store_many(
            [
                L0Entry("task:new", {"v": 1}),
                L0Entry(IRI, {"v": 2}, version=0),
                L0Entry(IRI, {"v": 2}, version=1),  # older than the version 2 the batch just wrote
            ]
        ),
        ConflictError,
    )


def test_conflicts_change_nothing(seeded: L0Store) -> None:
    refused(seeded, lambda: seeded.store(L0Entry(IRI, {"v": 9}), expect_version=5), ConflictError)
    seeded.store(L0Entry(IRI, {"v": 9}, version=10), merge=False)
    refused(seeded, lambda: seeded.store(L0Entry(IRI, {"v": 9}, version=3)), ConflictError)


@pytest.mark.parametrize(
    "query",
    [
        {"prefix": "task: a"},
        {"prefix": 5},
        {"min_importance": "0.1"},
        {"max_importance": math.nan},
        {"limit": -1},
        {"limit": 1.5},
        {"node_type": ""},
    ],
    ids=repr,
)
def test_bad_queries_are_refused(seeded: L0Store, query: dict[str, Any]) -> None:
    refused(seeded, lambda: seeded.query(**query))
    refused(seeded, lambda: seeded.query_iris(**query))


def test_bad_write_options_are_refused(seeded: L0Store) -> None:
    refused(seeded, lambda: seeded.store(L0Entry(IRI, {"v": 1}), sync="yes"))  # type: ignore[arg-type]
    refused(seeded, lambda: seeded.store(L0Entry(IRI, {"v": 1}), expect_version=-1))
    refused(seeded, lambda: seeded.annotate(IRI, mesi_state="Q"))
    refused(seeded, lambda: seeded.annotate(IRI, vector_id="x"))  # type: ignore[arg-type]


def test_the_store_still_works_after_refusals(seeded: L0Store) -> None:
    for content in BAD_CONTENT[:5]:
        with pytest.raises(InvalidInput):
            seeded.store(L0Entry(IRI, content))
    assert seeded.store(L0Entry(IRI, {"@type": "Task", "title": "auth, again"})).version == 2
    assert seeded.verify() == []
