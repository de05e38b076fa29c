"""``bench l2``: what a write and a coherent SPARQL query cost on the blackboard.

One :class:`~gliding_actors.system.MemorySystem` on the threads runtime, real
LevelDB and real pyoxigraph; every baseline is measured in the same process,
alternating sample by sample with ours so that machine load hits both alike.

Data: ``nodes`` small JSON-LD task nodes (``@type`` Task, title, status,
priority, revision) in graph ``execution``, written by four DA agents (a
quarter each); half are ``open``. One fixed SELECT (:data:`QUERY`) returns the
open ones with four variables, ordered. The querying agent is a CA, which may
read ``execution``: every node is in a readable graph, so the confined query
and the raw one return the same rows (checked every round).

* ``coherent_query_p50_us_0_dirty`` — ``Agent.query(QUERY)`` while no cache
  holds a line in M or E: the recall still asks every directory shard and
  finds nothing to fetch, then the query runs confined to the role's readable
  graphs and its solutions are turned into plain rows.
* ``coherent_query_p50_us_100_dirty`` — the same query while four *other*
  agents hold 100 of the matching lines in M (each just rewrote its 25 with a
  new ``revision``, outside the timed region). Each timed query recalls those
  100 lines home (Fwd-GetS, data back, each line's quads replaced in the
  graph) before it runs.
* ``raw_oxigraph_query_p50_us`` — the same SPARQL text on the same pyoxigraph
  store (``GraphStore.raw``), union default graph, no confinement, its lazy
  solutions iterated to the end (terms stay pyoxigraph objects, no strings):
  what pyoxigraph alone costs for this query.
* Where the 0-dirty gap goes: ``raw_oxigraph_confined_query_p50_us`` — the raw
  query with the role's dataset arguments (its readable graphs as default and
  named graphs), ``confinement_ratio`` = that / raw; ``recall_p50_us_0_dirty``
  — a bare ``MemorySystem.submit_recall()`` with nothing dirty. What is left
  is the handle's own work (graph list, checks, plain rows).
* ``coherent_query_overhead_ratio`` = 0-dirty / raw;
  ``coherent_query_100_dirty_ratio`` = 100-dirty / raw;
  ``recall_us_per_dirty_line`` = (100-dirty − 0-dirty) / 100.
* Evidence, not timings: ``recalled_lines_min_100_dirty`` is the fewest lines
  seen to go from M to S across one timed 100-dirty query (read off the
  agents' published cache views, no message): 100 means every sample really
  recalled 100 lines. ``dirty_lines_max_0_dirty`` is the most lines seen in M
  before a 0-dirty round (must be 0). ``coherent_results_ok`` says every query
  returned every matching row, every bare recall moved nothing, and every
  100-dirty query showed every dirty line's newest revision.
* ``write_p50_us`` — a blocking ``Agent.write`` of a new small JSON-LD node
  (an IRI no cache holds) to graph ``execution``, write-back: JSON-LD and
  permission checks in the handle, a GetM miss at the directory, the line left
  in M in the writer's cache (the graph sees it when it is recalled).
  ``write_held_m_p50_us`` — a rewrite of a line the writer already holds in M
  (one ask to its own cache, no directory). Both also in units of a raw Pykka
  ask round trip measured between them (``write_rtts``). Writes stay within the
  cache's default capacity (1,024 lines), so no eviction write-back is timed.
  Evidence: ``write_messages_max`` / ``write_held_m_messages_max`` are the most
  protocol messages one such write caused (the held rewrite must cause none),
  ``write_policies`` the policies seen (``write_back`` only).

Latencies are medians; the query figures' sample count is ``rounds``.
"""

from __future__ import annotations

import gc
import statistics
import time
from typing import Any

import pyoxigraph as ox

from gliding_actors.agent import Agent
from gliding_actors.bench._baselines import raw_pykka_echo
from gliding_actors.errors import InvalidInput
from gliding_actors.system import MemorySystem

__all__ = ["DIRTY", "QUERY", "run"]

#: Lines held dirty (M) by other agents during each ``100_dirty`` query.
DIRTY = 100
#: Agents holding the dirty lines (DIRTY / HOLDERS each).
HOLDERS = 4
GRAPH = "execution"

