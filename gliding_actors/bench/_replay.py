"""``bench replay``: events per second replaying a recorded team trace, on ``sim`` and on ``threads``.

The trace is a real recording (``MemorySystem.open(record=...)``,
docs/RECORDING.md) of the example team's op mix: one PDCA cell of five agents
(``bench._team.record_team``) cycling through their role steps — context,
turn, reads, writes, locks, pub/sub, tasks — on a virtual clock, until it
holds ``events`` agent ops (10,000; ``--quick`` 1,000). It is converted with
the library's converter (``convert_trace``), loaded like any scenario file,
and replayed with ``scenario.replay`` on each runtime, every op checked
against its recorded result and the invariants checked after every step, as
``gliding-actors replay`` does.

A replay that fails is not a speed: the report carries each run's ``ok`` and
the bench raises if one failed. ``events_per_s`` = ops replayed ÷ wall time of
``replay()`` (the whole call: opening the memory, every op, every invariant
check, the final quiesce and close), median over ``repeats`` runs, with the
range. The recording and the conversion are timed too, once.

Baseline in the same run: one sim replay with the directory-agreement
invariant inspecting every line after every step (as it did before it
became incremental, ``scenario/_ops/coherence.py``); ``agreement_speedup`` is the
incremental replay's events/s over that one's. ``where_time_goes_sim`` is a
cProfile of one sim replay: the cumulative share of each part (they overlap).
"""

from __future__ import annotations

import contextlib
import cProfile
import functools
import inspect
import json
import pstats
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gliding_actors.bench._progress import say
from gliding_actors.bench._team import record_team
from gliding_actors.config import Config
from gliding_actors.errors import GlidingError, InvalidInput
from gliding_actors.scenario import Scenario, load_scenario_text, replay
from gliding_actors.scenario._convert import ConvertOptions, convert_trace, read_trace
from gliding_actors.scenario._invariants import invariant

__all__ = ["TARGET_SIM_EVENTS_PER_S", "make_scenario", "run", "time_replay"]

#: the replay target on the simulator (events/s; docs/BENCHMARKS.md)
TARGET_SIM_EVENTS_PER_S = 20_000.0

_say = functools.partial(say, "replay")


def make_scenario(
    events: int, workdir: str | Path, embedder: str | None = None
) -> tuple[Scenario, dict[str, Any]]:
    """Record ``events`` ops of the team, convert the trace, load the scenario; and what that took.

    ``embedder``: the memory's text embedder (None: the library's); the scenario replays with it."""
    trace = Path(workdir) / "team.jsonl"
    _say(f"recording the team on threads until the trace holds {events:,} ops")
    start = time.perf_counter()
    record_team(trace, events, config={"hyperspace": {"embedder": embedder}} if embedder is not None else None)
    recorded_s = time.perf_counter() - start
    header, lines = read_trace(trace)
    op_lines = sum(1 for line in lines if line.get("kind") == "op")
    _say(f"recorded in {recorded_s:.0f} s; converting the trace")
    start = time.perf_counter()
    data = convert_trace(header, lines, ConvertOptions(name="team_replay"))
    text = json.dumps(data)
    scenario = load_scenario_text(text, str(Path(workdir) / "team_replay.json"))
    converted_s = time.perf_counter() - start
    info = {
        "trace_events": op_lines,
        "scenario_steps": len(scenario.steps),
        "record_s": round(recorded_s, 3),
        "convert_s": round(converted_s, 3),
        "description": data.get("description", ""),
    }
    return scenario, info


def _ops_in(scenario: Scenario) -> int:
    """Agent/system ops the replay issues (control steps such as ``advance`` are not events)."""
    from gliding_actors.scenario._replay import CONTROL_OPS

    count = 0
    for step in scenario.steps:
        ops = getattr(step, "ops", None)
        if ops is not None:
            count += len(ops)
        elif getattr(step, "op", None) not in CONTROL_OPS:
            count += 1
    return count


_AGREEMENT = "directory agreement at quiescence"


