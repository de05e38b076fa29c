"""Agent awareness on the blackboard: who is there, what each is doing, who went quiet.

:class:`AgentRegistry` keeps one record per agent — role, status, current
operation, last heartbeat — and decides staleness against the ``now`` its host
passes in (read from the injected clock), so it is deterministic and never
needs a timer of its own: the host schedules one at
:meth:`AgentRegistry.next_deadline` and calls :func:`release_stale` when it
fires.

Why these rules:

* **Stale is a fact about time, not a flag.** An agent is stale when
  ``now ≥ last heartbeat + timeout`` (at the deadline, not after it, so a timer
  set for :meth:`~AgentRegistry.next_deadline` finds it stale). Listings
  compute it from ``now``; :meth:`~AgentRegistry.sweep` additionally remembers
  which agents it already reported, so each one is announced (and its locks
  released) once per silence, not on every sweep.
* **A heartbeat revives.** A stale agent that heartbeats again is live again;
  its released locks stay released (another agent may hold them by now, which
  the fencing tokens of :mod:`~gliding_actors.l2._locks` make safe).
* **Omitted fields keep their value.** ``heartbeat(status=None)`` keeps the
  status; ``operation`` left out (:data:`KEEP`) keeps the operation, while an
  explicit ``None`` clears it — the scenario op ``heartbeat`` sends only the
  keys it has.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import Any

from gliding_actors.errors import InvalidInput, show
from gliding_actors.l2._locks import Effects, LockManager, _check_agent, _check_now
from gliding_actors.l2._permissions import ROLES

__all__ = [
    "AGENT_STATUSES",
    "DEFAULT_HEARTBEAT_TIMEOUT_S",
    "KEEP",
    "AgentInfo",
    "AgentRegistry",
    "StaleSweep",
    "release_stale",
]

#: Statuses an agent reports with a heartbeat; a registered agent starts ``idle``.
AGENT_STATUSES: tuple[str, ...] = ("idle", "working", "waiting", "completed", "error")

#: Seconds without a heartbeat after which an agent is stale, by default.
DEFAULT_HEARTBEAT_TIMEOUT_S = 30.0


class _Keep(enum.Enum):
    KEEP = "keep"


#: ``heartbeat(operation=KEEP)``: leave the current operation as it is.
KEEP = _Keep.KEEP


@dataclasses.dataclass(frozen=True)
class AgentInfo:
    """One agent as plain values, as seen at some ``now``."""

    agent: str
    role: str
    status: str
    operation: str | None
    registered_at: float
    last_seen: float
    stale: bool

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class _Agent:
    role: str
    status: str
    operation: str | None
    registered_at: float
    last_seen: float
    #: Reported stale by a sweep and not heard from since.
    reported: bool = False


class AgentRegistry:
    """Registered agents and their heartbeats; see the module docstring."""

    def __init__(self, timeout_s: float = DEFAULT_HEARTBEAT_TIMEOUT_S) -> None:
        """``timeout_s`` ≥ 0 (0: every agent is stale at once, i.e. awareness is off)."""
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)):
            raise InvalidInput(f"timeout_s must be a number, not {show(timeout_s)}")
        if not (0 <= timeout_s < math.inf):
            raise InvalidInput(f"timeout_s must be finite and 0 or more, not {show(timeout_s)}")
        self._timeout_s = float(timeout_s)
        self._agents: dict[str, _Agent] = {}

    @property
    def timeout_s(self) -> float:
        return self._timeout_s

    # ------------------------------------------------------------------ changes

    def register(self, agent: str, role: str, *, now: float) -> AgentInfo:
        """Add ``agent`` with ``role``, idle and just seen.

        Registering again with the same role is a restart: the agent is idle,
        has no operation and is live. A different role is
        :class:`~gliding_actors.errors.InvalidInput` (ids are unique per team).
        """
        _check_agent(agent)
        if role not in ROLES:
            raise InvalidInput(f"unknown role {show(role)} (roles: {', '.join(ROLES)})")
        at = _check_now(now)
        known = self._agents.get(agent)
        if known is not None and known.role != role:
            raise InvalidInput(f"agent {show(agent)} is already registered as {known.role}, not {role}")
        if known is None:
            self._agents[agent] = _Agent(role, "idle", None, at, at)
        else:
            known.status, known.operation, known.reported = "idle", None, False
            known.last_seen = max(known.last_seen, at)
        return self.info(agent, now=at)

    def heartbeat(
        self,
        agent: str,
        *,
        now: float,
        status: str | None = None,
        operation: str | None | _Keep = KEEP,
    ) -> AgentInfo:
        """Record that ``agent`` is alive at ``now``, optionally with a new status / operation.

        An unknown agent, status or a non-string operation is
        :class:`~gliding_actors.errors.InvalidInput`. A heartbeat older than
        the last one (a late message) still revives but does not move
        ``last_seen`` back.
        """
        _check_agent(agent)
        if status is not None and status not in AGENT_STATUSES:
            raise InvalidInput(
                f"unknown agent status {show(status)} (statuses: {', '.join(AGENT_STATUSES)})"
            )
        if operation is not KEEP and operation is not None and not isinstance(operation, str):
            raise InvalidInput(f"an operation is a string or null, not {show(operation)}")
        at = _check_now(now)
        record = self._get(agent)
        record.last_seen = max(record.last_seen, at)
        record.reported = False
        if status is not None:
            record.status = status
        if not isinstance(operation, _Keep):
            record.operation = operation
        return self.info(agent, now=at)

    def unregister(self, agent: str) -> None:
        """Forget ``agent`` (unknown: :class:`~gliding_actors.errors.InvalidInput`)."""
        _check_agent(agent)
        self._get(agent)
        del self._agents[agent]

    def sweep(self, now: float) -> list[str]:
        """The agents that are stale at ``now`` and were not reported yet (sorted); marks them."""
        at = _check_now(now)
        fresh = [
            a
            for a in sorted(self._agents)
            if not self._agents[a].reported and self._overdue(self._agents[a], at)
        ]
        for agent in fresh:
            self._agents[agent].reported = True
        return fresh

    # ------------------------------------------------------------------ queries

    def __contains__(self, agent: object) -> bool:
        return agent in self._agents

    def info(self, agent: str, *, now: float) -> AgentInfo:
        """One agent as seen at ``now``."""
        _check_agent(agent)
        at = _check_now(now)
        record = self._get(agent)
        return AgentInfo(
            agent,
            record.role,
            record.status,
            record.operation,
            record.registered_at,
            record.last_seen,
            self._overdue(record, at),
        )

    def agents(self, *, now: float) -> dict[str, AgentInfo]:
        """Every agent as seen at ``now``, by id (sorted)."""
        return {a: self.info(a, now=now) for a in sorted(self._agents)}

    def listing(self, *, now: float) -> dict[str, dict[str, Any]]:
        """The scenario op ``agents``'s result: ``{id: {role, status, stale}}``."""
        return {
            a: {"role": i.role, "status": i.status, "stale": i.stale}
            for a, i in self.agents(now=now).items()
        }

    def is_stale(self, agent: str, *, now: float) -> bool:
        """True if ``agent`` has not heartbeated within the timeout at ``now``."""
        return self.info(agent, now=now).stale

    def next_deadline(self) -> float | None:
        """When the next not-yet-reported agent goes stale if it stays silent (None: nobody)."""
        times = [r.last_seen + self._timeout_s for r in self._agents.values() if not r.reported]
        return min(times) if times else None

    def snapshot(self) -> dict[str, Any]:
        """Every record as plain, sorted, msgpack-ready data (staleness needs a ``now``: see info)."""
        return {
            "timeout_s": self._timeout_s,
            "agents": {a: dataclasses.asdict(self._agents[a]) for a in sorted(self._agents)},
        }

    # ------------------------------------------------------------------ private

    def _get(self, agent: str) -> _Agent:
        record = self._agents.get(agent)
        if record is None:
            raise InvalidInput(f"unknown agent {show(agent)}")
        return record

    def _overdue(self, record: _Agent, now: float) -> bool:
        return now >= record.last_seen + self._timeout_s


