"""Leased, fenced, FIFO locks on named blackboard resources, as a plain deterministic class.

:class:`LockManager` is the lock table of the L2 blackboard. It never blocks,
sleeps, reads a clock or starts a thread: every call takes ``now`` (the host
reads it from its injected :class:`~gliding_actors.clock.Clock`) and returns
what happened as plain values, so the same class runs inside an actor in
production and step by step in the simulator and in property tests.

Why the shape:

* **A wait is state, not a blocked call.** In an actor system a handler may not
  wait, so a request that cannot be granted yet is queued and answered later:
  :meth:`~LockManager.acquire` returns :class:`Granted`, :class:`Queued` or
  (for a try-once request) :class:`Refused`. When a queued request is granted —
  by a release, an expiry, a time-out of the waiter ahead, a stale agent's
  release — it appears as a :class:`Grant` in some later call's
  :class:`Effects`, and the host answers the waiter then. The host schedules
  one timer at :meth:`~LockManager.next_deadline` and calls
  :meth:`~LockManager.expire` when it fires.
* **Time only moves forward, and in order.** Every call first brings the table
  up to ``now`` exactly as if :meth:`~LockManager.expire` had been called at
  each deadline in between (leases that ran out, waits granted in their place,
  waits that timed out), so a late timer changes nothing about the outcome.
  At one instant, lease expiries come first, then the grants they allow, then
  wait time-outs: a waiter whose deadline is the very moment the lock frees up
  gets the lock. A ``now`` earlier than one already seen counts as that one.
* **Strict FIFO per resource.** A request is granted at once only when it is
  compatible with every current holder *and* nobody is queued on the resource;
  otherwise it queues behind the earlier ones, even if it is compatible with
  the holders. A steady stream of readers therefore cannot starve a writer.
* **Deadlocks fail fast.** Before a request is queued, the wait-for graph is
  searched; if queueing would close a cycle the request fails at once with
  :class:`~gliding_actors.errors.DeadlockError` and nothing is queued. The
  graph's nodes are agents and queued requests: an agent waits for each of its
  own queued requests (a blocked agent releases nothing); a request waits for
  every other agent that holds the resource in a conflicting mode, for every
  other agent queued ahead of it in a conflicting mode (that one will hold the
  lock first), and for the request just ahead of it (strict FIFO). Grants,
  releases, expiries and time-outs only ever remove paths from this graph, so
  checking at enqueue time is enough to keep it acyclic forever.
* **Fencing tokens.** Every grant takes the next number of one counter, so
  tokens only grow (for every resource). A writer passes its token to
  :meth:`~LockManager.check_fence`, which refuses it with
  :class:`~gliding_actors.errors.ConflictError` once a *write or exclusive*
  grant with a newer token was made on that resource. Read grants do not move
  the fence: ``read`` and ``write`` may coexist, and a reader arriving must not
  invalidate the writer's token; readers never write, so they have nothing a
  stale writer could clobber.

Modes and compatibility: ``read`` + ``read`` and ``read`` + ``write`` coexist;
``write`` + ``write`` conflict; ``exclusive`` conflicts with everything; an agent
never conflicts with itself. The modes are ordered read < write < exclusive
(each conflicts with a superset of what the one before conflicts with), so:

* a holder asking again for its mode or a weaker one *renews* its lease and
  keeps its token (nothing about who may hold the lock changed);
* a holder asking for a stronger mode *upgrades*: it is a new request, checked
  and queued like any other (its current hold stays meanwhile) and, when
  granted, replaces the hold with a new token.

An agent has at most one queued request per resource.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from collections.abc import Iterable
from typing import Any, ClassVar

from gliding_actors.errors import ConflictError, DeadlockError, InvalidInput, show
from gliding_actors.l0 import is_valid_label

__all__ = [
    "DEFAULT_LEASE_S",
    "MODES",
    "Effects",
    "Grant",
    "Granted",
    "Lease",
    "LockManager",
    "Queued",
    "Refused",
    "Wait",
    "modes_compatible",
]

#: Lock modes, weakest first.
MODES: tuple[str, ...] = ("read", "write", "exclusive")

#: Lease length when the constructor is given none, in seconds.
DEFAULT_LEASE_S = 60.0

_RANK = {mode: i for i, mode in enumerate(MODES)}


def modes_compatible(a: str, b: str) -> bool:
    """True if two *different* agents may hold ``a`` and ``b`` on one resource at once."""
    return a != "exclusive" and b != "exclusive" and not (a == "write" and b == "write")


class _Record:
    """The plain records below (dataclasses) as dicts; the annotation tells mypy they are dataclasses."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Lease(_Record):
    """One agent's hold on one resource."""

    agent: str
    resource: str
    mode: str
    #: The fencing token of the grant that made this hold.
    token: int
    granted_at: float
    #: The hold ends by itself at this instant unless renewed.
    expires_at: float


