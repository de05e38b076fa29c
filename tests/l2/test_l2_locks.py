"""The lock manager, case by case: modes, FIFO, leases, time-outs, deadlocks, fencing, bad input."""

from __future__ import annotations

import math
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gliding_actors.errors import ConflictError, DeadlockError, InvalidInput
from gliding_actors.l2 import (
    MODES,
    Effects,
    Granted,
    LockManager,
    Queued,
    Refused,
    modes_compatible,
)

INF = math.inf


def granted(result: Any) -> Granted:
    assert isinstance(result, Granted), result
    return result


def queued(result: Any) -> Queued:
    assert isinstance(result, Queued), result
    return result


def refused(result: Any) -> Refused:
    assert isinstance(result, Refused), result
    return result


# --------------------------------------------------------------------------- modes


@pytest.mark.parametrize(
    ("a", "b", "ok"),
    [
        ("read", "read", True),
        ("read", "write", True),
        ("write", "read", True),
        ("write", "write", False),
        ("exclusive", "read", False),
        ("exclusive", "write", False),
        ("exclusive", "exclusive", False),
        ("read", "exclusive", False),
        ("write", "exclusive", False),
    ],
)
def test_compatibility_table(a: str, b: str, ok: bool) -> None:
    assert modes_compatible(a, b) is ok
    locks = LockManager()
    granted(locks.acquire("x", "r", a, now=0))
    result = locks.acquire("y", "r", b, now=0)
    assert isinstance(result, Granted) is ok


@pytest.mark.parametrize("first", MODES)
@pytest.mark.parametrize("second", MODES)
def test_an_agent_never_conflicts_with_itself(first: str, second: str) -> None:
    locks = LockManager()
    one = granted(locks.acquire("x", "r", first, now=0))
    two = granted(locks.acquire("x", "r", second, now=1))
    stronger = MODES.index(second) > MODES.index(first)
    assert two.renewed is not stronger
    assert two.mode == (second if stronger else first)
    assert (two.token > one.token) is stronger
    assert list(locks.holders("r")) == ["x"]


def test_try_once_refusal_names_the_blockers_and_changes_nothing() -> None:
    locks = LockManager()
    granted(locks.acquire("a", "r", "read", now=0))
    granted(locks.acquire("b", "r", "write", now=0))
    before = locks.snapshot()
    result = refused(locks.acquire("c", "r", "exclusive", now=0))
    assert result.blockers == ("a", "b")
    assert result.granted is False
    assert locks.snapshot() == before
    # a write conflicts only with the writer
    assert refused(locks.acquire("c", "r", "write", now=0)).blockers == ("b",)


# --------------------------------------------------------------------------- FIFO


def test_strict_fifo_a_compatible_request_does_not_overtake_a_queued_one() -> None:
    locks = LockManager()
    granted(locks.acquire("a", "r", "read", now=0))
    w = queued(locks.acquire("b", "r", "exclusive", 10, now=0))
    # c's read is compatible with a's read, but b was first
    assert refused(locks.acquire("c", "r", "read", now=0)).blockers == ("b",)
    c = queued(locks.acquire("c", "r", "read", 10, now=0))
    effects = locks.release("a", "r", now=1)
    assert [(g.wait_id, g.agent, g.mode) for g in effects.granted] == [
        (w.wait_id, "b", "exclusive")
    ]
    assert [x.wait_id for x in locks.queue("r")] == [c.wait_id]
    effects = locks.release("b", "r", now=2)
    assert [g.agent for g in effects.granted] == ["c"]


def test_a_release_grants_every_compatible_waiter_at_the_head_in_order() -> None:
    locks = LockManager()
    granted(locks.acquire("x", "r", "exclusive", now=0))
    line = [("a", "read"), ("b", "write"), ("c", "read"), ("d", "write"), ("e", "read")]
    waits = [queued(locks.acquire(a, "r", m, 10, now=0)) for a, m in line]
    effects = locks.release("x", "r", now=1)
    # read, write, read are compatible; the second write stops the line (and e stays behind it)
    assert [g.wait_id for g in effects.granted] == [w.wait_id for w in waits[:3]]
    assert [w.agent for w in locks.queue("r")] == ["d", "e"]
    tokens = [g.token for g in effects.granted]
    assert tokens == sorted(tokens)


