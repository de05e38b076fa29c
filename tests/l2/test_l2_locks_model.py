"""The lock manager against a simple reference model, driven by hypothesis.

The reference model keeps holds in one flat dict and waits in one list, and
recomputes everything by brute force on every call. Crucially it has no
wait-for graph: it decides "would this wait deadlock?" by *simulating* the
future — every agent with nothing queued finishes and releases all it holds,
queues are served strictly FIFO, repeat — and calls it a deadlock if some wait
is never served. The manager's graph search must agree with that simulation
on every request (no missed deadlock, no false alarm), and the simulation must
find no deadlock in the manager's state after any step.

Time advances by random amounts; leases expire, waits time out, agents stop
heartbeating and are swept as stale (their locks released), and fencing
tokens are checked against the model's fences.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from gliding_actors.errors import ConflictError, DeadlockError, InvalidInput
from gliding_actors.l2 import (
    AgentRegistry,
    Effects,
    Granted,
    LockManager,
    Queued,
    Refused,
    release_stale,
)

AGENTS = ("a", "b", "c")
RESOURCES = ("r1", "r2")
MODES = ("read", "write", "exclusive")
START = 100.0
INF = math.inf

#: Pairs of modes two different agents may hold at once (written out, not derived).
COMPATIBLE = {("read", "read"), ("read", "write"), ("write", "read")}
STRENGTH = {"read": 0, "write": 1, "exclusive": 2}


def all_served(holds: dict[tuple[str, str], str], waits: list[tuple[str, str, str]]) -> bool:
    """Would every wait be served if every agent with nothing queued released everything?

    ``holds``: (resource, agent) -> mode; ``waits``: (agent, resource, mode), oldest first.
    """
    holds = dict(holds)
    waits = list(waits)
    while waits:
        progress = False
        busy = {agent for agent, _, _ in waits}
        for key in [k for k in holds if k[1] not in busy]:
            del holds[key]
            progress = True
        for resource in sorted({r for _, r, _ in waits}):
            while True:
                queue = [w for w in waits if w[1] == resource]
                if not queue:
                    break
                agent, _, mode = queue[0]
                if any(
                    (mode, held) not in COMPATIBLE
                    for (r, a), held in holds.items()
                    if r == resource and a != agent
                ):
                    break
                waits.remove(queue[0])
                holds[(resource, agent)] = mode
                progress = True
        if not progress:
            return False
    return True


class RefLocks:
    """A brute-force lock table with the same documented semantics."""

    def __init__(self, lease_s: float) -> None:
        self.lease_s = lease_s
        self.now: float | None = None
        self.holds: dict[tuple[str, str], dict[str, Any]] = {}  # (resource, agent) -> hold
        self.waits: list[dict[str, Any]] = []  # oldest first
        self.fences: dict[str, int] = {}
        self.token = 0
        self.wait_id = 0
        self.out: dict[str, list[tuple[Any, ...]]] = self._empty()

    @staticmethod
    def _empty() -> dict[str, list[tuple[Any, ...]]]:
        return {k: [] for k in ("expired", "timed_out", "released", "cancelled", "granted")}

    def take(self) -> dict[str, list[tuple[Any, ...]]]:
        out, self.out = self.out, self._empty()
        return out

    # -- helpers -------------------------------------------------------------

    def lease(self, resource: str, agent: str) -> tuple[Any, ...]:
        h = self.holds[(resource, agent)]
        return (agent, resource, h["mode"], h["token"], h["granted_at"], h["expires_at"])

    @staticmethod
    def wait_tuple(w: dict[str, Any]) -> tuple[Any, ...]:
        return (w["wait_id"], w["agent"], w["resource"], w["mode"], w["enqueued_at"], w["deadline"])

    def fits(self, resource: str, agent: str, mode: str) -> bool:
        return all(
            (mode, h["mode"]) in COMPATIBLE
            for (r, a), h in self.holds.items()
            if r == resource and a != agent
        )

    def queue(self, resource: str) -> list[dict[str, Any]]:
        return [w for w in self.waits if w["resource"] == resource]

    def grant(self, agent: str, resource: str, mode: str) -> dict[str, Any]:
        assert self.now is not None
        self.token += 1
        hold = {
            "mode": mode,
            "token": self.token,
            "granted_at": self.now,
            "expires_at": self.now + self.lease_s,
        }
        self.holds[(resource, agent)] = hold
        if mode != "read":
            self.fences[resource] = self.token
        return hold

    def pump(self) -> None:
        for resource in RESOURCES:
            while self.queue(resource):
                w = self.queue(resource)[0]
                if not self.fits(resource, w["agent"], w["mode"]):
                    break
                self.waits.remove(w)
                h = self.grant(w["agent"], resource, w["mode"])
                self.out["granted"].append(
                    (w["wait_id"], w["agent"], resource, h["mode"], h["token"], h["expires_at"])
                )

    def advance(self, now: float) -> None:
        if self.now is not None:
            now = max(now, self.now)
        while True:
            due = [h["expires_at"] for h in self.holds.values()]
            due += [w["deadline"] for w in self.waits if w["deadline"] != INF]
            due = [t for t in due if t <= now]
            if not due:
                break
            t = min(due)
            self.now = t
            for key in sorted(self.holds):
                if self.holds[key]["expires_at"] <= t:
                    self.out["expired"].append(self.lease(*key))
                    del self.holds[key]
            self.pump()
            for w in list(self.waits):
                if w["deadline"] <= t:
                    self.waits.remove(w)
                    self.out["timed_out"].append(self.wait_tuple(w))
            self.pump()
        self.now = now

    # -- calls ---------------------------------------------------------------

    def acquire(
        self, agent: str, resource: str, mode: str, timeout: float, now: float
    ) -> tuple[Any, ...]:
        self.advance(now)
        assert self.now is not None
        held = self.holds.get((resource, agent))
        if held is not None and STRENGTH[held["mode"]] >= STRENGTH[mode]:
            held["expires_at"] = self.now + self.lease_s
            return ("granted", held["mode"], held["token"], held["expires_at"], True)
        queue = self.queue(resource)
        if any(w["agent"] == agent for w in queue):
            return ("invalid",)
        if not queue and self.fits(resource, agent, mode):
            h = self.grant(agent, resource, mode)
            return ("granted", h["mode"], h["token"], h["expires_at"], False)
        if timeout == 0:
            blockers = {w["agent"] for w in queue} | {
                a
                for (r, a), h in self.holds.items()
                if r == resource and (mode, h["mode"]) not in COMPATIBLE
            }
            return ("refused", tuple(sorted(blockers - {agent})))
        holds = {k: h["mode"] for k, h in self.holds.items()}
        waits = [(w["agent"], w["resource"], w["mode"]) for w in self.waits]
        if not all_served(holds, [*waits, (agent, resource, mode)]):
            return ("deadlock",)
        self.wait_id += 1
        w = {
            "wait_id": self.wait_id,
            "agent": agent,
            "resource": resource,
            "mode": mode,
            "enqueued_at": self.now,
            "deadline": self.now + timeout,
        }
        self.waits.append(w)
        return ("queued", self.wait_id, w["deadline"])

    def release(self, agent: str, resource: str, now: float) -> None:
        self.advance(now)
        if (resource, agent) in self.holds:
            self.out["released"].append(self.lease(resource, agent))
            del self.holds[(resource, agent)]
            self.pump()

    def release_all(self, agent: str, now: float) -> None:
        self.advance(now)
        for key in sorted(k for k in self.holds if k[1] == agent):
            self.out["released"].append(self.lease(*key))
            del self.holds[key]
        for w in [w for w in self.waits if w["agent"] == agent]:
            self.waits.remove(w)
            self.out["cancelled"].append(self.wait_tuple(w))
        self.pump()

    def cancel(self, wait_id: int, now: float) -> None:
        self.advance(now)
        for w in self.waits:
            if w["wait_id"] == wait_id:
                self.waits.remove(w)
                self.out["cancelled"].append(self.wait_tuple(w))
                self.pump()
                break

    def state(self) -> dict[str, Any]:
        return {
            "holds": {
                k: (h["mode"], h["token"], h["granted_at"], h["expires_at"])
                for k, h in self.holds.items()
            },
            "waits": [self.wait_tuple(w) for w in self.waits],
            "fences": dict(self.fences),
            "last_token": self.token,
        }


def effects_tuples(effects: Effects) -> dict[str, list[tuple[Any, ...]]]:
    return {
        "expired": [
            (x.agent, x.resource, x.mode, x.token, x.granted_at, x.expires_at)
            for x in effects.expired
        ],
        "timed_out": [
            (x.wait_id, x.agent, x.resource, x.mode, x.enqueued_at, x.deadline)
            for x in effects.timed_out
        ],
        "released": [
            (x.agent, x.resource, x.mode, x.token, x.granted_at, x.expires_at)
            for x in effects.released
        ],
        "cancelled": [
            (x.wait_id, x.agent, x.resource, x.mode, x.enqueued_at, x.deadline)
            for x in effects.cancelled
        ],
        "granted": [
            (x.wait_id, x.agent, x.resource, x.mode, x.token, x.expires_at) for x in effects.granted
        ],
    }


def real_state(locks: LockManager) -> dict[str, Any]:
    snap = locks.snapshot()
    holds = {}
    waits = []
    for resource, entry in snap["resources"].items():
        for agent, h in entry["holders"].items():
            holds[(resource, agent)] = (h["mode"], h["token"], h["granted_at"], h["expires_at"])
        for w in entry["queue"]:
            waits.append(
                (w["wait_id"], w["agent"], resource, w["mode"], w["enqueued_at"], w["deadline"])
            )
    waits.sort()
    return {
        "holds": holds,
        "waits": waits,
        "fences": snap["fences"],
        "last_token": snap["last_token"],
    }


class LockMachine(RuleBasedStateMachine):
    """Three agents, two resources; times are whole seconds from ``START``."""

    @initialize(
        lease_s=st.sampled_from([8.0, 20.0]),
        heartbeat_s=st.sampled_from([15.0, 1000.0]),
    )
    def setup(self, lease_s: float, heartbeat_s: float) -> None:
        """Leases shorter or longer than the heartbeat timeout (both orders matter:
        short leases expire under their holders, long ones are freed by the stale sweep)."""
        self.now = START
        self.heartbeat_s = heartbeat_s
        self.locks = LockManager(lease_s=lease_s)
        self.ref = RefLocks(lease_s)
        self.registry = AgentRegistry(timeout_s=heartbeat_s)
        self.last_seen = {a: START for a in AGENTS}
        self.reported: set[str] = set()
        for agent in AGENTS:
            self.registry.register(agent, "DA", now=START)

    def check_effects(self, effects: Effects) -> None:
        assert effects_tuples(effects) == self.ref.take()

    @rule(
        agent=st.sampled_from(AGENTS),
        resource=st.sampled_from(RESOURCES),
        mode=st.sampled_from(MODES),
        timeout=st.sampled_from([0.0, 2.0, 5.0, 12.0]),
    )
    def acquire(self, agent: str, resource: str, mode: str, timeout: float) -> None:
        self._acquire(agent, resource, mode, timeout)

    @rule(
        agent=st.sampled_from(AGENTS),
        resource=st.sampled_from(RESOURCES),
        mode=st.sampled_from(MODES),
        timeout=st.sampled_from([30.0, INF]),
    )
    def acquire_patiently(self, agent: str, resource: str, mode: str, timeout: float) -> None:
        """Long waits, a rule of their own so that queues (and deadlocks) build up often."""
        self._acquire(agent, resource, mode, timeout)

    def _acquire(self, agent: str, resource: str, mode: str, timeout: float) -> None:
        expected = self.ref.acquire(agent, resource, mode, timeout, self.now)
        try:
            result = self.locks.acquire(agent, resource, mode, timeout, now=self.now)
        except DeadlockError:
            assert expected == ("deadlock",)
            self.check_effects(self.locks.take_effects())
            return
        except InvalidInput:
            assert expected == ("invalid",)
            self.check_effects(self.locks.take_effects())
            return
        if isinstance(result, Granted):
            got: tuple[Any, ...] = (
                "granted",
                result.mode,
                result.token,
                result.expires_at,
                result.renewed,
            )
        elif isinstance(result, Queued):
            got = ("queued", result.wait_id, result.deadline)
        else:
            assert isinstance(result, Refused)
            got = ("refused", result.blockers)
        assert got == expected
        self.check_effects(result.effects)

    @rule(agent=st.sampled_from(AGENTS), resource=st.sampled_from(RESOURCES))
    def release(self, agent: str, resource: str) -> None:
        self.ref.release(agent, resource, self.now)
        self.check_effects(self.locks.release(agent, resource, now=self.now))

    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        wait_id = data.draw(st.integers(1, self.ref.wait_id + 1))
        self.ref.cancel(wait_id, self.now)
        self.check_effects(self.locks.cancel(wait_id, now=self.now))

    @rule(seconds=st.sampled_from([1, 3, 6]))
    def advance(self, seconds: int) -> None:
        """Time passes; nothing is told (the next call must catch up, in order)."""
        self.now += seconds

    @rule(seconds=st.sampled_from([11, 16, 25, 40]))
    def advance_far(self, seconds: int) -> None:
        """Past a lease or a heartbeat timeout, or everything at once."""
        self.now += seconds

    @rule()
    def expire(self) -> None:
        self.ref.advance(self.now)
        self.check_effects(self.locks.expire(self.now))

    @rule(agent=st.sampled_from(AGENTS))
    def heartbeat(self, agent: str) -> None:
        self.registry.heartbeat(agent, now=self.now, status="working")
        self.last_seen[agent] = max(self.last_seen[agent], self.now)
        self.reported.discard(agent)

    @rule()
    def sweep_stale(self) -> None:
        stale = [
            a
            for a in AGENTS
            if a not in self.reported and self.now >= self.last_seen[a] + self.heartbeat_s
        ]
        self.reported |= set(stale)
        self.ref.advance(self.now)
        for agent in stale:
            self.ref.release_all(agent, self.now)
        sweep = release_stale(self.registry, self.locks, self.now)
        assert list(sweep.stale) == stale
        self.check_effects(sweep.effects)
        assert [e["agent"] for e in sweep.events] == stale
        for agent in stale:
            assert not self.locks.held_by(agent)
            assert not self.locks.waits_of(agent)

    @rule(resource=st.sampled_from(RESOURCES), data=st.data())
    def fence(self, resource: str, data: st.DataObject) -> None:
        if self.ref.token == 0:
            return
        token = data.draw(st.integers(1, self.ref.token))
        stale = token < self.ref.fences.get(resource, 0)
        try:
            self.locks.check_fence(resource, token)
        except ConflictError:
            assert stale
        else:
            assert not stale

    @invariant()
    def same_state(self) -> None:
        assert real_state(self.locks) == self.ref.state()

    @invariant()
    def same_next_deadline(self) -> None:
        due = [h["expires_at"] for h in self.ref.holds.values()]
        due += [w["deadline"] for w in self.ref.waits if w["deadline"] != INF]
        assert self.locks.next_deadline() == (min(due) if due else None)

    @invariant()
    def holders_compatible(self) -> None:
        for resource in RESOURCES:
            holders = list(self.locks.holders(resource).values())
            for x in holders:
                for y in holders:
                    if x.agent != y.agent:
                        assert (x.mode, y.mode) in COMPATIBLE

    @invariant()
    def no_missed_grant(self) -> None:
        """Strict FIFO: the head of every queue is blocked by a holder (else it was granted)."""
        for resource in RESOURCES:
            queue = self.locks.queue(resource)
            if queue:
                head = queue[0]
                assert any(
                    (head.mode, h.mode) not in COMPATIBLE
                    for a, h in self.locks.holders(resource).items()
                    if a != head.agent
                )

    @invariant()
    def fence_is_newest_writer(self) -> None:
        for resource in RESOURCES:
            for lease in self.locks.holders(resource).values():
                if lease.mode != "read":
                    assert self.locks.fence(resource) == lease.token

    @invariant()
    def never_deadlocked(self) -> None:
        holds = {k: h["mode"] for k, h in self.ref.holds.items()}
        waits = [(w["agent"], w["resource"], w["mode"]) for w in self.ref.waits]
        assert all_served(holds, waits)


FAST = settings(
    max_examples=200,
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
LONG = settings(
    max_examples=3000,
    stateful_step_count=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_lock_manager_matches_the_reference_model() -> None:
    run_state_machine_as_test(LockMachine, settings=FAST)


@pytest.mark.slow
def test_lock_manager_matches_the_reference_model_long() -> None:
    run_state_machine_as_test(LockMachine, settings=LONG)


_REQUEST = st.tuples(st.sampled_from(AGENTS), st.sampled_from(RESOURCES), st.sampled_from(MODES))


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.one_of(_REQUEST, st.sampled_from(AGENTS)), min_size=4, max_size=10))
def test_deadlock_verdicts_match_the_simulation(steps: list[Any]) -> None:
    """Only requests that never time out, and agents finishing (releasing all they hold):
    the densest way to build wait chains. Every verdict must match the simulation."""
    locks = LockManager()
    holds: dict[tuple[str, str], str] = {}
    waits: list[tuple[str, str, str]] = []

    def sync() -> None:
        holds.clear()
        waits.clear()
        for resource in RESOURCES:
            for agent, lease in locks.holders(resource).items():
                holds[(resource, agent)] = lease.mode
        everyone = sorted(
            (w.wait_id, w.agent, w.resource, w.mode) for a in AGENTS for w in locks.waits_of(a)
        )
        waits.extend((a, r, m) for _, a, r, m in everyone)

    for step in steps:
        if isinstance(step, str):
            locks.release_all(step, now=0.0)
            sync()
            continue
        agent, resource, mode = step
        if any(a == agent and r == resource for a, r, _ in waits):
            continue
        held = holds.get((resource, agent))
        if held is not None and STRENGTH[held] >= STRENGTH[mode]:
            result = locks.acquire(agent, resource, mode, INF, now=0.0)
            assert isinstance(result, Granted) and result.renewed
            continue
        served = all_served(holds, [*waits, step])
        try:
            locks.acquire(agent, resource, mode, INF, now=0.0)
        except DeadlockError:
            assert not served, step
        else:
            assert served, step
        sync()
        assert all_served(holds, waits)


def test_the_oracle_sees_a_simple_deadlock() -> None:
    """Sanity check of the model's own deadlock simulation."""
    holds = {("r1", "a"): "exclusive", ("r2", "b"): "exclusive"}
    assert all_served(holds, [("a", "r2", "read")])
    assert not all_served(holds, [("a", "r2", "read"), ("b", "r1", "read")])