@dataclasses.dataclass(frozen=True)
class Wait(_Record):
    """A queued request (the host keeps ``wait_id`` to answer its caller later)."""

    wait_id: int
    agent: str
    resource: str
    mode: str
    enqueued_at: float
    #: The request gives up at this instant (``inf``: never) if not granted by then.
    deadline: float


@dataclasses.dataclass(frozen=True)
class Grant(_Record):
    """A queued request that was granted: answer the waiter ``wait_id`` with ``token``."""

    wait_id: int
    agent: str
    resource: str
    mode: str
    token: int
    expires_at: float


@dataclasses.dataclass(frozen=True)
class Effects:
    """What a call did to parties other than the caller, in the order it happened.

    ``expired``: leases that ran out. ``timed_out``: waits whose deadline
    passed (answer them "not granted"). ``released``: holds given up by
    :meth:`LockManager.release` / :meth:`LockManager.release_all`.
    ``cancelled``: waits dropped by :meth:`LockManager.cancel` /
    :meth:`LockManager.release_all`. ``granted``: queued requests granted.
    """

    expired: tuple[Lease, ...] = ()
    timed_out: tuple[Wait, ...] = ()
    released: tuple[Lease, ...] = ()
    cancelled: tuple[Wait, ...] = ()
    granted: tuple[Grant, ...] = ()

    def _parts(self) -> dict[str, tuple[Any, ...]]:
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}

    def __bool__(self) -> bool:
        return any(self._parts().values())

    def __add__(self, other: Effects) -> Effects:
        theirs = other._parts()
        return Effects(**{name: mine + theirs[name] for name, mine in self._parts().items()})

    def to_dict(self) -> dict[str, list[dict[str, Any]]]:
        return {name: [x.to_dict() for x in part] for name, part in self._parts().items()}


@dataclasses.dataclass(frozen=True)
class Granted:
    """The request holds the lock now (``renewed``: it already did; same token, longer lease)."""

    agent: str
    resource: str
    mode: str
    token: int
    expires_at: float
    renewed: bool
    effects: Effects = Effects()

    @property
    def granted(self) -> bool:
        """True: the scenario op ``lock``'s ``granted``."""
        return True


@dataclasses.dataclass(frozen=True)
class Queued:
    """The request waits; a later :class:`Grant` or time-out with this ``wait_id`` answers it."""

    wait_id: int
    agent: str
    resource: str
    mode: str
    deadline: float
    effects: Effects = Effects()

    @property
    def granted(self) -> bool:
        """False: the scenario op ``lock``'s ``granted``."""
        return False


@dataclasses.dataclass(frozen=True)
class Refused:
    """A try-once request (``timeout_s`` 0) that could not be granted; nothing changed.

    ``blockers``: the other agents holding the resource in a conflicting mode or
    queued on it (sorted).
    """

    agent: str
    resource: str
    mode: str
    blockers: tuple[str, ...]
    effects: Effects = Effects()

    @property
    def granted(self) -> bool:
        """False: the scenario op ``lock``'s ``granted``."""
        return False


_Node = tuple[str, str | int]  # ("agent", id) or ("wait", wait_id)