def test_an_agent_queues_once_per_resource() -> None:
    locks = LockManager()
    granted(locks.acquire("a", "r", "exclusive", now=0))
    queued(locks.acquire("b", "r", "read", 10, now=0))
    before = locks.snapshot()
    with pytest.raises(InvalidInput, match="already waiting"):
        locks.acquire("b", "r", "write", 10, now=0)
    assert locks.snapshot() == before


def test_cancel_withdraws_a_wait_and_lets_the_next_one_through() -> None:
    locks = LockManager()
    granted(locks.acquire("a", "r", "read", now=0))
    w = queued(locks.acquire("b", "r", "exclusive", 10, now=0))
    c = queued(locks.acquire("c", "r", "read", 10, now=0))
    effects = locks.cancel(w.wait_id, now=1)
    assert [x.wait_id for x in effects.cancelled] == [w.wait_id]
    assert [(g.wait_id, g.agent) for g in effects.granted] == [(c.wait_id, "c")]
    assert not locks.cancel(w.wait_id, now=1)  # already gone: nothing happens


# --------------------------------------------------------------------------- upgrades


def test_an_upgrade_waits_for_other_readers_and_keeps_its_read_meanwhile() -> None:
    locks = LockManager()
    a = granted(locks.acquire("a", "r", "read", now=0))
    granted(locks.acquire("b", "r", "read", now=0))
    granted(locks.acquire("a", "r", "write", now=0))  # read + write coexist: immediate
    up = queued(locks.acquire("a", "r", "exclusive", 10, now=0))
    assert locks.holders("r")["a"].mode == "write"
    effects = locks.release("b", "r", now=1)
    (grant,) = effects.granted
    assert (grant.wait_id, grant.agent, grant.mode) == (up.wait_id, "a", "exclusive")
    assert grant.token > a.token
    assert locks.holders("r")["a"].token == grant.token


def test_two_readers_upgrading_at_once_is_a_deadlock() -> None:
    locks = LockManager()
    granted(locks.acquire("a", "r", "read", now=0))
    granted(locks.acquire("b", "r", "read", now=0))
    queued(locks.acquire("a", "r", "exclusive", 10, now=0))
    with pytest.raises(DeadlockError, match="b -> a -> b"):
        locks.acquire("b", "r", "exclusive", 10, now=0)


# --------------------------------------------------------------------------- deadlocks


def test_two_agents_waiting_on_each_other_get_a_deadlock_error_instead_of_hanging() -> None:
    locks = LockManager()
    granted(locks.acquire("a", "r1", "exclusive", now=0))
    granted(locks.acquire("b", "r2", "exclusive", now=0))
    queued(locks.acquire("a", "r2", "write", INF, now=0))  # no time limit: would wait forever
    before = locks.snapshot()
    with pytest.raises(DeadlockError) as caught:
        locks.acquire("b", "r1", "read", INF, now=0)
    assert isinstance(caught.value, ConflictError)
    assert "b -> a -> b" in str(caught.value) and "'r1'" in str(caught.value)
    assert locks.snapshot() == before  # nothing granted, nothing queued
    # b gives up r2 instead: a gets it, nobody is stuck
    effects = locks.release("b", "r2", now=1)
    assert [g.agent for g in effects.granted] == ["a"]


def test_a_three_agent_cycle_is_found() -> None:
    locks = LockManager()
    for agent, resource in [("a", "r1"), ("b", "r2"), ("c", "r3")]:
        granted(locks.acquire(agent, resource, "write", now=0))
    queued(locks.acquire("a", "r2", "write", 10, now=0))
    queued(locks.acquire("b", "r3", "exclusive", 10, now=0))
    with pytest.raises(DeadlockError, match="c -> a -> b -> c"):
        locks.acquire("c", "r1", "write", 10, now=0)
    # a read of r1 is compatible with a's write and nobody is queued on r1: granted at once
    granted(locks.acquire("c", "r1", "read", 10, now=0))


