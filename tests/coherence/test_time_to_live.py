"""Lines written with a time to live, and the importance a write carries, through the public API."""

from __future__ import annotations

from pathlib import Path

import pytest

from gliding_actors import MemorySystem
from gliding_actors.clock import VirtualClock
from gliding_actors.coherence._hosting import cache_name
from gliding_actors.errors import ConflictError, InvalidInput

EVERYTHING = "SELECT ?s WHERE { ?s ?p ?o }"


def subjects(agent: object) -> set[str]:
    return {row["s"] for row in agent.query(EVERYTHING)["rows"]}  # type: ignore[attr-defined]


@pytest.mark.parametrize("runtime", ["sim", "threads"])
def test_an_expired_line_is_absent_to_every_reader_and_deleted_in_l0(tmp_path: Path, runtime: str) -> None:
    clock = VirtualClock()
    with MemorySystem.open(tmp_path, runtime=runtime, clock=clock) as memory:
        pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
        pa.write("note:draft", {"text": "scratch idea about tokens"}, ttl_s=10)
        pa.write("note:kept", {"text": "the plan"})
        assert da.read("note:draft")["value"] == {"text": "scratch idea about tokens"}  # da now holds a copy
        clock.advance(9.5)
        assert pa.read("note:draft")["value"] is not None  # not yet
        clock.advance(1)
        assert da.read("note:draft")["value"] is None  # its copy went with the system's delete
        assert pa.read("note:draft")["value"] is None
        assert subjects(da) == {"note:kept"}
        assert "note:draft" not in da.search("scratch idea", k=5)["iris"]
        memory.flush()
        assert memory.l0.retrieve("note:draft") is None  # the tombstone reached L0
        assert memory.l0.retrieve("note:kept") is not None
        assert len(memory.expiry.table) == 0


def test_a_write_without_ttl_makes_the_line_permanent_and_a_new_ttl_counts_from_its_write(tmp_path: Path) -> None:
    clock = VirtualClock()
    with MemorySystem.open(tmp_path, runtime="sim", clock=clock) as memory:
        pa = memory.agent("pa", "PA")
        pa.write("note:a", {"text": "v1"}, ttl_s=5)
        pa.write("note:a", {"text": "v2"})  # permanent from now on
        pa.write("note:b", {"text": "v1"}, ttl_s=5)
        clock.advance(4)
        pa.write("note:b", {"text": "v2"}, ttl_s=5)  # expires at 9, not 5
        clock.advance(2)
        assert memory.sweep_expired() == 0
        assert pa.read("note:a")["value"] == {"text": "v2"}
        assert pa.read("note:b")["value"] == {"text": "v2"}
        clock.advance(4)
        assert memory.sweep_expired() == 1
        assert pa.read("note:b")["value"] is None
        assert pa.read("note:a")["value"] == {"text": "v2"}


def test_the_expiry_survives_a_reopen(tmp_path: Path) -> None:
    clock = VirtualClock()
    with MemorySystem.open(tmp_path, runtime="sim", clock=clock) as memory:
        memory.agent("pa", "PA").write("note:a", {"text": "short-lived"}, ttl_s=5)
    # the close flushed the line and its expiry to L0
    with MemorySystem.open(tmp_path, runtime="sim", clock=clock) as memory:
        pa = memory.agent("pa", "PA")
        assert pa.read("note:a")["value"] == {"text": "short-lived"}
        assert memory.l0.retrieve("note:a").metadata == {"expires_at": 5.0}  # type: ignore[union-attr]
        clock.advance(6)
        assert pa.read("note:a")["value"] is None


def test_importance_is_kept_in_l0_and_by_later_writes_that_give_none(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path, runtime="sim") as memory:
        pa = memory.agent("pa", "PA")
        pa.write("note:a", {"text": "v1"}, importance=0.9)
        pa.write("note:a", {"text": "v2"})
        pa.write("note:b", {"text": "v1"})
        memory.flush()
        assert memory.l0.retrieve("note:a").importance == pytest.approx(0.9)  # type: ignore[union-attr]
        assert memory.l0.retrieve("note:b").importance == pytest.approx(0.5)  # type: ignore[union-attr]
        assert [e.iri for e in memory.l0.query_by_importance(0.8, 1.0)] == ["note:a"]


@pytest.mark.parametrize(
    "bad", [{"importance": 1.5}, {"importance": -0.1}, {"importance": float("nan")}, {"importance": True},
            {"ttl_s": 0}, {"ttl_s": -1}, {"ttl_s": float("inf")}, {"ttl_s": "10"}],
)
def test_bad_importance_or_ttl_is_refused_and_changes_nothing(tmp_path: Path, bad: dict[str, object]) -> None:
    with MemorySystem.open(tmp_path, runtime="sim") as memory:
        pa = memory.agent("pa", "PA")
        pa.write("note:a", {"text": "v1"})
        with pytest.raises(InvalidInput):
            pa.write("note:a", {"text": "v2"}, **bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidInput):
            pa.cas("note:a", 1, {"text": "v2"}, **bad)  # type: ignore[arg-type]
        assert pa.read("note:a") == {"value": {"text": "v1"}, "version": 1, "state": "M", "messages": 0}
        assert len(memory.expiry.table) == 0


