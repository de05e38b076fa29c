"""Crashes between protocol transactions: an agent cache, a directory, the process.

What each must keep (docs/COHERENCE.md, "Crashes"): write-through and flushed
writes always; a write-back write only while the cache holding it lives; and
a crash reports the lines it lost, after which the last durable version is
what every agent reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from dict_home import DictHome

from gliding_actors import ActorUnavailable, InvalidInput, MemorySystem, StorageError
from gliding_actors.clock import VirtualClock
from gliding_actors.coherence import _messages as m
from gliding_actors.coherence._directory import DirectoryController
from gliding_actors.coherence._states import ProtocolError
from gliding_actors.runtime import BACKENDS, Simulator


@pytest.fixture(params=[(b, sharded) for b in BACKENDS for sharded in (False, True)], ids=lambda p: f"{p[0]}-{'sharded' if p[1] else 'one'}-l0")
def memory(request: pytest.FixtureRequest) -> Iterator[MemorySystem]:
    """Both runtimes, and L0 as one store or one per shard (``l0.sharded``, as on Ray)."""
    backend, sharded = request.param
    system = MemorySystem.open(
        runtime=backend,
        clock=VirtualClock(),
        config={
            "coherence": {"directory_shards": 2, "critical_tags": ["confirmed_fact"]},
            "l0": {"sharded": sharded},
        },
    )
    yield system
    system.close(flush=False)  # a no-op after crash_process, which closed it


def line(memory: MemorySystem, iri: str) -> tuple[str, str | None, list[str], dict[str, str]]:
    found = memory.inspect(iri, timeout=5.0)
    return found["directory"], found["owner"], found["sharers"], found["caches"]


def test_an_agent_crash_loses_only_its_unflushed_write_back_lines(memory: MemorySystem) -> None:
    pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
    pa.write("plan:kept", {"v": 1}, tags=["confirmed_fact"])
    pa.write("plan:flushed", {"v": 1})
    memory.flush(timeout=5.0)
    pa.write("plan:lost", {"v": 1})
    pa.write("plan:lost", {"v": 2})
    pa.write("plan:flushed", {"v": 2})
    da.read("plan:kept")  # pa and da share it

    result = memory.crash("agent:pa", timeout=5.0)

    assert result["lost"] == ["plan:flushed", "plan:lost"]
    assert line(memory, "plan:lost")[0] == "I"
    assert line(memory, "plan:kept")[:3] == ("S", None, ["da"])
    # Home serves what survived (nothing, for a line that never reached it), fenced at a new
    # epoch's first version: above v2, which pa acknowledged and lost, so never numbered again.
    fence = 1 << 32
    lost = pa.read("plan:lost")
    assert lost["value"] is None and lost["version"] >= fence
    got = da.read("plan:flushed")
    assert got["value"] == {"v": 1} and got["version"] >= fence
    kept = pa.read("plan:kept")
    assert (kept["version"], kept["value"], kept["state"]) == (1, {"v": 1}, "S")
    # the protocol goes on from the fenced versions
    assert pa.write("plan:flushed", {"v": 3})["version"] == got["version"] + 1
    assert pa.write("plan:lost", {"v": 3})["version"] == lost["version"] + 1
    assert da.read("plan:flushed")["value"] == {"v": 3}


def test_a_crashed_sharer_is_no_longer_invalidated(memory: MemorySystem) -> None:
    pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
    pa.write("plan:s", {"v": 1})
    da.read("plan:s")
    pa.evict("plan:s")
    assert line(memory, "plan:s")[:3] == ("S", None, ["da"])
    assert memory.crash("agent:da", timeout=5.0)["lost"] == []
    assert line(memory, "plan:s")[:3] == ("I", None, [])
    written = pa.write("plan:s", {"v": 2})
    assert written["messages"] == 2  # GetM and Data: nobody left to invalidate


def test_a_directory_rebuilds_owners_and_sharers_from_the_caches(memory: MemorySystem) -> None:
    pa, da, ca = memory.agent("pa", "PA"), memory.agent("da", "DA"), memory.agent("ca", "CA")
    iris = [f"plan:{i}" for i in range(8)]
    for n, iri in enumerate(iris):
        pa.write(iri, {"n": n})
        if n % 2:
            da.read(iri)
            ca.read(iri)
    memory.quiesce(5.0)
    before = {iri: line(memory, iri) for iri in iris}
    assert {b[0] for b in before.values()} == {"S", "EM"}

    result = memory.crash("directory", timeout=5.0)

    assert result == {"lost": [], "notes": []}
    assert {iri: line(memory, iri) for iri in iris} == before
    # and it serves: an upgrade invalidates exactly the rebuilt sharers
    assert pa.write(iris[1], {"n": "new"})["messages"] == 2 + 2 * 2
    assert ca.read(iris[1])["value"] == {"n": "new"}
    assert da.read(iris[0])["value"] == {"n": 0}


def test_one_shard_can_crash_alone(memory: MemorySystem) -> None:
    pa = memory.agent("pa", "PA")
    for i in range(6):
        pa.write(f"plan:{i}", {"i": i})
    assert memory.crash("dir:1", timeout=5.0)["lost"] == []
    for i in range(6):
        assert memory.inspect(f"plan:{i}", timeout=5.0)["owner"] == "pa"
        assert pa.read(f"plan:{i}")["messages"] == 0


def test_a_rebuilt_shard_takes_a_census_of_the_caches_that_talked_to_it_and_only_them() -> None:
    """The census list is the home's, not the system's roster: a shard in another
    process cannot read the driver's agent list, and needs only caches that hold its lines."""
    with MemorySystem.open(runtime="sim", clock=VirtualClock(), config={"coherence": {"directory_shards": 2}}) as memory:
        rt = memory.runtime
        assert isinstance(rt, Simulator)
        da = memory.agent("da", "DA")
        memory.agent("idle", "DA")
        iri = next(f"plan:{i}" for i in range(50) if memory.directory_for(f"plan:{i}") == "dir:0")
        da.write(iri, {"i": 1})
        mark = len(rt.log)
        memory.crash("dir:0", timeout=5.0)
        asked = sorted(e.dst for e in rt.log[mark:] if e.kind == "deliver" and e.message.get("t") == "Census")
        assert asked == ["cache:da"]
        assert memory.inspect(iri, timeout=5.0)["owner"] == "da"
        assert da.read(iri)["value"] == {"i": 1}


