"""Replaying a scenario: issue each step's ops, wait, check, record.

The engine is the same for every runtime. On ``sim`` the whole run is a pure
function of (file, seed): waiting on an op drives the simulator, whose seeded
scheduler interleaves the protocol messages of everything in flight. On
``threads`` the same steps run on real Pykka threads against a virtual clock
(``advance`` must still move time exactly).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Protocol, runtime_checkable

from gliding_actors.clock import VirtualClock
from gliding_actors.errors import GlidingError, Timeout
from gliding_actors.runtime import Future
from gliding_actors.scenario._expect import Mismatch, check_expectations
from gliding_actors.scenario._invariants import run_invariants
from gliding_actors.scenario._model import OpStep, ParallelStep, Position, Scenario, Step
from gliding_actors.scenario._ops import ReplayWorld, implementation, implemented_ops
from gliding_actors.scenario._opspecs import get_op_spec
from gliding_actors.system import MemorySystem

__all__ = ["Failure", "OpOutcome", "RunResult", "replay"]

CONTROL_OPS = frozenset({"advance", "quiesce", "check"})


def main_list_of(op: str) -> str | None:
    """The result key that ``contains``/``excludes``/``count`` refer to for ``op``."""
    try:
        return get_op_spec(op).main_list
    except KeyError:
        return None


@dataclasses.dataclass(frozen=True)
class OpOutcome:
    """What one op did: its result mapping, or the error it failed with."""

    step: OpStep
    result: Mapping[str, Any] | None
    error: BaseException | None
    mismatches: tuple[Mismatch, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "step": self.step.where,
            "line": self.step.pos.line,
            "op": self.step.op,
            "agent": self.step.agent,
            "args": dict(self.step.args),
        }
        if self.error is not None:
            data["error"] = {"name": type(self.error).__name__, "message": str(self.error)}
        else:
            data["result"] = _jsonable(self.result)
        return data


@dataclasses.dataclass(frozen=True)
class Failure:
    """Why a run failed: where, with which seed, what was expected and what came."""

    file: str
    where: str
    pos: Position
    seed: int
    runtime: str
    what: str
    expected: Any = None
    actual: Any = None
    recent: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "where": self.where,
            "line": self.pos.line,
            "col": self.pos.col,
            "seed": self.seed,
            "runtime": self.runtime,
            "what": self.what,
            "expected": _jsonable(self.expected),
            "actual": _jsonable(self.actual),
            "recent_messages": list(self.recent),
        }


@dataclasses.dataclass
class RunResult:
    """The outcome of replaying one file with one seed."""

    file: str
    name: str
    seed: int
    runtime: str
    outcomes: list[OpOutcome] = dataclasses.field(default_factory=list)
    failure: Failure | None = None
    steps_run: int = 0
    invariant_checks: int = 0
    messages: int = 0
    log_hash: str | None = None
    #: with ``replay(keep_log=True)`` on sim: every protocol event of the run, in order
    protocol_log: list[Any] = dataclasses.field(default_factory=list)
    #: with ``keep_log=True``: (length of ``protocol_log`` when a step ended, the step's label)
    step_marks: list[tuple[int, str]] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.failure is None

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "name": self.name,
            "seed": self.seed,
            "runtime": self.runtime,
            "ok": self.ok,
            "steps_run": self.steps_run,
            "ops": len(self.outcomes),
            "invariant_checks": self.invariant_checks,
            "messages": self.messages,
            "log_hash": self.log_hash,
            "failure": None if self.failure is None else self.failure.to_json(),
        }


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


class _Stop(Exception):
    """Ends a run at the first failure."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.what)
        self.failure = failure


@runtime_checkable
class _TimersOutsideTheLoop(Protocol):
    """A runtime whose actors run on their own (threads, Ray): the replay moves
    its virtual clock to the next timer once every message is handled."""

    def is_quiescent(self) -> bool: ...

    def next_timer(self) -> float | None: ...


StepCallback = Callable[[Step, list[OpOutcome]], None]


