"""Scenario ops and invariants of the coherence layer (spec: read, write, cas,
delete, evict, inspect, flush; invariants "single writer", "data value",
"directory agreement", "versions never go back", "write-through lines in L0").

The invariants need the truth to compare with, so every completed write's
result is recorded here as the scenario runs (the latest completed version and
value of each line, and each agent's highest version seen).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from gliding_actors.coherence._hosting import CACHE_PREFIX
from gliding_actors.runtime import CompletedFuture, Future, MappedFuture
from gliding_actors.scenario._invariants import invariant
from gliding_actors.scenario._model import OpStep
from gliding_actors.scenario._ops import ReplayWorld, implements

__all__ = ["line_disagreement"]

_STABLE = {"I", "S", "E", "M"}


@dataclasses.dataclass
class _Truth:
    """What the scenario knows happened: completed writes and versions seen."""

    #: iri -> (version, value) of the latest completed write or delete
    latest: dict[str, tuple[int, Any]] = dataclasses.field(default_factory=dict)
    #: (agent, iri) -> highest version that agent has seen
    seen: dict[tuple[str, str], int] = dataclasses.field(default_factory=dict)
    #: iri -> version of the latest completed write-through write
    through: dict[str, int] = dataclasses.field(default_factory=dict)
    problems: list[str] = dataclasses.field(default_factory=list)

    def saw(self, agent: str, iri: str, version: int) -> None:
        before = self.seen.get((agent, iri), 0)
        if version < before:
            self.problems.append(f"{agent} saw {iri} go back from v{before} to v{version}")
        else:
            self.seen[(agent, iri)] = version

    def lost(self, iri: str, version: int, value: Any) -> None:
        """A crash reported the line's newest write lost: ``version`` is what survived.

        The survivor becomes the latest completed write, and what agents saw
        of the lost versions no longer counts against them. Only lines the
        crash *reported* are forgiven, so losing an unreported one still
        fails the data-value and version invariants.
        """
        self.latest[iri] = (version, value)
        for key, seen in list(self.seen.items()):
            if key[1] == iri and seen > version:
                self.seen[key] = version

    def wrote(self, agent: str, iri: str, version: int, value: Any, through: bool) -> None:
        have = self.latest.get(iri, (0, None))[0]
        if version > have:
            self.latest[iri] = (version, value)
        if through:
            self.through[iri] = max(version, self.through.get(iri, 0))
        self.saw(agent, iri, version)


def _truth(world: ReplayWorld) -> _Truth:
    truth: _Truth | None = world.state.get("coherence")
    if truth is None:
        truth = world.state["coherence"] = _Truth()
        # the system deletes expired lines: those tombstones are completed writes too
        sweeper = world.system.expiry
        sweeper.listeners.append(lambda iri, version: truth.wrote(sweeper.agent_id, iri, version, None, False))
    return truth


def _track(future: Future[Any], record: Any) -> Future[Mapping[str, Any]]:
    def done(result: Any) -> Mapping[str, Any]:
        out = dict(result)
        record(out)
        return out

    return MappedFuture(future, done)


@implements("read")
def _read(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    agent = world.agent(step)
    iri = step.args["iri"]
    truth = _truth(world)
    system = world.system

    def seen(result: Mapping[str, Any]) -> None:
        # A line the reader's role may not read answers as absent (version 0): no version was seen.
        if result["version"] > 0 or system.may_read(agent.role, iri):
            truth.saw(agent.id, iri, result["version"])

    return _track(agent.submit_read(iri), seen)


def _write_like(world: ReplayWorld, step: OpStep, future: Future[Any], value: Any) -> Future[Mapping[str, Any]]:
    agent = world.agent(step)
    iri = step.args["iri"]
    truth = _truth(world)
    def wrote(r: Mapping[str, Any]) -> None:
        truth.wrote(agent.id, iri, r["version"], value, r.get("policy") == "write_through")

    return _track(future, wrote)


@implements("write")
def _write(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    args = step.args
    future = world.agent(step).submit_write(
        args["iri"], args["value"], tags=args.get("tags"), graph=args.get("graph"),
        importance=args.get("importance"), ttl_s=args.get("ttl_s"),
    )
    return _write_like(world, step, future, args["value"])


@implements("cas")
def _cas(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    args = step.args
    future = world.agent(step).submit_cas(
        args["iri"], args["version"], args["value"], tags=args.get("tags"), graph=args.get("graph"),
        importance=args.get("importance"), ttl_s=args.get("ttl_s"),
    )
    return _write_like(world, step, future, args["value"])


def declared_edit(args: Mapping[str, Any]) -> Callable[[dict[str, Any] | None], dict[str, Any]]:
    """The function a scenario's ``modify`` declares: fields ``remove``d, then ``set``, then ``increment``ed
    (a missing field counts from 0; one that is not a number makes the function raise, so nothing changes)."""
    removed = list(args.get("remove") or ())
    assigned = dict(args.get("set") or {})
    added = dict(args.get("increment") or {})

    def edit(value: dict[str, Any] | None) -> dict[str, Any]:
        out = dict(value or {})
        for name in removed:
            out.pop(name, None)
        out.update(assigned)
        for name, by in added.items():
            current = out.get(name, 0)
            if isinstance(current, bool) or not isinstance(current, (int, float)):
                raise TypeError(f"field {name!r} is {type(current).__name__}, not a number to increment")
            out[name] = current + by
        return out

    return edit


@implements("modify")
def _modify(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    args = step.args
    agent = world.agent(step)
    future = agent.submit_modify(
        args["iri"], declared_edit(args), tags=args.get("tags"), graph=args.get("graph"), importance=args.get("importance")
    )
    truth = _truth(world)

    def wrote(r: Mapping[str, Any]) -> None:
        truth.wrote(agent.id, args["iri"], r["version"], r["value"], r.get("policy") == "write_through")

    return _track(future, wrote)


@implements("delete")
def _delete(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    future = world.agent(step).submit_delete(step.args["iri"], version=step.args.get("version"))
    return _write_like(world, step, future, None)


@implements("update")
def _update(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    """Each line the update wrote is a completed write: its value is the updater's own copy (a hit)."""
    agent = world.agent(step)
    truth = _truth(world)

    def wrote(result: Mapping[str, Any]) -> None:
        for iri, version in result["versions"].items():
            value = None if iri in result["deleted"] else agent.read(iri)["value"]
            truth.wrote(agent.id, iri, version, value, False)

    return _track(agent.submit_update(step.args["sparql"]), wrote)