def test_a_process_crash_keeps_what_was_durable_and_lists_the_rest(memory: MemorySystem) -> None:
    pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
    pa.write("plan:through", {"v": 1}, tags=["confirmed_fact"])
    pa.write("plan:flushed", {"v": 1})
    memory.flush(timeout=5.0)
    pa.write("plan:flushed", {"v": 2})
    da.write("exec:back", {"v": 1})

    reopened = memory.crash_process(timeout=5.0)
    try:
        assert memory.closed
        with pytest.raises(ActorUnavailable):
            pa.read("plan:other")
        assert reopened.lost_in_crash == ["exec:back", "plan:flushed"]
        fresh = reopened.agent("da", "DA")
        assert fresh.read("plan:through")["value"] == {"v": 1}
        assert fresh.read("plan:flushed")["version"] == 1
        assert fresh.read("exec:back")["version"] == 0
        assert reopened.path == memory.path
    finally:
        reopened.close(flush=False)


@pytest.mark.parametrize("target", ["agent:nobody", "l2", "l0", "process", "dir:9", "", 7])
def test_a_bad_crash_target_is_refused_and_changes_nothing(memory: MemorySystem, target: object) -> None:
    pa = memory.agent("pa", "PA")
    pa.write("plan:x", {"v": 1})
    before = memory.inspect("plan:x", timeout=5.0)
    with pytest.raises(InvalidInput):
        memory.crash(target)  # type: ignore[arg-type]
    assert memory.inspect("plan:x", timeout=5.0) == before
    assert pa.read("plan:x")["messages"] == 0


def test_requests_wait_while_a_directory_recovers() -> None:
    """A read issued right after a directory crashed may reach it before the
    caches have answered its census; it must wait, then be served right.

    The crash is delivered first: a request already inside the protocol when a
    directory dies is the fault injector's case (tools/reliability), not this recovery."""
    for seed in range(30):
        with MemorySystem.open(runtime="sim", seed=seed) as memory:
            pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
            pa.write("plan:r", {"v": 1})
            memory.quiesce()
            rt = memory.runtime
            assert isinstance(rt, Simulator)
            crashed = rt.lookup("dir:0").ask({"t": "crash"})
            assert rt.step(("@driver", "dir:0"))
            read = da.submit_read("plan:r")
            got = read.get(5.0)
            assert (got["version"], got["value"]) == (1, {"v": 1})
            assert crashed.done()
            memory.quiesce()
            assert memory.inspect("plan:r")["sharers"] == ["da", "pa"]


# -- the controller's recovery steps, alone ---------------------------------------


def test_reclaim_answers_a_waiting_reader_from_home() -> None:
    home = DictHome()
    home.store("x:1", {"v": 1}, 1, True, None)
    d = DirectoryController("dir", home)
    d.handle("c1", {"t": "GetM", "iri": "x:1", "src": "c1"})
    out = d.handle("c2", {"t": "GetS", "iri": "x:1", "src": "c2"})
    assert [(dst, msg["t"]) for dst, msg in out] == [("c1", "Fwd-GetS")]
    assert d.inspect("x:1")["directory"] == "S_D"
    out = d.reclaim("c1")  # c1 died before it could forward the data
    assert [(dst, msg["t"], msg["version"]) for dst, msg in out] == [("c2", "Data", 1)]
    assert d.inspect("x:1") == {"directory": "S", "owner": None, "sharers": ["c2"]}


