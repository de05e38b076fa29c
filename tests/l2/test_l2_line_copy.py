"""``MemorySystem.line_copy`` answers from the L2 graph's node map.

It used to read each directory's home (``peek`` + ``meta_of``) and fall back
to L0; on Ray the homes live in other processes, so it now reads the graph's
node map, which every ``LayeredHome.store`` writes (value, version, tags,
graph) and which the open rebuilds from L0. These tests hold it to the old
answer on a real memory (real LevelDB, real pyoxigraph, the simulator), with
node maps and caches small enough that lines are dropped for capacity and
reloaded, and check the one place where it differs on purpose: a tombstone the
home dropped is still a tombstone at the delete's version (the old read found
nothing at home and nothing live in L0, and answered None).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from gliding_actors import MemorySystem
from gliding_actors.clock import VirtualClock
from gliding_actors.coherence._home import DEFAULT_GRAPH
from gliding_actors.l0 import L0Entry

IRIS = [f"note:{i}" for i in range(7)]
AGENTS = ("a", "b", "c")
GRAPHS = (DEFAULT_GRAPH, "plan", "execution")
#: confirmed_fact is a critical tag: a write carrying it is write-through, any other write-back
TAGS = ("confirmed_fact", "draft", "todo")
#: 2 lines per shard in L2, 2 lines per agent cache: drops and reloads on most runs
CONFIG = {"l2": {"node_capacity": 4}, "coherence": {"cache_lines": 2, "directory_shards": 2}}

Copy = tuple[dict[str, Any] | None, int, list[str], str] | None


def home_then_l0(memory: MemorySystem, iri: str) -> Copy:
    """What ``line_copy`` answered before it read the graph: the home's copy
    when the line is resident there, else L0's (the code it replaced)."""
    home = memory._homes[memory.directory_for(iri)]
    held = home.peek(iri)
    if held is not None:
        meta = home.meta_of(iri) or {}
        return held["value"], int(held["version"]), list(meta.get("tags") or ()), meta.get("graph") or DEFAULT_GRAPH
    entry = memory.l0.retrieve(iri, touch=False)
    if entry is None:
        return None
    return entry.content, entry.version, list(entry.tags), entry.named_graph or DEFAULT_GRAPH


def check_after_recall(
    memory: MemorySystem,
    touched: set[str],
    latest: dict[str, tuple[Any, int]],
    deletes: dict[str, tuple[int, list[str], str]],
    seen: Counter[str],
) -> None:
    """Recall every dirty line home, then hold ``line_copy`` of every touched
    IRI to the old answer and to the latest completed write.

    Two intended differences, both tombstones, because L0 keeps a delete's
    version but not its tags or graph: a tombstone the home dropped (the old
    read answered None) and one it reloaded from L0 (the old read answered no
    tags, graph ``shared``). The graph keeps the delete's own tags and graph:
    ``deletes`` remembers them from when the home held the delete as stored,
    and the later answers must not drift from them.
    """
    memory.submit_recall().get()
    memory.quiesce()
    for iri in sorted(touched):
        got = memory.line_copy(iri)
        old = home_then_l0(memory, iri)
        home = memory._homes[memory.directory_for(iri)]
        resident = home.peek(iri) is not None
        if got is not None and got[0] is None and (old is None or home.meta_of(iri) is None):
            assert old is None or old[:2] == got[:2], (iri, got, old)
            assert got[1] == memory.l0.retrieve_version(iri) > 0, (iri, got)
            known = deletes.get(iri)
            if known is not None and known[0] == got[1]:
                assert (got[2], got[3]) == (known[1], known[2]), (iri, got, known)
                seen["tombstone tags kept"] += 1
            seen["dropped tombstone" if old is None else "reloaded tombstone"] += 1
        else:
            assert got == old, (iri, got, old)
            seen["resident" if resident else "from L0"] += 1
            if got is not None and got[0] is None:
                deletes[iri] = (got[1], got[2], got[3])
                seen["tombstone"] += 1
        # After the recall home holds every completed write: line_copy is the latest.
        want = latest.get(iri)
        assert (None if got is None else (got[0], got[1])) == want, (iri, got, want)


def value_of(iri: str, n: int) -> dict[str, Any]:
    return {"@type": "Note", "n": n, "of": iri}


