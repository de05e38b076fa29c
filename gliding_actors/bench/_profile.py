"""``bench profile``: where the team workload's time goes, and what was done about each hot spot.

The workload is ``bench team``'s (its ``seed_cells``, ``subscribe`` and
``role_cycle``: the example team's op mix, cells of five roles), driven one op
at a time in role order on the deterministic simulator. Why the simulator
and not ``bench team``'s threads: on ``threads`` the actors' work runs on
their own threads, which a profiler started in the calling thread does not
see (cProfile and pyinstrument both profile one thread), so the profile
would show agents waiting on futures; on ``sim`` every delivery runs inside
the caller's ``get()`` and the whole memory's work is in one profile. What
it adds that threads do not have — the simulator's message log and hash per
delivery (``runtime/_sim.py``) — is named as such in the table.

The profiler is pyinstrument (sampling, the ``bench`` extra) when it is
installed, else the standard library's cProfile (deterministic, with its
per-call overhead inflating small functions); the report names which ran.
For each of the ``top`` functions by own time: its ``file:line``, own and
cumulative share of the profiled wall time, and a verdict from
:data:`VERDICTS` — ``fixed`` (what was changed, with a before/after ratio
measured in this same run where the change has a switch) or ``explained``
(why the time is there and what it would take to remove it); a hot spot
without an entry says so (``not yet looked at``) rather than hiding.

The before/after: the workload is also run, unprofiled, with
``hyperspace.structure_refresh_after: 1`` — the old behaviour, a search
retrains the Poincaré model after every typed write — against the default;
the ratio of the two wall times is the fix's.
"""

from __future__ import annotations

import cProfile
import importlib
import os
import platform
import pstats
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gliding_actors.bench._team import CELL, role_cycle, role_of, seed_cells, subscribe
from gliding_actors.clock import VirtualClock
from gliding_actors.errors import InvalidInput
from gliding_actors.system import MemorySystem

__all__ = ["VERDICTS", "drive_team", "profile_team", "render", "run", "setup_ops"]

#: simulated LLM latency between a context and its turn (as ``record_team``), virtual seconds
THINK_S = 2.0