def test_queue_order_counts_a_waiter_ahead_will_hold_first() -> None:
    """b holds r2 and queues for r1 behind a; a then asks for r2: a cycle through the queue."""
    locks = LockManager()
    granted(locks.acquire("x", "r1", "exclusive", now=0))
    granted(locks.acquire("b", "r2", "exclusive", now=0))
    queued(locks.acquire("a", "r1", "write", 10, now=0))
    queued(locks.acquire("b", "r1", "write", 10, now=0))  # behind a, conflicting with a's write
    with pytest.raises(DeadlockError, match="a -> b -> a"):
        locks.acquire("a", "r2", "read", 10, now=0)


def test_a_compatible_waiter_ahead_is_no_false_alarm() -> None:
    """b waits (read) on r1 and on r2, which a holds; a queues a read behind b's read on
    r1. When c lets r1 go both reads are served together, a finishes, b gets r2: no
    deadlock, although a waits behind a busy agent."""
    locks = LockManager()
    granted(locks.acquire("c", "r1", "exclusive", now=0))
    granted(locks.acquire("a", "r2", "exclusive", now=0))
    queued(locks.acquire("b", "r1", "read", INF, now=0))
    queued(locks.acquire("b", "r2", "read", INF, now=0))
    queued(locks.acquire("a", "r1", "read", INF, now=0))
    effects = locks.release("c", "r1", now=1)
    assert sorted(g.agent for g in effects.granted) == ["a", "b"]
    effects = locks.release_all("a", now=2)
    assert [(g.agent, g.resource) for g in effects.granted] == [("b", "r2")]


def test_a_try_once_request_never_raises_deadlock() -> None:
    locks = LockManager()
    granted(locks.acquire("a", "r1", "exclusive", now=0))
    granted(locks.acquire("b", "r2", "exclusive", now=0))
    queued(locks.acquire("a", "r2", "write", 10, now=0))
    assert refused(locks.acquire("b", "r1", "read", 0, now=0)).blockers == ("a",)


# --------------------------------------------------------------------------- time


def test_leases_expire_and_renewal_keeps_the_token() -> None:
    locks = LockManager(lease_s=10)
    g = granted(locks.acquire("a", "r", "write", now=0))
    assert g.expires_at == 10
    assert locks.next_deadline() == 10
    again = granted(locks.acquire("a", "r", "read", now=8))  # weaker: a renewal
    assert (again.renewed, again.token, again.mode, again.expires_at) == (
        True,
        g.token,
        "write",
        18,
    )
    assert not locks.expire(17.5)
    effects = locks.expire(18)  # expiry is inclusive: at the deadline the lease is gone
    assert [(x.agent, x.token) for x in effects.expired] == [("a", g.token)]
    assert locks.holders("r") == {}
    assert locks.next_deadline() is None


def test_an_expired_lease_lets_the_waiter_in_at_the_expiry_instant() -> None:
    locks = LockManager(lease_s=10)
    granted(locks.acquire("a", "r", "exclusive", now=0))
    w = queued(locks.acquire("b", "r", "exclusive", 30, now=1))
    assert locks.next_deadline() == 10
    effects = locks.expire(15)
    (grant,) = effects.granted
    assert grant.wait_id == w.wait_id
    # granted at 10 (when a's lease ran out), not at 15 when we got round to it
    assert grant.expires_at == 20
    assert locks.holders("r")["b"].granted_at == 10
    # and a very late call sees b's own lease run out too, in order
    effects = locks.expire(100)
    assert [(x.agent, x.expires_at) for x in effects.expired] == [("b", 20)]


def test_a_wait_times_out() -> None:
    locks = LockManager(lease_s=60)
    granted(locks.acquire("a", "r", "exclusive", now=0))
    w = queued(locks.acquire("b", "r", "read", 5, now=1))
    assert (w.deadline, locks.next_deadline()) == (6, 6)
    effects = locks.expire(6)
    assert [x.wait_id for x in effects.timed_out] == [w.wait_id]
    assert locks.queue("r") == []


def test_at_one_instant_a_freed_lock_beats_the_time_out() -> None:
    locks = LockManager(lease_s=10)
    granted(locks.acquire("a", "r", "exclusive", now=0))
    w = queued(locks.acquire("b", "r", "exclusive", 10, now=0))  # deadline 10 = a's expiry
    effects = locks.expire(10)
    assert [g.wait_id for g in effects.granted] == [w.wait_id]
    assert effects.timed_out == ()