@contextlib.contextmanager
def _full_agreement() -> Iterator[None]:
    """Register the every-line agreement check under the invariant's name for a baseline run, then restore."""
    from gliding_actors.scenario._ops.coherence import _agreement, agreement_everywhere

    invariant(_AGREEMENT)(agreement_everywhere)
    try:
        yield
    finally:
        invariant(_AGREEMENT)(_agreement)


def time_replay(
    scenario: Scenario, runtime: str, repeats: int, seed: int = 0, *, full_agreement: bool = False
) -> dict[str, Any]:
    """Replay ``scenario`` ``repeats`` times on ``runtime``; events/s median and range; raises if a run failed.

    ``full_agreement``: the baseline, every line inspected after every step."""
    events = _ops_in(scenario)
    rates: list[float] = []
    firsts: list[float] = []
    lasts: list[float] = []
    messages = 0
    for k in range(repeats):
        what = "every line checked after every step" if full_agreement else f"seed {seed + k}"
        _say(f"replaying {events:,} events on {runtime} ({what}), run {k + 1} of {repeats}")
        marks: list[tuple[int, float]] = []  # (events done, time) after each step

        def mark(_step: Any, outcomes: list[Any], marks: list[tuple[int, float]] = marks) -> None:
            marks.append((marks[-1][0] + len(outcomes), time.perf_counter()))

        start = time.perf_counter()
        marks.append((0, start))
        with _full_agreement() if full_agreement else contextlib.nullcontext():
            result = replay(scenario, seed=seed + k, runtime=runtime, on_step=mark)
        elapsed = time.perf_counter() - start
        if not result.ok:
            failure = result.failure
            raise GlidingError(f"bench replay: the {runtime} replay failed: {failure.what if failure else '?'}")
        if len(result.outcomes) != events:
            raise GlidingError(f"bench replay: {len(result.outcomes)} ops replayed, {events} expected")
        rates.append(events / elapsed)
        _say(f"{runtime}: {events / elapsed:,.1f} events/s")
        first, last = edge_rates(marks, EDGE_EVENTS)
        firsts.append(first)
        lasts.append(last)
        messages = result.messages
    first_rate, last_rate = statistics.median(firsts), statistics.median(lasts)
    return {
        "events": events,
        "repeats": repeats,
        "events_per_s": round(statistics.median(rates), 1),
        "events_per_s_range": [round(min(rates), 1), round(max(rates), 1)],
        "protocol_messages": messages if runtime == "sim" else None,
        # does an event cost more as the trace grows? (1.0: flat)
        "first_1k_events_per_s": round(first_rate, 1),
        "last_1k_events_per_s": round(last_rate, 1),
        "last_1k_vs_first_1k": round(last_rate / first_rate, 3) if first_rate else None,
    }


#: the events at each end of a replay whose rates are compared
EDGE_EVENTS = 1_000


def edge_rates(marks: list[tuple[int, float]], n: int) -> tuple[float, float]:
    """Events per second over the first ``n`` events of a replay and over its last ``n``.

    ``marks``: ``(0, start)``, then ``(events done, time)`` after each step, in order. The spans
    run from the step before the ``n``-th event's step and from the step where
    the last ``n`` begin, so a step's events are counted whole (a trace
    shorter than ``2 n`` events overlaps its two ends).
    """
    if len(marks) < 2:
        return 0.0, 0.0
    total = marks[-1][0]
    first_end = next(i for i, (done, _t) in enumerate(marks) if done >= min(n, total))
    last_start = max(i for i, (done, _t) in enumerate(marks) if done <= max(0, total - n))

    def rate(i: int, j: int) -> float:
        (a_done, a_t), (b_done, b_t) = marks[i], marks[j]
        return (b_done - a_done) / (b_t - a_t) if b_t > a_t else 0.0

    return rate(0, max(1, first_end)), rate(min(last_start, len(marks) - 2), len(marks) - 1)