@implements("sweep")
def _sweep(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    _truth(world)  # listening before the sweep deletes anything
    return CompletedFuture({"swept": world.system.sweep_expired()})


@implements("evict")
def _evict(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    return MappedFuture(world.agent(step).submit_evict(step.args["iri"]), lambda r: {"state": r["state"]})


@implements("inspect")
def _inspect(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    return world.system.submit_inspect(step.args["iri"])


@implements("flush")
def _flush(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    return MappedFuture(world.system.submit_flush(), lambda n: {"flushed": n})


@implements("crash")
def _crash(world: ReplayWorld, step: OpStep) -> Future[Mapping[str, Any]]:
    """``agent:ID``, ``directory`` (or one shard, ``dir:N``) or ``process``.

    Everything in flight lands first (the crash falls between protocol
    transactions), so this op blocks while it runs; it returns
    ``{"lost": [IRIs]}`` — the lines whose newest write died in the crash.
    """
    target = step.args["target"]
    truth = _truth(world)
    if target == "process":
        old = world.system
        world.system = old.crash_process()
        world.state.setdefault("retired_systems", []).append(old)
        world.agents = {a.id: world.system.agent(a.id, a.role) for a in world.scenario.agents}
        lost = list(world.system.lost_in_crash)
    else:
        lost = list(world.system.crash(target)["lost"])
    for iri in lost:
        found = world.system.inspect(iri, timeout=10.0)
        survivor = found["l2"] or found["l0"] or {"value": None, "version": 0}
        truth.lost(iri, int(survivor["version"]), survivor["value"])
    return CompletedFuture({"lost": lost})


# -- invariants ------------------------------------------------------------------


def _quiescent(world: ReplayWorld) -> bool:
    return world.system.runtime.known_quiescent()


@invariant("versions never go back")
def _versions(world: ReplayWorld) -> list[str]:
    truth = _truth(world)
    problems, truth.problems = truth.problems, []
    return problems


@invariant("single writer")
def _single_writer(world: ReplayWorld) -> list[str]:
    holders: dict[str, list[tuple[str, str]]] = {}
    for agent, view in sorted(world.system.board.holders().items()):
        for iri, (state, _value, _version) in view.items():
            holders.setdefault(iri, []).append((agent, state))
    out = []
    for iri, held in sorted(holders.items()):
        owners = [a for a, s in held if s in ("E", "M")]
        if len(owners) > 1 or (owners and len(held) > 1):
            out.append(f"{iri} held {sorted(held)}")
    return out


@invariant("data value")
def _data_value(world: ReplayWorld) -> list[str]:
    """Every readable copy is the latest completed write. Checked between steps,
    when every op issued so far has completed: a writer completes only after
    every other copy was invalidated, so no quiescence is needed."""
    truth = _truth(world)
    out = []
    for agent, view in sorted(world.system.board.holders().items()):
        for iri, (_state, value, version) in sorted(view.items()):
            latest = truth.latest.get(iri)
            if latest is not None and (version, value) != latest:
                out.append(f"{agent} holds {iri} v{version} {value!r}; latest completed is v{latest[0]} {latest[1]!r}")
    return out


@invariant("write-through lines in L0")
def _write_through_durable(world: ReplayWorld) -> list[str]:
    out = []
    system = world.system
    for iri, version in sorted(_truth(world).through.items()):
        held = system.durable_version(iri)
        if held < version:
            out.append(f"{iri} completed write-through v{version} but L0 holds v{held}")
    return out


def _known_lines(world: ReplayWorld) -> set[str]:
    """The lines the agreement check covers: every line a cache holds readable, and every line written."""
    return {iri for view in world.system.board.holders().values() for iri in view} | set(_truth(world).latest)


def line_disagreement(iri: str, found: Mapping[str, Any]) -> str | None:
    """How line ``iri``'s directory entry and cache copies (an ``inspect`` result) disagree, or None.

    Also what ``gliding-actors convert`` asks of a recorded inspect: expected only when settled."""
    caches = found.get("caches") or {}
    unstable = {a: s for a, s in caches.items() if s not in _STABLE}
    if unstable:
        return f"{iri}: caches in transient states at quiescence {unstable}"
    holding = {a: s for a, s in caches.items() if s != "I"}
    state = found.get("directory")
    sharers = found.get("sharers") or []
    owner = found.get("owner")
    if state == "I" and holding:
        return f"{iri}: directory I but caches hold {holding}"
    if state == "S" and (set(holding) != set(sharers) or any(s != "S" for s in holding.values())):
        return f"{iri}: directory S{sharers} but caches hold {holding}"
    if state == "EM" and (set(holding) != {owner} or holding.get(str(owner)) not in ("E", "M")):
        return f"{iri}: directory EM({owner}) but caches hold {holding}"
    if state not in ("I", "S", "EM"):
        return f"{iri}: directory in transient state {state} at quiescence"
    return None


def _disagreements(world: ReplayWorld, iris: list[str]) -> list[tuple[str, str]]:
    """``(iri, violation)`` for each of ``iris`` whose directory entry and cache copies disagree."""
    found = [(iri, line_disagreement(iri, world.system.inspect(iri, timeout=5.0))) for iri in iris]
    return [(iri, problem) for iri, problem in found if problem is not None]


def agreement_everywhere(world: ReplayWorld) -> list[str]:
    """The full check: every covered line inspected (the reference the incremental check is tested against)."""
    if not _quiescent(world):
        return []
    return [line for _iri, line in _disagreements(world, sorted(_known_lines(world)))]


#: requests that only read a coherence actor's state (inspections): they touch no line
_READ_ONLY = frozenset({"state", "states", "inspect", "ready"})
#: requests that name no line and change none by themselves: recalls / flushes of every dirty line,
#: which move a line only through a Fwd-GetS to its owner and the owner's Data home — messages naming it
_LINE_FREE = frozenset({"recall", "flush"})
#: simulator log kinds that change no actor's state by themselves (a timer's message is logged when delivered)
_INERT_KINDS = frozenset({"reply", "fail", "hold", "timer"})


def _named_lines(message: Any) -> set[str] | None:
    """The lines a message names (``iri``, or an ``iris`` list), or None if it names none."""
    if not isinstance(message, dict):
        return None
    iri = message.get("iri")
    if isinstance(iri, str):
        return {iri}
    iris = message.get("iris")
    if isinstance(iris, list) and all(isinstance(i, str) for i in iris):
        return set(iris)
    return None


@dataclasses.dataclass
class _AgreementLog:
    """What the last quiescent agreement check saw, so the next checks only the lines touched since.

    Why this is as strong as inspecting every line: a line's verdict is a
    function of its directory entry, its cache copies and the set of agents.
    Actor state changes only while an actor handles a message (or starts,
    crashes, restarts), and every coherence message that can change a line
    names it (``iri``, or ``iris``). So on the simulator, whose log holds
    every delivery, a line no delivery to or from ``dir:*`` / ``cache:*``
    named since the last check, that passed it, still passes; anything the
    log cannot attribute to lines — a crash, an injection, a dead letter, a
    message naming no line other than an inspection (:data:`_READ_ONLY`) or
    a recall / flush (:data:`_LINE_FREE`) — a reclaim, a census —, new
    agents, a new runtime after a process crash, a runtime without a log
    (threads) — makes the check inspect every line, as before. Lines
    flagged last time are inspected again, and lines new to the covered set
    are inspected. ``tests/coherence/test_agreement_incremental.py`` checks
    that it flags exactly what :func:`agreement_everywhere` flags, on random
    schedules with and without protocol bugs switched on. What it assumes
    that the full check does not: a change to a line that no message names
    (a bug that silently drops a copy while handling another line's message)
    shows only when something next touches that line.
    """

    runtime: Any = None
    #: entries of ``runtime.log`` already accounted for, counted from the start of the record
    seen: int = 0
    agents: tuple[str, ...] = ()
    covered: frozenset[str] = frozenset()
    flagged: frozenset[str] = frozenset()
    #: how many checks inspected every line, and how many only the touched ones (bench replay reports it)
    full_checks: int = 0
    incremental_checks: int = 0
    #: lines inspected by the incremental checks, and lines they covered (what a full check would inspect)
    lines_inspected: int = 0
    lines_covered: int = 0

    def touched(self, world: ReplayWorld, covered: set[str]) -> set[str] | None:
        """The covered lines to inspect, or None: inspect them all."""
        rt = world.system.runtime
        log = rt.message_log()
        agents = tuple(sorted(world.system.agents()))
        if log is None or not log.keep_log or rt is not self.runtime or agents != self.agents:
            return None
        if self.seen < log.log_start:
            return None  # entries not read yet were forgotten
        coherent = set(world.system.directories)
        touched = set(self.flagged) | (covered - self.covered)
        for entry in log.log[self.seen - log.log_start :]:
            if entry.kind in _INERT_KINDS:
                continue
            if entry.kind != "deliver":
                return None
            to_coherence = entry.dst in coherent or entry.dst.startswith(CACHE_PREFIX)
            if not (to_coherence or entry.src in coherent or entry.src.startswith(CACHE_PREFIX)):
                continue
            kind = entry.message.get("t") if isinstance(entry.message, dict) else None
            if to_coherence and kind in _READ_ONLY:
                continue
            named = _named_lines(entry.message)
            if named is not None:
                touched |= named
            elif to_coherence and kind not in _LINE_FREE:
                return None
        return touched & covered

    def checked(self, world: ReplayWorld, covered: set[str], flagged: set[str]) -> None:
        rt = world.system.runtime
        self.runtime = rt
        log = rt.message_log()
        self.seen = log.log_start + len(log.log) if log is not None else 0
        world.log_readers["directory agreement"] = self.seen  # what comes after is read at the next check
        self.agents = tuple(sorted(world.system.agents()))
        self.covered = frozenset(covered)
        self.flagged = frozenset(flagged)


@invariant("directory agreement at quiescence")
def _agreement(world: ReplayWorld) -> list[str]:
    """Directory and caches agree on every covered line, inspecting only the lines touched since the
    last check (:class:`_AgreementLog` says why that is as strong as inspecting them all)."""
    if not _quiescent(world):
        return []
    log: _AgreementLog = world.state.setdefault("agreement", _AgreementLog())
    covered = _known_lines(world)
    touched = log.touched(world, covered)
    if touched is None:
        log.full_checks += 1
        todo = covered
    else:
        log.incremental_checks += 1
        log.lines_inspected += len(touched)
        log.lines_covered += len(covered)
        todo = touched
    found = _disagreements(world, sorted(todo))
    log.checked(world, covered, {iri for iri, _line in found})
    return [line for _iri, line in found]