class LockManager:
    """The lock table: holds, FIFO wait queues, leases and fencing tokens.

    Every mutating call takes ``now`` and first applies what the passage of
    time up to ``now`` implies (see the module docstring); the result's
    ``effects`` report that together with the call's own effects on others. A
    call that raises changes nothing itself; if it had already brought the
    table up to ``now``, those time effects wait in an outbox and come out with
    the next result or :meth:`take_effects` — a host that answers a failed call
    must deliver them too.
    """

    def __init__(self, lease_s: float = DEFAULT_LEASE_S) -> None:
        if isinstance(lease_s, bool) or not isinstance(lease_s, (int, float)):
            raise InvalidInput(f"lease_s must be a number, not {show(lease_s)}")
        if not (0 < lease_s < math.inf):
            raise InvalidInput(f"lease_s must be positive and finite, not {show(lease_s)}")
        self._lease_s = float(lease_s)
        self._now: float | None = None
        self._last_token = 0
        self._last_wait_id = 0
        #: resource -> agent -> lease
        self._holds: dict[str, dict[str, Lease]] = {}
        #: resource -> queued waits, oldest first
        self._queues: dict[str, deque[Wait]] = {}
        #: wait_id -> wait (every queued wait)
        self._waits: dict[int, Wait] = {}
        #: resource -> newest token of a write/exclusive grant
        self._fences: dict[str, int] = {}
        #: effects on others not yet returned, by :class:`Effects` field
        self._outbox: dict[str, list[Any]] = {field.name: [] for field in dataclasses.fields(Effects)}

    # ------------------------------------------------------------------ calls

    @property
    def lease_s(self) -> float:
        """Seconds a grant or renewal holds before it expires."""
        return self._lease_s

    @property
    def now(self) -> float | None:
        """The latest instant the table was brought up to (None before the first call)."""
        return self._now

    def acquire(
        self, agent: str, resource: str, mode: str, timeout_s: float = 0.0, *, now: float
    ) -> Granted | Queued | Refused:
        """Ask for ``resource`` in ``mode`` on behalf of ``agent``.

        ``timeout_s`` 0 tries once: :class:`Granted` or :class:`Refused`. A
        positive ``timeout_s`` (``inf``: no limit) queues the request if it
        cannot be granted now: :class:`Queued`. Raises
        :class:`~gliding_actors.errors.DeadlockError` when queueing would close a
        wait-for cycle, and :class:`~gliding_actors.errors.InvalidInput` for bad
        arguments or when ``agent`` is already queued on ``resource``.
        """
        _check_agent(agent)
        _check_resource(resource)
        _check_mode(mode)
        timeout = _check_timeout(timeout_s)
        self._advance(now)
        at = self._at()
        held = self._holds.get(resource, {}).get(agent)
        if held is not None and _RANK[held.mode] >= _RANK[mode]:
            lease = dataclasses.replace(held, expires_at=at + self._lease_s)
            self._holds[resource][agent] = lease
            return Granted(
                agent, resource, lease.mode, lease.token, lease.expires_at, True, self._take()
            )
        queue = self._queues.get(resource, ())
        if any(w.agent == agent for w in queue):
            raise InvalidInput(f"agent {show(agent)} is already waiting for {show(resource)}")
        if not queue and self._fits(resource, agent, mode):
            lease = self._grant(agent, resource, mode)
            return Granted(
                agent, resource, lease.mode, lease.token, lease.expires_at, False, self._take()
            )
        if timeout == 0:
            blockers = {w.agent for w in queue} | {
                holder
                for holder, lease in self._holds.get(resource, {}).items()
                if not modes_compatible(mode, lease.mode)
            }
            blockers.discard(agent)
            return Refused(agent, resource, mode, tuple(sorted(blockers)), self._take())
        cycle = self._find_cycle(agent, resource, mode)
        if cycle is not None:
            raise DeadlockError(
                f"agent {agent!r} waiting for {resource!r} ({mode}) would close the wait-for "
                f"cycle {' -> '.join(cycle)}; nothing was queued"
            )
        self._last_wait_id += 1
        wait = Wait(self._last_wait_id, agent, resource, mode, at, at + timeout)
        self._queues.setdefault(resource, deque()).append(wait)
        self._waits[wait.wait_id] = wait
        return Queued(wait.wait_id, agent, resource, mode, wait.deadline, self._take())

    def release(self, agent: str, resource: str, *, now: float) -> Effects:
        """Give up ``agent``'s hold on ``resource`` and grant whoever may go next.

        Releasing a lock one does not hold (for example one whose lease
        expired) does nothing: the caller's goal — not holding it — is met. A
        queued request of ``agent`` on ``resource`` stays queued (see
        :meth:`cancel`).
        """
        _check_agent(agent)
        _check_resource(resource)
        self._advance(now)
        lease = self._holds.get(resource, {}).pop(agent, None)
        if lease is not None:
            self._outbox["released"].append(lease)
            self._pump(resource)
        return self._take()

    def release_all(self, agent: str, *, now: float) -> Effects:
        """Drop every hold and every queued request of ``agent`` (e.g. it went stale)."""
        _check_agent(agent)
        self._advance(now)
        touched: set[str] = set()
        for resource in sorted(self._holds):
            lease = self._holds[resource].pop(agent, None)
            if lease is not None:
                self._outbox["released"].append(lease)
                touched.add(resource)
        for wait_id in sorted(self._waits):
            wait = self._waits[wait_id]
            if wait.agent == agent:
                self._drop_wait(wait)
                self._outbox["cancelled"].append(wait)
                touched.add(wait.resource)
        for resource in sorted(touched):
            self._pump(resource)
        return self._take()

    def cancel(self, wait_id: int, *, now: float) -> Effects:
        """Withdraw a queued request (unknown or already answered: nothing happens)."""
        if isinstance(wait_id, bool) or not isinstance(wait_id, int):
            raise InvalidInput(f"a wait id is an integer, not {show(wait_id)}")
        self._advance(now)
        wait = self._waits.get(wait_id)
        if wait is not None:
            self._drop_wait(wait)
            self._outbox["cancelled"].append(wait)
            self._pump(wait.resource)
        return self._take()

    def expire(self, now: float) -> Effects:
        """Bring the table up to ``now``: expired leases, grants they allow, timed-out waits."""
        self._advance(now)
        return self._take()

    def take_effects(self) -> Effects:
        """Effects waiting in the outbox (after a call that raised), and empty it."""
        return self._take()

    def check_fence(self, resource: str, token: int) -> None:
        """Refuse a write carrying ``token`` if a newer writer was granted ``resource`` since.

        Raises :class:`~gliding_actors.errors.ConflictError` when a write or
        exclusive grant with a newer token exists — the caller's lease expired
        and someone else took over. A token that was never issued is
        :class:`~gliding_actors.errors.InvalidInput`. Passing does not prove the
        caller still holds the lock; it proves nobody newer could have written.
        """
        _check_resource(resource)
        if isinstance(token, bool) or not isinstance(token, int) or token < 1:
            raise InvalidInput(f"a fencing token is a positive integer, not {show(token)}")
        if token > self._last_token:
            raise InvalidInput(f"fencing token {token} was never issued")
        fence = self._fences.get(resource, 0)
        if token < fence:
            raise ConflictError(
                f"fencing token {token} on {resource!r} is stale: token {fence} was granted since"
            )

    # ------------------------------------------------------------------ queries

    def fence(self, resource: str) -> int:
        """The newest write/exclusive token granted on ``resource`` (0: none yet)."""
        _check_resource(resource)
        return self._fences.get(resource, 0)

    def holders(self, resource: str) -> dict[str, Lease]:
        """Who holds ``resource`` now, by agent (sorted)."""
        _check_resource(resource)
        held = self._holds.get(resource, {})
        return {agent: held[agent] for agent in sorted(held)}

    def queue(self, resource: str) -> list[Wait]:
        """The requests queued on ``resource``, oldest first."""
        _check_resource(resource)
        return list(self._queues.get(resource, ()))

    def held_by(self, agent: str) -> list[Lease]:
        """Every hold of ``agent``, sorted by resource."""
        _check_agent(agent)
        return [self._holds[r][agent] for r in sorted(self._holds) if agent in self._holds[r]]

    def waits_of(self, agent: str) -> list[Wait]:
        """Every queued request of ``agent``, oldest first."""
        _check_agent(agent)
        return [self._waits[i] for i in sorted(self._waits) if self._waits[i].agent == agent]

    def next_deadline(self) -> float | None:
        """The next instant something happens by itself (a lease expiry or a wait time-out)."""
        return self._next_due()

    @property
    def waits_queued(self) -> int:
        """How many requests have had to wait since the table was made (every wait ever queued)."""
        return self._last_wait_id

    @property
    def waiting(self) -> int:
        """Requests waiting now."""
        return len(self._waits)

    @property
    def held(self) -> int:
        """Leases held now (one per agent and resource)."""
        return sum(len(h) for h in list(self._holds.values()))

    def snapshot(self) -> dict[str, Any]:
        """The whole state as plain, sorted, msgpack-serialisable data."""
        return {
            "now": self._now,
            "lease_s": self._lease_s,
            "last_token": self._last_token,
            "last_wait_id": self._last_wait_id,
            "resources": {
                r: {
                    "holders": {
                        a: _without(lease.to_dict(), "agent", "resource")
                        for a, lease in sorted(self._holds.get(r, {}).items())
                    },
                    "queue": [_without(w.to_dict(), "resource") for w in self._queues.get(r, ())],
                }
                for r in sorted(set(self._holds) | set(self._queues))
            },
            "fences": {r: self._fences[r] for r in sorted(self._fences)},
            "outbox": {name: [x.to_dict() for x in out] for name, out in self._outbox.items()},
        }

    # ------------------------------------------------------------------ private

    def _at(self) -> float:
        assert self._now is not None
        return self._now

    def _advance(self, now: float) -> None:
        """Apply every lease expiry and wait time-out due by ``now``, in time order."""
        now = _check_now(now)
        if self._now is not None and now < self._now:
            now = self._now
        while True:
            due = self._next_due()
            if due is None or due > now:
                break
            self._now = due if self._now is None else max(self._now, due)
            touched: set[str] = set()
            for resource in sorted(self._holds):
                held = self._holds[resource]
                for agent in sorted(held):
                    if held[agent].expires_at <= due:
                        self._outbox["expired"].append(held.pop(agent))
                        touched.add(resource)
            for resource in sorted(touched):
                self._pump(resource)
            touched = set()
            for wait_id in sorted(self._waits):
                wait = self._waits[wait_id]
                if wait.deadline <= due:
                    self._drop_wait(wait)
                    self._outbox["timed_out"].append(wait)
                    touched.add(wait.resource)
            for resource in sorted(touched):
                self._pump(resource)
        self._now = now

    def _next_due(self) -> float | None:
        times = [lease.expires_at for held in self._holds.values() for lease in held.values()]
        times.extend(w.deadline for w in self._waits.values() if w.deadline < math.inf)
        return min(times) if times else None

    def _fits(self, resource: str, agent: str, mode: str) -> bool:
        """True if ``mode`` is compatible with every other agent's hold on ``resource``."""
        return all(
            modes_compatible(mode, lease.mode)
            for holder, lease in self._holds.get(resource, {}).items()
            if holder != agent
        )

    def _grant(self, agent: str, resource: str, mode: str) -> Lease:
        at = self._at()
        self._last_token += 1
        lease = Lease(agent, resource, mode, self._last_token, at, at + self._lease_s)
        self._holds.setdefault(resource, {})[agent] = lease
        if mode != "read":
            self._fences[resource] = lease.token
        return lease

    def _pump(self, resource: str) -> None:
        """Grant queued requests on ``resource`` from the head while they fit (strict FIFO), then drop its empty entries."""
        queue = self._queues.get(resource)
        while queue and self._fits(resource, queue[0].agent, queue[0].mode):
            wait = queue.popleft()
            del self._waits[wait.wait_id]
            lease = self._grant(wait.agent, resource, wait.mode)
            self._outbox["granted"].append(
                Grant(wait.wait_id, wait.agent, resource, lease.mode, lease.token, lease.expires_at)
            )
        if resource in self._holds and not self._holds[resource]:
            del self._holds[resource]
        if resource in self._queues and not self._queues[resource]:
            del self._queues[resource]

    def _drop_wait(self, wait: Wait) -> None:
        del self._waits[wait.wait_id]
        self._queues[wait.resource].remove(wait)

    def _take(self) -> Effects:
        effects = Effects(**{name: tuple(out) for name, out in self._outbox.items()})
        for out in self._outbox.values():
            out.clear()
        return effects

    # --- wait-for graph ---------------------------------------------------

    def _request_edges(
        self, agent: str, resource: str, mode: str, ahead: Iterable[Wait]
    ) -> list[_Node]:
        """What a request of ``agent`` with the waits ``ahead`` of it on ``resource`` waits for."""
        ahead = list(ahead)
        agents = {
            h
            for h, lease in self._holds.get(resource, {}).items()
            if h != agent and not modes_compatible(mode, lease.mode)
        }
        agents |= {
            w.agent for w in ahead if w.agent != agent and not modes_compatible(mode, w.mode)
        }
        nodes: list[_Node] = [("agent", a) for a in sorted(agents)]
        if ahead:
            nodes.append(("wait", ahead[-1].wait_id))
        return nodes

    def _successors(self, node: _Node) -> list[_Node]:
        kind, key = node
        if kind == "agent":
            return [("wait", i) for i in sorted(self._waits) if self._waits[i].agent == key]
        assert isinstance(key, int)
        wait = self._waits[key]
        queue = list(self._queues[wait.resource])
        ahead = queue[: queue.index(wait)]
        return self._request_edges(wait.agent, wait.resource, wait.mode, ahead)

    def _find_cycle(self, agent: str, resource: str, mode: str) -> list[str] | None:
        """The agents of the cycle a new request would close, or None (breadth-first: shortest)."""
        target: _Node = ("agent", agent)
        start = self._request_edges(agent, resource, mode, self._queues.get(resource, ()))
        parent: dict[_Node, _Node | None] = {}
        frontier: list[_Node] = []
        for node in start:
            if node not in parent:
                parent[node] = None
                frontier.append(node)
        while frontier:
            following: list[_Node] = []
            for node in frontier:
                if node == target:
                    return self._cycle_agents(agent, node, parent)
                for nxt in self._successors(node):
                    if nxt not in parent:
                        parent[nxt] = node
                        following.append(nxt)
            frontier = following
        return None

    def _cycle_agents(self, agent: str, end: _Node, parent: dict[_Node, _Node | None]) -> list[str]:
        """Name the agents along a found path (a request counts as its agent), repeats folded."""
        chain: list[_Node] = []
        step: _Node | None = end
        while step is not None:
            chain.append(step)
            step = parent[step]
        names = [agent]
        for kind, key in reversed(chain):
            name = str(key) if kind == "agent" else self._waits[int(key)].agent
            if name != names[-1]:
                names.append(name)
        return names


def _without(data: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in keys}


def _check_label(value: object, what: str) -> None:
    if not is_valid_label(value):
        raise InvalidInput(f"{what} is a non-empty string without control characters, not {show(value)}")


def _check_agent(agent: object) -> None:
    _check_label(agent, "an agent id")


def _check_resource(resource: object) -> None:
    _check_label(resource, "a lock resource")


def _check_now(now: object) -> float:
    if isinstance(now, bool) or not isinstance(now, (int, float)) or not math.isfinite(now):
        raise InvalidInput(f"now must be a finite number of seconds, not {show(now)}")
    return float(now)


def _check_mode(mode: object) -> None:
    if not isinstance(mode, str) or mode not in _RANK:
        raise InvalidInput(f"unknown lock mode {show(mode)} (modes: {', '.join(MODES)})")


def _check_timeout(timeout_s: object) -> float:
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)):
        raise InvalidInput(f"timeout_s must be a number of seconds, not {show(timeout_s)}")
    if math.isnan(timeout_s) or timeout_s < 0:
        raise InvalidInput(f"timeout_s must be 0 or more, not {show(timeout_s)}")
    return float(timeout_s)