#: The one query every figure runs. Its own PREFIX line makes the text
#: self-contained, so the raw store runs exactly the same string.
QUERY = """PREFIX ga: <https://gliding-actors.dev/ns#>
SELECT ?task ?title ?priority ?revision WHERE {
  ?task a ga:Task ; ga:status "open" ; ga:title ?title ;
        ga:priority ?priority ; ga:revision ?revision .
}
ORDER BY DESC(?priority) ?task"""

_ns = time.perf_counter_ns


def _median_us(samples: list[int]) -> float:
    return statistics.median(samples) / 1000.0


def _node(i: int, revision: int) -> dict[str, Any]:
    return {
        "@type": "Task",
        "title": f"Task {i}: refactor the auth middleware to verify JWT tokens",
        "status": "open" if i % 2 == 0 else "done",
        "priority": i % 5,
        "revision": revision,
    }


def _held_m(agents: list[Agent], iris: list[str]) -> int:
    """How many of ``iris`` the ``agents`` hold in M, read off the published
    cache views (no message, so it does not disturb what is measured)."""
    board = agents[0].system.board
    count = 0
    for agent in agents:
        for iri in iris:
            hit = board.lookup(agent.id, iri)
            if hit is not None and hit[0] == "M":
                count += 1
    return count


def _queries(memory: MemorySystem, nodes: int, rounds: int) -> dict[str, Any]:
    if nodes < 2 * DIRTY:
        raise InvalidInput(
            f"bench l2 needs at least {2 * DIRTY} nodes, so that {DIRTY} matching lines can be dirty"
        )
    holders = [memory.agent(f"holder{h}", "DA") for h in range(HOLDERS)]
    querier = memory.agent("querier", "CA")
    iris = [f"task:bench-{i:05d}" for i in range(nodes)]
    owner = {iri: holders[i % HOLDERS] for i, iri in enumerate(iris)}
    pending = [owner[iri].submit_write(iri, _node(i, 0), graph=GRAPH) for i, iri in enumerate(iris)]
    for future in pending:
        future.get(30.0)
    memory.submit_recall().get(30.0)  # every line home and in the graph; owners keep S
    # The dirty lines are matching (open) ones, so the query must show their new revision.
    dirty_index = {iris[i]: i for i in range(0, 2 * DIRTY, 2)}
    dirty = list(dirty_index)
    raw = memory.graph.raw

    readable = [memory.graph.graph_node(g) for g in memory.readable_graphs(querier.role)]

    def materialise(solutions: Any) -> int:
        assert isinstance(solutions, ox.QuerySolutions)
        count = 0
        for solution in solutions:
            list(solution)  # pyoxigraph is lazy: take every term, as a caller would
            count += 1
        return count

    def raw_query() -> int:
        return materialise(raw.query(QUERY, use_default_graph_as_union=True))

    def raw_confined_query() -> int:
        return materialise(raw.query(QUERY, default_graph=list(readable), named_graphs=list(readable)))

    def coherent_query() -> int:
        return len(querier.query(QUERY, timeout=30.0)["rows"])

    def bare_recall() -> int:
        moved: int = memory.submit_recall().get(30.0)
        return moved  # lines moved home: none, nothing is dirty

    def redirty(revision: int) -> None:
        futures = [
            owner[iri].submit_write(iri, _node(dirty_index[iri], revision), graph=GRAPH) for iri in dirty
        ]
        for future in futures:
            future.get(30.0)

    clean = [
        ("raw", raw_query),
        ("raw_confined", raw_confined_query),
        ("coherent", coherent_query),
        ("recall", bare_recall),
    ]
    for _ in range(3):  # warm up every path
        for _name, measure in clean:
            measure()
    raw_rows = raw_query()

    samples: dict[str, list[int]] = {name: [] for name, _ in clean}
    samples["dirty"] = []
    held_before_clean: list[int] = []
    recalled: list[int] = []
    results_ok = True
    gc.collect()
    for r in range(1, rounds + 1):
        held_before_clean.append(_held_m(holders, dirty))
        # The clean-state measures run in a rotating order, so none always
        # runs first after the untimed re-dirtying.
        for name, measure in clean[r % len(clean) :] + clean[: r % len(clean)]:
            start = _ns()
            answer = measure()
            samples[name].append(_ns() - start)
            # every query returns every matching row; a bare recall moves nothing
            results_ok = results_ok and answer == (0 if name == "recall" else raw_rows)
        redirty(r)
        before = _held_m(holders, dirty)
        start = _ns()
        result = querier.query(QUERY, timeout=30.0)
        samples["dirty"].append(_ns() - start)
        recalled.append(before - _held_m(holders, dirty))
        seen = {row["task"]: row["revision"] for row in result["rows"]}
        results_ok = (
            results_ok and len(result["rows"]) == raw_rows and all(seen.get(iri) == str(r) for iri in dirty)
        )
    p50 = {name: _median_us(values) for name, values in samples.items()}
    raw_p50 = p50["raw"]
    return {
        "nodes": nodes,
        "quads": memory.graph.quad_count(),
        "rows": raw_rows,
        "readable_graphs": len(readable),
        "dirty_lines": DIRTY,
        "dirty_holders": HOLDERS,
        "rounds": rounds,
        "raw_oxigraph_query_p50_us": round(raw_p50, 1),
        "raw_oxigraph_confined_query_p50_us": round(p50["raw_confined"], 1),
        "recall_p50_us_0_dirty": round(p50["recall"], 1),
        "coherent_query_p50_us_0_dirty": round(p50["coherent"], 1),
        "coherent_query_p50_us_100_dirty": round(p50["dirty"], 1),
        "confinement_ratio": round(p50["raw_confined"] / raw_p50, 3),
        "coherent_query_overhead_ratio": round(p50["coherent"] / raw_p50, 3),
        "coherent_query_100_dirty_ratio": round(p50["dirty"] / raw_p50, 3),
        "recall_us_per_dirty_line": round((p50["dirty"] - p50["coherent"]) / DIRTY, 1),
        "dirty_lines_max_0_dirty": max(held_before_clean),
        "recalled_lines_min_100_dirty": min(recalled),
        "coherent_results_ok": results_ok,
    }


