"""Permissions on every agent path: read (hit and miss), write, cas, delete.

Each refusal is checked twice: it raises ``PermissionDenied``, and it changed
nothing anywhere — L0, the Oxigraph graph, every part of the touched lines
(directory, every cache, L2, L0), every agent's published cache view, the
line → graph registry and, on the simulator, not one message was delivered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gliding_actors import Config, ConfigError, InvalidInput, MemorySystem, PermissionDenied
from gliding_actors.clock import VirtualClock
from gliding_actors.l2._registry import LineGraphs
from gliding_actors.runtime import BACKENDS, Simulator


@pytest.fixture(params=BACKENDS)
def memory(request: pytest.FixtureRequest) -> Iterator[MemorySystem]:
    with MemorySystem.open(runtime=request.param, clock=VirtualClock()) as system:
        yield system


def picture(memory: MemorySystem, iris: list[str]) -> dict[str, Any]:
    """Everything a refused op could have changed, as comparable plain data."""
    memory.quiesce(5.0)
    return {
        "l0": memory.l0.query(),
        "l0_versions": {iri: memory.l0.retrieve_version(iri) for iri in iris},
        "graph": memory.graph.dump(),
        "lines": {iri: memory.inspect(iri, timeout=5.0) for iri in iris},
        "views": memory.board.holders(),
        "registry": memory.line_graphs.snapshot(),
    }


def refused(memory: MemorySystem, iris: list[str], call: Callable[[], Any], words: str | None = None) -> None:
    """``call`` raises PermissionDenied (mentioning ``words``) and changes nothing."""
    before = picture(memory, iris)
    rt = memory.runtime
    log = rt.log_hash() if isinstance(rt, Simulator) else None
    with pytest.raises(PermissionDenied, match=words):
        call()
    memory.quiesce(5.0)
    if isinstance(rt, Simulator):
        assert rt.log_hash() == log, "a refused op sent a message"
    assert picture(memory, iris) == before


def stores(memory: MemorySystem, iris: list[str]) -> dict[str, Any]:
    """What a read may never change: L0 and the line registry.

    (Like any read, it may bring a dirty copy home, into the graph: the same version, not a new one.)
    """
    memory.quiesce(5.0)
    return {
        "l0": memory.l0.query(),
        "l0_versions": {iri: memory.l0.retrieve_version(iri) for iri in iris},
        "registry": memory.line_graphs.snapshot(),
    }


def unseen(memory: MemorySystem, iris: list[str], call: Callable[[], Any]) -> None:
    """``call`` reads as a line nobody wrote reads (no value, version 0) and changes no store.

    Like any read it may bring the line into the reader's cache; its value never leaves it.
    """
    before = stores(memory, iris)
    got = call()
    if not isinstance(got, dict) and got is not None:
        got = got.get(5.0)  # a future
    if isinstance(got, dict):
        assert (got["value"], got["version"]) == (None, 0), got
        assert got["state"] in ("S", "E")
    else:
        assert got is None
    assert stores(memory, iris) == before


# -- reads --------------------------------------------------------------------------


def test_a_read_miss_in_a_graph_the_role_may_not_read_reads_as_absent(memory: MemorySystem) -> None:
    ca, pa = memory.agent("ca", "CA"), memory.agent("pa", "PA")
    ca.write("review:r", {"verdict": "approve"}, graph="review")
    unseen(memory, ["review:r"], lambda: pa.read("review:r"))
    unseen(memory, ["review:r"], lambda: pa.get("review:r"))
    unseen(memory, ["review:r"], lambda: pa.submit_read("review:r"))
    assert not memory.may_read("PA", "review:r")
    # CA and AA read reviews; the refusal was about PA, not the line.
    assert memory.agent("aa", "AA").read("review:r")["value"] == {"verdict": "approve"}


def test_a_read_hit_is_checked_before_it_returns(tmp_path: Path) -> None:
    # A role that may create reviews but not read them still holds what it wrote:
    # the copy sits in its cache, and the hit path must hide it anyway.
    config = {"permissions": {"DA": {"review": "c"}}}
    with MemorySystem.open(tmp_path, config, runtime="sim") as memory:
        da = memory.agent("da", "DA")
        da.write("review:self", {"verdict": "mine"}, graph="review")
        assert memory.board.lookup("da", "review:self") is not None  # a hit, were it allowed
        unseen(memory, ["review:self"], lambda: da.read("review:self"))
        unseen(memory, ["review:self"], lambda: da.submit_read("review:self"))
        assert memory.inspect("review:self")["caches"]["da"] == "M"
        # Its other hits still work, without a message.
        da.write("artifact:a", {"n": 1}, graph="execution")
        assert da.read("artifact:a")["messages"] == 0


def test_a_line_moved_out_of_sight_reads_as_absent_on_the_next_read(memory: MemorySystem) -> None:
    pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
    pa.write("note:n", {"text": "for all"})  # shared
    assert pa.read("note:n")["messages"] == 0
    da.write("note:n", {"text": "now an artifact"}, graph="execution")  # DA moves it
    assert memory.line_graphs.graph_of("note:n") == "execution"
    unseen(memory, ["note:n"], lambda: pa.read("note:n"))


def test_an_iri_nobody_wrote_is_a_shared_line(memory: MemorySystem) -> None:
    sa = memory.agent("sa", "SA")
    got = sa.read("never:written")
    assert (got["value"], got["version"]) == (None, 0)
    assert memory.line_graphs.known("never:written") is None
    assert memory.may_read("SA", "never:written")


# -- deletes ------------------------------------------------------------------------


def test_a_delete_needs_the_delete_right_on_the_lines_graph(memory: MemorySystem) -> None:
    pa, da, sa = memory.agent("pa", "PA"), memory.agent("da", "DA"), memory.agent("sa", "SA")
    pa.write("task:t", {"goal": "g"}, graph="plan")
    da.write("note:n", {"text": "t"})  # shared: everyone creates, only SA deletes
    iris = ["task:t", "note:n", "never:written"]
    refused(memory, iris, lambda: da.delete("task:t"), "DA may not delete in graph 'plan'")
    refused(memory, iris, lambda: da.delete("note:n"), "DA may not delete in graph 'shared'")
    refused(memory, iris, lambda: da.submit_delete("note:n"))
    refused(memory, iris, lambda: pa.delete("never:written"), "in graph 'shared'")
    assert sa.delete("note:n") == 2
    assert pa.delete("task:t") == 2
    assert memory.line_graphs.snapshot()["task:t"] == ("plan", 2)


def test_a_tombstone_keeps_its_graph_so_rereads_stay_confined(memory: MemorySystem) -> None:
    ca, pa = memory.agent("ca", "CA"), memory.agent("pa", "PA")
    ca.write("review:r", {"verdict": "reject"}, graph="review")
    assert ca.delete("review:r") == 2
    assert memory.line_graphs.snapshot()["review:r"] == ("review", 2)
    unseen(memory, ["review:r"], lambda: pa.read("review:r"))
    # Writing it again is an update of a review, not a fresh create in shared.
    refused(memory, ["review:r"], lambda: pa.write("review:r", {"verdict": "mine now"}))
    assert ca.write("review:r", {"verdict": "approve"}, graph="review")["version"] == 3


# -- writes and cas -----------------------------------------------------------------


def test_a_new_line_needs_create_on_its_target_graph(memory: MemorySystem) -> None:
    da, ca = memory.agent("da", "DA"), memory.agent("ca", "CA")
    iris = ["review:new", "decision:new"]
    refused(memory, iris, lambda: da.write("review:new", {"v": 1}, graph="review"), "DA may not create")
    refused(memory, iris, lambda: da.cas("review:new", 0, {"v": 1}, graph="review"), "DA may not create")
    refused(memory, iris, lambda: ca.submit_write("decision:new", {"v": 1}, graph="decision"))
    assert ca.write("review:new", {"v": 1}, graph="review")["version"] == 1
    assert memory.line_graphs.snapshot()["review:new"] == ("review", 1)


def test_an_existing_line_needs_update_on_its_current_graph(memory: MemorySystem) -> None:
    pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
    pa.write("task:t", {"goal": "g"}, graph="plan")
    iris = ["task:t"]
    refused(memory, iris, lambda: da.write("task:t", {"goal": "x"}, graph="plan"), "DA may not update in graph 'plan'")
    refused(memory, iris, lambda: da.cas("task:t", 1, {"goal": "x"}, graph="plan"), "may not update")
    # Naming a graph DA may create in does not launder the line out of plan.
    refused(memory, iris, lambda: da.write("task:t", {"goal": "x"}, graph="execution"), "update in graph 'plan'")
    refused(memory, iris, lambda: da.write("task:t", {"goal": "x"}), "update in graph 'plan'")
    refused(memory, iris, lambda: da.submit_cas("task:t", 1, {"goal": "x"}))
    assert pa.cas("task:t", 1, {"goal": "g2"}, graph="plan")["version"] == 2
    assert memory.line_graphs.snapshot()["task:t"] == ("plan", 2)


def test_moving_a_line_needs_create_on_the_new_graph_too(memory: MemorySystem) -> None:
    sa, da = memory.agent("sa", "SA"), memory.agent("da", "DA")
    sa.write("note:n", {"text": "t"})  # shared: DA may update it ...
    iris = ["note:n"]
    # ... but not put it in review, where DA may not create.
    refused(memory, iris, lambda: da.write("note:n", {"text": "t"}, graph="review"), "DA may not create in graph 'review'")
    refused(memory, iris, lambda: da.cas("note:n", 1, {"text": "t"}, graph="review"), "create in graph 'review'")
    # Into execution, where it may create, the move goes through.
    assert da.cas("note:n", 1, {"text": "t"}, graph="execution")["version"] == 2
    assert memory.line_graphs.snapshot()["note:n"] == ("execution", 2)
    memory.flush()  # write-back: the graph learns the move when the line goes home
    assert memory.graph.graph_of("note:n") == "execution"
    stored = memory.l0.retrieve("note:n", touch=False)
    assert stored is not None and stored.named_graph == "execution"
    # Now SA, who may not read (or update) execution, cannot touch it.
    unseen(memory, iris, lambda: sa.read("note:n"))
    refused(memory, iris, lambda: sa.write("note:n", {"text": "back"}), "SA may not update in graph 'execution'")
    refused(memory, iris, lambda: sa.delete("note:n"))


def test_a_failed_cas_records_nothing(memory: MemorySystem) -> None:
    from gliding_actors import ConflictError

    sa, da = memory.agent("sa", "SA"), memory.agent("da", "DA")
    sa.write("note:n", {"text": "t"})
    with pytest.raises(ConflictError):
        da.cas("note:n", 7, {"text": "t"}, graph="execution")
    assert memory.line_graphs.snapshot()["note:n"] == ("shared", 1)
    assert memory.agent("pa", "PA").read("note:n")["version"] == 1


def test_the_system_role_may_do_anything(memory: MemorySystem) -> None:
    root = memory.agent("root", "system")
    for graph in ("plan", "execution", "review", "decision", "knowledge", "shared", "elsewhere"):
        iri = f"x:{graph}"
        assert root.write(iri, {"g": graph}, graph=graph)["version"] == 1
        assert root.read(iri)["value"] == {"g": graph}
        assert root.delete(iri) == 2
        assert memory.may_read("system", iri)


def test_bad_input_is_invalid_input_not_a_refusal(memory: MemorySystem) -> None:
    pa = memory.agent("pa", "PA")
    with pytest.raises(InvalidInput):
        pa.read("not an iri")
    with pytest.raises(InvalidInput):
        pa.delete("")
    with pytest.raises(InvalidInput):
        memory.may_read("XX", "task:t")


# -- the registry -------------------------------------------------------------------


def test_the_registry_is_rebuilt_from_l0_on_open(tmp_path: Path) -> None:
    where = tmp_path / "memory"
    with MemorySystem.open(where, runtime="sim") as memory:
        ca, pa = memory.agent("ca", "CA"), memory.agent("pa", "PA")
        ca.write("review:r", {"verdict": "approve"}, graph="review")
        pa.write("task:t", {"goal": "g"}, graph="plan")
        pa.write("note:n", {"text": "t"})
    with MemorySystem.open(where, runtime="sim") as memory:
        assert memory.line_graphs.snapshot() == {
            "note:n": ("shared", 1),
            "review:r": ("review", 1),
            "task:t": ("plan", 1),
        }
        pa = memory.agent("pa", "PA")
        unseen(memory, ["review:r"], lambda: pa.read("review:r"))
        assert pa.read("task:t")["value"] == {"goal": "g"}


def test_line_graphs_keeps_the_newest_version() -> None:
    lines = LineGraphs("shared")
    assert (lines.graph_of("a:1"), lines.known("a:1"), lines.version_of("a:1")) == ("shared", None, 0)
    assert lines.record("a:1", "plan", 3)
    assert not lines.record("a:1", "review", 2)  # an older completion reported late
    assert lines.snapshot() == {"a:1": ("plan", 3)}
    assert lines.record("a:1", None, 3)  # a crash made the next write reuse version 3
    assert lines.snapshot() == {"a:1": ("shared", 3)}
    lines.reset("a:1", "review", 1)
    assert lines.snapshot() == {"a:1": ("review", 1)}
    lines.reset("a:1", None, 0)
    assert (lines.known("a:1"), len(lines)) == (None, 0)
    with pytest.raises(InvalidInput):
        LineGraphs("")


def test_line_graphs_record_many_is_record_of_each() -> None:
    one_by_one, at_once = LineGraphs("shared"), LineGraphs("shared")
    heard: list[tuple[str, int, bool]] = []
    at_once.add_listener(lambda iri, version, forced: heard.append((iri, version, forced)))
    lines = [("a:1", "plan", 3), ("a:2", "review", 1), ("a:1", "review", 2), ("a:2", "plan", 4)]
    for line in lines:
        one_by_one.record(*line)
    at_once.record_many(lines)
    assert at_once.snapshot() == one_by_one.snapshot() == {"a:1": ("plan", 3), "a:2": ("plan", 4)}
    assert heard == [("a:1", 3, False), ("a:2", 1, False), ("a:2", 4, False)]  # the late one is not heard


# -- config -------------------------------------------------------------------------


def test_config_grants_and_revokes_cells(tmp_path: Path) -> None:
    config = {"permissions": {"PA": {"review": "r"}, "SA": {"shared": "cru"}}}
    with MemorySystem.open(tmp_path, config, runtime="sim") as memory:
        ca, pa, sa = memory.agent("ca", "CA"), memory.agent("pa", "PA"), memory.agent("sa", "SA")
        ca.write("review:r", {"verdict": "approve"}, graph="review")
        assert pa.read("review:r")["value"] == {"verdict": "approve"}  # granted
        sa.write("note:n", {"text": "t"})
        refused(memory, ["note:n"], lambda: sa.delete("note:n"), "SA may not delete")  # revoked
        # Cells not named keep their defaults.
        refused(memory, ["review:r"], lambda: pa.write("review:r", {"verdict": "x"}, graph="review"))
        assert memory.permissions.rights("PA", "plan") == "crud"


def test_config_permissions_merge_and_round_trip() -> None:
    cfg = Config.from_dict({"permissions": {"DA": {"review": "rr"}}})
    assert cfg.permissions == {"DA": {"review": "r"}}
    merged = cfg.merged({"permissions": {"DA": {"plan": ""}, "CA": {"*": "r"}}})
    assert merged.permissions == {"CA": {"*": "r"}, "DA": {"plan": "", "review": "r"}}
    assert Config.from_dict(merged.to_dict()) == merged
    assert hash(merged) == hash(Config.from_dict(merged.to_dict()))
    assert Config().permissions == {}


@pytest.mark.parametrize(
    ("permissions", "path", "words"),
    [
        (["DA"], ("permissions",), "must be a mapping"),
        ({"XX": {"plan": "r"}}, ("permissions", "XX"), "unknown role 'XX'"),
        ({"DA": "r"}, ("permissions", "DA"), "must be a mapping of graph to letters"),
        ({"DA": {"review": "rx"}}, ("permissions", "DA", "review"), "letters other than c, r, u, d: x"),
        ({"DA": {"review": ["read"]}}, ("permissions", "DA", "review"), "must be a string of the letters"),
        ({"DA": {"": "r"}}, ("permissions", "DA", ""), "not a graph name"),
        ({"system": {"plan": ""}}, ("permissions", "system"), "system role may do anything"),
    ],
)
def test_bad_permission_overrides_are_config_errors(
    tmp_path: Path, permissions: Any, path: tuple[str, ...], words: str
) -> None:
    with pytest.raises(ConfigError) as info:
        Config.from_dict({"permissions": permissions})
    assert info.value.path == path
    assert words in str(info.value)
    where = tmp_path / "memory"
    with pytest.raises(ConfigError):
        MemorySystem.open(where, {"permissions": permissions}, runtime="sim")
    assert not (where / "l0").exists()  # refused before anything was opened


def test_a_read_racing_a_move_out_of_sight_never_returns_the_moved_value() -> None:
    """Another agent's move may land while a read is on its way; the data's
    own graph is judged when the answer comes, so the moved value never
    reaches a reader who may not see it: the line reads as absent."""
    refused = 0
    for seed in range(40):
        with MemorySystem.open(runtime="sim", seed=seed) as memory:
            pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
            da.write("x:moving", {"where": "shared"}, graph="shared")
            memory.quiesce()
            read = pa.submit_read("x:moving")
            move = da.submit_write("x:moving", {"where": "execution"}, graph="execution")
            assert move.get(5.0)["version"] == 2
            got = read.get(5.0)
            if got["version"] == 0:
                assert got["value"] is None
                refused += 1
            else:
                assert (got["value"], got["version"]) == ({"where": "shared"}, 1)
    assert refused > 0  # the race really happened on some seeds