def replay(
    scenario: Scenario,
    *,
    seed: int | None = None,
    runtime: str = "sim",
    record: IO[str] | None = None,
    on_step: StepCallback | None = None,
    op_timeout_s: float | None = None,
    keep_log: bool = False,
) -> RunResult:
    """Replay ``scenario`` once; ``seed`` defaults to the file's own seed.

    ``record`` receives one JSON line per op (its args and result or error);
    ``on_step`` is called after every step with the outcomes of its ops;
    ``keep_log`` keeps the simulator's protocol log and step boundaries in the
    result (``protocol_log``, ``step_marks``: the sequence diagram's input).
    """
    run_seed = scenario.seed if seed is None else seed
    implemented_ops()  # import every layer's ops, and with them its invariants
    result = RunResult(file=scenario.path, name=scenario.name, seed=run_seed, runtime=runtime)
    clock = VirtualClock()
    system = MemorySystem.open(
        config=scenario.config, runtime=runtime, clock=clock, seed=run_seed, trace=64
    )
    world: ReplayWorld | None = None
    try:
        world = ReplayWorld(
            scenario=scenario,
            system=system,
            seed=run_seed,
            agents={a.id: system.agent(a.id, a.role) for a in scenario.agents},
        )
        engine = _Engine(world, result, clock, record, on_step, op_timeout_s)
        engine.keep_log = keep_log
        try:
            for step in scenario.steps:
                engine.run_step(step)
                result.steps_run += 1
            engine.finish()
        except _Stop as stop:
            result.failure = stop.failure
    finally:
        # A ``crash: process`` step replaces the system; every runtime the run
        # used counts towards its message log.
        current = system if world is None else world.system
        retired: list[MemorySystem] = [] if world is None else list(world.state.get("retired_systems", []))
        runtimes = [s.runtime for s in [*retired, current]]
        logs = [rt.message_log() for rt in runtimes]
        if all(log is not None for log in logs):
            kept = [log for log in logs if log is not None]
            hashes = [log.log_hash() for log in kept]
            result.log_hash = hashes[0] if len(hashes) == 1 else hashlib.sha256("".join(hashes).encode()).hexdigest()
            result.messages = sum(log.delivered for log in kept)
            if keep_log:
                result.protocol_log = [e for log in kept for e in log.log]
        current.close()
    return result


