"""GlidingStore against LangGraph's documented BaseStore contract, on a real memory."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langgraph.store.base", reason="the 'langgraph' extra is not installed (pip install '.[langgraph]')")

from langgraph.store.base import GetOp, ListNamespacesOp, PutOp, SearchOp  # noqa: E402

from gliding_actors import InvalidInput, MemorySystem, PermissionDenied, VirtualClock  # noqa: E402
from gliding_actors.errors import ConflictError  # noqa: E402
from gliding_actors.integrations.langgraph import GlidingStore, item_iri, namespace_tags  # noqa: E402


@pytest.fixture
def memory() -> Iterator[MemorySystem]:
    with MemorySystem.open(clock=VirtualClock(1_000.0)) as mem:  # the default configuration
        yield mem


@pytest.fixture
def store(memory: MemorySystem) -> GlidingStore:
    return GlidingStore(memory.agent("pa", "PA"))


def test_put_get_round_trips_any_json_object_and_keeps_created_at(store: GlidingStore, memory: MemorySystem) -> None:
    value: dict[str, Any] = {"@id": "not-an-iri", "nested": {"list": [1, 2.5, None, "x"]}, "ünï": True}
    store.put(("users", "alice"), "prefs", value)
    item = store.get(("users", "alice"), "prefs")
    assert item is not None and item.value == value and item.key == "prefs" and item.namespace == ("users", "alice")
    created = item.created_at
    clock = memory.clock
    assert isinstance(clock, VirtualClock)
    clock.advance(5)
    store.put(("users", "alice"), "prefs", {"v": 2})
    again = store.get(("users", "alice"), "prefs")
    assert again is not None and again.value == {"v": 2}
    assert again.created_at == created and (again.updated_at - created).total_seconds() == 5
    assert store.get(("users", "alice"), "missing") is None
    assert store.get(("users", "bob"), "prefs") is None


def test_the_mapping_escapes_labels_and_keys(store: GlidingStore) -> None:
    assert namespace_tags(("a b", "c/d")) == ["lgns:a%20b", "lgns:a%20b/c%2Fd"]
    assert item_iri(("a",), "b/c") != item_iri(("a", "b"), "c")
    store.put(("a b", "c/d"), "k/1 %", {"x": 1})
    store.put(("a b",), "c/d", {"x": 2})
    item = store.get(("a b", "c/d"), "k/1 %")
    assert item is not None and item.value == {"x": 1}
    other = store.get(("a b",), "c/d")
    assert other is not None and other.value == {"x": 2}


def test_delete_and_put_none_remove_and_missing_deletes_are_no_ops(store: GlidingStore) -> None:
    store.put(("docs",), "a", {"t": 1})
    store.put(("docs",), "b", {"t": 2})
    store.delete(("docs",), "a")
    store.put(("docs",), "b", None)  # type: ignore[arg-type]
    store.delete(("docs",), "never")
    assert store.get(("docs",), "a") is None and store.get(("docs",), "b") is None
    assert store.search(("docs",)) == [] and store.list_namespaces() == []


def test_put_if_version_is_a_cas(store: GlidingStore) -> None:
    assert store.version(("v",), "k") == 0
    v1 = store.put_if_version(("v",), "k", {"n": 1}, 0)
    with pytest.raises(ConflictError):
        store.put_if_version(("v",), "k", {"n": 99}, 0)
    item = store.get(("v",), "k")
    assert item is not None and item.value == {"n": 1}  # the refused write changed nothing
    assert store.put_if_version(("v",), "k", {"n": 2}, v1) == v1 + 1


def test_search_filters_limits_and_ranks_by_hybrid_search(store: GlidingStore) -> None:
    store.put(("mem", "alice"), "1", {"text": "alice likes green tea", "kind": "pref", "n": 1})
    store.put(("mem", "alice"), "2", {"text": "alice rotates signing keys weekly", "kind": "fact", "n": 5})
    store.put(("mem", "bob"), "3", {"text": "bob likes black coffee", "kind": "pref", "n": 3})
    store.put(("other",), "4", {"text": "green tea everywhere", "kind": "pref", "n": 9})
    everything = store.search(("mem",))
    assert [(i.namespace, i.key) for i in everything] == [(("mem", "alice"), "1"), (("mem", "alice"), "2"),
                                                          (("mem", "bob"), "3")]
    assert all(i.score is None for i in everything)
    assert [i.key for i in store.search(("mem",), filter={"kind": "pref"})] == ["1", "3"]
    assert [i.key for i in store.search(("mem",), filter={"n": {"$gte": 3}})] == ["2", "3"]
    assert [i.key for i in store.search(("mem",), limit=1, offset=1)] == ["2"]
    ranked = store.search(("mem",), query="signing keys rotation")
    assert ranked and ranked[0].key == "2" and ranked[0].score is not None
    assert all(i.namespace[0] == "mem" for i in ranked)  # ("other",) is outside the prefix
    tea = store.search((), query="green tea")
    assert {i.key for i in tea[:2]} == {"1", "4"}


def test_list_namespaces_prefix_suffix_and_max_depth(store: GlidingStore) -> None:
    for ns in (("a", "x", "1"), ("a", "y", "1"), ("b", "x"), ("a", "x", "2")):
        store.put(ns, "k", {"v": 1})
    assert store.list_namespaces() == [("a", "x", "1"), ("a", "x", "2"), ("a", "y", "1"), ("b", "x")]
    assert store.list_namespaces(prefix=("a",)) == [("a", "x", "1"), ("a", "x", "2"), ("a", "y", "1")]
    assert store.list_namespaces(prefix=("a", "*", "1")) == [("a", "x", "1"), ("a", "y", "1")]
    assert store.list_namespaces(suffix=("x",)) == [("b", "x")]
    assert store.list_namespaces(max_depth=2) == [("a", "x"), ("a", "y"), ("b", "x")]
    assert store.list_namespaces(limit=2, offset=1) == [("a", "x", "2"), ("a", "y", "1")]


def test_batch_returns_one_result_per_op_in_order(store: GlidingStore) -> None:
    results = store.batch([
        PutOp(("t",), "a", {"v": 1}),
        GetOp(("t",), "a"),
        GetOp(("t",), "zz"),
        SearchOp(("t",)),
        ListNamespacesOp(max_depth=1),
    ])
    assert results[0] is None and results[2] is None
    assert results[1] is not None and results[1].value == {"v": 1}  # type: ignore[union-attr]
    assert [i.key for i in results[3]] == ["a"]  # type: ignore[union-attr]
    assert results[4] == [("t",)]


def test_async_variants_give_the_same_answers(store: GlidingStore) -> None:
    async def run() -> tuple[Any, ...]:
        await store.aput(("as",), "k", {"v": 1})
        got = await store.aget(("as",), "k")
        found = await store.asearch(("as",))
        spaces = await store.alist_namespaces()
        await store.adelete(("as",), "k")
        gone = await store.aget(("as",), "k")
        many = await store.abatch([PutOp(("as",), "j", {"v": 2}), GetOp(("as",), "j")])
        return got, found, spaces, gone, many

    got, found, spaces, gone, many = asyncio.run(run())
    assert got.value == {"v": 1} and [i.key for i in found] == ["k"] and spaces == [("as",)]
    assert gone is None and many[1].value == {"v": 2}


@pytest.mark.parametrize(
    "bad",
    [
        PutOp((), "k", {"v": 1}),                       # empty namespace
        PutOp(("a.b",), "k", {"v": 1}),                 # a period in a label
        PutOp(("ok",), "", {"v": 1}),                   # empty key
        PutOp(("ok",), "k", ["not", "a", "mapping"]),   # type: ignore[arg-type]
        PutOp(("ok",), "k", {"x": float("nan")}),       # not JSON
        PutOp(("ok",), "k", {"x": object()}),           # not JSON
        PutOp(("ok",), "k", {"v": 1}, ttl=0.0),         # a TTL is > 0 minutes
        PutOp(("ok",), "k", {"v": 1}, ttl=-1.0),
        PutOp(("ok",), "k", {"v": 1}, ttl="5"),         # type: ignore[arg-type]
        SearchOp(("ok",), filter={"n": {"$regex": "x"}}),
        SearchOp(("ok",), limit=-1),
        ListNamespacesOp(max_depth=0),
    ],
)
def test_bad_input_is_invalid_input_and_a_batch_holding_it_changes_nothing(
    store: GlidingStore, bad: Any
) -> None:
    store.put(("ok",), "k", {"v": 0})
    with pytest.raises(InvalidInput):
        store.batch([PutOp(("ok",), "k", {"v": 1}), PutOp(("ok",), "new", {"v": 1}), bad])
    item = store.get(("ok",), "k")
    assert item is not None and item.value == {"v": 0}
    assert store.get(("ok",), "new") is None
    assert store.list_namespaces() == [("ok",)]


def test_the_store_writes_in_its_roles_own_graph_and_the_matrix_decides_the_rest(
    memory: MemorySystem, store: GlidingStore
) -> None:
    assert store.graph == "plan"  # PA's own graph on the default table
    store.put(("team",), "k", {"v": 1})
    assert memory.inspect(item_iri(("team",), "k"))["caches"]["pa"] == "M"
    reader = GlidingStore(memory.agent("da", "DA"))  # DA reads plan, writes only in execution
    assert reader.graph == "execution"
    item = reader.get(("team",), "k")
    assert item is not None and item.value == {"v": 1}
    with pytest.raises(PermissionDenied):
        reader.put(("team",), "k", {"v": 2})
    with pytest.raises(PermissionDenied):
        reader.delete(("team",), "k")
    reader.put(("da-notes",), "n", {"v": 3})
    outsider = GlidingStore(memory.agent("pa2", "PA"))  # PA may not read execution
    assert outsider.get(("da-notes",), "n") is None  # as if nobody had put it
    assert [i.key for i in outsider.search(())] == ["k"]  # confined to the graphs PA may read
    after = store.get(("team",), "k")
    assert after is not None and after.value == {"v": 1}
    assert GlidingStore(memory.agent("root", "system")).graph == "shared"
    assert GlidingStore(memory.agent("aa", "AA"), graph="knowledge").graph == "knowledge"


def test_what_langgraphs_own_stores_allow_is_allowed(store: GlidingStore) -> None:
    """Lists as prefixes and paths, an empty query, the root label "langgraph" inside a batch."""
    store.put(("a", "b"), "1", {"text": "hello"})
    store.put(("a", "c"), "2", {"text": "world"})
    assert store.list_namespaces(prefix=["a"]) == [("a", "b"), ("a", "c")]  # type: ignore[arg-type]
    assert [i.key for i in store.search(["a"])] == ["1", "2"]  # type: ignore[arg-type]
    assert [(i.key, i.score) for i in store.search(("a",), query="")] == [("1", None), ("2", None)]
    store.batch([PutOp(("langgraph", "x"), "k", {"v": 1})])
    got = store.get(("langgraph", "x"), "k")
    assert got is not None and got.value == {"v": 1}
    with pytest.raises(ValueError, match="langgraph"):
        store.put(("langgraph",), "k", {"v": 1})  # BaseStore.put keeps LangGraph's own rule


def test_non_ascii_text_is_searchable(store: GlidingStore) -> None:
    store.put(("docs",), "ja", {"text": "東京 の 天気 は 晴れ"})
    store.put(("docs",), "zh", {"text": "北京 烤鸭 很 好吃"})
    store.put(("docs",), "en", {"text": "the weather in london"})
    assert [i.key for i in store.search(("docs",), query="東京 天気")][:1] == ["ja"]
    assert [i.key for i in store.search(("docs",), query="北京 烤鸭")][:1] == ["zh"]


def test_a_query_ranks_every_item_under_the_prefix_with_scores_in_0_1(store: GlidingStore) -> None:
    for n in range(12):
        store.put(("mem", "alice"), f"noise{n}", {"text": f"alice noted item number {n} about the garden"})
    store.put(("mem", "alice"), "tea", {"text": "alice likes green tea"})
    for n in range(30):  # outranking documents outside the prefix must not push alice's items out
        store.put(("elsewhere",), f"t{n}", {"text": "green tea green tea green tea"})
    ranked = store.search(("mem", "alice"), query="green tea", limit=20)
    assert len(ranked) == 13 and ranked[0].key == "tea"  # every item, the match first
    assert all(i.score is not None and 0.0 <= i.score <= 1.0 for i in ranked)
    assert ranked[0].score is not None and ranked[0].score > 0
    scores = [i.score for i in ranked]
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]


def test_a_store_is_bound_to_an_agent() -> None:
    with pytest.raises(InvalidInput):
        GlidingStore("pa")  # type: ignore[arg-type]


def _axis_embed(texts: list[str]) -> list[list[float]]:
    """A tiny real embedding function: counts of three marker words."""
    return [[float(t.lower().count(w)) + 1e-3 for w in ("tea", "coffee", "keys")] for t in texts]


def test_an_index_config_embeds_fields_and_scores_by_cosine(memory: MemorySystem) -> None:
    store = GlidingStore(memory.agent("pa", "PA"), index={"dims": 3, "embed": _axis_embed, "fields": ["text"]})
    store.put(("m",), "tea", {"text": "green tea, more tea", "other": "coffee coffee coffee"})
    store.put(("m",), "coffee", {"text": "black coffee"})
    store.put(("m",), "plain", {"text": "tea"}, index=False)  # kept, not embedded
    store.put(("m",), "keys", {"note": "rotate keys"}, index=["note"])  # its own fields
    ranked = store.search(("m",), query="tea")
    assert [i.key for i in ranked] == ["tea", "coffee", "keys", "plain"]
    assert ranked[0].score == pytest.approx(1.0, abs=1e-3) and ranked[-1].score is None
    assert all(i.score is None or 0 <= i.score <= 1 for i in ranked)
    assert [i.key for i in store.search(("m",), query="keys")][:1] == ["keys"]
    assert [i.key for i in store.search(("m",), query="tea", filter={"text": "black coffee"})] == ["coffee"]
    by_name = GlidingStore(memory.agent("da", "DA"), index={"dims": 384, "embed": "hash"})
    by_name.put(("n",), "a", {"text": "signing keys rotate weekly"})
    by_name.put(("n",), "b", {"text": "the dashboard colours"})
    assert [i.key for i in by_name.search(("n",), query="rotate the signing keys")][:1] == ["a"]
    with pytest.raises(InvalidInput):
        GlidingStore(memory.agent("aa", "AA"), index=["not", "a", "config"])  # type: ignore[arg-type]


def test_an_item_put_with_a_ttl_is_gone_once_it_ran_out_and_a_read_refreshes_it(memory: MemorySystem) -> None:
    clock = memory.clock
    assert isinstance(clock, VirtualClock)
    store = GlidingStore(memory.agent("pa", "PA"), ttl={"default_ttl": 1.0, "refresh_on_read": True})
    other = GlidingStore(memory.agent("pa2", "PA"))
    store.put(("t",), "default", {"v": 1})  # the config's default_ttl: one minute
    store.put(("t",), "short", {"v": 2}, ttl=0.5)
    store.put(("t",), "forever", {"v": 3}, ttl=None)
    clock.advance(40)
    assert other.get(("t",), "short", refresh_ttl=False) is None  # 30 s ran out: gone for every agent
    assert store.get(("t",), "default") is not None  # refreshed: one more minute from now
    clock.advance(40)
    assert store.sweep_ttl() == 0
    assert other.get(("t",), "default", refresh_ttl=False) is not None
    assert [i.key for i in other.search(("t",), refresh_ttl=False)] == ["default", "forever"]
    clock.advance(30)
    assert store.sweep_ttl() == 1
    assert other.get(("t",), "default", refresh_ttl=False) is None
    assert other.get(("t",), "forever") is not None
    assert other.list_namespaces() == [("t",)]


def test_a_bad_ttl_config_is_refused(memory: MemorySystem) -> None:
    agent = memory.agent("pa", "PA")
    for bad in ({"default_ttl": 0}, {"default_ttl": "1"}, {"refresh_on_read": 1}, {"sweep": 1}, ["default_ttl"]):
        with pytest.raises(InvalidInput):
            GlidingStore(agent, ttl=bad)  # type: ignore[arg-type]


def test_the_ttl_sweeper_thread_deletes_what_ran_out_and_stops() -> None:
    with MemorySystem.open() as memory:  # the system clock: the sweeper sleeps for real
        store = GlidingStore(memory.agent("pa", "PA"), ttl={"sweep_interval_minutes": 0.002})
        store.put(("t",), "k", {"v": 1}, ttl=0.001)  # 60 ms
        store.start_ttl_sweeper()
        try:
            deadline = time.monotonic() + 10
            while memory.expiry.swept == 0 and time.monotonic() < deadline:
                time.sleep(0.02)
        finally:
            assert store.stop_ttl_sweeper(timeout=10)
        assert memory.expiry.swept == 1
        assert memory.line_graphs.version_of(item_iri(("t",), "k")) == 2  # deleted by the sweeper, not by a read