op = st.one_of(
    st.tuples(
        st.just("write"),
        st.sampled_from(AGENTS),
        st.sampled_from(IRIS),
        st.integers(0, 9),
        st.lists(st.sampled_from(TAGS), max_size=2, unique=True),
        st.sampled_from((None, *GRAPHS)),
    ),
    st.tuples(st.just("delete"), st.sampled_from(AGENTS), st.sampled_from(IRIS)),
    st.tuples(st.just("read"), st.sampled_from(AGENTS), st.sampled_from(IRIS)),
    st.tuples(st.just("evict"), st.sampled_from(AGENTS), st.sampled_from(IRIS)),
    st.tuples(st.just("recall")),
    st.tuples(st.just("flush")),
)


def run(sim_seed: int, ops: list[tuple[Any, ...]]) -> Counter[str]:
    """A fixed prelude that drops a live line and a tombstone for capacity,
    then ``ops``; ``line_copy`` checked after every recall."""
    seen: Counter[str] = Counter()
    latest: dict[str, tuple[Any, int]] = {}
    deletes: dict[str, tuple[int, list[str], str]] = {}
    touched: set[str] = set()
    with MemorySystem.open(config=CONFIG, runtime="sim", seed=sim_seed) as memory:
        agents = {name: memory.agent(name, "system") for name in AGENTS}
        a = agents["a"]
        # Prelude: every line written (half of them write-through), one deleted,
        # all brought home and pushed through two-line node maps.
        for n, iri in enumerate(IRIS):
            tags = ["confirmed_fact", "todo"] if n % 2 else ["draft"]
            got = a.write(iri, value_of(iri, n), tags=tags, graph=GRAPHS[n % 3])
            latest[iri] = (value_of(iri, n), got["version"])
            touched.add(iri)
        latest[IRIS[0]] = (None, a.delete(IRIS[0]))
        for iri in IRIS:
            a.evict(iri)
        memory.flush()  # every line clean: droppable
        check_after_recall(memory, touched, latest, deletes, seen)
        assert deletes.keys() == {IRIS[0]}, seen  # the tombstone was held as stored: its tags are known
        for iri in IRIS[1:]:  # reads reload lines and push the tombstone out
            assert agents["b"].read(iri)["value"] == latest[iri][0]
        check_after_recall(memory, touched, latest, deletes, seen)
        assert seen["dropped tombstone"] == seen["tombstone tags kept"] == 1, seen
        for kind, *args in ops:
            if kind == "write":
                name, iri, n, tags, graph = args
                got = agents[name].write(iri, value_of(iri, n), tags=tags, graph=graph)
                latest[iri] = (value_of(iri, n), got["version"])
                touched.add(iri)
            elif kind == "delete":
                name, iri = args
                latest[iri] = (None, agents[name].delete(iri))
                touched.add(iri)
            elif kind == "read":
                name, iri = args
                got = agents[name].read(iri)
                assert (got["value"], got["version"]) == latest.get(iri, (None, 0))
            elif kind == "evict":
                name, iri = args
                agents[name].evict(iri)
            elif kind == "recall":
                check_after_recall(memory, touched, latest, deletes, seen)
            else:
                memory.flush()
        check_after_recall(memory, touched, latest, deletes, seen)
        stats = memory.l2_stats()
        assert sum(s["drops"] for s in stats.values()) > 0, stats
        assert sum(s["reloads"] for s in stats.values()) > 0, stats
    return seen


@seed(20251201)
@settings(max_examples=60, deadline=None)
@given(sim_seed=st.integers(0, 2**16), ops=st.lists(op, max_size=40))
def test_line_copy_from_the_graph_answers_as_home_then_l0(sim_seed: int, ops: list[tuple[Any, ...]]) -> None:
    seen = run(sim_seed, ops)
    assert seen["resident"] > 0 and seen["from L0"] > 0 and seen["dropped tombstone"] > 0, seen


@pytest.mark.slow
@seed(20251202)
@settings(max_examples=2000, deadline=None)
@given(sim_seed=st.integers(0, 2**16), ops=st.lists(op, max_size=120))
def test_line_copy_from_the_graph_answers_as_home_then_l0_long(sim_seed: int, ops: list[tuple[Any, ...]]) -> None:
    run(sim_seed, ops)


# -- the cases one by one ----------------------------------------------------------------


