"""Fault injection in the simulator: crashes at any delivery step, slow links, a process death.

Why this exists: ``MemorySystem.crash`` quiesces first, so the crash tests
only ever see a crash *between* protocol transactions. Real actors die with
messages in flight. Here a seeded workload runs on the deterministic
simulator one delivery at a time, and at random steps a fault is injected
right there — with whatever is in flight staying in flight:

* ``cache_crash``: an agent's cache crashes (``Simulator.inject``); it restarts
  empty, sends ``Reclaim``, and until each directory's ``Reclaim-Ack`` answers
  for its dead self (docs/COHERENCE.md, "Crashes"). Allowed in flight: its own
  GetS (the answer is dropped by incarnation), a WT or a Put from it, forwards
  and Invs to it (Nack / Inv-Ack / dropped). Not injected while the cache
  (a) holds a *deferred* forward or Inv — its requester would wait for ever —
  or (b) waits for a GetM's Data or Inv-Acks (IM_AD, SM_AD, IM_A, SM_A):
  other caches are then still giving the line up to it (an Inv or a Fwd-GetM
  in flight, or deferred behind their own op), and a Reclaim that frees the
  line at once would let a new owner in beside a copy not yet surrendered
  (found by this harness: seed 1 of the first sweep). See
  ``DirectoryController.reclaim``.
* ``directory_crash``: a directory shard crashes and rebuilds from a census
  of the caches, placing copies caught mid-transaction; in any state: its
  lines waiting in S_D (with the requests deferred behind them) and what a
  census held back are kept beside its home and restored. A recall's asker
  (a flush) fails with the crash.
* ``delay``: a channel is held back for a number of deliveries (a slow link).
* ``process_crash`` (at most once per seed): ``crash_process(quiesce=False)``;
  messages in flight die with the process. Checked against the durability
  contract: every completed write-through write and every line of a
  completed flush is in L0 of the reopened memory.

After every delivery the coherence invariants registered for scenarios run
(single writer, data value, versions never go back, write-through lines in L0:
the very functions of ``scenario/_ops/coherence.py``, through the invariant
registry). Their record of completed writes is fed by the ops' completions;
a loss is forgiven only when a directory *reports* it: each time recovery
serves a line from home in place of a dead cache's copy it appends
``(iri, version, served)`` to ``DirectoryController.fallbacks``, and a
completed write newer than ``version`` is then lost (``_Truth.lost``); home
then serves the surviving value as version ``served`` (a durable fence above
every version the dead copy may have acknowledged). A version at home
newer than every completed write must be a write whose op failed with the
crash (a write-through whose WT reached home): it is adopted only if its value
is that of such a write, else it is a violation.

At the end every outstanding op is driven to an answer (a simulator
``Timeout`` counts as a hang), the directories must agree with the caches at
quiescence, and every line must still serve a write and a read by every agent.

Entry point: :func:`run_faults` (``gliding-actors bench reliability``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from gliding_actors.agent import Agent
from gliding_actors.clock import VirtualClock
from gliding_actors.coherence._hosting import cache_name
from gliding_actors.scenario._ops.coherence import _Truth, _truth
from gliding_actors.config import Config
from gliding_actors.errors import ActorUnavailable, GlidingError, Timeout
from gliding_actors.runtime import Simulator
from gliding_actors.scenario._invariants import _INVARIANTS
from gliding_actors.scenario._model import AgentSpec, Position, Scenario
from gliding_actors.scenario._ops import ReplayWorld, implemented_ops
from gliding_actors.system import MemorySystem

__all__ = ["FaultPlan", "run_faults"]

#: the coherence invariants checked after every delivery (all of them but the
#: one that needs quiescence, which runs at the end)
STEP_INVARIANTS = ("data value", "single writer", "versions never go back", "write-through lines in L0")
QUIESCENT_INVARIANTS = ("directory agreement at quiescence",)

#: roles that may all create and update lines in the shared graph; only SA may delete there
AGENTS = (("sa", "SA"), ("pa", "PA"), ("da", "DA"))
CRITICAL = "confirmed_fact"
KINDS = ("cache_crash", "directory_crash", "delay", "process_crash")


@dataclasses.dataclass(frozen=True)
class FaultPlan:
    """How a seed's run is shaped. The defaults keep 50 seeds x 400 steps well under a minute."""

    #: chance per step of issuing an op (while fewer than ``max_outstanding`` are open)
    p_op: float = 0.3
    #: chance per step of injecting a fault
    p_fault: float = 0.03
    #: of the faults, the share that kills the process (at most one per seed)
    p_process: float = 0.04
    lines: int = 4
    shards: int = 2
    cache_lines: int = 2
    max_outstanding: int = 6
    #: a delayed channel is held back for 1..hold_max deliveries
    hold_max: int = 30
    #: virtual seconds the final drain may take before an op counts as hung
    drain_s: float = 30.0