def test_late_processing_is_chronological() -> None:
    """b's wait ran out at 5, before a's lease expired at 10: b must not get the lock."""
    locks = LockManager(lease_s=10)
    granted(locks.acquire("a", "r", "exclusive", now=0))
    queued(locks.acquire("b", "r", "exclusive", 5, now=0))
    result = locks.acquire("c", "r", "read", now=50)  # the first call after a long silence
    effects = granted(result).effects
    assert [x.agent for x in effects.timed_out] == ["b"]
    assert [x.agent for x in effects.expired] == ["a"]
    assert effects.granted == ()


_EVENT = st.tuples(
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from(["r1", "r2"]),
    st.sampled_from(MODES),
    st.sampled_from([0.0, 3.0, 12.0, INF]),
    st.integers(0, 8),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_EVENT, max_size=12), st.integers(0, 60))
def test_one_late_expire_equals_an_expire_at_every_deadline(events: list[Any], late: int) -> None:
    def build() -> tuple[LockManager, float]:
        locks, now = LockManager(lease_s=10), 0.0
        for agent, resource, mode, timeout, gap in events:
            now += gap
            try:
                locks.acquire(agent, resource, mode, timeout, now=now)
            except (DeadlockError, InvalidInput):
                pass
            locks.take_effects()
        return locks, now

    lazy, now = build()
    eager, _ = build()
    target = now + late
    all_lazy = lazy.expire(target)
    all_eager = Effects()
    while (due := eager.next_deadline()) is not None and due <= target:
        all_eager = all_eager + eager.expire(due)
    all_eager = all_eager + eager.expire(target)
    assert all_lazy == all_eager
    assert lazy.snapshot() == eager.snapshot()


def test_time_never_goes_back() -> None:
    locks = LockManager(lease_s=10)
    granted(locks.acquire("a", "r", "write", now=100))
    g = granted(locks.acquire("b", "q", "write", now=50))  # a late message: counts as 100
    assert g.expires_at == 110
    assert locks.now == 100


# --------------------------------------------------------------------------- release


def test_release_of_a_lock_not_held_does_nothing() -> None:
    locks = LockManager()
    locks.expire(0)
    before = locks.snapshot()
    assert not locks.release("a", "r", now=0)
    assert locks.snapshot() == before


def test_release_all_drops_holds_and_waits_then_grants() -> None:
    locks = LockManager()
    granted(locks.acquire("a", "r1", "exclusive", now=0))
    granted(locks.acquire("b", "r2", "exclusive", now=0))
    wa = queued(locks.acquire("a", "r2", "read", 10, now=0))
    wc = queued(locks.acquire("c", "r1", "read", 10, now=0))
    effects = locks.release_all("a", now=1)
    assert [x.resource for x in effects.released] == ["r1"]
    assert [x.wait_id for x in effects.cancelled] == [wa.wait_id]
    assert [g.wait_id for g in effects.granted] == [wc.wait_id]
    assert locks.held_by("a") == [] and locks.waits_of("a") == []


# --------------------------------------------------------------------------- fencing


def test_a_holder_whose_lease_expired_cannot_clobber_its_successor() -> None:
    locks = LockManager(lease_s=10)
    old = granted(locks.acquire("a", "doc", "write", now=0)).token
    locks.check_fence("doc", old)  # fine while nobody newer was granted
    locks.expire(10)
    locks.check_fence("doc", old)  # expired, but nobody took over yet: still fine
    new = granted(locks.acquire("b", "doc", "write", now=11)).token
    assert new > old and locks.fence("doc") == new
    with pytest.raises(ConflictError, match="stale"):
        locks.check_fence("doc", old)
    locks.check_fence("doc", new)


def test_readers_do_not_move_the_fence() -> None:
    locks = LockManager()
    w = granted(locks.acquire("a", "doc", "write", now=0)).token
    r = granted(locks.acquire("b", "doc", "read", now=0)).token
    assert r > w
    locks.check_fence("doc", w)  # the writer's token stays good while a reader joins
    assert locks.fence("doc") == w
    x = granted(locks.acquire("c", "other", "exclusive", now=0)).token
    locks.check_fence("doc", w)  # tokens of other resources do not matter
    assert x > r


