"""Agent awareness: registration, heartbeats, stale detection, and releasing a stale agent's locks."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

import gliding_actors
from gliding_actors.errors import InvalidInput
from gliding_actors.l2 import (
    AGENT_STATUSES,
    KEEP,
    AgentRegistry,
    Granted,
    LockManager,
    Queued,
    release_stale,
)
from gliding_actors.scenario._opspecs import HEARTBEAT_STATUSES, LOCK_MODES, TASK_STATUSES


def team(now: float = 0.0) -> AgentRegistry:
    registry = AgentRegistry()  # default timeout: 30 s
    for agent, role in [("sa", "SA"), ("pa", "PA"), ("da", "DA")]:
        registry.register(agent, role, now=now)
    return registry


def test_the_names_agree_with_the_scenario_format_and_the_package() -> None:
    from gliding_actors.l2 import MODES, ROLES, TASK_FINAL_STATUSES

    assert AGENT_STATUSES == HEARTBEAT_STATUSES
    assert MODES == LOCK_MODES
    assert TASK_FINAL_STATUSES == TASK_STATUSES
    assert ROLES == gliding_actors.ROLES


def test_a_registered_agent_is_idle_and_live() -> None:
    registry = team(now=100)
    info = registry.info("pa", now=100)
    assert (info.role, info.status, info.operation, info.last_seen, info.stale) == (
        "PA",
        "idle",
        None,
        100,
        False,
    )
    assert registry.timeout_s == 30


def test_heartbeat_updates_status_and_operation() -> None:
    registry = team()
    registry.heartbeat("da", now=5, status="working", operation="write jwt.py")
    info = registry.heartbeat("da", now=6)  # nothing given: both kept
    assert (info.status, info.operation, info.last_seen) == ("working", "write jwt.py", 6)
    info = registry.heartbeat("da", now=7, status="waiting", operation=KEEP)
    assert (info.status, info.operation) == ("waiting", "write jwt.py")
    info = registry.heartbeat("da", now=8, status="idle", operation=None)  # explicit null clears
    assert (info.status, info.operation) == ("idle", None)


def test_stale_exactly_at_the_timeout() -> None:
    registry = team()
    registry.heartbeat("pa", now=10)
    assert registry.next_deadline() == 30  # sa and da, registered at 0
    assert not registry.is_stale("sa", now=29.999)
    assert registry.is_stale("sa", now=30)
    assert registry.listing(now=30) == {
        "da": {"role": "DA", "status": "idle", "stale": True},
        "pa": {"role": "PA", "status": "idle", "stale": False},
        "sa": {"role": "SA", "status": "idle", "stale": True},
    }


def test_sweep_reports_each_silence_once_and_a_heartbeat_revives() -> None:
    registry = team()
    registry.heartbeat("pa", now=10)
    assert registry.sweep(29) == []
    assert registry.sweep(30) == ["da", "sa"]
    assert registry.sweep(35) == []  # already reported
    assert registry.next_deadline() == 40  # only pa is left to go stale
    assert registry.sweep(40) == ["pa"]
    assert registry.next_deadline() is None
    registry.heartbeat("da", now=50, status="working")
    assert not registry.is_stale("da", now=50)
    assert registry.sweep(79) == []
    assert registry.sweep(80) == ["da"]  # silent again: reported again


def test_a_late_heartbeat_does_not_move_last_seen_back() -> None:
    registry = team()
    registry.heartbeat("pa", now=20)
    info = registry.heartbeat("pa", now=15, status="working")
    assert (info.last_seen, info.status) == (20, "working")


def test_re_registering_is_a_restart_and_a_new_role_is_refused() -> None:
    registry = team()
    registry.heartbeat("da", now=5, status="error", operation="crashed")
    info = registry.register("da", "DA", now=6)
    assert (info.status, info.operation, info.registered_at, info.last_seen) == ("idle", None, 0, 6)
    before = registry.snapshot()
    with pytest.raises(InvalidInput, match="already registered as DA"):
        registry.register("da", "CA", now=7)
    assert registry.snapshot() == before


def test_zero_timeout_makes_everyone_stale_at_once() -> None:
    registry = AgentRegistry(timeout_s=0)
    registry.register("a", "SA", now=3)
    assert registry.is_stale("a", now=3)


@pytest.mark.parametrize(
    "call",
    [
        lambda r: r.register("x", "boss", now=0),
        lambda r: r.register("", "SA", now=0),
        lambda r: r.register("x", "SA", now=float("nan")),
        lambda r: r.heartbeat("ghost", now=1),
        lambda r: r.heartbeat("da", now=1, status="busy"),
        lambda r: r.heartbeat("da", now=1, operation=5),
        lambda r: r.heartbeat("da", now="1"),
        lambda r: r.unregister("ghost"),
        lambda r: r.info("ghost", now=1),
        lambda r: r.sweep(None),
    ],
)
def test_bad_input_is_invalid_input_and_changes_nothing(call: Any) -> None:
    registry = team()
    before = registry.snapshot()
    with pytest.raises(InvalidInput):
        call(registry)
    assert registry.snapshot() == before


@pytest.mark.parametrize("timeout_s", [-1, float("inf"), float("nan"), "30", True])
def test_bad_timeout(timeout_s: Any) -> None:
    with pytest.raises(InvalidInput):
        AgentRegistry(timeout_s=timeout_s)


def test_unregister_forgets() -> None:
    registry = team()
    registry.unregister("sa")
    assert "sa" not in registry and list(registry.agents(now=0)) == ["da", "pa"]


def test_snapshot_is_plain_msgpack_data() -> None:
    registry = team()
    registry.heartbeat("da", now=1, status="working", operation="x")
    snap = registry.snapshot()
    assert list(snap["agents"]) == ["da", "pa", "sa"]
    assert msgpack.unpackb(msgpack.packb(snap)) == snap


# --------------------------------------------------------------------------- stale release


def test_a_stale_agents_locks_are_released_and_waiters_granted() -> None:
    registry = team()
    locks = LockManager(lease_s=60)
    assert isinstance(locks.acquire("da", "artifact:jwt", "exclusive", now=0), Granted)
    assert isinstance(locks.acquire("da", "plan:jwt", "read", now=0), Granted)
    wait = locks.acquire("pa", "artifact:jwt", "write", 100, now=1)
    assert isinstance(wait, Queued)
    da_wait = locks.acquire("da", "shared:x", "read", 100, now=1)
    assert isinstance(da_wait, Granted)  # free: granted at once
    locks.acquire("sa", "shared:y", "exclusive", now=1)
    q = locks.acquire("da", "shared:y", "read", 100, now=1)
    assert isinstance(q, Queued)

    registry.heartbeat("pa", now=20)
    registry.heartbeat("sa", now=20)
    sweep = release_stale(registry, locks, 30)
    assert sweep.stale == ("da",)
    assert sweep.events == (
        {
            "type": "agent.stale",
            "agent": "da",
            "role": "DA",
            "last_seen": 0.0,
            "released": ["artifact:jwt", "plan:jwt", "shared:x"],
            "cancelled": [q.wait_id],
        },
    )
    assert [(g.wait_id, g.agent, g.resource) for g in sweep.effects.granted] == [
        (wait.wait_id, "pa", "artifact:jwt")
    ]
    assert locks.held_by("da") == [] and locks.waits_of("da") == []
    assert msgpack.unpackb(msgpack.packb(list(sweep.events))) == list(sweep.events)

    # nothing new at the next sweep; the successor's token fences the stale writer out
    again = release_stale(registry, locks, 31)
    assert again.stale == () and again.events == () and not again.effects


def test_release_stale_reports_lease_expiries_that_happened_meanwhile() -> None:
    registry = team()
    locks = LockManager(lease_s=10)
    locks.acquire("pa", "plan:x", "write", now=0)
    sweep = release_stale(registry, locks, 12)
    assert sweep.stale == ()
    assert [x.agent for x in sweep.effects.expired] == ["pa"]
