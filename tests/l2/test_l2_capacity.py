"""L2 capacity: the node map holds a bounded number of lines.

The least recently used clean line is dropped and reloaded from L0 on its next
miss; dirty lines are written down to L0 first; the SPARQL graph keeps every
line (docs/L2.md, "Capacity"). Checked on a real LevelDB and a real pyoxigraph
store, through whole memory systems on both runtimes, against a dict model
with hypothesis, and by replaying the coherence race scenarios with a node map
of one line.
"""

from __future__ import annotations

import dataclasses
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gliding_actors import InvalidInput, MemorySystem
from gliding_actors.clock import VirtualClock
from gliding_actors.coherence._home import LayeredHome
from gliding_actors.config import Config, L0Config
from gliding_actors.errors import ConfigError
from gliding_actors.l0 import L0Store
from gliding_actors.l2._graph import GraphStore
from gliding_actors.runtime import BACKENDS
from gliding_actors.scenario import load_scenario, load_scenario_text, replay

REPO = Path(__file__).resolve().parents[2]
RACES = sorted((REPO / "scenarios" / "coherence").glob("*.yaml"))
NOTES = "SELECT ?s ?n WHERE { ?s a ga:Note ; ga:n ?n } ORDER BY ?s"


def note(i: int, rev: int = 0) -> dict[str, Any]:
    return {"@type": "Note", "n": i, "rev": rev}


@pytest.fixture
def l0(tmp_path: Path) -> Iterator[L0Store]:
    store = L0Store(str(tmp_path / "l0"), clock=VirtualClock())
    yield store
    store.close()


def home_over(l0: L0Store, capacity: int | None, graph: GraphStore | None = None) -> LayeredHome:
    return LayeredHome(l0, graph, threading.Lock(), capacity=capacity)


def in_l0(l0: L0Store, iri: str) -> tuple[Any, int]:
    entry = l0.retrieve(iri, touch=False)
    return (entry.content, entry.version) if entry is not None else (None, l0.retrieve_version(iri))


# -- configuration -------------------------------------------------------------------


def test_the_capacity_is_configured_and_validated() -> None:
    assert Config().l2.node_capacity == 100_000
    assert Config.from_dict({"l2": {"node_capacity": 3}}).l2.node_capacity == 3
    for bad, message in ((0, "outside"), (-1, "outside"), (2.5, "integer"), (True, "integer"), ("3", "integer")):
        with pytest.raises(ConfigError, match=message) as info:
            Config.from_dict({"l2": {"node_capacity": bad}})
        assert info.value.path == ("l2", "node_capacity")
    with pytest.raises(ConfigError, match="unknown config key 'l2.capacity'"):
        Config.from_dict({"l2": {"capacity": 3}})


def test_a_bad_capacity_is_refused_by_the_home(l0: L0Store) -> None:
    for bad in (0, -3, True, 1.5):
        with pytest.raises(InvalidInput, match="capacity"):
            home_over(l0, bad)  # type: ignore[arg-type]
    assert l0.count() == 0


@pytest.mark.parametrize(("capacity", "shards", "each"), [(7, 1, 7), (7, 3, 2), (2, 4, 1), (1, 1, 1)])
def test_the_capacity_is_split_across_directory_shards(capacity: int, shards: int, each: int) -> None:
    config = {"l2": {"node_capacity": capacity}, "coherence": {"directory_shards": shards}}
    with MemorySystem.open(config=config, runtime="sim") as memory:
        stats = memory.l2_stats()
        assert sorted(stats) == sorted(memory.directories)
        assert {s["capacity"] for s in stats.values()} == {each}


# -- the home on its own ----------------------------------------------------------------