@dataclasses.dataclass
class _Op:
    kind: str
    agent: str
    iri: str
    step: int
    value: Any = None
    critical: bool = False
    done: bool = False
    error: BaseException | None = None
    result: Any = None


class _Violation(Exception):
    """Stops a seed at its first broken invariant (the rest of it would only repeat it)."""


class _SeedRun:
    """One seed: a memory on the simulator, a workload, faults, checks."""

    def __init__(self, seed: int, steps: int, plan: FaultPlan, workdir: Path | None) -> None:
        self.seed = seed
        self.steps = steps
        self.plan = plan
        self.rng = random.Random(f"faults:{seed}")
        self.iris = [f"fault:{i}" for i in range(plan.lines)]
        self.config = Config.from_dict(
            {
                "coherence": {
                    "directory_shards": plan.shards,
                    "cache_lines": plan.cache_lines,
                    "critical_tags": [CRITICAL],
                },
                # restarts are what is under test, not the restart intensity
                "runtime": {"max_restarts": 1_000_000},
            }
        )
        self.scenario = Scenario(
            path="<faults>",
            name=f"faults seed {seed}",
            description=None,
            seed=seed,
            config=self.config,
            config_data={},
            agents=tuple(AgentSpec(a, r, Position("<faults>", 1, 1)) for a, r in AGENTS),
            steps=(),
            final=None,
            final_pos=None,
        )
        self.system = MemorySystem.open(workdir, self.config, "sim", clock=VirtualClock(), seed=seed)
        self.retired: list[MemorySystem] = []
        self.world = self._world()
        self.ops: list[_Op] = []
        self.counter = 0
        self.by_kind: dict[str, int] = dict.fromkeys(KINDS, 0)
        self.skipped = 0
        #: why each skipped fault was skipped (the postponements that remain): reason -> count
        self.skipped_why: dict[str, int] = {}
        self.violations = 0
        self.lost = 0
        self.adopted = 0
        #: directory crashes that hit a shard mid-transaction (a line in S_D, or its own census)
        self.directory_mid_transaction = 0
        self.process_crashed = False
        self.failures: list[dict[str, Any]] = []
        #: iri -> version L0 must hold after a process crash (write-through, flushed)
        self.promised: dict[str, int] = {}
        #: iri -> bumped at every reported loss (a flush's promise skips lines lost meanwhile)
        self.loss_epoch: dict[str, int] = {}
        #: iri -> values of writes whose op failed while they may have taken effect
        self.maybe: dict[str, list[tuple[Any, bool, str]]] = {}
        self.step_no = 0

    # -- set-up ---------------------------------------------------------------
    def _world(self) -> ReplayWorld:
        agents = {a: self.system.agent(a, r) for a, r in AGENTS}
        return ReplayWorld(scenario=self.scenario, system=self.system, seed=self.seed, agents=agents)

    @property
    def sim(self) -> Simulator:
        rt = self.system.runtime
        assert isinstance(rt, Simulator)
        return rt

    @property
    def truth(self) -> _Truth:
        return _truth(self.world)

    def _inner(self, name: str) -> Any:
        behaviour = self.sim.behaviour(name)
        return getattr(behaviour, "inner", behaviour)

    # -- the run ----------------------------------------------------------------
    def run(self) -> None:
        try:
            for self.step_no in range(self.steps):
                if self.rng.random() < self.plan.p_op and self._open() < self.plan.max_outstanding:
                    self._issue()
                if self.rng.random() < self.plan.p_fault:
                    self._fault()
                if not self.sim.is_quiescent():
                    self.sim.step()
                self._after_delivery()
            self._finish()
        except _Violation:
            pass

    def _open(self) -> int:
        return sum(1 for op in self.ops if not op.done)

    def _fail(self, what: str, detail: Any) -> None:
        self.failures.append({"seed": self.seed, "step": self.step_no, "what": what, "detail": detail})

    def _violated(self, problems: list[str]) -> None:
        self.violations += len(problems)
        self._fail("invariant", problems[:3])
        raise _Violation

    def _check(self, names: Iterable[str]) -> None:
        problems = [f"{name}: {line}" for name in names for line in _INVARIANTS[name](self.world)]
        if problems:
            self._violated(problems)

    def _after_delivery(self) -> None:
        self._take_fallbacks()
        for iri in sorted(self.maybe):  # a failed write's WT may reach home later (held back by a census)
            self._reconcile(iri)
        self._check(STEP_INVARIANTS)

    # -- ops ----------------------------------------------------------------------
    def _issue(self) -> None:
        rng = self.rng
        agent_id, _role = AGENTS[rng.randrange(len(AGENTS))]
        iri = self.iris[rng.randrange(len(self.iris))]
        roll = rng.random()
        self.counter += 1
        value = {"n": self.counter, "seed": self.seed}
        if roll < 0.05:
            self._track(_Op("flush", "@system", "*", self.step_no), self._submit_flush)
            return
        if roll < 0.35:
            op = _Op("read", agent_id, iri, self.step_no)
        elif roll < 0.6:
            op = _Op("write", agent_id, iri, self.step_no, value)
        elif roll < 0.72:
            op = _Op("write", agent_id, iri, self.step_no, value, critical=True)
        elif roll < 0.82:
            op = _Op("cas", agent_id, iri, self.step_no, value)
        elif roll < 0.88:
            op = _Op("delete", "sa", iri, self.step_no, None)
        else:
            op = _Op("evict", agent_id, iri, self.step_no)
        self._track(op, lambda: self._submit(op))

    def _submit(self, op: _Op) -> Any:
        agent: Agent = self.world.agents[op.agent]
        if op.kind == "read":
            return agent.submit_read(op.iri)
        if op.kind == "write":
            return agent.submit_write(op.iri, op.value, tags=[CRITICAL] if op.critical else None)
        if op.kind == "cas":
            expected = self.truth.seen.get((op.agent, op.iri), 0)
            if self.rng.random() < 0.3:
                expected += self.rng.choice((-1, 1))
            return agent.submit_cas(op.iri, max(0, expected), op.value)
        if op.kind == "delete":
            return agent.submit_delete(op.iri)
        return agent.submit_evict(op.iri)

    def _submit_flush(self) -> Any:
        truth = self.truth
        began = {iri: (version, self.loss_epoch.get(iri, 0)) for iri, (version, _v) in truth.latest.items()}
        future = self.system.submit_flush()

        def flushed(f: Any) -> None:
            try:
                f.get(0)
            except GlidingError:
                return
            for iri, (version, epoch) in began.items():
                if self.loss_epoch.get(iri, 0) == epoch and truth is self.truth:
                    self.promised[iri] = max(self.promised.get(iri, 0), version)

        future.add_done_callback(flushed)
        return future

    def _track(self, op: _Op, submit: Callable[[], Any]) -> None:
        self.ops.append(op)
        world = self.world
        try:
            future = submit()
        except GlidingError as exc:  # refused before anything was sent
            op.done, op.error = True, exc
            return
        except Exception as exc:  # noqa: BLE001 - an untyped refusal is what we count
            op.done, op.error = True, exc
            return
        future.add_done_callback(lambda f: self._landed(op, world, f))

    def _landed(self, op: _Op, world: ReplayWorld, future: Any) -> None:
        op.done = True
        try:
            op.result = future.get(0)
        except Exception as exc:  # noqa: BLE001 - typed or not, it is classified later
            op.error = exc
            if op.kind in ("write", "cas", "delete") and isinstance(exc, ActorUnavailable) and world is self.world:
                # It may have taken effect (a WT that reached home before the cache died).
                self.maybe.setdefault(op.iri, []).append((op.value, op.critical, op.agent))
                self._reconcile(op.iri)
            return
        if world is not self.world or op.kind in ("flush", "evict"):
            return
        truth = _truth(world)
        if op.kind == "read":
            truth.saw(op.agent, op.iri, int(op.result["version"]))
            return
        through = op.result.get("policy") == "write_through"
        truth.wrote(op.agent, op.iri, int(op.result["version"]), op.value, through)
        if through:
            self.promised[op.iri] = max(self.promised.get(op.iri, 0), int(op.result["version"]))

    # -- what recovery reports --------------------------------------------------------
    def _take_fallbacks(self) -> None:
        for name in self.system.directories:
            inner = self._inner(name)
            controller = getattr(inner, "controller", None)
            if controller is None or not controller.fallbacks:
                continue
            reported, controller.fallbacks = list(controller.fallbacks), []
            for iri, version, served in reported:
                self._fallback(iri, version)
                self._renumbered(iri, served)

    def _fallback(self, iri: str, version: int) -> None:
        truth = self.truth
        latest, _value = truth.latest.get(iri, (0, None))
        copy = self.system.line_copy(iri)
        value = None if copy is None else copy[0]
        if version < latest:
            truth.lost(iri, version, value)
            self.loss_epoch[iri] = self.loss_epoch.get(iri, 0) + 1
            self.lost += 1
        elif version > latest and not self._reconcile(iri):
            pending = any(
                not op.done and op.iri == iri and op.kind in ("write", "cas", "delete") and op.value == value
                for op in self.ops
            )
            if not pending:  # a write still waiting for its WT-Ack will complete with it
                self._violated([f"home holds {iri} v{version} {value!r}, newer than any write: v{latest}"])

    def _renumbered(self, iri: str, served: int) -> None:
        """Home now holds the line's surviving value at version ``served`` (its fence)."""
        truth = self.truth
        version, value = truth.latest.get(iri, (0, None))
        if served > version:
            truth.latest[iri] = (served, value)
            if iri in self.promised:  # the fence is durable: L0 holds the value at ``served``
                self.promised[iri] = served

    def _reconcile(self, iri: str) -> bool:
        """Adopt home's version of ``iri`` if it is newer than every completed write and
        is the value of a write whose op failed with a crash (it reached home first)."""
        truth = self.truth
        copy = self.system.line_copy(iri)
        if copy is None or copy[1] <= truth.latest.get(iri, (0, None))[0]:
            return False
        match = next((c for c in self.maybe.get(iri, []) if c[0] == copy[0]), None)
        if match is None:
            return False
        truth.wrote(match[2], iri, copy[1], copy[0], match[1])
        if match[1]:
            self.promised[iri] = max(self.promised.get(iri, 0), copy[1])
        self.adopted += 1
        return True

    # -- faults -----------------------------------------------------------------------
    def _fault(self) -> None:
        rng = self.rng
        roll = rng.random()
        if roll < self.plan.p_process and not self.process_crashed:
            self._process_crash()
        elif roll < 0.45:
            self._crash_cache()
        elif roll < 0.7:
            self._crash_directory()
        else:
            channels = [c for c in self.sim.channels() if not c[0].startswith("@")]
            if not channels:
                self._skip("delay: no message in flight to hold back")
                return
            channel = channels[rng.randrange(len(channels))]
            self.sim.hold(channel, rng.randint(1, self.plan.hold_max))
            self.by_kind["delay"] += 1

    def _skip(self, why: str) -> None:
        self.skipped += 1
        self.skipped_why[why] = self.skipped_why.get(why, 0) + 1

    def _crash_cache(self) -> None:
        eligible = [a for a, _r in AGENTS if _crashable(self._inner(cache_name(a)).controller)]
        if not eligible:
            self._skip(
                "cache_crash: every cache holds a deferred forward or Inv, or waits for a GetM's Data or"
                " Inv-Acks (recovery there is not yet sound: a new owner could meet a copy not yet given up)"
            )
            return
        agent = eligible[self.rng.randrange(len(eligible))]
        # What the crash reports lost, as MemorySystem.crash reports it: the lines
        # whose newest copy was this cache's M (a later Reclaim may find nothing to
        # fall back from: a directory that crashed meanwhile forgot the owner).
        for iri, (state, _value, version) in sorted(self.system.board.holders().get(agent, {}).items()):
            copy = self.system.line_copy(iri)
            if state == "M" and version > (0 if copy is None else copy[1]):
                self._fallback(iri, 0 if copy is None else copy[1])
        self.sim.inject(cache_name(agent), {"t": "crash"})
        self.by_kind["cache_crash"] += 1

    def _crash_directory(self) -> None:
        eligible = list(self.system.directories)  # in any state: S_D lines and a census outlive it
        name = eligible[self.rng.randrange(len(eligible))]
        controller = self._inner(name).controller
        if controller.recovering or controller.open_lines():
            self.directory_mid_transaction += 1
        self.sim.inject(name, {"t": "crash"})
        self.by_kind["directory_crash"] += 1

    def _process_crash(self) -> None:
        self.process_crashed = True
        self.by_kind["process_crash"] += 1
        promised = dict(self.promised)
        old = self.system
        self.system = old.crash_process(quiesce=False)
        self.retired.append(old)
        l0 = self.system.l0
        missing = [
            f"{iri}: promised v{version}, L0 holds v{l0.retrieve_version(iri)}"
            for iri, version in sorted(promised.items())
            if l0.retrieve_version(iri) < version
        ]
        if missing:
            self._violated(["durability after a process crash: " + m for m in missing])
        self.world = self._world()
        truth = self.truth
        for iri in self.iris:
            copy = self.system.line_copy(iri)
            if copy is not None:
                truth.latest[iri] = (copy[1], copy[0])
            elif l0.retrieve_version(iri):  # a tombstone
                truth.latest[iri] = (l0.retrieve_version(iri), None)
        self.maybe = {}
        self.promised = {iri: v for iri, v in promised.items()}

    # -- the end ---------------------------------------------------------------------
    def _finish(self) -> None:
        sim = self.sim
        budget = sim.delivered + 200_000
        try:
            while not all(op.done for op in self.ops) and sim.delivered < budget:
                if sim.is_quiescent():  # only timers can move it on (none: a hang)
                    sim.run_until(
                        lambda: not sim.is_quiescent() or all(op.done for op in self.ops),
                        timeout=self.plan.drain_s,
                        what="outstanding ops",
                    )
                    continue
                sim.step()
                self._after_delivery()
        except Timeout:
            pass
        hung = [op for op in self.ops if not op.done]
        self.hung = len(hung)
        if hung:
            self._fail("hang", [f"{op.kind} {op.iri} by {op.agent} from step {op.step}" for op in hung[:5]])
            return
        while not sim.is_quiescent():
            sim.step()
            self._after_delivery()
        self._check(QUIESCENT_INVARIANTS)
        self._serve()

    def _serve(self) -> None:
        """Every line still serves: each agent writes it, the next one reads it back."""
        agents = self.world.agents
        order = [a for a, _r in AGENTS]
        for n, iri in enumerate(self.iris):
            for i, writer in enumerate(order):
                reader = order[(i + 1) % len(order)]
                value = {"serve": n, "by": writer}
                try:
                    wrote = agents[writer].write(iri, value, timeout=self.plan.drain_s)
                    self.truth.wrote(writer, iri, int(wrote["version"]), value, False)
                    got = agents[reader].read(iri, timeout=self.plan.drain_s)
                except Exception as exc:  # noqa: BLE001 - any failure here means the line stopped serving
                    self._fail("serve", f"{iri}: {type(exc).__name__}: {exc}")
                    self.serve_failed = True
                    return
                if got["value"] != value or got["version"] != wrote["version"]:
                    self._fail("serve", f"{iri}: {reader} read {got!r} after {writer} wrote v{wrote['version']}")
                    self.serve_failed = True
                    return
                self._after_delivery()

    serve_failed = False
    #: ops still unanswered when the final drain gave up (counted before close fails them)
    hung = 0

    # -- results ----------------------------------------------------------------------
    def log_hash(self) -> str:
        hashes = []
        for system in [*self.retired, self.system]:
            rt = system.runtime
            if isinstance(rt, Simulator):
                hashes.append(rt.log_hash())
        return hashlib.sha256("".join(hashes).encode()).hexdigest()

    def close(self) -> None:
        self.system.close(flush=False)


