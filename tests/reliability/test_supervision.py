"""Supervision of every actor: crash one with a request in flight, on both runtimes.

For each kind of actor the system runs, the request the crash interrupts fails
fast with a typed error (``ActorCrashed``, an ``ActorUnavailable``), the actor
is rebuilt, the next request succeeds, and the state is what the durability
story says survives (docs/RELIABILITY.md, "Supervision"). The crash is real:
an ``InjectedCrash`` raised inside the actor (``{"t": "supervision.crash",
"on": "next"}`` arms it, so the next message it handles — the request —
dies with it). Then the restart intensity: too many crashes too quickly and
the actor stays stopped, and callers are refused at once instead of waiting.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gliding_actors import MemorySystem
from gliding_actors._supervision import CRASH_TOPIC, SUPERVISOR_ACTOR
from gliding_actors.agent import Agent
from gliding_actors.clock import VirtualClock
from gliding_actors.errors import (
    ActorCrashed,
    ActorUnavailable,
    ConfigError,
    ConflictError,
    InvalidInput,
)
from gliding_actors.runtime import Future

RUNTIMES = ("sim", "threads")
#: wall-clock bound on a failed request (threads): fast, never a hang
FAST_S = 2.0
LINE = "plan:supervised"


@pytest.fixture(params=RUNTIMES)
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemorySystem]:
    config = {"l3": {"workers": 1}, "runtime": {"ask_timeout_s": 5.0}}
    system = MemorySystem.open(tmp_path / "m", config, request.param, clock=VirtualClock())
    yield system
    system.close(flush=False)


def _arm(memory: MemorySystem, actor: str) -> None:
    """The next message ``actor`` handles raises InjectedCrash inside it."""
    memory.quiesce()
    assert memory.runtime.lookup(actor).ask({"t": "supervision.crash", "on": "next"}).get(5.0) == {
        "armed": True
    }


@dataclasses.dataclass
class Team:
    memory: MemorySystem
    pa: Agent
    ca: Agent
    da: Agent
    kept: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Case:
    """One actor kind: what to do before, the request the crash kills, what must hold after."""

    actor: str
    setup: Callable[[Team], None]
    in_flight: Callable[[Team], Future[Any]]
    after: Callable[[Team], None]


# -- caches and directories ----------------------------------------------------------------
def _write_through(team: Team) -> None:
    team.pa.write(LINE, {"v": 1}, tags=["confirmed_fact"])


def _cache_in_flight(team: Team) -> Future[Any]:
    _arm(team.memory, "cache:ca")  # ca holds nothing: its read is a message to its cache
    return team.ca.submit_read(LINE)


def _cache_after(team: Team) -> None:
    assert team.ca.read(LINE)["value"] == {"v": 1}
    team.ca.write(LINE, {"v": 2})
    assert team.pa.read(LINE)["value"] == {"v": 2}


def _directory_in_flight(team: Team) -> Future[Any]:
    _arm(team.memory, "dir:0")
    return team.memory.submit_flush()


def _directory_after(team: Team) -> None:
    team.pa.write(LINE, {"v": 2})
    assert team.memory.flush(timeout=5.0) >= 1
    assert team.memory.l0.retrieve(LINE, touch=False).content == {"v": 2}  # type: ignore[union-attr]
    assert team.ca.read(LINE)["value"] == {"v": 2}


# -- the bus -------------------------------------------------------------------------------
def _bus_setup(team: Team) -> None:
    team.ca.subscribe("reviews")
    team.kept["seq"] = team.pa.publish("reviews", {"n": 1})


def _bus_in_flight(team: Team) -> Future[Any]:
    _arm(team.memory, "bus")
    return team.pa.submit_publish("reviews", {"n": 2})


def _bus_after(team: Team) -> None:
    seq = team.pa.publish("reviews", {"n": 3})
    # seq goes on (the supervisor's actor.crashed event took one in between)
    assert seq > team.kept["seq"]
    # the subscription and the undrained mailbox survived; the crashed publish went nowhere
    assert [e["message"] for e in team.ca.inbox() if e["topic"] == "reviews"] == [
        {"n": 1},
        {"n": 3},
    ]
    assert [e["seq"] for e in team.ca.messages("reviews")] == [team.kept["seq"], seq]


# -- the blackboard ------------------------------------------------------------------------
def _board_setup(team: Team) -> None:
    team.pa.create_task("task:plan")
    team.kept["token"] = team.pa.lock("res:doc", "write")
    assert team.kept["token"] is not None


def _board_in_flight(team: Team) -> Future[Any]:
    waiting = team.da.submit_lock(
        "res:doc", "write", timeout_s=600.0
    )  # queued behind pa: a deferred reply
    notes = team.memory.crash("blackboard")["notes"]
    assert any("1 orphaned lock waits withdrawn; 1 holds" in n for n in notes), notes
    return waiting


def _board_after(team: Team) -> None:
    assert ["task:plan"] in team.pa.task_layers()  # the DAG survived
    assert team.ca.lock("res:doc", "write") is None  # pa still holds it
    team.pa.unlock("res:doc")
    # da's wait died with the old actor and was withdrawn: ca, not da, gets the lock
    token = team.ca.lock("res:doc", "write")
    assert token is not None and token > team.kept["token"]  # fencing tokens keep increasing
    board = team.memory.runtime.lookup("blackboard")
    with pytest.raises(ConflictError):
        board.ask({"t": "fence", "resource": "res:doc", "token": team.kept["token"]}).get(5.0)
    assert team.memory.team()["pa"]["role"] == "PA"  # registrations survived


# -- L1, L3, hyperspace, context, the supervisor --------------------------------------------
def _l1_setup(team: Team) -> None:
    team.kept["first"] = team.pa.turn("planned the rollout", tokens=10)["archive_iri"]


def _l1_in_flight(team: Team) -> Future[Any]:
    _arm(team.memory, "l1:pa")
    return team.pa.submit_turn("this turn dies with the actor", tokens=10)


def _l1_after(team: Team) -> None:
    second = team.pa.turn("checked the rollout", tokens=10)["archive_iri"]
    assert second != team.kept["first"]  # numbering goes on from L0, never reused
    chain = (
        [b["archive_iri"] for b in team.pa.session()["chain"]]
        if "chain" in team.pa.session()
        else None
    )
    summaries = [m["content"] for m in team.pa.session_messages()]
    assert any("planned the rollout" in s for s in summaries), summaries  # the chain survived
    assert any("checked the rollout" in s for s in summaries), summaries
    assert not any("dies with the actor" in s for s in summaries), summaries
    _ = chain


def _project_setup(team: Team) -> None:
    _write_through(team)
    team.kept["projection"] = team.pa.project(timeout=5.0)


def _project_in_flight(team: Team) -> Future[Any]:
    _arm(team.memory, "l3:worker:0")
    return team.pa.submit_project(max_tokens=1000)  # another budget: not served from the view cache


def _project_after(team: Team) -> None:
    again = team.pa.project(max_tokens=1000, timeout=5.0)
    assert (again["frame"], again["iris"], again["tokens"]) == (
        team.kept["projection"]["frame"],
        team.kept["projection"]["iris"],
        team.kept["projection"]["tokens"],
    )


def _views_in_flight(team: Team) -> Future[Any]:
    _arm(team.memory, "l3:views")
    return team.memory.runtime.lookup("l3:views").ask({"t": "stats"})


def _views_after(team: Team) -> None:
    assert "views" in str(team.memory.runtime.lookup("l3:views").ask({"t": "stats"}).get(5.0))


def _search_setup(team: Team) -> None:
    team.pa.write("plan:kafka", {"title": "kafka consumer rollout"}, tags=["confirmed_fact"])
    team.kept["hits"] = team.pa.search("kafka consumer", timeout=5.0)["iris"]
    assert "plan:kafka" in team.kept["hits"]


def _search_in_flight(team: Team) -> Future[Any]:
    _arm(team.memory, "hyperspace")
    return team.pa.submit_search("kafka consumer")


def _search_after(team: Team) -> None:
    assert (
        team.pa.search("kafka consumer", timeout=5.0)["iris"] == team.kept["hits"]
    )  # the index survived


def _context_in_flight(team: Team) -> Future[Any]:
    _arm(team.memory, "scheduler")
    return team.pa.submit_context("rollout", 500)


def _context_after(team: Team) -> None:
    assert team.pa.context("rollout", 500, timeout=5.0) is not None


def _intent_in_flight(team: Team) -> Future[Any]:
    _arm(team.memory, "prefetch")
    return team.pa.submit_intent([LINE])


def _intent_after(team: Team) -> None:
    team.pa.intent([LINE])


def _supervisor_in_flight(team: Team) -> Future[Any]:
    _arm(team.memory, SUPERVISOR_ACTOR)
    return team.memory.runtime.lookup(SUPERVISOR_ACTOR).ask({"t": "records"})


def _supervisor_after(team: Team) -> None:
    records = team.memory.runtime.lookup(SUPERVISOR_ACTOR).ask({"t": "records"}).get(5.0)
    assert (
        records["actors"][SUPERVISOR_ACTOR]["crashes"] == 1
    )  # its own notice reached its restarted self


def _nothing(team: Team) -> None:
    pass


CASES = {
    "cache": Case("cache:ca", _write_through, _cache_in_flight, _cache_after),
    "directory": Case("dir:0", _write_through, _directory_in_flight, _directory_after),
    "bus": Case("bus", _bus_setup, _bus_in_flight, _bus_after),
    "blackboard": Case("blackboard", _board_setup, _board_in_flight, _board_after),
    "l1": Case("l1:pa", _l1_setup, _l1_in_flight, _l1_after),
    "l3-worker": Case("l3:worker:0", _project_setup, _project_in_flight, _project_after),
    "l3-views": Case("l3:views", _nothing, _views_in_flight, _views_after),
    "hyperspace": Case("hyperspace", _search_setup, _search_in_flight, _search_after),
    "scheduler": Case("scheduler", _write_through, _context_in_flight, _context_after),
    "prefetch": Case("prefetch", _write_through, _intent_in_flight, _intent_after),
    "supervisor": Case(SUPERVISOR_ACTOR, _nothing, _supervisor_in_flight, _supervisor_after),
}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_a_crash_fails_the_request_in_flight_fast_then_the_actor_serves_with_its_state(
    memory: MemorySystem, kind: str
) -> None:
    case = CASES[kind]
    team = Team(
        memory, memory.agent("pa", "PA"), memory.agent("ca", "CA"), memory.agent("da", "DA")
    )
    watcher = memory.agent("aa", "AA")
    watcher.subscribe(CRASH_TOPIC)
    case.setup(team)
    memory.quiesce()
    before = memory.supervision()["actors"][case.actor]
    request = case.in_flight(team)
    started = time.monotonic()
    with pytest.raises(ActorCrashed) as caught:
        request.get(FAST_S)
    assert time.monotonic() - started < FAST_S
    assert caught.value.actor == case.actor and "InjectedCrash" in caught.value.cause
    memory.quiesce()
    record = memory.supervision()["actors"][case.actor]
    assert record["status"] == "running"
    assert record["restarts"] == before["restarts"] + 1
    assert record["crashes"] == before["crashes"] + 1
    assert "InjectedCrash" in str(record["last_error"])
    case.after(team)
    events = [e["message"] for e in watcher.inbox() if e["topic"] == CRASH_TOPIC]
    assert [e["actor"] for e in events] == [case.actor]
    assert events[0]["restarted"] is True and events[0]["restarts"] == record["restarts"]


def test_every_actor_the_system_spawns_is_supervised(memory: MemorySystem) -> None:
    memory.agent("pa", "PA")
    actors = set(memory.supervision()["actors"])
    expected = {
        SUPERVISOR_ACTOR, "bus", "blackboard", "dir:0", "cache:pa", "l1:pa",
        "l3:worker:0", "l3:views", "hyperspace", "scheduler", "prefetch",
    }  # fmt: skip
    assert actors == expected
    summary = memory.supervision()
    assert (summary["supervised"], summary["crashes"], summary["restarts"], summary["stopped"]) == (
        11,
        0,
        0,
        [],
    )


@pytest.mark.parametrize(
    ("target", "actors"),
    [
        ("bus", ["bus"]),
        ("blackboard", ["blackboard"]),
        ("l1:pa", ["l1:pa"]),
        ("l3", ["l3:worker:0", "l3:views"]),
        ("hyperspace", ["hyperspace"]),
        ("context", ["scheduler", "prefetch"]),
        ("supervisor", [SUPERVISOR_ACTOR]),
    ],
)
def test_crash_targets_crash_each_named_actor_once_and_wait_until_it_serves(
    memory: MemorySystem, target: str, actors: list[str]
) -> None:
    memory.agent("pa", "PA")
    result = memory.crash(target)
    assert result["lost"] == []
    records = memory.supervision()["actors"]
    assert {name for name, r in records.items() if r["restarts"]} == set(actors)
    assert all(
        records[name]["restarts"] == 1 and records[name]["status"] == "running" for name in actors
    )
    for name in actors:
        assert memory.runtime.lookup(name).ask({"t": "supervision.ping"}).get(5.0)["actor"] == name


@pytest.mark.parametrize(
    "target", ["l0", "l2", "bus ", "l1:nobody", "l3:worker:0", "supervisor:x", "", None]
)
def test_a_bad_crash_target_is_refused_and_crashes_nothing(
    memory: MemorySystem, target: object
) -> None:
    memory.agent("pa", "PA")
    before = memory.supervision()
    with pytest.raises(InvalidInput):
        memory.crash(target)  # type: ignore[arg-type]
    memory.quiesce()
    assert memory.supervision() == before
    assert all(memory.runtime.lookup(name).is_alive() for name in before["actors"])


def _limited(
    tmp_path: Path, runtime: str, clock: VirtualClock, restarts: int, window_s: float
) -> MemorySystem:
    config = {
        "runtime": {"max_restarts": restarts, "restart_window_s": window_s, "ask_timeout_s": 5.0}
    }
    return MemorySystem.open(tmp_path / "m", config, runtime, clock=clock)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_more_crashes_than_the_restart_intensity_stop_the_actor_and_callers_are_refused_at_once(
    tmp_path: Path, runtime: str
) -> None:
    clock = VirtualClock()
    memory = _limited(tmp_path, runtime, clock, restarts=2, window_s=60.0)
    try:
        pa, ca = memory.agent("pa", "PA"), memory.agent("ca", "CA")
        ca.subscribe(CRASH_TOPIC)
        for _ in range(2):
            clock.advance(1.0)
            memory.crash("bus")
        assert memory.supervision()["stopped"] == []
        clock.advance(1.0)
        notes = memory.crash("bus")["notes"]  # the third crash within 60 s: stopped for good
        assert len(notes) == 1 and notes[0].startswith("bus: stopped")
        summary = memory.supervision()
        assert summary["stopped"] == ["bus"]
        assert summary["actors"]["bus"] == {
            "crashes": 3, "restarts": 2, "last_error": "InjectedCrash: bus crashed on purpose",
            "last_crash_at": 3.0, "status": "stopped",
        }  # fmt: skip
        for _ in range(3):
            started = time.monotonic()
            with pytest.raises(ActorUnavailable):
                pa.publish("reviews", {"n": 1}, timeout=30.0)
            assert time.monotonic() - started < 0.5
        with pytest.raises(ActorUnavailable):
            memory.crash("bus")  # nothing left to crash
        clock.advance(3600.0)
        with pytest.raises(ActorUnavailable):  # stays stopped, however long one waits
            pa.publish("reviews", {"n": 1}, timeout=30.0)
        # the rest of the memory serves without the bus (its notifications become dead letters)
        pa.write(LINE, {"v": 1}, tags=["confirmed_fact"])
        assert ca.read(LINE)["value"] == {"v": 1}
        assert memory.supervision()["actors"]["cache:pa"]["status"] == "running"
    finally:
        memory.close(flush=False)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_crashes_spread_wider_than_the_window_never_stop_an_actor(
    tmp_path: Path, runtime: str
) -> None:
    clock = VirtualClock()
    memory = _limited(tmp_path, runtime, clock, restarts=1, window_s=10.0)
    try:
        pa = memory.agent("pa", "PA")
        pa.create_task("task:a")
        for _ in range(4):
            memory.crash("blackboard")
            clock.advance(10.0)  # each crash falls out of the window before the next
        assert memory.supervision()["actors"]["blackboard"]["restarts"] == 4
        assert ["task:a"] in pa.task_layers()
        memory.crash("blackboard")
        memory.crash("blackboard")  # two within 10 s with one restart allowed
        assert memory.supervision()["stopped"] == ["blackboard"]
        with pytest.raises(ActorUnavailable):
            pa.task_layers()
    finally:
        memory.close(flush=False)


@pytest.mark.parametrize(
    "override",
    [
        {"max_restarts": -1},
        {"max_restarts": 1.5},
        {"max_restarts": True},
        {"restart_window_s": 0},
        {"restart_window_s": "10"},
        {"restart_windows": 10},
    ],
)
def test_bad_restart_intensity_config_is_refused(override: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        MemorySystem.open(config={"runtime": override}, runtime="sim")


def test_max_restarts_zero_stops_an_actor_at_its_first_crash(tmp_path: Path) -> None:
    memory = _limited(tmp_path, "sim", VirtualClock(), restarts=0, window_s=1.0)
    try:
        memory.agent("pa", "PA")
        memory.crash("hyperspace")
        assert memory.supervision()["stopped"] == ["hyperspace"]
        with pytest.raises(ActorUnavailable):
            memory.agent("pa", "PA").search("anything")
    finally:
        memory.close(flush=False)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_scenario_crashes_the_bus_and_the_blackboard_and_its_team_carries_on(
    tmp_path: Path, runtime: str
) -> None:
    """The ``crash`` op's added targets replay; locks, tasks and subscriptions survive them."""
    from gliding_actors.cli import main

    scenario = tmp_path / "supervised.yaml"
    scenario.write_text(
        "format: gliding-actors/scenario@1\n"
        "name: supervised\n"
        "agents:\n"
        "  - {id: pa, role: PA}\n"
        "  - {id: ca, role: CA}\n"
        "steps:\n"
        "  - {op: subscribe, agent: ca, topic: reviews}\n"
        "  - {op: task.create, agent: pa, task: 'task:plan'}\n"
        "  - {op: lock, agent: pa, resource: 'res:doc', mode: write, expect: {granted: true}}\n"
        "  - {op: crash, target: bus, expect: {lost: []}}\n"
        "  - {op: crash, target: blackboard, expect: {lost: []}}\n"
        "  - {op: crash, target: 'l1:pa'}\n"
        "  - {op: crash, target: l3}\n"
        "  - {op: crash, target: hyperspace}\n"
        "  - {op: crash, target: context}\n"
        "  - {op: crash, target: supervisor}\n"
        "  - {op: lock, agent: ca, resource: 'res:doc', mode: write, expect: {granted: false}}\n"
        "  - {op: task.layers, agent: ca, task: 'task:plan', expect: {layers: [['task:plan']]}}\n"
        "  - {op: publish, agent: pa, topic: reviews, message: {n: 1}}\n"
        "  - {op: inbox, agent: ca, expect: {count: 1}}\n",
        encoding="utf-8",
    )
    assert main(["replay", str(scenario), "--runtime", runtime]) == 0