#: (path suffix, function) -> (verdict, why). The replay's hot spots (bench replay) share these.
VERDICTS: dict[tuple[str, str], tuple[str, str]] = {
    ("hyperspace/_service.py", "refresh_structure"): (
        "fixed",
        "retrained the Poincaré model on the search path after every typed write; now only once "
        "`structure_refresh_after` (64) such writes accumulated (docs/HYPERSPACE.md: the staleness bound). "
        "Ratio: `structure_fix_speedup`.",
    ),
    ("hyperspace/_poincare.py", "_train"): (
        "fixed",
        "the Poincaré training, called by `refresh_structure` (see there). What is left is mostly the first "
        "fit (no model yet: burn-in and 50 epochs), a one-off cost that a short run shows large; after it, one "
        "incremental update per 64 typed writes.",
    ),
    ("hyperspace/_poincare.py", "_negatives_for"): ("fixed", "negative sampling of `_train` (see there)."),
    ("hyperspace/_poincare.py", "draw"): ("fixed", "negative sampling of `_train` (see there)."),
    ("hyperspace/_poincare.py", "invalid"): ("fixed", "negative sampling of `_train` (see there)."),
    ("hyperspace/_poincare.py", "_step"): ("fixed", "Riemannian SGD steps of `_train` (see `refresh_structure`)."),
    ("hyperspace/_service.py", "visible_fn"): (
        "fixed",
        "a search asked the permission matrix twice per candidate node per ranking; now the engine asks once "
        "per node (its allow-set is already confined) and the answer is kept per named graph for the search.",
    ),
    ("l2/_permissions.py", "allowed"): (
        "fixed",
        "mostly from the search's per-node visibility (see `visible_fn`); what remains is each read's own check.",
    ),
    ("hyperspace/_embedders.py", "_features"): (
        "explained",
        "the hash embedder tokenising and hashing each written value and each query: every write's text is "
        "new, so it is embedded once (the embedding cache by text hash already spares re-written text).",
    ),
    ("hyperspace/_embedders.py", "embed_one"): ("explained", "the hash embedder (see `_features`)."),
    ("context/_service.py", "_one_line"): (
        "explained",
        "every context candidate (chain turn, archived turn) is rendered as the one prompt line it would be, "
        "whitespace collapsed by a regex, because packing by marginal gain per token needs each line's token "
        "count before choosing; rendering only the chosen lines would need a token estimate from the raw text.",
    ),
    ("l1/_session.py", "line_changed"): (
        "explained",
        "L1 marking the turns that cite a line stale when the line changes (the `line.changed` bus event): a scan "
        "of the agent's chain per event, linear in the chain (bounded by the token budget), per agent listening.",
    ),
    # built-ins, as pyinstrument and cProfile name them
    ("<built-in>", "dict.get"): (
        "explained",
        "dictionary lookups spread over every layer; attributed to callers, the largest (the hash embedder's "
        "feature table) is half a percent of the run.",
    ),
    ("<built-in>", "dict.items"): (
        "explained",
        "iteration over dicts spread over the layers; attributed to callers, the largest (context assembly's "
        "merge) is about a tenth of a percent.",
    ),
    ("~", "<method 'items' of 'dict' objects>"): ("explained", "dict iteration over every layer (see dict.items)."),
    ("<built-in>", "dict.fromkeys"): (
        "explained",
        "mostly L2's JSON-LD to quads conversion (`l2/_jsonld.py` `to_quads`), deduplicating each written "
        "value's quads in order before they replace the line's quads in the graph.",
    ),
    ("~", "<built-in method fromkeys>"): ("explained", "L2's quads deduplication (see dict.fromkeys)."),
    ("<built-in>", "Pattern.sub"): ("explained", "the regex of `_one_line` (context candidates' prompt lines)."),
    ("~", "<method 'sub' of 're.Pattern' objects>"): ("explained", "the regex of `_one_line` (see Pattern.sub)."),

    ("l0/_store.py", "retrieve"): (
        "explained",
        "L0 (LevelDB) reads: context assembly and the hyperspace catch-up read archived turns and home copies; "
        "each is one plyvel get plus msgpack decoding. Fewer would need a read-through cache above L0, which "
        "is what L2 is for lines; archives are L0-only by design (docs/L1.md).",
    ),
    ("context/_service.py", "assemble_now"): (
        "explained",
        "the MemoryScheduler assembling a context per LLM step: it ranks every candidate (session, archive, "
        "search hits) to fill the budget; linear in the candidates, called once per `context` op.",
    ),
    ("context/_service.py", "_summarized"): (
        "explained",
        "context assembly summarising each archived turn it considers (see `assemble_now`); the archive grows "
        "with the team's turns, so this grows with the run.",
    ),
    ("context/_assemble.py", "merge"): ("explained", "context assembly merging ranked candidates (see `assemble_now`)."),
    ("runtime/_sim.py", "_record"): (
        "explained",
        "the simulator's log and SHA-256 hash of every delivery: what makes a replay reproducible byte for "
        "byte (sim only; threads has no such cost).",
    ),
    ("runtime/_sim.py", "_enqueue"): ("explained", "the simulator packing each message with msgpack (serialisability is checked as Ray would)."),
    ("runtime/_sim.py", "step"): ("explained", "the simulator's delivery loop (sim only)."),
    ("coherence/_hosting.py", "unpack_value"): (
        "explained",
        "msgpack-unpacking a cached line's value: each reader gets a private copy, so a writer can never "
        "change what a reader holds (docs/DESIGN.md).",
    ),
    ("hyperspace/_engine.py", "_text_ranking"): (
        "explained",
        "the text ranking of a search: embeds the query (cached by text) and scores the vector index; "
        "once per `context` op, whose assembly searches.",
    ),
    ("context/_assemble.py", "gain"): ("explained", "context assembly's marginal gain per candidate (see `assemble_now`)."),
    ("l0/_store.py", "store_many"): (
        "explained",
        "L0 batch writes: each `turn` archives to L0, and write-through lines (decisions) go down at once.",
    ),
    ("l0/_entry.py", "packb"): ("explained", "msgpack encoding of L0 entries (see `store_many`)."),
    ("runtime/_sim.py", "get"): (
        "explained",
        "the caller waiting on a future: on `sim` the wait runs the deliveries (plumbing, its own time is the loop).",
    ),
    ("context/_assemble.py", "utility"): (
        "explained",
        "context assembly scoring each candidate (relevance, recency, importance) for the budget; the "
        "candidates include every archived turn of the agent, so it grows with the session (see `assemble_now`).",
    ),
    ("context/_assemble.py", "assemble"): ("explained", "context assembly's greedy fill of the budget (see `assemble_now`)."),
    ("hyperspace/_engine.py", "_fuse"): (
        "explained",
        "reciprocal-rank fusion of the text, BM25 and structure rankings of a search: linear in their depth (50).",
    ),
    ("hyperspace/_bm25.py", "scores"): (
        "explained",
        "BM25 over the query's words: walks the postings of each word; archived turns share the team's vocabulary, "
        "so postings grow with the run.",
    ),
    ("~", "<method 'get' of 'dict' objects>"): (
        "explained",
        "dict lookups spread over every layer (cProfile counts each one; no single caller dominates).",
    ),
    ("~", "<built-in method builtins.sorted>"): (
        "explained",
        "sorting for deterministic order (ties by IRI, sorted keys in messages), spread over the layers.",
    ),
    ("l0/_store.py", "_scan_nodes"): (
        "explained",
        "L0 key scans: the hyperspace catch-up lists the archive prefix on every catch-up to find new archived "
        "turns (docs/HYPERSPACE.md), O(archives) each time. The next lever: have the session actor hand new "
        "archives over with `hyperspace.notify` and drop the scan.",
    ),
    ("hyperspace/_index.py", "_best_of"): (
        "explained",
        "exact cosine over the vector delta and allow-lists, and over every vector when the graph search "
        "would cost as much (a small index, or a wide search): numpy, one matrix product.",
    ),
}