def test_the_least_recently_used_clean_line_is_dropped_and_peek_does_not_count(l0: L0Store) -> None:
    for i in range(4):
        l0.store_jsonld_node({"@id": f"note:{i}", "n": i})
    home = home_over(l0, 2)
    assert home.load("note:0")[1] == 1
    assert home.load("note:1")[1] == 1
    assert home.load("note:0")[1] == 1  # touch: note:1 is now the least recently used
    assert home.load("note:2")[1] == 1
    assert (home.peek("note:0"), home.peek("note:1")) == ({"value": {"@id": "note:0", "n": 0}, "version": 1}, None)
    assert home.peek("note:0") is not None  # inspection only: note:0 stays least recently used
    home.load("note:3")
    assert [home.peek(f"note:{i}") is not None for i in range(4)] == [False, False, True, True]
    assert home.stats() == {
        "capacity": 2, "resident": 2, "dirty": 0, "drops": 2, "reloads": 4,
        "forced_writedowns": 0, "writedown_batches": 0, "writedown_failures": 0,
    }
    assert home.load("note:1") == ({"@id": "note:1", "n": 1}, 1)  # reloaded from L0
    assert home.stats()["reloads"] == 5


def test_a_dirty_line_is_written_down_before_it_is_dropped(l0: L0Store) -> None:
    home = home_over(l0, 2)
    home.store("note:a", note(0), 1, False, {"tags": ["t"], "graph": "execution"})
    home.store("note:b", note(1), 1, False, None)
    assert l0.count() == 0 and home.dirty() == ["note:a", "note:b"]
    home.store("note:c", note(2), 1, False, None)
    # Every line but the new one was dirty: both were written down in one batch,
    # then the least recently used one was dropped.
    assert in_l0(l0, "note:a") == (note(0), 1) and in_l0(l0, "note:b") == (note(1), 1)
    entry = l0.retrieve("note:a", touch=False)
    assert entry is not None and list(entry.tags) == ["t"] and entry.named_graph == "execution"
    assert home.peek("note:a") is None and home.peek("note:b") == {"value": note(1), "version": 1}
    assert home.dirty() == ["note:c"] and in_l0(l0, "note:c") == (None, 0)
    assert home.stats()["forced_writedowns"] == 2 and home.stats()["writedown_batches"] == 1
    # A tombstone is written down as a delete at its version.
    home.store("note:b", None, 2, False, None)
    home.store("note:d", note(3), 1, False, None)  # c, b dirty: both written, c dropped
    assert in_l0(l0, "note:b") == (None, 2) and in_l0(l0, "note:c") == (note(2), 1)
    assert home.peek("note:c") is None and home.peek("note:b") == {"value": None, "version": 2}
    home.store("note:e", note(4), 1, False, None)  # b is clean now: dropped
    assert home.peek("note:b") is None and home.stats()["writedown_batches"] == 2
    assert home.load("note:b") == (None, 2)
    assert home.load("note:a") == (note(0), 1)


def test_a_refused_write_down_keeps_the_dirty_lines_and_the_flush_raises(tmp_path: Path) -> None:
    small = L0Store(str(tmp_path / "small"), clock=VirtualClock(), config=L0Config(max_node_bytes=300))
    try:
        home = home_over(small, 1)
        home.store("note:big", {"text": "x" * 1000}, 1, False, None)
        home.store("note:small", note(1), 1, False, None)
        # L0 refuses the batch (too large): nothing dropped, nothing written.
        assert home.stats()["writedown_failures"] == 1 and home.stats()["resident"] == 2
        assert home.dirty() == ["note:big", "note:small"] and small.count() == 0
        assert home.load("note:big") == ({"text": "x" * 1000}, 1)
        with pytest.raises(InvalidInput, match="bytes"):
            home.flush()
        assert home.dirty() == ["note:big", "note:small"] and small.count() == 0
        assert home.flush(["note:small"]) == ["note:small"]
        assert in_l0(small, "note:small") == (note(1), 1) and home.dirty() == ["note:big"]
    finally:
        small.close()


def test_a_flush_counts_the_lines_capacity_wrote_down_during_it(l0: L0Store) -> None:
    home = home_over(l0, 1)
    home.store("note:a", note(0), 1, False, None)
    home.begin_flush(7)  # the directory's recall is bringing owners' copies home
    home.store("note:b", note(1), 1, False, None)  # pushes note:a down and out
    home.store("note:c", note(2), 1, False, None)  # and note:b
    assert home.stats()["forced_writedowns"] == 2 and home.dirty() == ["note:c"]
    assert home.flush(["note:a", "note:c"], mark=7) == ["note:a", "note:c"]
    home.store("note:d", note(3), 1, False, None)  # no flush open: counted nowhere but the stats
    assert home.flush(mark=8) == ["note:d"]
    assert home.flush() == [] and [in_l0(l0, f"note:{x}")[1] for x in "abcd"] == [1, 1, 1, 1]


