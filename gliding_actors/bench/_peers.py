"""``gliding-actors bench peers``: a coherent team memory against what a team would use instead.

Users choosing a shared memory for agent threads compare it with the
alternatives on the same workload, so every system here runs the same
operations in the same process:

* ``gliding_actors``: this project, one :class:`~gliding_actors.Agent` per
  thread, ``read`` / ``write`` (write-back), the threads runtime;
* ``agent_coherence``: agent-coherence's ``CoherenceAdapterCore``, strategy
  ``lazy`` (its default), one registered agent per thread, JSON text content.
  Its adapter is not safe to call from several threads at once (measured
  here: concurrent writes of one artifact raise ``commit_not_allowed``, and
  reads came back stale), so each call holds one lock: its bookkeeping runs
  as function calls under that lock. Its logical tick is a second of the run;
* ``langgraph_inmemory`` / ``langgraph_sqlite``: LangGraph's ``InMemoryStore``
  and ``SqliteStore`` (a file, sqlite's default full sync: one fsync per write);
* ``dict_lock``: a dict under a lock, the floor of what any of them can cost.

Workloads, over ``KEYS`` keys holding ~300-byte JSON objects, each of ``N``
threads picking keys uniformly at random from its own seeded generator:
``90_10`` (90 % reads), ``50_50``, and ``hot_key``: every thread increments
one counter. On the hot key this project uses ``modify`` (its atomic
read-modify-write: the owner's cache applies the increment, no retry);
agent-coherence uses ``write_cas`` (its optimistic
read-modify-write), or a plain write by an agent that holds the counter in E
or M (which ``write_cas`` refuses); the dict locks.
LangGraph's stores have no atomic read-modify-write, so they are not run
on it (recorded as skipped, with the reason).

Each (workload, N) cell runs every system in ``ROUNDS`` timed slices of
``SLICE_S`` seconds, the order rotating each round, so drift in the machine's
load hits all of them alike; ``ops_per_s`` is the median over the slices.
A slice ends when the system has finished the work its operations left
behind: this project indexes every written line for search on a background
thread, and the time that thread needs to work off its queue after the last
operation is part of the slice's time (so it is charged to this project and
never runs in the next system's slice).

Correctness is counted in every cell, for every system:

* ``stale_reads``: a read that returned a version whose write had completed
  before another write of that key began, that other write having been
  acknowledged before the read began (so the read should have seen it or
  something newer). Each value carries a stamp from one logical clock,
  taken when its write began; the clock also marks each acknowledgement.
* ``lost_updates`` (hot key): acknowledged increments minus the counter's
  final value.

Report keys: ``peers.<workload>.<N>.<system>.ops_per_s``,
``.vs_agent_coherence`` (ops/s over agent-coherence's in the same cell),
``.stale_reads``, ``.lost_updates``; plus ``errors`` (operations that raised)
and, on the hot key, ``failed_tries_per_increment``. A peer that is not
installed is ``{"skipped": reason}`` (the ``bench`` extra installs them).
"""

from __future__ import annotations

import functools
import itertools
import json
import random
import statistics
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from gliding_actors.bench._progress import say

__all__ = ["run"]

WORKLOADS: dict[str, float | None] = {"90_10": 0.9, "50_50": 0.5, "hot_key": None}
AGENTS = (4, 16)
SYSTEMS = ("gliding_actors", "agent_coherence", "langgraph_inmemory", "langgraph_sqlite", "dict_lock")
#: (full, quick)
KEYS = {False: 1000, True: 100}
SLICE_S = {False: 1.5, True: 0.2}
ROUNDS = {False: 6, True: 2}
#: at most this long for a system to finish its work behind a slice
SETTLE_S = 120.0
HOT = "hot"
#: a value's filler, so each JSON value is about 300 bytes
_PAD = "x" * 240
_NO_RMW = "LangGraph's stores have no atomic read-modify-write: a read then a put loses increments by design"


def _value(key: str, stamp: int, agent: int) -> dict[str, Any]:
    return {"key": key, "stamp": stamp, "by": agent, "note": _PAD}


class _Ledger:
    """One logical clock for write starts and acknowledgements, and the stale-read rule (module docstring)."""

    def __init__(self) -> None:
        self._clock = itertools.count(1)
        self._lock = threading.Lock()
        self._latest_acked_start: dict[str, int] = {}
        self._ended: dict[int, int] = {0: 0}  # stamp -> when its write was acknowledged (0: the seeded value)
        self.stale = 0

    def begin(self) -> int:
        return next(self._clock)

    def acknowledged(self, key: str, stamp: int) -> None:
        ended = next(self._clock)
        with self._lock:
            self._ended[stamp] = ended
            if stamp > self._latest_acked_start.get(key, 0):
                self._latest_acked_start[key] = stamp

    def floor(self, key: str) -> int:
        """Taken as a read begins: the latest start among the key's acknowledged writes."""
        with self._lock:
            return self._latest_acked_start.get(key, 0)

    def check(self, floor: int, stamp: int) -> None:
        with self._lock:
            ended = self._ended.get(stamp)  # None: still in flight, so concurrent with the read
            if ended is not None and ended < floor:
                self.stale += 1


