"""Load and soak harnesses: many agent threads on shared lines, checked for linearizability.

:func:`run_load` is what ``gliding-actors bench reliability`` calls: it opens a
temporary memory on the threads runtime, starts one thread per agent, and
each agent does a seeded mix of operations on a pool of lines:

==========================  ======  =====================================
op                          share   what it exercises
==========================  ======  =====================================
read                        40 %    hits on the published cache view, misses through the directory
write (write-back)          25 %    M copies changing hands between caches
write (``confirmed_fact``)  10 %    write-through to L0 before completing
cas on the last seen version 20 %   conflicts under contention, and successes
delete (SA agents only)      5 %    tombstones; other roles write instead
==========================  ======  =====================================

Roles cycle SA, PA, DA, CA, AA: all may read, create and update in
``shared`` (where the lines live), only SA may delete there, so no op is
refused for want of a right. Every op is recorded in a
:class:`~tools.reliability._lincheck.HistoryRecorder` (invocation and
response on the monotonic clock) and the whole history is checked line by
line with :func:`~tools.reliability._lincheck.check_history`.

Every wait has a timeout. An op that times out or finds its actor unavailable
is recorded as pending (it may have taken effect or not); a cas that loses is
a completed op that changed nothing; an op refused with a typed error before
anything was sent is left out of the history; an error that is not a
:class:`~gliding_actors.errors.GlidingError` is counted (``untyped_errors``)
and recorded as pending too. The harness itself never crashes on an op.

:func:`run_soak` runs the same mix for a duration without keeping the history
(which would grow by itself) and samples the process's resident set size to
decide whether memory stays bounded. It is meant to run outside CI (10
minutes); see its docstring for the verdict's definition.
"""

from __future__ import annotations

import os
import random
import resource
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypedDict

from gliding_actors.agent import Agent
from gliding_actors.config import Config
from gliding_actors.errors import (
    ActorUnavailable,
    ConflictError,
    GlidingError,
    InvalidInput,
    PermissionDenied,
    Timeout,
)
from gliding_actors.metrics import rss_mb
from tools.reliability._lincheck import HistoryRecorder, Op, check_history, count_anomalies

if TYPE_CHECKING:
    from gliding_actors.system import MemorySystem

__all__ = ["LOAD_FULL", "LOAD_QUICK", "LOAD_TEST", "LoadSize", "record_load", "run_load", "run_soak"]



class LoadSize(TypedDict):
    """A load's size, typed so ``run_load(**size, seed=...)`` type-checks."""

    agents: int
    ops_per_agent: int
    lines: int


#: the full size (``-m slow``): 64 agent threads x 10,000 mixed ops on 1,000 lines
LOAD_FULL: LoadSize = {"agents": 64, "ops_per_agent": 10_000, "lines": 1_000}
#: the bench's --quick size: well under 90 s on a 2-core machine, checker included
LOAD_QUICK: LoadSize = {"agents": 32, "ops_per_agent": 500, "lines": 200}
#: the default test run's size: high contention, a few seconds
LOAD_TEST: LoadSize = {"agents": 8, "ops_per_agent": 300, "lines": 50}

ROLE_CYCLE = ("SA", "PA", "DA", "CA", "AA")
CRITICAL_TAG = "confirmed_fact"
LINE_PREFIX = "urn:gliding-actors:load:line-"


def line_iri(n: int) -> str:
    return f"{LINE_PREFIX}{n}"