def setup_ops(agents: int) -> int:
    """Ops before the first cycle: four seeding writes per cell, one subscription per CA, AA, DA and SA."""
    cells = (agents + CELL - 1) // CELL
    return 4 * cells + sum(1 for i in range(agents) if role_of(i) != "PA")


def drive_team(memory: MemorySystem, agents: int, ops: int, clock: VirtualClock | None = None) -> int:
    """Run ``agents`` agents of the team through their role cycles, one op at a time, until ``ops`` ops ran.

    Seeding and subscriptions count as ops (as in ``record_team``); returns the ops made.
    """

    class _Enough(Exception):
        pass

    done = setup_ops(agents)
    if ops <= done:
        raise InvalidInput(f"bench profile: {agents} agents take {done} ops to set up; ops must be more, not {ops}")
    cells = (agents + CELL - 1) // CELL
    seed_cells(memory, cells)
    team = [(memory.agent(f"{role_of(i).lower()}-{i}", role_of(i)), role_of(i), i // CELL) for i in range(agents)]
    for agent, role, cell in team:
        subscribe(agent, role, cell)

    def counted(_op: str, call: Callable[[], Any]) -> Any:
        nonlocal done
        if done >= ops:
            raise _Enough
        done += 1
        return call()

    think = None if clock is None else (lambda: clock.advance(THINK_S))
    cycle = 0
    try:
        while done < ops:
            cycle += 1
            for agent, role, cell in team:
                role_cycle(agent, role, cell, cycle, counted, think=think)
    except _Enough:
        pass
    return done


def _workload(agents: int, ops: int, config: Mapping[str, Any] | None = None) -> float:
    """Wall seconds of one unprofiled run of the workload (its ops; opening and closing the memory left out)."""
    clock = VirtualClock()
    with MemorySystem.open(runtime="sim", clock=clock, config=config) as memory:
        start = time.perf_counter()
        drive_team(memory, agents, ops, clock)
        return time.perf_counter() - start


def _short(path: str) -> str:
    """``gliding_actors/...`` for the package's files, the file name otherwise."""
    marker = f"gliding_actors{os.sep}"
    at = path.rfind(marker)
    return path[at:] if at >= 0 else os.path.basename(path)


def _rows_cprofile(agents: int, ops: int) -> tuple[float, list[dict[str, Any]]]:
    clock = VirtualClock()
    profiler = cProfile.Profile()
    with MemorySystem.open(runtime="sim", clock=clock) as memory:
        start = time.perf_counter()
        profiler.enable()
        try:
            drive_team(memory, agents, ops, clock)
        finally:
            profiler.disable()
        wall = time.perf_counter() - start
    stats: dict[tuple[str, int, str], tuple[Any, ...]] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    total = sum(tt for (_cc, _nc, tt, _ct, _callers) in stats.values()) or 1.0
    rows = [
        {"function": func, "file": _short(file), "line": line, "calls": nc,
         "own_s": tt, "cum_s": ct, "own_share": tt / total, "cum_share": ct / total}
        for (file, line, func), (_cc, nc, tt, ct, _callers) in stats.items()
    ]
    return wall, rows


def _rows_pyinstrument(module: Any, agents: int, ops: int) -> tuple[float, list[dict[str, Any]]]:
    """Aggregate pyinstrument's call tree per function: own = summed self time, cumulative = time of the
    outermost frames of that function (recursion counted once)."""
    clock = VirtualClock()
    profiler = module.Profiler(interval=0.0005)
    with MemorySystem.open(runtime="sim", clock=clock) as memory:
        start = time.perf_counter()
        profiler.start()
        try:
            drive_team(memory, agents, ops, clock)
        finally:
            profiler.stop()
        wall = time.perf_counter() - start
    root = profiler.last_session.root_frame()
    total = float(root.time) or 1.0
    acc: dict[tuple[str, int, str], dict[str, Any]] = {}

    def walk(frame: Any, open_keys: frozenset[tuple[str, int, str]]) -> None:
        if getattr(frame, "is_synthetic", False):
            return  # a "[self]" child: its time is already in its parent's total_self_time
        key = (str(frame.file_path or "?"), int(frame.line_no or 0), str(frame.function or "?"))
        row = acc.setdefault(key, {"own_s": 0.0, "cum_s": 0.0, "calls": None})
        row["own_s"] += float(frame.total_self_time)
        if key not in open_keys:
            row["cum_s"] += float(frame.time)
        for child in frame.children:
            walk(child, open_keys | {key})

    if root is not None:
        walk(root, frozenset())
    rows = [
        {"function": func, "file": _short(file), "line": line, "calls": row["calls"], "own_s": row["own_s"],
         "cum_s": row["cum_s"], "own_share": row["own_s"] / total, "cum_share": row["cum_s"] / total}
        for (file, line, func), row in acc.items()
    ]
    return wall, rows


def profile_team(agents: int, ops: int, top: int) -> dict[str, Any]:
    """Profile the workload; the ``top`` functions by own time, each with its verdict."""
    try:
        module: Any = importlib.import_module("pyinstrument")
    except ImportError:
        module = None
    if module is not None:
        profiler_name = f"pyinstrument {getattr(module, '__version__', '?')}"
        wall, rows = _rows_pyinstrument(module, agents, ops)
    else:
        profiler_name = "cProfile (pyinstrument is not installed)"
        wall, rows = _rows_cprofile(agents, ops)
    rows = [r for r in rows if "disable' of '_lsprof" not in r["function"]]  # the profiler switching off
    rows.sort(key=lambda r: (-r["own_s"], r["file"], r["line"]))
    hot = []
    for row in rows[:top]:
        verdict, why = next(
            ((v, w) for (suffix, name), (v, w) in VERDICTS.items()
             if row["function"] == name and row["file"].endswith(suffix)),
            ("not yet looked at", ""),
        )
        hot.append({
            "function": row["function"],
            "where": "built-in" if row["file"] == "~" else f"{row['file']}:{row['line']}",
            "calls": row["calls"],
            "own_share": round(row["own_share"], 4),
            "cum_share": round(row["cum_share"], 4),
            "verdict": verdict,
            "why": why,
        })
    return {"profiler": profiler_name, "profiled_wall_s": round(wall, 3), "hot_spots": hot}


def render(report: Mapping[str, Any]) -> str:
    """docs/PROFILE.md from a ``bench profile`` report."""
    lines = [
        "# Where time goes — `gliding-actors bench profile`",
        "",
        "Generated by `gliding-actors bench profile"
        f" --agents {report['agents']} --ops {report['ops']} --out docs/PROFILE.md` "
        "(`gliding_actors/bench/_profile.py`; its module docstring says why the workload runs on the simulator). "
        "Do not edit by hand: rerun the command.",
        "",
        f"* workload: `bench team`'s op mix, {report['agents']} agents, {report['ops']} ops, on `sim`, "
        f"one op at a time ({report['ops_per_s']} ops/s unprofiled)",
        f"* profiler: {report['profiler']}; profiled wall time {report['profiled_wall_s']} s",
        f"* machine: {report['machine']}",
        f"* fix measured in this run: the old search-path retraining (`structure_refresh_after: 1`) took "
        f"{report['before_s']} s, the default {report['after_s']} s — **{report['structure_fix_speedup']}×**",
        "",
        "Shares are of the profiled time; own = in the function itself, cumulative = with what it called.",
        "",
        "| # | function | where | calls | own | cumulative | verdict | why |",
        "|---|---|---|---:|---:|---:|---|---|",
    ]
    for k, spot in enumerate(report["hot_spots"], 1):
        calls = "" if spot["calls"] is None else str(spot["calls"])
        lines.append(
            f"| {k} | `{spot['function']}` | `{spot['where']}` | {calls} | {100 * spot['own_share']:.1f} % "
            f"| {100 * spot['cum_share']:.1f} % | {spot['verdict']} | {spot['why']} |"
        )
    lines += ["", report.get("notes", ""), ""]
    return "\n".join(lines)


_NOTES = """## Reading it

No single function dominates any more: the profile is flat, spread over the
layers each op crosses (context assembly, hybrid search, L0 reads, the
simulator's own log). The two hot spots that did dominate were fixed:
the Poincaré retraining on the search path (above, measured), and the
per-node permission checks of a search (`visible_fn`). `bench replay` had a
third, its own: the directory-agreement invariant inspected every line after
every step; it now inspects only the lines touched since the last check
(`scenario/_ops/coherence.py`, `_AgreementLog`), and reports the ratio."""


def run(
    quick: bool = False, *, agents: int | None = None, ops: int | None = None, out: str | Path | None = None,
    top: int | None = None,
) -> dict[str, Any]:
    """Profile the team workload and (with ``out``) write the Markdown table there (module docstring)."""
    n = agents if agents is not None else 5
    count = ops if ops is not None else (300 if quick else 2_000)
    rows = top if top is not None else 15
    for name, value, low in (("agents", n, 1), ("ops", count, 40), ("top", rows, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise InvalidInput(f"bench profile: {name} is an integer >= {low}, not {value!r}")
    if n > 256:
        raise InvalidInput(f"bench profile: at most 256 agents, not {n}")
    if count <= setup_ops(n):
        raise InvalidInput(f"bench profile: {n} agents take {setup_ops(n)} ops to set up; ops must be more, not {count}")
    _workload(n, min(count, setup_ops(n) + 40))  # warm-up: imports and first-use costs land in neither run
    before_s = _workload(n, count, {"hyperspace": {"structure_refresh_after": 1}})
    after_s = _workload(n, count)
    profiled = profile_team(n, count, rows)
    report: dict[str, Any] = {
        "suite": "profile",
        "agents": n,
        "ops": count,
        "ops_per_s": round(count / after_s, 1),
        **profiled,
        "before_s": round(before_s, 3),
        "after_s": round(after_s, 3),
        "structure_fix_speedup": round(before_s / after_s, 2),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "notes": _NOTES,
    }
    if out is not None:
        Path(out).write_text(render(report), encoding="utf-8")
        report["written"] = str(out)
    return report