def test_dropping_leaves_the_graph_whole(l0: L0Store) -> None:
    graph = GraphStore()
    home = home_over(l0, 2, graph)
    for i in range(6):
        home.store(f"note:{i}", note(i), 1, False, {"graph": "execution"})
    assert home.stats()["resident"] == 2
    rows = graph.query(NOTES, graphs=None, role_is_system=True)["rows"]
    assert [(r["s"], r["n"]) for r in rows] == [(f"note:{i}", str(i)) for i in range(6)]


# -- a dict model -----------------------------------------------------------------------

IRIS = [f"node:{i}" for i in range(6)]
_op = st.one_of(
    st.tuples(st.just("store"), st.sampled_from(IRIS), st.booleans(), st.booleans()),
    st.tuples(st.just("load"), st.sampled_from(IRIS), st.just(False), st.just(False)),
    st.tuples(st.just("flush"), st.sampled_from(IRIS), st.booleans(), st.just(False)),
)


@settings(max_examples=60)
@given(capacity=st.integers(1, 5), ops=st.lists(_op, max_size=40))
def test_the_home_agrees_with_a_dict_model(capacity: int, ops: list[tuple[str, str, bool, bool]]) -> None:
    """Random stores (write-back or durable, values or tombstones), loads and
    flushes: every load returns the model's latest version, no version seen
    ever goes back, a line not resident has its latest version in L0, the graph
    holds every line's latest version, and the map never exceeds capacity."""
    with tempfile.TemporaryDirectory() as where:
        store = L0Store(where, clock=VirtualClock())
        graph = GraphStore()
        try:
            home = home_over(store, capacity, graph)
            latest: dict[str, tuple[Any, int]] = {}
            seen: dict[str, int] = {}
            for n, (kind, iri, flag, tomb) in enumerate(ops):
                if kind == "store":
                    version = home.load(iri)[1] + 1  # as the directory does: load, then a newer version
                    value = None if tomb else {"n": n}
                    home.store(iri, value, version, flag, {"graph": "g"})
                    latest[iri] = (value, version)
                    if flag:
                        assert in_l0(store, iri) == latest[iri]
                elif kind == "load":
                    got = home.load(iri)
                    assert got == latest.get(iri, (None, 0))
                    assert got[1] >= seen.get(iri, 0)
                    seen[iri] = got[1]
                else:
                    expected = sorted(i for i in latest if in_l0(store, i) != latest[i])
                    assert home.dirty() == expected
                    written = home.flush(None if flag else [iri])
                    assert written == (expected if flag else [i for i in expected if i == iri])
                assert home.stats()["resident"] <= capacity
                for i, (value, version) in latest.items():
                    if home.peek(i) is None:
                        assert in_l0(store, i) == (value, version)
                    else:
                        assert home.peek(i) == {"value": value, "version": version}
                    node = graph.node(i)
                    assert node is not None and (node.value, node.version) == (value, version)
            home.flush()
            assert home.dirty() == []
            for i, want in latest.items():
                assert in_l0(store, i) == want
        finally:
            store.close()
            graph.close()