#: a cache waiting for a GetM's Data or Inv-Acks: other caches are mid-way through giving
#: the line up to it (an Inv or a Fwd-GetM in flight or deferred), so the directory's
#: Reclaim cannot tell when the line is really free
_GETTING_M = frozenset({"IM_AD", "SM_AD", "IM_A", "SM_A"})


def _crashable(controller: Any) -> bool:
    """May this cache crash now and the protocol recover exactly? (see the module docs)"""
    return not controller.has_deferred() and not (_GETTING_M & set(controller.states().values()))


def _classify(ops: list[_Op]) -> tuple[int, int, int]:
    """(unanswered, typed errors, untyped errors) among ``ops``; an op a hang left
    unanswered is failed by the close that follows, so hangs are counted by the run."""
    hung = sum(1 for op in ops if not op.done)
    typed = sum(1 for op in ops if op.error is not None and isinstance(op.error, GlidingError))
    untyped = sum(1 for op in ops if op.error is not None and not isinstance(op.error, GlidingError))
    return hung, typed, untyped


def run_faults(
    *,
    seeds: range | list[int],
    steps: int,
    plan: FaultPlan | None = None,
    progress: Callable[[int], None] | None = None,
    max_failures: int = 5,
) -> dict[str, Any]:
    """Run the seeded fault workload once per seed; return the figures.

    Keys: ``seeds`` (how many), ``steps`` (per seed), ``ops``, ``faults_injected``,
    ``by_kind`` (``cache_crash``, ``directory_crash``, ``delay``,
    ``process_crash``), ``skipped_faults`` (a drawn fault with no eligible
    target), ``skipped_why`` (those by reason: the postponements that
    remain), ``lost_reported`` (lines a directory reported lost and the
    invariants forgave), ``adopted`` (writes whose op failed with the crash but
    reached home), ``directory_crashes_mid_transaction`` (of the directory
    crashes, those that hit a shard with a line in S_D or in its own
    census), ``typed_errors``, ``untyped_errors``, ``hung_ops``,
    ``invariant_violations``, ``serve_failures``, ``failures`` (the first
    ``max_failures``, each with ``seed`` and ``step``) and ``log_hash``
    (SHA-256 over every seed's simulator log: same seeds, same hash).
    """
    implemented_ops()  # registers every layer's invariants
    plan = plan or FaultPlan()
    seed_list = list(seeds)
    totals: dict[str, Any] = {
        "seeds": len(seed_list),
        "steps": steps,
        "ops": 0,
        "faults_injected": 0,
        "by_kind": dict.fromkeys(KINDS, 0),
        "skipped_faults": 0,
        "skipped_why": {},
        "lost_reported": 0,
        "adopted": 0,
        "directory_crashes_mid_transaction": 0,
        "typed_errors": 0,
        "untyped_errors": 0,
        "hung_ops": 0,
        "invariant_violations": 0,
        "serve_failures": 0,
        "failures": [],
    }
    digest = hashlib.sha256()
    for done, seed in enumerate(seed_list, start=1):
        run = _SeedRun(seed, steps, plan, None)
        try:
            run.run()
        finally:
            run.close()
        hung, typed, untyped = _classify(run.ops)
        totals["ops"] += len(run.ops)
        totals["hung_ops"] += max(hung, run.hung)
        totals["typed_errors"] += typed
        totals["untyped_errors"] += untyped
        totals["invariant_violations"] += run.violations
        totals["serve_failures"] += int(run.serve_failed)
        totals["lost_reported"] += run.lost
        totals["adopted"] += run.adopted
        totals["directory_crashes_mid_transaction"] += run.directory_mid_transaction
        totals["skipped_faults"] += run.skipped
        for why, n in run.skipped_why.items():
            totals["skipped_why"][why] = totals["skipped_why"].get(why, 0) + n
        for kind, n in run.by_kind.items():
            totals["by_kind"][kind] += n
        totals["faults_injected"] += sum(run.by_kind.values())
        untyped_ops = [op for op in run.ops if op.error is not None and not isinstance(op.error, GlidingError)]
        for op in untyped_ops[:2]:
            run.failures.append(
                {"seed": seed, "step": op.step, "what": "untyped error", "detail": f"{op.kind} {op.iri}: {op.error!r}"}
            )
        room = max_failures - len(totals["failures"])
        if room > 0:
            totals["failures"].extend(run.failures[:room])
        digest.update(run.log_hash().encode())
        if progress is not None:
            progress(done)
    totals["log_hash"] = digest.hexdigest()
    return totals


def summary(figures: Mapping[str, Any]) -> str:
    """One line for a terminal."""
    return (
        f"{figures['seeds']} seeds x {figures['steps']} steps: {figures['ops']} ops, "
        f"{figures['faults_injected']} faults {dict(figures['by_kind'])}, "
        f"{figures['invariant_violations']} violations, {figures['hung_ops']} hung, "
        f"{figures['untyped_errors']} untyped errors, {figures['serve_failures']} lines not serving"
    )