@dataclasses.dataclass(frozen=True)
class StaleSweep:
    """What :func:`release_stale` did.

    ``stale``: agents newly found stale (sorted). ``effects``: everything the
    lock table did meanwhile (time passing, the stale agents' holds released and
    waits cancelled, the grants that followed) — answer waiters from it.
    ``events``: one ``agent.stale`` event per stale agent, to publish.
    """

    stale: tuple[str, ...]
    effects: Effects
    events: tuple[dict[str, Any], ...]


def release_stale(registry: AgentRegistry, locks: LockManager, now: float) -> StaleSweep:
    """Find newly stale agents, release their locks and cancel their waits, at ``now``.

    Each event is ``{"type": "agent.stale", "agent", "role", "last_seen",
    "released": [resources, sorted], "cancelled": [wait ids]}``.
    """
    stale = registry.sweep(now)
    effects = locks.expire(now)
    events: list[dict[str, Any]] = []
    for agent in stale:
        released = locks.release_all(agent, now=now)
        effects = effects + released
        record = registry.info(agent, now=now)
        events.append(
            {
                "type": "agent.stale",
                "agent": agent,
                "role": record.role,
                "last_seen": record.last_seen,
                "released": sorted(lease.resource for lease in released.released),
                "cancelled": [wait.wait_id for wait in released.cancelled],
            }
        )
    return StaleSweep(tuple(stale), effects, tuple(events))