# -- through a whole memory system --------------------------------------------------------


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_a_team_writes_more_lines_than_l2_holds(backend: str) -> None:
    """Capacity 3, one shard, eight lines written back home by evictions: the
    exact drops and write-downs of the policy, then every value read back."""
    config = {"l2": {"node_capacity": 3}}
    with MemorySystem.open(config=config, runtime=backend, clock=VirtualClock()) as memory:
        da, ca = memory.agent("da", "DA"), memory.agent("ca", "CA")
        for i in range(8):
            da.write(f"note:{i}", note(i))
            da.evict(f"note:{i}")  # the dirty copy goes home
        # 0,1,2 dirty at home; 3 arrives: all dirty -> one batch (0,1,2), drop 0;
        # 4, 5 drop 1, 2; 6 arrives: 3,4,5 dirty -> one batch, drop 3; 7 drops 4.
        stats = memory.l2_stats()["dir:0"]
        assert {k: stats[k] for k in ("resident", "dirty", "drops", "forced_writedowns", "writedown_batches")} == {
            "resident": 3, "dirty": 2, "drops": 5, "forced_writedowns": 6, "writedown_batches": 2,
        }
        for i in range(8):
            seen = memory.inspect(f"note:{i}")
            on_disk = {"value": note(i), "version": 1} if i < 6 else None
            held = {"value": note(i), "version": 1} if i >= 5 else None
            assert (seen["l2"], seen["l0"], seen["directory"]) == (held, on_disk, "I"), i
        # A reader misses on a dropped line: reloaded from L0, back in inspect's l2.
        got = ca.read("note:0")
        assert (got["value"], got["version"]) == (note(0), 1)
        assert memory.inspect("note:0")["l2"] == {"value": note(0), "version": 1}
        assert memory.l2_stats()["dir:0"]["reloads"] == 1
        for i in range(8):
            got = ca.read(f"note:{i}")
            assert (got["value"], got["version"]) == (note(i), 1)
        # Only the two lines still dirty at home are left for the flush.
        assert memory.flush() == 2
        assert all(memory.inspect(f"note:{i}")["l0"] == {"value": note(i), "version": 1} for i in range(8))
        assert memory.flush() == 0


@pytest.mark.parametrize("shards", [1, 3])
def test_every_read_and_query_sees_the_latest_write(backend: str, shards: int) -> None:
    """Rewrites of dropped lines, reads by other agents, SPARQL over every line,
    a flush that leaves nothing behind: with a node map far smaller than the data."""
    config = {"l2": {"node_capacity": 2 * shards}, "coherence": {"directory_shards": shards, "cache_lines": 2}}
    with MemorySystem.open(config=config, runtime=backend, clock=VirtualClock()) as memory:
        da, ca, aa = memory.agent("da", "DA"), memory.agent("ca", "CA"), memory.agent("aa", "AA")
        latest: dict[str, tuple[dict[str, Any], int]] = {}
        for rev in range(3):
            for i in range(7):
                writer = (da, ca)[(i + rev) % 2]
                iri = f"note:{i}"
                result = writer.write(iri, note(i, rev))
                assert result["version"] == rev + 1
                latest[iri] = (note(i, rev), rev + 1)
                got = aa.read(f"note:{(i * 3) % 7}")  # moves other lines home
                want = latest.get(f"note:{(i * 3) % 7}", (None, 0))
                assert (got["value"], got["version"]) == want
            rows = aa.query(NOTES)["rows"]
            assert [(r["s"], r["n"]) for r in rows] == [(f"note:{i}", str(i)) for i in range(7)]
            revs = aa.query("SELECT ?s ?r WHERE { ?s ga:rev ?r } ORDER BY ?s")["rows"]
            assert [r["r"] for r in revs] == [str(rev)] * 7
        stats = memory.l2_stats()
        assert all(s["resident"] <= 2 for s in stats.values())
        assert sum(s["drops"] for s in stats.values()) > 0
        for iri, (value, version) in latest.items():
            got = aa.read(iri)
            assert (got["value"], got["version"]) == (value, version)
        memory.quiesce()  # owners' data answering the reads may still be on its way home
        before = {iri: memory.inspect(iri) for iri in latest}
        newer = [iri for iri, seen in before.items() if seen["l0"] != {"value": latest[iri][0], "version": latest[iri][1]}]
        # Lines capacity wrote down while the flush's recall brought owners'
        # copies home count as flushed: the count does not depend on capacity.
        assert memory.flush() == len(newer)
        for iri, (value, version) in latest.items():
            assert memory.inspect(iri)["l0"] == {"value": value, "version": version}
        assert memory.flush() == 0


