"""The coherence layer as an orchestrator uses it: agents' handles over cache and
directory actors, on every runtime, against a real LevelDB as L0."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gliding_actors import ConflictError, InvalidInput, MemorySystem
from gliding_actors.clock import VirtualClock
from gliding_actors.runtime import BACKENDS, Simulator, ThreadsRuntime


@pytest.fixture(params=BACKENDS)
def memory(request: pytest.FixtureRequest) -> Iterator[MemorySystem]:
    with MemorySystem.open(runtime=request.param, clock=VirtualClock(), config={"coherence": {"directory_shards": 2}}) as system:
        yield system


def settle(memory: MemorySystem) -> None:
    rt = memory.runtime
    if isinstance(rt, Simulator):
        rt.run_until_quiescent()
    else:
        assert isinstance(rt, ThreadsRuntime)
        rt.wait_quiescent(5.0)


def test_a_write_is_seen_by_every_other_agent(memory: MemorySystem) -> None:
    pa, da, ca = memory.agent("pa", "PA"), memory.agent("da", "DA"), memory.agent("ca", "CA")
    absent = pa.read("plan:p")
    assert (absent["value"], absent["version"], absent["state"], absent["messages"]) == (None, 0, "E", 2)
    assert pa.read("plan:p")["messages"] == 0
    first = pa.write("plan:p", {"goal": "JWT"}, graph="shared")
    assert (first["version"], first["state"], first["policy"]) == (1, "M", "write_back")
    assert da.read("plan:p")["value"] == {"goal": "JWT"}
    assert ca.read("plan:p")["version"] == 1
    second = da.write("plan:p", {"goal": "JWT", "alg": "RS256"}, graph="shared")
    assert second["version"] == 2
    for agent in (pa, ca):
        got = agent.read("plan:p")
        assert (got["version"], got["value"]) == (2, {"goal": "JWT", "alg": "RS256"})


def test_a_hit_sends_no_message(memory: MemorySystem) -> None:
    pa = memory.agent("pa", "PA")
    pa.write("plan:h", {"x": 1})
    settle(memory)
    rt = memory.runtime
    before = rt.delivered if isinstance(rt, Simulator) else None
    result = pa.read("plan:h")
    assert result["messages"] == 0 and result["state"] == "M"
    if isinstance(rt, Simulator):
        assert rt.delivered == before and rt.is_quiescent()


def test_values_come_back_as_written_and_private(memory: MemorySystem) -> None:
    pa, ca = memory.agent("pa", "PA"), memory.agent("ca", "CA")
    value = {"@type": "Task", "goal": "g", "nested": {"list": [1, 2.5, "three", None, True]}}
    pa.write("task:v", value)
    got = ca.read("task:v")["value"]
    assert got == value
    got["nested"]["list"].append("mine")  # a reader's edit must not reach anyone else
    assert pa.read("task:v")["value"] == value
    assert ca.read("task:v")["value"] == value
    value["goal"] = "changed after writing"
    assert ca.read("task:v")["value"]["goal"] == "g"


def test_cas_conflict_changes_nothing(memory: MemorySystem) -> None:
    pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
    pa.write("plan:c", {"n": 1})
    assert da.cas("plan:c", 1, {"n": 2})["version"] == 2
    with pytest.raises(ConflictError):
        pa.cas("plan:c", 1, {"n": 3})
    assert pa.read("plan:c")["value"] == {"n": 2}
    assert pa.cas("plan:c", 2, {"n": 4})["version"] == 3


def test_delete_is_a_versioned_tombstone(memory: MemorySystem) -> None:
    pa, sa = memory.agent("pa", "PA"), memory.agent("sa", "SA")
    pa.write("plan:d", {"n": 1})
    assert sa.delete("plan:d") == 2  # a shared line: only SA (and system) may delete it
    got = pa.read("plan:d")
    assert (got["value"], got["version"]) == (None, 2)
    assert pa.write("plan:d", {"n": 3})["version"] == 3


@pytest.mark.parametrize(
    ("call", "args"),
    [
        ("write", ("not an iri", {"a": 1})),
        ("write", ("plan:x", ["not", "an", "object"])),
        ("write", ("plan:x", {"bad": float("inf")})),
        ("write", ("plan:x", {"a": 1}, ["tag with", 3])),
        ("cas", ("plan:x", -1, {"a": 1})),
        ("read", ("has space:x",)),
        ("delete", ("",)),
    ],
)
def test_bad_input_is_refused_and_changes_nothing(memory: MemorySystem, call: str, args: tuple[Any, ...]) -> None:
    pa = memory.agent("pa", "PA")
    pa.write("plan:x", {"a": 0})
    settle(memory)
    before = memory.inspect("plan:x")
    with pytest.raises(InvalidInput):
        if call == "write" and len(args) == 3:
            pa.write(args[0], args[1], tags=args[2])
        else:
            getattr(pa, call)(*args)
    settle(memory)
    assert memory.inspect("plan:x") == before


def test_write_through_is_durable_when_the_write_returns(memory: MemorySystem) -> None:
    aa = memory.agent("aa", "AA")
    result = aa.write("decision:d", {"ship": True}, tags=["confirmed_fact"], graph="decision")
    assert result["policy"] == "write_through"
    entry = memory.l0.retrieve("decision:d", touch=False)
    assert entry is not None and (entry.content, entry.version) == ({"ship": True}, 1)
    assert entry.named_graph == "decision" and "confirmed_fact" in entry.tags


def test_flush_writes_down_what_only_a_cache_held(memory: MemorySystem) -> None:
    da = memory.agent("da", "DA")
    da.write("artifact:a", {"v": 1})
    da.write("artifact:a", {"v": 2})
    da.write("artifact:b", {"v": 1})
    assert memory.l0.retrieve("artifact:a", touch=False) is None
    assert memory.flush() == 2
    entry = memory.l0.retrieve("artifact:a", touch=False)
    assert entry is not None and (entry.content, entry.version) == ({"v": 2}, 2)
    assert memory.flush() == 0
    assert memory.inspect("artifact:a")["caches"]["da"] == "S"  # recalled, still readable


def test_a_full_cache_evicts_its_least_recently_used_line_home() -> None:
    with MemorySystem.open(runtime="sim", config={"coherence": {"cache_lines": 2}}) as memory:
        da, ca = memory.agent("da", "DA"), memory.agent("ca", "CA")
        for i in range(3):
            da.write(f"artifact:{i}", {"i": i})
        memory.runtime.run_until_quiescent()  # type: ignore[attr-defined]
        states = [memory.inspect(f"artifact:{i}")["caches"]["da"] for i in range(3)]
        assert states == ["I", "M", "M"]
        assert memory.inspect("artifact:0")["l2"] == {"value": {"i": 0}, "version": 1}
        assert ca.read("artifact:0")["value"] == {"i": 0}


def test_inspect_reports_every_part(memory: MemorySystem) -> None:
    pa, ca = memory.agent("pa", "PA"), memory.agent("ca", "CA")
    pa.write("plan:i", {"a": 1})
    ca.read("plan:i")
    settle(memory)
    found = memory.inspect("plan:i")
    assert found["directory"] == "S"
    assert found["sharers"] == ["ca", "pa"]
    assert found["owner"] is None
    assert found["caches"] == {"ca": "S", "pa": "S"}
    assert found["l2"] == {"value": {"a": 1}, "version": 1}
    assert found["l0"] is None


def test_durable_lines_and_versions_survive_a_restart(tmp_path: Any) -> None:
    where = tmp_path / "memory"
    with MemorySystem.open(where) as memory:
        aa, da = memory.agent("aa", "AA"), memory.agent("da", "DA")
        aa.write("decision:keep", {"v": 1}, tags=["confirmed_fact"])
        aa.write("decision:keep", {"v": 2}, tags=["confirmed_fact"])
        da.write("artifact:gone", {"v": 1}, tags=["confirmed_fact"], graph="execution")  # DA may delete there
        assert da.delete("artifact:gone") == 2
        memory.flush()
        da.write("artifact:kept", {"only": "in a cache"})  # write-back
        memory.close(flush=False)  # thrown away: what only a cache held is gone
    with MemorySystem.open(where) as memory:
        ca = memory.agent("ca", "CA")
        kept = ca.read("decision:keep")
        assert (kept["value"], kept["version"]) == ({"v": 2}, 2)
        gone = ca.read("artifact:gone")
        assert (gone["value"], gone["version"]) == (None, 2)
        # the second life numbers its writes from its epoch: above any version the first
        # may have acknowledged and lost (artifact:kept v1 was never written down)
        assert ca.write("artifact:gone", {"v": 3})["version"] == (1 << 32) + 1
        assert ca.read("artifact:kept")["version"] == 0
        assert ca.write("artifact:kept", {"second": "session"})["version"] == (1 << 32) + 1
    with MemorySystem.open(where) as memory:  # a clean close flushed the write-back line
        kept = memory.agent("pa", "PA").read("artifact:kept")
        assert (kept["value"], kept["version"]) == ({"second": "session"}, (1 << 32) + 1)


class _Listener:
    def __init__(self) -> None:
        self.events: list[Any] = []

    def receive(self, message: Any, ctx: Any) -> Any:
        if message == "events":
            return self.events
        self.events.append(message["message"])
        return None


def test_every_completed_write_is_announced_on_the_bus(memory: MemorySystem) -> None:
    from gliding_actors.bus import BUS_ACTOR
    from gliding_actors.coherence._hosting import LINE_CHANGED

    rt = memory.runtime
    rt.spawn("derived-views", _Listener)
    rt.lookup(BUS_ACTOR).ask(
        {"type": "subscribe", "topic": LINE_CHANGED, "subscriber": "derived-views", "mode": "push"}
    ).get(2.0)
    pa, da = memory.agent("pa", "SA"), memory.agent("da", "DA")  # SA: may delete in shared
    pa.write("plan:w", {"n": 1})
    da.write("plan:w", {"n": 2})
    pa.delete("plan:w")
    with pytest.raises(ConflictError):
        da.cas("plan:w", 1, {"n": 4})  # a refused write announces nothing
    pa.read("plan:w")
    settle(memory)
    events = rt.lookup("derived-views").ask("events").get(2.0)
    # Events from different writers travel on different channels, so the bus may
    # see them out of version order; listeners order by version.
    assert sorted(events, key=lambda e: e["version"]) == [
        {"iri": "plan:w", "version": 1, "agent": "pa", "graph": "shared"},
        {"iri": "plan:w", "version": 2, "agent": "da", "graph": "shared"},
        {"iri": "plan:w", "version": 3, "agent": "pa", "graph": "shared"},  # a tombstone stays in its graph
    ]


def test_a_write_outside_the_roles_graphs_is_refused_and_changes_nothing(memory: MemorySystem) -> None:
    from gliding_actors import PermissionDenied

    pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
    pa.write("task:p", {"goal": "g"}, graph="plan")
    settle(memory)
    before = memory.inspect("task:p")
    with pytest.raises(PermissionDenied, match="DA"):
        da.write("task:p", {"goal": "hijacked"}, graph="plan")
    with pytest.raises(PermissionDenied):
        da.cas("task:p", 1, {"goal": "hijacked"}, graph="plan")
    settle(memory)
    assert memory.inspect("task:p") == before


def test_a_tagless_delete_of_a_critical_line_fetched_from_home_is_write_through(memory: MemorySystem) -> None:
    """Home sends a line's tags and graph with its data, so an agent that never
    wrote the line still deletes a critical fact durably, in the line's graph."""
    aa, sa = memory.agent("aa", "AA"), memory.agent("sa", "SA")
    aa.write("fact:f", {"ok": True}, tags=["confirmed_fact"], graph="shared")
    aa.evict("fact:f")
    settle(memory)
    version = sa.delete("fact:f")
    assert version == 2
    entry = memory.l0.retrieve("fact:f", touch=False)
    assert entry is None and memory.l0.retrieve_version("fact:f") == 2  # the tombstone is in L0 now


def test_a_rewrite_that_names_no_graph_keeps_the_line_in_its_graph(memory: MemorySystem) -> None:
    pa = memory.agent("pa", "PA")
    pa.write("plan:g", {"v": 1}, graph="plan")
    pa.write("plan:g", {"v": 2})
    memory.flush(timeout=5.0)
    entry = memory.l0.retrieve("plan:g", touch=False)
    assert entry is not None and entry.named_graph == "plan" and entry.version == 2