def _writes(memory: MemorySystem, count: int) -> dict[str, Any]:
    writer = memory.agent("writer", "DA")
    raw_ask, raw_stop = raw_pykka_echo()
    fresh: list[int] = []
    held: list[int] = []
    pykka: list[int] = []
    messages = {"new": 0, "held": 0}
    policies: set[str] = set()
    try:
        for i in range(20):  # warm up
            writer.write(f"task:warm-{i}", _node(i, 0), graph=GRAPH, timeout=30.0)
            raw_ask({"t": "ping"})
        gc.collect()
        for i in range(count):
            iri = f"task:write-{i:05d}"
            start = _ns()
            first = writer.write(iri, _node(i, 0), graph=GRAPH, timeout=30.0)
            middle = _ns()
            again = writer.write(iri, _node(i, 1), graph=GRAPH, timeout=30.0)
            end = _ns()
            messages["new"] = max(messages["new"], first["messages"])
            messages["held"] = max(messages["held"], again["messages"])
            policies.update((first["policy"], again["policy"]))
            raw_ask({"t": "ping"})
            pykka.append(_ns() - end)
            fresh.append(middle - start)
            held.append(end - middle)
    finally:
        raw_stop()
    rtt = _median_us(pykka)
    write_p50 = _median_us(fresh)
    return {
        "writes": count,
        "write_p50_us": round(write_p50, 1),
        "write_held_m_p50_us": round(_median_us(held), 1),
        "pykka_ask_p50_us": round(rtt, 1),
        "write_rtts": round(write_p50 / rtt, 2),
        "write_messages_max": messages["new"],
        "write_held_m_messages_max": messages["held"],
        "write_policies": sorted(policies),
    }


def run(quick: bool = False) -> dict[str, Any]:
    """Run the suite; returns one JSON-able dict (prints nothing)."""
    nodes, rounds, writes = (200, 15, 200) if quick else (500, 60, 800)
    report: dict[str, Any] = {"suite": "l2"}
    with MemorySystem.open(runtime="threads") as memory:
        # Queries first: the writes below leave lines in M, which a 0-dirty
        # query would have to recall.
        report.update(_queries(memory, nodes, rounds))
        report.update(_writes(memory, writes))
    report["command"] = "gliding-actors bench l2 --json" + (" --quick" if quick else "")
    return report