def test_fence_rejects_malformed_or_unissued_tokens() -> None:
    locks = LockManager()
    granted(locks.acquire("a", "doc", "write", now=0))
    for bad in (0, -1, True, 1.0, "1"):
        with pytest.raises(InvalidInput):
            locks.check_fence("doc", bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="never issued"):
        locks.check_fence("doc", 2)


# --------------------------------------------------------------------------- bad input, state


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.acquire("a", "r", "upgrade", now=1),
        lambda m: m.acquire("a", "r", ["read"], now=1),
        lambda m: m.acquire("a", "", "read", now=1),
        lambda m: m.acquire("a", 3, "read", now=1),
        lambda m: m.acquire("", "r", "read", now=1),
        lambda m: m.acquire("a", "r\x00", "read", now=1),
        lambda m: m.acquire("a", "r", "read", -1, now=1),
        lambda m: m.acquire("a", "r", "read", math.nan, now=1),
        lambda m: m.acquire("a", "r", "read", True, now=1),
        lambda m: m.acquire("a", "r", "read", "5", now=1),
        lambda m: m.acquire("a", "r", "read", now=math.nan),
        lambda m: m.acquire("a", "r", "read", now=INF),
        lambda m: m.acquire("a", "r", "read", now="1"),
        lambda m: m.release("a", "", now=1),
        lambda m: m.release_all(None, now=1),
        lambda m: m.cancel("1", now=1),
        lambda m: m.expire(None),
        lambda m: m.check_fence("", 1),
        lambda m: m.holders(""),
    ],
)
def test_bad_input_is_invalid_input_and_changes_nothing(call: Any) -> None:
    locks = LockManager(lease_s=10)
    granted(locks.acquire("x", "r", "write", now=0))
    queued(locks.acquire("y", "r", "write", 100, now=0))
    before = locks.snapshot()
    with pytest.raises(InvalidInput):
        call(locks)
    assert locks.snapshot() == before


@pytest.mark.parametrize("lease_s", [0, -1, INF, math.nan, "60", True])
def test_bad_lease_length(lease_s: Any) -> None:
    with pytest.raises(InvalidInput):
        LockManager(lease_s=lease_s)


def test_a_deadlock_error_keeps_time_effects_in_the_outbox() -> None:
    """The call that raised changed nothing itself, but time did pass: nothing is lost."""
    locks = LockManager(lease_s=10)
    granted(locks.acquire("t", "tmp", "read", now=0))  # expires at 10
    granted(locks.acquire("a", "r1", "exclusive", now=5))
    granted(locks.acquire("b", "r2", "exclusive", now=5))
    queued(locks.acquire("a", "r2", "write", 100, now=5))
    before = locks.snapshot()
    with pytest.raises(DeadlockError):
        locks.acquire("b", "r1", "write", 100, now=12)
    snap = locks.snapshot()
    assert [x["agent"] for x in snap["outbox"]["expired"]] == ["t"]
    del before["resources"]["tmp"]
    assert snap["resources"] == before["resources"]  # the request itself left no trace
    effects = locks.take_effects()
    assert [x.agent for x in effects.expired] == ["t"]
    assert not locks.take_effects()
    # the next result carries whatever happened meanwhile
    result = granted(locks.acquire("c", "r3", "read", now=16))
    assert [x.agent for x in result.effects.expired] == ["a", "b"]
    assert [g.agent for g in result.effects.granted] == ["a"]


def test_snapshot_is_plain_sorted_msgpack_data() -> None:
    locks = LockManager(lease_s=10)
    granted(locks.acquire("b", "r2", "read", now=0))
    granted(locks.acquire("a", "r2", "read", now=0))
    granted(locks.acquire("a", "r1", "exclusive", now=0))
    queued(locks.acquire("c", "r1", "read", INF, now=1))
    snap = locks.snapshot()
    assert msgpack.unpackb(msgpack.packb(snap), strict_map_key=False) == snap
    assert list(snap["resources"]) == ["r1", "r2"]
    assert list(snap["resources"]["r2"]["holders"]) == ["a", "b"]
    assert snap["resources"]["r1"]["queue"][0]["deadline"] == INF
    assert snap["fences"] == {"r1": 3}
    assert snap["now"] == 1