def test_a_conditional_delete_only_deletes_the_version_it_names(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path, runtime="sim") as memory:
        pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
        pa.write("task:a", {"goal": "v1"}, graph="plan")
        pa.write("task:a", {"goal": "v2"}, graph="plan")
        with pytest.raises(ConflictError):
            pa.delete("task:a", version=1)
        assert da.read("task:a")["value"] == {"goal": "v2"}
        assert pa.delete("task:a", version=2) == 3
        assert da.read("task:a")["value"] is None
        with pytest.raises(InvalidInput):
            pa.delete("task:a", version=-1)


@pytest.mark.parametrize(
    "bad",
    [{"t": "store", "importance": 2}, {"t": "store", "importance": "high"}, {"t": "cas", "version": 1, "expires": "soon"},
     {"t": "store", "expires": float("nan")}, {"t": "delete", "version": -1}, {"t": "delete", "version": True}],
)
def test_a_cache_mailbox_refuses_a_bad_importance_expiry_or_version_and_changes_nothing(
    tmp_path: Path, bad: dict[str, object]
) -> None:
    """The cache judges what reaches its mailbox itself, whoever sent it."""
    with MemorySystem.open(tmp_path, runtime="threads") as memory:
        pa = memory.agent("pa", "PA")
        pa.write("note:a", {"text": "v1"})
        request = {"iri": "note:a", "value": {"text": "v2"}, **bad}
        with pytest.raises(InvalidInput):
            memory.runtime.lookup(cache_name("pa")).ask(request).get(10)
        assert pa.read("note:a") == {"value": {"text": "v1"}, "version": 1, "state": "M", "messages": 0}
        assert len(memory.expiry.table) == 0


@pytest.mark.parametrize("graph_writer", [False, True])
def test_search_filters_on_the_importance_a_write_gave_and_after_a_reopen(tmp_path: Path, graph_writer: bool) -> None:
    config = {"l2": {"graph_writer": graph_writer}}
    with MemorySystem.open(tmp_path, config, runtime="sim") as memory:
        pa = memory.agent("pa", "PA")
        pa.write("note:key", {"text": "rotate the signing keys"}, importance=0.9)
        pa.write("note:minor", {"text": "rotate the signing keys later"}, importance=0.1)
        pa.write("note:own", {"text": "rotate the signing keys now", "importance": 0.8})  # the value's own key
        found = pa.search("rotate signing keys", k=5, filters={"min_importance": 0.7})["iris"]
        assert sorted(found) == ["note:key", "note:own"]
    with MemorySystem.open(tmp_path, config, runtime="sim") as memory:
        pa = memory.agent("pa", "PA")
        assert memory.graph.node("note:key").importance == pytest.approx(0.9)  # type: ignore[union-attr]
        found = pa.search("rotate signing keys", k=5, filters={"max_importance": 0.2})["iris"]
        assert found == ["note:minor"]


def test_the_sweepers_id_is_the_memorys_own(tmp_path: Path) -> None:
    clock = VirtualClock()
    with MemorySystem.open(tmp_path, runtime="sim", clock=clock) as memory:
        with pytest.raises(InvalidInput):
            memory.agent("ttl-sweeper", "PA")  # a hostile agent may not take it and stop every sweep
        pa = memory.agent("pa", "PA")
        pa.write("note:a", {"text": "brief"}, ttl_s=1)
        clock.advance(2)
        assert memory.sweep_expired() == 1


def test_a_sweep_that_could_not_finish_leaves_the_lines_due() -> None:
    """A delete that times out (or a memory closing) does not lose the expiry: the next sweep tries again."""
    from gliding_actors._expiry import ExpirySweeper, ExpiryTable
    from gliding_actors.errors import Timeout

    class Unreachable:
        def submit_delete(self, iri: str, *, version: int | None = None) -> object:
            raise Timeout("no answer within 0 s")

    clock = VirtualClock()
    table = ExpiryTable(clock)
    table.note("note:a", 1, 5.0)
    table.note("note:b", 3, 6.0)
    sweeper = ExpirySweeper(table, Unreachable, lambda iri: {"note:a": 1, "note:b": 3}[iri], 1.0)
    clock.advance(10)
    with pytest.raises(Timeout):
        sweeper.sweep()
    assert sorted(table.heap) == [(5.0, "note:a", 1), (6.0, "note:b", 3)] and sweeper.swept == 0