def test_a_reopened_memory_answers_queries_over_every_line(tmp_path: Path) -> None:
    config = {"l2": {"node_capacity": 2}}
    with MemorySystem.open(tmp_path, config=config, runtime="sim") as memory:
        da = memory.agent("da", "DA")
        for i in range(5):
            da.write(f"note:{i}", note(i))
            da.evict(f"note:{i}")
    with MemorySystem.open(tmp_path, config=config, runtime="sim") as memory:
        assert all(s["resident"] == 0 for s in memory.l2_stats().values())
        rows = memory.agent("aa", "AA").query(NOTES)["rows"]
        assert [r["s"] for r in rows] == [f"note:{i}" for i in range(5)]


# -- scenarios --------------------------------------------------------------------------

DROPPED = """
format: gliding-actors/scenario@1
name: L2 drops clean lines and reloads them
config:
  l2: {node_capacity: 2}
agents:
  - {id: da, role: DA}
  - {id: ca, role: CA}
steps:
  - {op: write, agent: da, iri: "note:a", graph: shared, value: {n: 1}}
  - {op: evict, agent: da, iri: "note:a"}
  - {op: write, agent: da, iri: "note:b", graph: shared, value: {n: 2}}
  - {op: evict, agent: da, iri: "note:b"}
  - {op: inspect, iri: "note:a", expect: {l2: {value: {n: 1}, version: 1}, l0: null}}
  - {op: write, agent: da, iri: "note:c", graph: shared, value: {n: 3}}
  - {op: evict, agent: da, iri: "note:c"}
  - {op: inspect, iri: "note:a", expect: {directory: I, l2: null, l0: {value: {n: 1}, version: 1}}}
  - {op: inspect, iri: "note:b", expect: {l2: {value: {n: 2}, version: 1}, l0: {version: 1}}}
  - {op: inspect, iri: "note:c", expect: {l2: {value: {n: 3}, version: 1}, l0: null}}
  - {op: query, agent: ca, sparql: "SELECT ?s WHERE { ?s ga:n ?n } ORDER BY ?s", expect: {count: 3}}
  - {op: read, agent: ca, iri: "note:a", expect: {value: {n: 1}, version: 1}}
  - {op: inspect, iri: "note:a", expect: {directory: EM, l2: {value: {n: 1}, version: 1}}}
  - {op: inspect, iri: "note:b", expect: {l2: null, l0: {value: {n: 2}, version: 1}}}
  - {op: flush, expect: {flushed: 1}}
final:
  lines:
    "note:c": {l0: {value: {n: 3}, version: 1}}
"""


def test_inspect_shows_what_l2_holds_in_a_scenario() -> None:
    scenario = load_scenario_text(DROPPED, "dropped.yaml")
    for runtime, seeds in (("sim", range(10)), ("threads", range(2))):
        for seed in seeds:
            result = replay(scenario, seed=seed, runtime=runtime)
            assert result.ok, (runtime, seed, result.failure)


#: Scenarios whose expectations depend on what is still dirty when the process dies.
LOSES_LESS = {"crash_recovery.yaml"}


def test_the_coherence_races_pass_with_a_node_map_of_one_line() -> None:
    """Every race scenario, its config plus ``l2: {node_capacity: 1}``: lines the
    caches hold in S or EM are dropped at home and reloaded, and nothing breaks."""
    assert len(RACES) >= 10
    for path in RACES:
        scenario = load_scenario(path)
        tiny = dataclasses.replace(scenario, config=scenario.config.merged({"l2": {"node_capacity": 1}}))
        for runtime, seeds in (("sim", range(10)), ("threads", range(2))):
            for seed in seeds:
                result = replay(tiny, seed=seed, runtime=runtime)
                if path.name in LOSES_LESS and result.failure is not None:
                    # Capacity wrote a dirty line down before the process crash, so
                    # the crash loses less than the file expects: never more.
                    failure = result.failure
                    assert failure.what.startswith("crash: expected lost"), (path.name, runtime, seed, failure)
                    assert set(failure.actual["lost"]) < set(failure.expected["lost"]), failure
                    continue
                assert result.ok, (path.name, runtime, seed, result.failure)