class _Engine:
    def __init__(
        self,
        world: ReplayWorld,
        result: RunResult,
        clock: VirtualClock,
        record: IO[str] | None,
        on_step: StepCallback | None,
        op_timeout_s: float | None,
    ) -> None:
        self.world = world
        self.result = result
        self.clock = clock
        self.record = record
        self.on_step = on_step
        self.timeout = op_timeout_s
        self.keep_log = False

    # -- failure reporting ---------------------------------------------------
    def _recent(self) -> tuple[str, ...]:
        return self.world.system.runtime.recent_messages()

    def fail(self, where: str, pos: Position, what: str, expected: Any = None, actual: Any = None) -> _Stop:
        return _Stop(
            Failure(
                file=self.world.scenario.path,
                where=where,
                pos=pos,
                seed=self.world.seed,
                runtime=self.result.runtime,
                what=what,
                expected=expected,
                actual=actual,
                recent=self._recent(),
            )
        )

    def mismatched(self, where: str, pos: Position, what: str, found: Sequence[Mismatch]) -> _Stop:
        """The failure of unmet expectations: the first named, each key's expected and actual value."""
        expected = {m.key: m.expected for m in found}
        actual = {m.key: m.actual for m in found}
        return self.fail(where, pos, f"{what}: {found[0]}", expected=expected, actual=actual)

    # -- steps -----------------------------------------------------------------
    def run_step(self, step: Step) -> None:
        if self.keep_log and not self.result.step_marks:
            self._mark("set-up")  # the agents joining, before the first step
        if isinstance(step, OpStep) and step.op in CONTROL_OPS:
            self._control(step)
            outcomes: list[OpOutcome] = []
        else:
            ops = step.ops if isinstance(step, ParallelStep) else (step,)
            outcomes = self._run_ops(ops)
        if self.on_step is not None:
            self.on_step(step, outcomes)
        if self.keep_log:
            ops = step.ops if isinstance(step, ParallelStep) else (step,)
            what = " ∥ ".join(f"{op.op}{' ' + op.agent if op.agent else ''}" for op in ops)
            self._mark(f"step {step.number}: {what}")
        self._check_invariants(f"after step {step.number}", step.pos)
        if self.keep_log:
            self._mark("invariant checks")
        else:
            self._forget_log()

    def _forget_log(self) -> None:
        """Let the simulator drop the deliveries every reader has read (``ReplayWorld.log_readers``):
        a replay that does not return the log should not hold every message of the run until it ends."""
        log = self.world.system.runtime.message_log()
        if log is not None:
            readers = self.world.log_readers
            log.forget_log(min(readers.values()) if readers else None)

    def _mark(self, label: str) -> None:
        """Note how long the protocol log is now (sim only): the messages since the last mark are ``label``'s."""
        retired = list(self.world.state.get("retired_systems", []))
        runtimes = [s.runtime for s in [*retired, self.world.system]]
        length = sum(len(log.log) for log in (rt.message_log() for rt in runtimes) if log is not None)
        marks = self.result.step_marks
        if label in ("set-up", "invariant checks") and length == (marks[-1][0] if marks else 0):
            return  # they sent nothing
        marks.append((length, label))

    def _control(self, step: OpStep) -> None:
        if step.op == "advance":
            self.clock.advance(float(step.args["seconds"]))
        elif step.op == "quiesce":
            self._quiesce(step.where, step.pos)
        # "check" runs the invariants, which run_step does after every step anyway.

    def _quiesce(self, where: str, pos: Position) -> None:
        try:
            self.world.system.quiesce(self.timeout)
        except Timeout as exc:
            raise self.fail(where, pos, f"quiesce: {exc}") from None

    def _issue(self, step: OpStep) -> Future[Mapping[str, Any]] | BaseException:
        impl = implementation(step.op)
        if impl is None:
            raise self.fail(
                step.where,
                step.pos,
                f"op {step.op!r} is part of format v1 but this build does not implement it yet",
            )
        try:
            return impl(self.world, step)
        except GlidingError as exc:  # refused before anything was sent
            return exc

    def _wait_in_virtual_time(self, futures: list[Future[Mapping[str, Any]]]) -> None:
        """On threads (or Ray) with a virtual clock, waiting must move time as the simulator does.

        While ops are pending and every message has been handled, jump the
        clock to the next timer (a lock wait's time-out, a lease) if it falls
        within the op timeout in virtual seconds; otherwise just let the real
        time-out run out in ``get``.
        """
        rt = self.world.system.runtime
        if not isinstance(rt, _TimersOutsideTheLoop):
            return
        limit = self.timeout if self.timeout is not None else rt.ask_timeout_s
        horizon = self.clock.now() + limit
        real_deadline = time.monotonic() + limit
        while not all(f.done() for f in futures) and time.monotonic() < real_deadline:
            due = rt.next_timer()
            # done is asked again after quiescence: an op may have completed while it was judged
            if rt.is_quiescent() and due is not None and due <= horizon and not all(f.done() for f in futures):
                self.clock.set(max(self.clock.now(), due))
            time.sleep(0.001)

    def _run_ops(self, ops: tuple[OpStep, ...]) -> list[OpOutcome]:
        issued = [(step, self._issue(step)) for step in ops]
        self._wait_in_virtual_time([f for _s, f in issued if not isinstance(f, BaseException)])
        outcomes: list[OpOutcome] = []
        pending: list[str] = []
        for step, future in issued:
            if isinstance(future, BaseException):
                outcomes.append(OpOutcome(step, None, future))
                continue
            try:
                value = future.get(self.timeout)
                outcomes.append(OpOutcome(step, dict(value), None))
            except Timeout:
                pending.append(f"{step.where} ({step.op} by {step.agent}, line {step.pos.line})")
            except GlidingError as exc:
                outcomes.append(OpOutcome(step, None, exc))
        if pending:
            raise self.fail(
                ops[0].where,
                ops[0].pos,
                "ops did not complete (hang): " + "; ".join(pending),
            )
        checked = [self._check(outcome) for outcome in outcomes]
        for outcome in checked:
            self.result.outcomes.append(outcome)
            if self.record is not None:
                self.record.write(json.dumps(outcome.to_json(), sort_keys=True) + "\n")
            if outcome.step.label is not None and outcome.result is not None:
                self.world.labels[outcome.step.label] = outcome.result
        for outcome in checked:
            if outcome.mismatches:
                step = outcome.step
                raise self.mismatched(step.where, step.pos, step.op, outcome.mismatches)
        return checked

    def _check(self, outcome: OpOutcome) -> OpOutcome:
        step = outcome.step
        expect = step.expect or {}
        if not expect and outcome.error is None:
            return outcome
        mismatches = check_expectations(
            expect,
            result=outcome.result,
            error=outcome.error,
            main_list=main_list_of(step.op),
            labels=self.world.labels,
        )
        return dataclasses.replace(outcome, mismatches=tuple(mismatches))

    def _check_invariants(self, where: str, pos: Position) -> None:
        self.result.invariant_checks += 1
        violations = run_invariants(self.world)
        if violations:
            raise self.fail(where, pos, "invariant violated: " + violations[0], actual=violations)

    def finish(self) -> None:
        scenario = self.world.scenario
        end = scenario.final_pos or Position(scenario.path, 1, 1)
        self._quiesce("final", end)
        self._check_invariants("at the end", end)
        final = scenario.final or {}
        for iri, expect in (final.get("lines") or {}).items():
            self._final_op("inspect", None, {"iri": iri}, expect, end, f"final line {iri}")
        for agent, expect in (final.get("session") or {}).items():
            self._final_op("session", agent, {}, expect, end, f"final session of {agent}")

    def _final_op(
        self, op: str, agent: str | None, args: dict[str, Any], expect: Mapping[str, Any], pos: Position, where: str
    ) -> None:
        step = OpStep(op=op, agent=agent, args=args, expect=expect, label=None, pos=pos, number=0)
        impl = implementation(op)
        if impl is None:
            raise self.fail(where, pos, f"final: op {op!r} is not implemented by this build yet")
        try:
            value: Mapping[str, Any] | None = dict(impl(self.world, step).get(self.timeout))
            error: BaseException | None = None
        except GlidingError as exc:
            value, error = None, exc
        mismatches = check_expectations(
            expect, result=value, error=error, main_list=main_list_of(op), labels=self.world.labels
        )
        if mismatches:
            raise self.mismatched(where, pos, where, mismatches)


def load_and_replay(path: str | Path, **kwargs: Any) -> RunResult:
    """Load ``path`` and replay it (a convenience for tests and the API)."""
    from gliding_actors.scenario._loader import load_scenario

    return replay(load_scenario(path), **kwargs)