def test_a_putm_racing_a_recall_keeps_its_version_when_the_owner_dies_before_answering() -> None:
    """The owner wrote v2 (acknowledged, write-back) and was evicting it (PutM in flight) when a flush's
    recall sent it a Fwd-GetS; it died before answering. The directory, in S_D, dropped the PutM as stale
    and the Reclaim served v1 from home: the acknowledged v2 was lost although its data had reached the
    directory (fault seed 20261148). The PutM now goes home, and the Reclaim serves v2."""
    home = DictHome()
    home.store("x:1", {"v": 1}, 1, True, None)
    d = DirectoryController("dir", home)
    d.handle("c1", {"t": "GetM", "iri": "x:1", "src": "c1"})  # c1 owns it, writes v2 in its cache
    out = d.handle("flusher", m.recall("flusher", 1, ["x:1"]))
    assert [(dst, msg["t"]) for dst, msg in out] == [("c1", "Fwd-GetS")]
    assert d.handle("c1", m.put_m("x:1", "c1", {"v": 2}, 2, {"tags": [], "graph": "shared"})) == [
        ("c1", m.put_ack("x:1", "dir"))
    ]
    out = d.reclaim("c1")  # c1 died before it answered the Fwd-GetS
    assert home.load("x:1") == ({"v": 2}, 2)
    assert d.fallbacks == [("x:1", 2, 2)]  # served from home: the newest version, nothing lost
    assert [(dst, msg["t"]) for dst, msg in out] == [("flusher", "Recall-Ack")]


def test_a_putm_racing_a_recall_is_taken_once_when_the_owner_answers_too() -> None:
    home = DictHome()
    home.store("x:1", {"v": 1}, 1, True, None)
    d = DirectoryController("dir", home)
    d.handle("c1", {"t": "GetM", "iri": "x:1", "src": "c1"})
    d.handle("flusher", m.recall("flusher", 1, ["x:1"]))
    meta = {"tags": [], "graph": "shared"}
    d.handle("c1", m.put_m("x:1", "c1", {"v": 2}, 2, meta))
    stores = home.stores
    out = d.handle("c1", m.data("x:1", "c1", {"v": 2}, 2, meta, acks=0, excl=False, n=3))  # the Fwd-GetS answered
    assert home.stores == stores and home.load("x:1") == ({"v": 2}, 2)
    assert [(dst, msg["t"]) for dst, msg in out] == [("flusher", "Recall-Ack")]
    assert d.inspect("x:1") == {"directory": "I", "owner": None, "sharers": []}


def test_rebuild_refuses_an_impossible_census_and_notes_transients() -> None:
    d = DirectoryController("dir", DictHome())
    with pytest.raises(ProtocolError):
        d.rebuild({"c1": {"x:1": "M"}, "c2": {"x:1": "S"}})
    notes = d.rebuild({"c1": {"x:1": "IS_D", "x:2": "E"}, "c2": {"x:3": "S"}})
    assert notes == ["c1 holds x:1 in transient state IS_D"]
    assert d.inspect("x:2") == {"directory": "EM", "owner": "c1", "sharers": []}
    assert d.inspect("x:3") == {"directory": "S", "owner": None, "sharers": ["c2"]}


def test_a_lost_move_puts_the_line_back_in_its_durable_graph(memory: MemorySystem) -> None:
    """The permission registry recorded the lost write's graph; after the crash
    the line is where its surviving version lives, and reads are confined there
    (a line PA may not read reads as absent)."""
    da, pa = memory.agent("da", "DA"), memory.agent("pa", "PA")
    da.write("artifact:m", {"v": 1}, graph="execution")
    memory.flush(timeout=5.0)
    assert pa.read("artifact:m")["value"] is None
    da.write("artifact:m", {"v": 2}, graph="shared")  # a move, still write-back
    assert memory.line_graphs.graph_of("artifact:m") == "shared"

    assert memory.crash("agent:da", timeout=5.0)["lost"] == ["artifact:m"]

    assert memory.line_graphs.graph_of("artifact:m") == "execution"
    assert pa.read("artifact:m")["value"] is None
    assert da.read("artifact:m")["value"] == {"v": 1}