class _System(Protocol):
    def read(self, agent: int, key: str) -> dict[str, Any]: ...
    def write(self, agent: int, key: str, value: dict[str, Any]) -> None: ...
    def settle(self, timeout: float) -> None: ...  # finish the work the operations left behind
    def close(self) -> None: ...


@runtime_checkable
class _Counter(_System, Protocol):
    """A system with an atomic read-modify-write, which the hot key needs."""

    def increment(self, agent: int) -> int: ...  # the failed tries it took
    def count(self) -> int: ...


class _NothingBehind:
    """A peer whose calls leave no work running once they return: its slice settles at once."""

    def settle(self, timeout: float) -> None:
        pass


class _DictLock(_NothingBehind):
    def __init__(self, agents: int, keys: list[str], root: Path) -> None:
        self._lock = threading.Lock()
        self._data: dict[str, dict[str, Any]] = {k: _value(k, 0, -1) for k in keys}
        self._data[HOT] = {"count": 0}

    def read(self, agent: int, key: str) -> dict[str, Any]:
        with self._lock:
            return self._data[key]

    def write(self, agent: int, key: str, value: dict[str, Any]) -> None:
        with self._lock:
            self._data[key] = value

    def increment(self, agent: int) -> int:
        with self._lock:
            self._data[HOT] = {"count": self._data[HOT]["count"] + 1}
        return 0

    def count(self) -> int:
        return int(self._data[HOT]["count"])

    def close(self) -> None:
        pass


class _LangGraph(_NothingBehind):
    NAMESPACE = ("bench", "peers")

    def __init__(self, agents: int, keys: list[str], root: Path, *, sqlite: bool) -> None:
        self._conn: Any = None
        if sqlite:
            import sqlite3

            from langgraph.store.sqlite import SqliteStore

            self._conn = sqlite3.connect(root / "store.sqlite", check_same_thread=False, isolation_level=None)
            store: Any = SqliteStore(self._conn)
            store.setup()
        else:
            from langgraph.store.memory import InMemoryStore

            store = InMemoryStore()
        self._store = store
        for k in keys:
            store.put(self.NAMESPACE, k, _value(k, 0, -1))

    def read(self, agent: int, key: str) -> dict[str, Any]:
        item = self._store.get(self.NAMESPACE, key)
        value: dict[str, Any] = item.value  # as stored: the other systems hand back their object too
        return value

    def write(self, agent: int, key: str, value: dict[str, Any]) -> None:
        self._store.put(self.NAMESPACE, key, value)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


class _AgentCoherence(_NothingBehind):
    def __init__(self, agents: int, keys: list[str], root: Path) -> None:
        from ccs.adapters.base import CoherenceAdapterCore

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # its one-time notice that crash recovery is on by default
            self._core = CoherenceAdapterCore(strategy_name="lazy")
        self._started = time.monotonic()
        self._lock = threading.Lock()  # see the module docstring
        self._names = [f"a{i}" for i in range(agents)]
        for name in self._names:
            self._core.register_agent(name)
        self._ids = {
            k: self._core.register_artifact(name=k, content=json.dumps(_value(k, 0, -1))).id for k in keys
        }
        self._ids[HOT] = self._core.register_artifact(name=HOT, content=json.dumps({"count": 0})).id

    def _now(self) -> int:
        """Its logical tick: a second of this run (its crash recovery reclaims the grants of an agent
        silent for ``heartbeat_timeout_ticks``; an agent idle while the other systems run is not dead)."""
        return int(time.monotonic() - self._started)

    def read(self, agent: int, key: str) -> dict[str, Any]:
        with self._lock:
            got = self._core.read(agent_name=self._names[agent], artifact_id=self._ids[key], now_tick=self._now())
        value: dict[str, Any] = json.loads(got.content)
        return value

    def write(self, agent: int, key: str, value: dict[str, Any]) -> None:
        content = json.dumps(value)
        with self._lock:
            self._core.write(
                agent_name=self._names[agent], artifact_id=self._ids[key], content=content, now_tick=self._now()
            )

    def increment(self, agent: int) -> int:
        """``write_cas``, its optimistic read-modify-write; an agent that already holds the counter in E or
        M must commit as its owner instead (``write_cas`` refuses it: ``commit_cas_not_allowed``)."""
        from ccs.core.exceptions import CasRetriesExhausted
        from ccs.core.states import MESIState

        name, artifact = self._names[agent], self._ids[HOT]
        tries = 0

        def bumped() -> str:
            current = json.loads(self._core.content(agent_name=name, artifact_id=artifact) or '{"count": 0}')
            return json.dumps({"count": current["count"] + 1})

        def bump(_entry: Any) -> tuple[str, str | None]:
            nonlocal tries
            tries += 1
            return bumped(), None

        while True:
            try:
                with self._lock:
                    entry = self._core.runtime(name).cache.get(artifact)
                    if entry is None:  # a first read, which may grant E
                        self._core.read(agent_name=name, artifact_id=artifact, now_tick=self._now())
                        entry = self._core.runtime(name).cache.get(artifact)
                    if entry is not None and entry.state in (MESIState.EXCLUSIVE, MESIState.MODIFIED):
                        self._core.write(agent_name=name, artifact_id=artifact, content=bumped(), now_tick=self._now())
                        return 0
                    self._core.write_cas(agent_name=name, artifact_id=artifact, make_content=bump, now_tick=self._now())
                return tries - 1
            except CasRetriesExhausted:
                continue

    def count(self) -> int:
        with self._lock:
            got = self._core.read(agent_name=self._names[0], artifact_id=self._ids[HOT], now_tick=self._now())
        return int(json.loads(got.content)["count"])

    def close(self) -> None:
        pass