def test_a_dropped_tombstone_stays_a_tombstone() -> None:
    """One line per node map: the delete goes home, another line pushes it out.
    Home and L0 have no live copy; the graph still knows the delete."""
    config = {"l2": {"node_capacity": 1}}
    with MemorySystem.open(config=config, runtime="sim", clock=VirtualClock()) as memory:
        sa = memory.agent("sa", "SA")
        sa.write("note:gone", {"n": 1}, tags=["confirmed_fact"])  # write-through
        version = sa.delete("note:gone")
        sa.evict("note:gone")
        sa.write("note:other", {"n": 2}, tags=["confirmed_fact"])
        memory.quiesce()
        home = memory._homes[memory.directory_for("note:gone")]
        assert home.peek("note:gone") is None and memory.l2_stats()["dir:0"]["drops"] >= 1
        assert memory.l0.retrieve("note:gone", touch=False) is None
        assert memory.l0.retrieve_version("note:gone") == version == 2
        assert home_then_l0(memory, "note:gone") is None  # what the old read said
        # The delete keeps the line's tags and graph (a critical fact's delete is write-through).
        assert memory.line_copy("note:gone") == (None, 2, ["confirmed_fact"], DEFAULT_GRAPH)


def test_a_reopened_memory_answers_with_the_tags_in_l0(tmp_path: Path) -> None:
    """The open rebuilds the node map from L0, tags included: nothing is resident
    at home yet, and line_copy answers exactly what L0 holds."""
    with MemorySystem.open(tmp_path, runtime="sim") as memory:
        memory.agent("pa", "PA").write("plan:a", {"step": 1}, tags=["todo", "confirmed_fact", "todo"], graph="plan")
        memory.agent("sa", "SA").write("note:b", {"n": 2})  # write-back; the closing flush writes it down
    with MemorySystem.open(tmp_path, runtime="sim") as memory:
        assert all(s["resident"] == 0 for s in memory.l2_stats().values())
        node = memory.graph.node("plan:a")
        assert node is not None and node.tags == ("confirmed_fact", "todo")
        assert memory.line_copy("plan:a") == ({"step": 1}, 1, ["confirmed_fact", "todo"], "plan")
        assert memory.line_copy("note:b") == ({"n": 2}, 1, [], DEFAULT_GRAPH)
        for iri in ("plan:a", "note:b"):
            assert memory.line_copy(iri) == home_then_l0(memory, iri)


def test_a_line_the_graph_does_not_know_comes_from_l0() -> None:
    """A node written straight to L0 after the open (no home took it) is
    answered from L0; an IRI nobody knows is None."""
    with MemorySystem.open(runtime="sim") as memory:
        memory.l0.store(L0Entry("note:direct", {"n": 3}, tags=("b", "a"), named_graph="knowledge", version=4))
        assert memory.graph.node("note:direct") is None
        assert memory.line_copy("note:direct") == ({"n": 3}, 4, ["a", "b"], "knowledge")
        assert memory.line_copy("note:nobody") is None


def test_a_write_back_line_is_answered_once_it_is_home() -> None:
    """line_copy is for a reader that recalled first: a dirty copy still in its
    writer's cache is not home yet, and the recall brings it with its tags."""
    with MemorySystem.open(runtime="sim") as memory:
        da = memory.agent("da", "DA")
        da.write("exec:a", {"n": 1}, tags=["draft"], graph="execution")
        assert memory.line_copy("exec:a") is None
        assert memory.submit_recall().get() == 1
        assert memory.line_copy("exec:a") == ({"n": 1}, 1, ["draft"], "execution")
        assert memory.line_copy("exec:a") == home_then_l0(memory, "exec:a")


def test_a_tombstone_is_a_line_copy_after_reopening(tmp_path: Path) -> None:
    """L0 lists no tombstones, so the graph rebuilt from it on open holds none, and line_copy answered
    None (a line nobody wrote) for a line deleted at v2: a crash's fallback then reported version 0 and
    the fault sweep saw home hold v2, "newer than any write" (fault seed 20261299). It answers the
    tombstone now, with its version."""
    with MemorySystem.open(tmp_path, runtime="sim") as memory:
        sa = memory.agent("sa", "SA")
        sa.write("note:n", {"text": "t"}, tags=["confirmed_fact"])
        assert sa.delete("note:n") == 2
        memory.flush()
    with MemorySystem.open(tmp_path, runtime="sim") as memory:
        assert memory.l0.retrieve_version("note:n") == 2
        assert memory.line_copy("note:n") == (None, 2, [], "shared")
        assert memory.line_copy("note:never") is None