#: where a replay's time goes: (label, file suffix, function) whose cumulative time the profile reports
_PARTS: tuple[tuple[str, str, str], ...] = (
    ("invariant_checks", "scenario/_invariants.py", "run_invariants"),
    ("agreement_check", "scenario/_ops/coherence.py", "_agreement"),
    ("hyperspace_service", "hyperspace/_service.py", "receive"),
    ("context_assembly", "context/_service.py", "receive"),
    ("simulator_delivery", "runtime/_sim.py", "step"),
)


def profile_replay(scenario: Scenario, seed: int = 0) -> dict[str, Any]:
    """One sim replay under cProfile: the share of its time in each of ``_PARTS`` (they overlap: delivery
    includes the actors' work, the invariant checks' inspects deliver messages too)."""
    _say("one more sim replay under cProfile (where the time goes)")
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        result = replay(scenario, seed=seed, runtime="sim")
    finally:
        profiler.disable()
    if not result.ok:
        raise GlidingError("bench replay: the profiled sim replay failed")
    stats: dict[tuple[str, int, str], tuple[Any, ...]] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    # the embedders that run a model (not the chain that picks one): their ``embed`` do not call each other
    from gliding_actors.hyperspace._embedders import HashEmbedder, OnnxEmbedder, OpenAIEmbedder

    models = {inspect.getsourcelines(c.embed)[1] for c in (HashEmbedder, OnnxEmbedder, OpenAIEmbedder)}
    total = next(
        (ct for (file, _line, func), (_cc, _nc, _tt, ct, _callers) in stats.items()
         if file.endswith("scenario/_replay.py") and func == "replay"),
        0.0,
    )
    shares: dict[str, float] = {}
    for label, suffix, name in _PARTS:
        cumulative = sum(ct for (file, _line, func), (_cc, _nc, _tt, ct, _callers) in stats.items()
                         if file.endswith(suffix) and func == name)
        shares[label] = round(cumulative / total, 3) if total else 0.0
    embedding = sum(ct for (file, line, func), (_cc, _nc, _tt, ct, _callers) in stats.items()
                    if file.endswith("hyperspace/_embedders.py") and func == "embed" and line in models)
    shares["text_embedding"] = round(embedding / total, 3) if total else 0.0
    return {"profiled_s": round(total, 3), "share_of_time": shares}


def run(
    quick: bool = False,
    *,
    embedder: str | None = None,
    events: int | None = None,
    repeats: int | None = None,
    threads_repeats: int | None = None,
) -> dict[str, Any]:
    """Record, convert, replay on sim and threads (module docstring); ``embedder``: the memory's text
    embedder (None: the library's default)."""
    n = events if events is not None else (1_000 if quick else 10_000)
    sim_repeats = repeats if repeats is not None else (1 if quick else 3)
    thr_repeats = threads_repeats if threads_repeats is not None else (1 if quick else 3)
    if n < 1 or sim_repeats < 1 or thr_repeats < 1:
        raise InvalidInput(f"events and repeats must be >= 1, not {n}, {sim_repeats}, {thr_repeats}")
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as tmp:
        scenario, info = make_scenario(n, tmp, embedder)
        sim = time_replay(scenario, "sim", sim_repeats)
        baseline = time_replay(scenario, "sim", 1, full_agreement=True)
        threads = time_replay(scenario, "threads", thr_repeats)
        where = profile_replay(scenario)
    return {
        "suite": "replay",
        "embedder": embedder if embedder is not None else Config().hyperspace.embedder,
        **info,
        # the same on sim, where nothing else shares the time: the cost per event as the trace grows
        "replay": {"last_1k_vs_first_1k": sim["last_1k_vs_first_1k"]},
        "sim": sim,
        "sim_full_agreement": baseline,
        "agreement_speedup": round(sim["events_per_s"] / baseline["events_per_s"], 2),
        "threads": threads,
        "target_sim_events_per_s": TARGET_SIM_EVENTS_PER_S,
        "sim_target_met": sim["events_per_s"] >= TARGET_SIM_EVENTS_PER_S,
        "sim_share_of_target": round(sim["events_per_s"] / TARGET_SIM_EVENTS_PER_S, 4),
        "sim_messages_per_event": round(sim["protocol_messages"] / sim["events"], 1),
        "where_time_goes_sim": where,
    }