class _Gliding:
    def __init__(self, agents: int, keys: list[str], root: Path) -> None:
        from gliding_actors.system import MemorySystem

        self._memory = MemorySystem.open(root / "memory", runtime="threads")
        self._agents = [self._memory.agent(f"a{i}", "DA") for i in range(agents)]
        seed = self._agents[0]
        for k in keys:
            seed.write(_iri(k), _value(k, 0, -1))
        seed.write(_iri(HOT), {"count": 0})

    def read(self, agent: int, key: str) -> dict[str, Any]:
        value = self._agents[agent].read(_iri(key))["value"]
        assert value is not None
        return value

    def write(self, agent: int, key: str, value: dict[str, Any]) -> None:
        self._agents[agent].write(_iri(key), value)

    def increment(self, agent: int) -> int:
        self._agents[agent].modify(_iri(HOT), _plus_one)
        return 0  # applied where the line is owned: nothing to retry

    def count(self) -> int:
        value = self._agents[0].read(_iri(HOT))["value"]
        assert value is not None
        return int(value["count"])

    def settle(self, timeout: float) -> None:
        from gliding_actors.errors import Timeout

        if not self._memory.hyperspace.wait_embeddings(timeout):
            raise Timeout(f"the embed worker did not finish its queue within {timeout} s")

    def close(self) -> None:
        self._memory.close()


def _plus_one(value: dict[str, Any] | None) -> dict[str, Any]:
    assert value is not None
    return {"count": value["count"] + 1}


def _iri(key: str) -> str:
    return f"bench:{key}"


def _factory(system: str) -> Callable[[int, list[str], Path], _System] | str:
    """The system's constructor, or why it cannot run here."""
    if system == "agent_coherence":
        try:
            import ccs.adapters.base  # noqa: F401
        except ImportError:
            return "agent-coherence is not installed (pip install 'gliding-actors[bench]')"
        return _AgentCoherence
    if system.startswith("langgraph"):
        sqlite = system == "langgraph_sqlite"
        try:
            if sqlite:
                import langgraph.store.sqlite
            else:
                import langgraph.store.memory  # noqa: F401
        except ImportError:
            what = "langgraph-checkpoint-sqlite" if sqlite else "langgraph"
            return f"{what} is not installed (pip install 'gliding-actors[bench]')"
        return lambda agents, keys, root: _LangGraph(agents, keys, root, sqlite=sqlite)
    return _Gliding if system == "gliding_actors" else _DictLock


class _Tally:
    def __init__(self) -> None:
        self.rates: list[float] = []
        self.ledger = _Ledger()
        self.errors = 0
        self.first_error: str | None = None
        self.done = 0  # operations completed (on the hot key: acknowledged increments)
        self.failed_tries = 0


#: one operation of a thread: (agent, its generator) -> the failed tries it took
_Op = Callable[[int, random.Random], int]


def _operation(system: _System, keys: list[str], reads: float | None, ledger: _Ledger) -> _Op:
    """The workload's operation on ``system``: a counter increment, or a read or write of a random key."""
    if reads is None:
        if not isinstance(system, _Counter):
            raise TypeError(f"{type(system).__name__} has no atomic read-modify-write")
        return lambda agent, _rng: system.increment(agent)

    def read_or_write(agent: int, rng: random.Random) -> int:
        key = keys[rng.randrange(len(keys))]
        if rng.random() < reads:
            floor = ledger.floor(key)
            ledger.check(floor, int(system.read(agent, key)["stamp"]))
        else:
            stamp = ledger.begin()
            system.write(agent, key, _value(key, stamp, agent))
            ledger.acknowledged(key, stamp)
        return 0

    return read_or_write