def _cache_lines(given: int | None, lines: int) -> int:
    """Each agent cache's capacity: a quarter of the lines unless given, so LRU evictions
    (PutS / PutM racing the other agents' requests) happen all through the run."""
    if given is None:
        return max(8, lines // 4)
    _check_sizes(cache_lines=given)
    return given


def _team_config(config: Mapping[str, Any] | None, cache_lines: int) -> dict[str, Any]:
    """``config`` (overrides of the defaults) with each agent cache holding ``cache_lines``."""
    if config is None:
        config = {}
    if not isinstance(config, Mapping):
        raise InvalidInput(f"config is a mapping of overrides, not {type(config).__name__}")
    coherence = config.get("coherence", {})
    if not isinstance(coherence, Mapping):
        raise InvalidInput(f"config.coherence is a mapping, not {type(coherence).__name__}")
    return {**config, "coherence": {**coherence, "cache_lines": cache_lines}}


def _check_timeout(timeout_s: object) -> None:
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
        raise InvalidInput(f"timeout_s is a number > 0, not {timeout_s!r}")


def _check_sizes(**sizes: Any) -> None:
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidInput(f"{name} is an integer >= 1, not {value!r}")


class _Counters:
    """What the workers count besides the history, shared under one lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done = 0
        self.conflicts = 0
        self.unknown = 0
        self.refused = 0
        self.untyped = 0
        self.errors: dict[str, int] = {}
        self.max_latency_ns = 0

    def note_error(self, exc: BaseException) -> None:
        name = type(exc).__name__
        with self.lock:
            self.errors[name] = self.errors.get(name, 0) + 1


def _worker(
    agent: Agent,
    *,
    rng: random.Random,
    lines: int,
    ops: int | None,
    stop: threading.Event,
    recorder: HistoryRecorder | None,
    counters: _Counters,
    timeout_s: float,
) -> None:
    """One agent's loop: ``ops`` ops (or until ``stop``), each recorded and timed out."""
    may_delete = agent.role == "SA"
    seen: dict[str, int] = {}  # the last version this agent saw per line: what its cas expects
    n = 0
    while (ops is None or n < ops) and not stop.is_set():
        n += 1
        iri = line_iri(rng.randrange(lines))
        roll = rng.random()
        value = {"@id": iri, "agent": agent.id, "n": n}
        if roll < 0.40:
            kind = "read"
        elif roll < 0.75:
            kind = "write"
        elif roll < 0.95:
            kind = "cas"
        else:
            kind = "delete" if may_delete else "write"
        tags = [CRITICAL_TAG] if kind == "write" and 0.65 <= roll < 0.75 else None
        expected = seen.get(iri, 0)
        token = None
        if recorder is not None:
            if kind == "read":
                token = recorder.begin(agent.id, iri, "read")
            elif kind == "delete":
                token = recorder.begin(agent.id, iri, "delete")
            elif kind == "cas":
                token = recorder.begin(agent.id, iri, "cas", value=value, expected=expected)
            else:
                token = recorder.begin(agent.id, iri, "write", value=value)
        started = time.perf_counter_ns()
        try:
            if kind == "read":
                read = agent.read(iri, timeout=timeout_s)
                version = read["version"]
                if token is not None and recorder is not None:
                    recorder.ok(token, version, read["value"])
            elif kind == "write":
                version = agent.write(iri, value, tags=tags, timeout=timeout_s)["version"]
                if token is not None and recorder is not None:
                    recorder.ok(token, version)
            elif kind == "cas":
                version = agent.cas(iri, expected, value, timeout=timeout_s)["version"]
                if token is not None and recorder is not None:
                    recorder.ok(token, version)
            else:
                version = agent.delete(iri, timeout=timeout_s)
                if token is not None and recorder is not None:
                    recorder.ok(token, version)
            seen[iri] = version
        except ConflictError:
            if token is not None and recorder is not None:
                recorder.conflict(token)
            with counters.lock:
                counters.conflicts += 1
            # ``seen`` keeps the stale version: the next cas of this line loses
            # again unless a read or write of this agent refreshed it first
        except (InvalidInput, PermissionDenied) as exc:  # refused before anything was sent
            if token is not None and recorder is not None:
                recorder.refused(token)
            counters.note_error(exc)
            with counters.lock:
                counters.refused += 1
        except (Timeout, ActorUnavailable, GlidingError) as exc:  # outcome unknown
            if token is not None and recorder is not None:
                recorder.unknown(token, type(exc).__name__)
            counters.note_error(exc)
            with counters.lock:
                counters.unknown += 1
        except Exception as exc:  # noqa: BLE001 - an untyped error is a finding, not a harness crash
            if token is not None and recorder is not None:
                recorder.unknown(token, type(exc).__name__)
            counters.note_error(exc)
            with counters.lock:
                counters.untyped += 1
        latency = time.perf_counter_ns() - started
        with counters.lock:
            counters.done += 1
            counters.max_latency_ns = max(counters.max_latency_ns, latency)


def _run_team(
    *,
    agents: int,
    lines: int,
    seed: int,
    ops_per_agent: int | None,
    seconds: float | None,
    recorder: HistoryRecorder | None,
    progress: Callable[[int], None] | None,
    on_tick: Callable[[MemorySystem], None] | None,
    tick_s: float,
    timeout_s: float,
    cache_lines: int,
    config: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Open a temporary memory, run the team to the end (ops or time), close it."""
    from gliding_actors.system import MemorySystem

    counters = _Counters()
    stop = threading.Event()
    memory = MemorySystem.open(runtime="threads", config=_team_config(config, cache_lines))
    try:
        team = [memory.agent(f"load-{i}", ROLE_CYCLE[i % len(ROLE_CYCLE)]) for i in range(agents)]
        errors: list[BaseException] = []

        def body(index: int) -> None:
            try:
                _worker(
                    team[index],
                    rng=random.Random(seed * 1_000_003 + index),
                    lines=lines,
                    ops=ops_per_agent,
                    stop=stop,
                    recorder=recorder,
                    counters=counters,
                    timeout_s=timeout_s,
                )
            except BaseException as exc:  # noqa: BLE001 - reported, never lost in a thread
                errors.append(exc)

        threads = [threading.Thread(target=body, args=(i,), name=f"load-{i}", daemon=True) for i in range(agents)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        deadline = None if seconds is None else started + seconds
        reported = -1
        while any(thread.is_alive() for thread in threads):
            now = time.perf_counter()
            if deadline is not None and now >= deadline:
                stop.set()
            wait = tick_s if deadline is None else max(0.0, min(tick_s, deadline - now))
            alive = next((thread for thread in threads if thread.is_alive()), None)
            if alive is not None:
                alive.join(wait)
            if on_tick is not None:
                on_tick(memory)
            with counters.lock:
                done = counters.done
            if progress is not None and done != reported:
                progress(done)
                reported = done
        for thread in threads:
            thread.join()
        load_s = time.perf_counter() - started
        with counters.lock:
            done = counters.done
        if progress is not None and done != reported:
            progress(done)
        if errors:
            raise errors[0]
    finally:
        memory.close(flush=False)
    return {
        "ops_done": done,
        "load_s": load_s,
        "conflicts": counters.conflicts,
        "unknown_outcome": counters.unknown,
        "refused": counters.refused,
        "untyped_errors": counters.untyped,
        "errors": dict(sorted(counters.errors.items())),
        "max_latency_ms": counters.max_latency_ns / 1e6,
    }


def record_load(
    *,
    agents: int,
    ops_per_agent: int,
    lines: int,
    seed: int,
    progress: Callable[[int], None] | None = None,
    timeout_s: float = 60.0,
    cache_lines: int | None = None,
) -> tuple[list[Op], dict[str, Any]]:
    """Run the load and return its history (every op, in invocation order) and the team's counts.

    :func:`run_load` without the check: for tests that look at the history
    itself, or tamper with it to prove the check can fail.
    """
    _check_sizes(agents=agents, ops_per_agent=ops_per_agent, lines=lines)
    _check_timeout(timeout_s)
    recorder = HistoryRecorder()
    team = _run_team(
        agents=agents,
        lines=lines,
        seed=seed,
        ops_per_agent=ops_per_agent,
        seconds=None,
        recorder=recorder,
        progress=progress,
        on_tick=None,
        tick_s=0.5,
        timeout_s=timeout_s,
        cache_lines=_cache_lines(cache_lines, lines),
    )
    return recorder.ops(), team


def run_load(
    *,
    agents: int,
    ops_per_agent: int,
    lines: int,
    seed: int,
    runtime: str = "threads",
    progress: Callable[[int], None] | None = None,
    timeout_s: float = 60.0,
    cache_lines: int | None = None,
) -> dict[str, Any]:
    """Run ``agents`` threads x ``ops_per_agent`` mixed ops on ``lines`` lines; check the history.

    ``progress`` is called from the calling thread, about twice a second,
    with the number of ops finished so far (a progress bar's ``completed``). Each op
    waits at most ``timeout_s``. Each agent cache holds ``cache_lines``
    lines (default a quarter of ``lines``, at least 8), so evictions race
    the other agents' requests all through the run. Returns::

        {"agents", "ops", "lines", "seed", "linearizable": bool,
         "lost_updates", "stale_reads", "wrong_values",   # count_anomalies
         "ops_per_s", "load_s", "check_s", "rss_mb_start", "rss_mb_end",
         "conflicts", "unknown_outcome", "refused", "untyped_errors", "errors",
         "max_latency_ms", "failed_lines", "undecided_lines", "cache_lines",
         "counterexample": str | None}

    ``ops`` counts every op issued, ``conflicts`` the cas ops that lost,
    ``unknown_outcome`` those recorded as pending (timeouts, unavailable
    actors), ``counterexample`` a shrunk history of the first failing line.
    """
    _check_sizes(agents=agents, ops_per_agent=ops_per_agent, lines=lines)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InvalidInput(f"seed is an integer, not {seed!r}")
    if runtime != "threads":  # the simulator moves only when driven: threads of agents cannot drive it
        raise InvalidInput(f"run_load needs the threads runtime, not {runtime!r}")
    _check_timeout(timeout_s)
    capacity = _cache_lines(cache_lines, lines)
    rss_start = rss_mb()
    history, team = record_load(
        agents=agents,
        ops_per_agent=ops_per_agent,
        lines=lines,
        seed=seed,
        progress=progress,
        timeout_s=timeout_s,
        cache_lines=capacity,
    )
    result = check_history(history)
    anomalies = count_anomalies(history)
    rss_end = rss_mb()
    return {
        "agents": agents,
        "ops": team["ops_done"],
        "lines": lines,
        "seed": seed,
        "linearizable": result.linearizable,
        **anomalies,
        "ops_per_s": team["ops_done"] / team["load_s"] if team["load_s"] > 0 else 0.0,
        "load_s": team["load_s"],
        "check_s": result.check_s,
        "rss_mb_start": round(rss_start, 1),
        "rss_mb_end": round(rss_end, 1),
        "conflicts": team["conflicts"],
        "unknown_outcome": team["unknown_outcome"],
        "refused": team["refused"],
        "untyped_errors": team["untyped_errors"],
        "errors": team["errors"],
        "max_latency_ms": team["max_latency_ms"],
        "failed_lines": len(result.failed_lines),
        "undecided_lines": len(result.undecided_lines),
        "cache_lines": capacity,
        "counterexample": None if result.linearizable else result.report(),
    }


def _slope_mb_per_min(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of ``(seconds, MiB)`` points, in MiB per minute (0.0 if undefined)."""
    if len(points) < 2:
        return 0.0
    mean_t = sum(t for t, _ in points) / len(points)
    mean_v = sum(v for _, v in points) / len(points)
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var <= 0:
        return 0.0
    return sum((t - mean_t) * (v - mean_v) for t, v in points) / var * 60


def _third_maxima(points: list[tuple[float, float]], span: float) -> tuple[float, float]:
    """The largest value sampled in the first third of ``span`` and in the last third."""
    first = [v for t, v in points if t <= span / 3] or [points[0][1]]
    last = [v for t, v in points if t >= 2 * span / 3] or [points[-1][1]]
    return max(first), max(last)


def run_soak(
    *,
    seconds: float,
    agents: int = 16,
    lines: int = 1_000,
    seed: int = 0,
    sample_every_s: float = 5.0,
    tolerance_pct: float = 10.0,
    progress: Callable[[int], None] | None = None,
    timeout_s: float = 60.0,
    cache_lines: int | None = None,
    config: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Run the mixed load for ``seconds`` and sample the resident set size.

    The history is not kept (it would grow by itself); linearizability is
    :func:`run_load`'s job. Each agent cache holds a quarter of the
    ``lines`` (``cache_lines``, as in :func:`run_load`), so lines are evicted
    and reloaded all the time. The memory runs on the default config, with
    ``config``'s overrides if given (a mapping, as ``MemorySystem.open``
    takes; checked before anything starts).

    **Bounded** means: the largest RSS sampled in the last third of the run
    is at most ``tolerance_pct`` percent above the largest sampled in the
    first third. The first third takes the warm-up (caches, node map, graph
    and LevelDB's memtable filling up to their limits); a leak proportional
    to the ops done shows as steady growth after it. ``slope_mb_per_min`` is
    the least-squares slope over the last two thirds and
    ``slope_last_half_mb_per_min`` over the last half, for the record: they
    do not decide ``bounded``.

    Beside RSS each sample reads two parts of it, so that growth can be
    told apart (docs/RELIABILITY.md, "Memory over a soak"): LevelDB's own
    estimate of its memtables and block cache (:meth:`L0Store.memory_bytes`;
    ``l0_cap_mb`` is the bound the config sets on it, twice
    ``l0.write_buffer_bytes`` plus ``l0.block_cache_bytes``), and the number
    of blocks Python's object allocator has handed out
    (:func:`sys.getallocatedblocks`: the Python heap, in objects).

    Returns ``{"seconds", "agents", "lines", "cache_lines", "ops",
    "ops_per_s", "samples", "rss_mb_start", "rss_mb_end", "rss_mb_max",
    "first_third_max_mb", "last_third_max_mb", "growth_pct",
    "slope_mb_per_min", "slope_last_half_mb_per_min", "bounded",
    "l0_cap_mb", "l0_first_third_max_mb", "l0_last_third_max_mb",
    "l0_mb_max", "py_blocks_first_third_max", "py_blocks_last_third_max",
    "series", "untyped_errors", "unknown_outcome", "errors"}``; ``series``
    is every sample as ``[seconds, rss MiB, LevelDB MiB or None]``.
    """
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        raise InvalidInput(f"seconds is a number > 0, not {seconds!r}")
    if isinstance(sample_every_s, bool) or not isinstance(sample_every_s, (int, float)) or not sample_every_s > 0:
        raise InvalidInput(f"sample_every_s is a number > 0, not {sample_every_s!r}")
    _check_sizes(agents=agents, lines=lines)
    _check_timeout(timeout_s)
    capacity = _cache_lines(cache_lines, lines)
    Config.from_dict(_team_config(config, capacity))  # a bad override is refused before the soak begins
    # (seconds since start, RSS MiB, LevelDB MiB or None when no memory is open, Python blocks)
    samples: list[tuple[float, float, float | None, int]] = []
    l0_cap = [0.0]
    begun = time.perf_counter()
    samples.append((0.0, rss_mb(), None, sys.getallocatedblocks()))
    next_sample = [begun + sample_every_s]

    def tick(memory: MemorySystem) -> None:
        now = time.perf_counter()
        if now >= next_sample[0]:
            l0 = memory.l0
            if not l0_cap[0]:
                l0_cap[0] = (2 * l0.config.write_buffer_bytes + l0.config.block_cache_bytes) / 2**20
            try:
                l0_mb: float | None = l0.memory_bytes() / 2**20
            except GlidingError:  # closed under us: the run is ending
                l0_mb = None
            samples.append((now - begun, rss_mb(), l0_mb, sys.getallocatedblocks()))
            next_sample[0] = now + sample_every_s

    team = _run_team(
        agents=agents,
        lines=lines,
        seed=seed,
        ops_per_agent=None,
        seconds=float(seconds),
        recorder=None,
        progress=progress,
        on_tick=tick,
        tick_s=min(1.0, float(sample_every_s)),
        timeout_s=timeout_s,
        cache_lines=capacity,
        config=config,
    )
    samples.append((time.perf_counter() - begun, rss_mb(), None, sys.getallocatedblocks()))
    span = samples[-1][0]
    rss = [(t, r) for t, r, _, _ in samples]
    first_max, last_max = _third_maxima(rss, span)
    growth = (last_max - first_max) / first_max * 100 if first_max > 0 else 0.0
    l0 = [(t, m) for t, _, m, _ in samples if m is not None]
    l0_first, l0_last = _third_maxima(l0, span) if l0 else (0.0, 0.0)
    # the Python heap is read only while the memory is open: the last sample is after close
    blocks = [(t, float(b)) for t, _, m, b in samples if m is not None]
    blocks_first, blocks_last = _third_maxima(blocks, span) if blocks else (0.0, 0.0)
    return {
        "seconds": round(span, 1),
        "agents": agents,
        "lines": lines,
        "cache_lines": capacity,
        "ops": team["ops_done"],
        "ops_per_s": team["ops_done"] / team["load_s"] if team["load_s"] > 0 else 0.0,
        "samples": len(samples),
        "rss_mb_start": round(samples[0][1], 1),
        "rss_mb_end": round(samples[-1][1], 1),
        "rss_mb_max": round(max(r for _, r in rss), 1),
        "first_third_max_mb": round(first_max, 1),
        "last_third_max_mb": round(last_max, 1),
        "growth_pct": round(growth, 2),
        "slope_mb_per_min": round(_slope_mb_per_min([(t, r) for t, r in rss if t >= span / 3]), 2),
        "slope_last_half_mb_per_min": round(_slope_mb_per_min([(t, r) for t, r in rss if t >= span / 2]), 2),
        "bounded": growth <= tolerance_pct,
        "l0_cap_mb": round(l0_cap[0], 1),
        "l0_first_third_max_mb": round(l0_first, 2),
        "l0_last_third_max_mb": round(l0_last, 2),
        "l0_mb_max": round(max((m for _, m in l0), default=0.0), 2),
        "py_blocks_first_third_max": int(blocks_first),
        "py_blocks_last_third_max": int(blocks_last),
        "series": [[round(t, 1), round(r, 1), None if m is None else round(m, 2)] for t, r, m, _ in samples],
        "untyped_errors": team["untyped_errors"],
        "unknown_outcome": team["unknown_outcome"],
        "errors": team["errors"],
    }