def test_the_census_is_plain_controller_code_asks_holds_back_then_rebuilds_and_releases() -> None:
    """Recovery without a runtime: the controller asks, holds what arrives, rebuilds, hands it back in order."""
    d = DirectoryController("dir", DictHome())
    assert d.begin_census(["c2", "c1"]) == [("c1", {"t": m.CENSUS}), ("c2", {"t": m.CENSUS})]
    assert d.recovering
    d.hold_back("c1", m.get_s("x:2", "c1"))  # c1's GetS the dead directory never saw
    d.hold_back(None, {"t": "inspect", "iri": "x:1"}, "reply-1")  # an outside request and its reply handle
    assert d.census_answer("c9", {"t": m.CENSUS_ACK, "lines": {"x:1": "S"}}) is None  # not asked: ignored
    assert d.census_answer("c1", {"t": m.CENSUS_ACK, "lines": {"x:1": "M", "x:2": "IS_D"}}) is None
    assert d.recovering  # c2 has not answered
    held = d.census_answer("c2", {"t": m.CENSUS_ACK, "lines": {"x:3": "S"}})
    assert not d.recovering
    assert held == [("c1", m.get_s("x:2", "c1"), None), (None, {"t": "inspect", "iri": "x:1"}, "reply-1")]
    assert d.inspect("x:1") == {"directory": "EM", "owner": "c1", "sharers": []}
    assert d.inspect("x:2")["directory"] == "I"  # its GetS is still to be served: not placed yet
    assert d.inspect("x:3") == {"directory": "S", "owner": None, "sharers": ["c2"]}
    assert d.recovery_notes == []
    with pytest.raises(ProtocolError):
        d.hold_back("c1", m.get_s("x:4", "c1"))  # nothing is held back once serving


def test_a_census_of_no_cache_rebuilds_at_once() -> None:
    d = DirectoryController("dir", DictHome())
    assert d.begin_census([]) == []
    assert not d.recovering
    assert d.census_answer("c1", {"t": m.CENSUS_ACK, "lines": {"x:1": "M"}}) is None  # a late answer changes nothing
    assert d.inspect("x:1")["directory"] == "I"


class _RefusingHome(DictHome):
    """A home whose durable store fails (a full disk under L0)."""

    def store(self, iri: str, value: Any, version: int, durable: bool, meta: Any) -> None:
        super().store(iri, value, version, False, meta)
        if durable:
            raise StorageError("disk full (injected)")


def test_a_home_refusing_a_write_through_answers_the_writer_and_keeps_serving() -> None:
    """The directory's WT handler raised the StorageError: the writer waited for a WT-Ack forever, and
    every later request for the line waited behind it. The writer now gets a WT-Nack, its write fails
    with StorageError, and the line stays its dirty M copy, served as usual."""
    home = _RefusingHome()
    d = DirectoryController("dir", home)
    d.handle("c1", {"t": "GetM", "iri": "x:1", "src": "c1"})
    out = d.handle("c1", m.wt("x:1", "c1", {"v": 1}, 1, {"tags": ["confirmed_fact"], "graph": "shared"}))
    assert [(dst, msg["t"], msg["version"]) for dst, msg in out] == [("c1", "WT-Nack", 1)]
    assert "disk full" in out[0][1]["error"] and home.load("x:1") == ({"v": 1}, 1)
    out = d.handle("c2", {"t": "GetS", "iri": "x:1", "src": "c2"})
    assert [(dst, msg["t"]) for dst, msg in out] == [("c1", "Fwd-GetS")]


def test_a_write_through_l0_refuses_fails_typed_and_the_memory_serves_on(monkeypatch: pytest.MonkeyPatch) -> None:
    from gliding_actors.l0 import L0Store

    store_many = L0Store.store_many

    def refusing(self: L0Store, entries: Any, **options: Any) -> Any:
        entries = list(entries)
        if any(entry.iri == "plan:boom" for entry in entries):
            raise StorageError("disk full (injected)")
        return store_many(self, entries, **options)

    with MemorySystem.open(runtime="sim") as memory:
        pa, ca = memory.agent("pa", "PA"), memory.agent("ca", "CA")
        monkeypatch.setattr(L0Store, "store_many", refusing)
        with pytest.raises(StorageError, match="held but not durable: disk full"):
            pa.write("plan:boom", {"x": 1}, tags=["confirmed_fact"], timeout=5.0)
        assert pa.write("plan:ok", {"x": 2}, tags=["confirmed_fact"], timeout=5.0)["version"] == 1
        assert ca.read("plan:boom", timeout=5.0)["value"] == {"x": 1}  # held, and served
        assert memory.supervision()["actors"]["dir:0"]["crashes"] == 0
        monkeypatch.setattr(L0Store, "store_many", store_many)
        memory.flush(timeout=5.0)
        assert memory.l0.retrieve_version("plan:boom") == 1  # durable once L0 takes it