def _slice(op: _Op, settle: Callable[[float], None], tally: _Tally, agents: int, seconds: float, seed: int) -> None:
    """``agents`` threads doing ``op`` for ``seconds``, then ``settle``; appends the ops/s over both to ``tally.rates``."""
    counts = [0] * agents
    lock = threading.Lock()
    start = threading.Barrier(agents + 1)
    deadline = [0.0]

    def work(agent: int) -> None:
        rng = random.Random(seed * 1000 + agent)
        start.wait()
        done = failed = errors = 0
        first: str | None = None
        while time.perf_counter() < deadline[0]:
            try:
                failed += op(agent, rng)
                done += 1
            except Exception as exc:  # noqa: BLE001 - counted and reported: one system failing must not end the run
                errors += 1
                first = first or f"{type(exc).__name__}: {exc}"
        counts[agent] = done
        with lock:
            tally.done += done
            tally.failed_tries += failed
            tally.errors += errors
            tally.first_error = tally.first_error or first

    threads = [threading.Thread(target=work, args=(a,), name=f"bench-peers-{a}", daemon=True) for a in range(agents)]
    for t in threads:
        t.start()
    deadline[0] = time.perf_counter() + seconds
    began = time.perf_counter()
    start.wait()
    for t in threads:
        t.join(timeout=seconds + 120.0)
    settle(SETTLE_S)
    elapsed = time.perf_counter() - began
    tally.rates.append(sum(counts) / elapsed)


def _cell(workload: str, agents: int, quick: bool, root: Path) -> dict[str, Any]:
    keys = [f"k{i}" for i in range(KEYS[quick])]
    reads = WORKLOADS[workload]
    systems: dict[str, _System] = {}
    out: dict[str, Any] = {}
    for name in SYSTEMS:
        made = _factory(name)
        if isinstance(made, str):
            out[name] = {"skipped": made}
        elif reads is None and name.startswith("langgraph"):
            out[name] = {"skipped": _NO_RMW}  # _LangGraph is no _Counter
        else:
            folder = root / f"{workload}-{agents}-{name}"
            folder.mkdir(parents=True)
            systems[name] = made(agents, keys, folder)
    tallies = {name: _Tally() for name in systems}
    ops = {name: _operation(system, keys, reads, tallies[name].ledger) for name, system in systems.items()}
    order = list(systems)
    try:
        for r in range(ROUNDS[quick]):
            _say(f"{workload}, {agents} agents: round {r + 1} of {ROUNDS[quick]}")
            rotated = order[r % len(order):] + order[: r % len(order)]
            for name in rotated:
                _slice(ops[name], systems[name].settle, tallies[name], agents, SLICE_S[quick], seed=r)
        for name, tally in tallies.items():
            row: dict[str, Any] = {
                "ops_per_s": round(statistics.median(tally.rates), 1),
                "stale_reads": tally.ledger.stale,
                "lost_updates": 0,
                "errors": tally.errors,
            }
            if tally.first_error is not None:
                row["first_error"] = tally.first_error
            counter = systems[name]
            if reads is None and isinstance(counter, _Counter):
                row["lost_updates"] = max(0, tally.done - counter.count())
                row["increments"] = tally.done
                row["failed_tries_per_increment"] = round(tally.failed_tries / max(1, tally.done), 3)
            out[name] = row
    finally:
        for system in systems.values():
            system.close()
    peer = out.get("agent_coherence", {}).get("ops_per_s")
    for row in out.values():
        if "ops_per_s" in row:
            row["vs_agent_coherence"] = round(row["ops_per_s"] / peer, 3) if peer else None
    return {name: out[name] for name in SYSTEMS}


_say = functools.partial(say, "peers")


def run(quick: bool = False) -> dict[str, Any]:
    """Every (workload, agents) cell, every system in it; see the module docstring."""
    started = time.perf_counter()
    peers: dict[str, dict[str, dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="ga-bench-peers-") as tmp:
        for workload in WORKLOADS:
            peers[workload] = {}
            for agents in AGENTS:
                peers[workload][str(agents)] = _cell(workload, agents, quick, Path(tmp))
    return {
        "suite": "peers",
        "keys": KEYS[quick],
        "slice_s": SLICE_S[quick],
        "rounds": ROUNDS[quick],
        "peers": peers,
        "targets": {
            "90_10 vs_agent_coherence": ">= 1.0",
            "50_50 vs_agent_coherence": ">= 0.7",
            "hot_key vs_agent_coherence": ">= 1.0",
            "stale_reads, lost_updates": "0",
        },
        "total_s": round(time.perf_counter() - started, 1),
        "command": "gliding-actors bench peers --json" + (" --quick" if quick else ""),
    }
