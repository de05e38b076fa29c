"""``bench scaling``: the coherence workload on 1, 2 and 4 directory shards, on Ray and on threads.

The workload (:class:`~gliding_actors.bench._workload.WorkloadSpec`):
``agents`` agents, each an actor holding its own cache (so a read hit is a
lookup in the agent's process), closed loop with one op in flight, 90 %
reads / 10 % writes over 200 lines, the same plan on every runtime. Each
shard has its own L0 (LevelDB) and graph; lines are split across shards by
IRI hash.

* ``ray`` — a real two-node Ray cluster on 127.0.0.1 (started here unless
  ``address=`` names one), shards and agents placed round robin over the
  nodes. Figures per shard count: ``ops_per_s`` (median of the rounds),
  ``miss_p50_us``, ``write_p50_us``, ``hit_ratio`` and ``cpu_ms_per_op`` (the
  CPU the actors' worker processes used, summed, per op: what an op costs
  wherever it runs).
* ``threads`` — the same actors on the threads runtime in this process.
* Baselines in the same run: a plain Ray actor method call and a plain
  Pykka ask (round trip p50, µs): a miss is two messages, a write to a shared
  line a few more, so these floors explain most of each runtime's latency.
* ``projection`` — the 100-node arithmetic of docs/SCALING.md, from the
  measured ``cpu_ms_per_op``: every figure it uses is in the report.
"""

from __future__ import annotations

import functools
import os
import shutil
import statistics
import tempfile
import time
from typing import Any

from gliding_actors.bench._baselines import raw_pykka_echo, raw_ray_echo
from gliding_actors.bench._workload import TeamMember, WorkloadSpec
from gliding_actors.coherence._distributed import ShardRecipe
from gliding_actors.coherence._hosting import cache_name
from gliding_actors.runtime import Runtime, ThreadsRuntime

__all__ = ["SHARD_COUNTS", "run", "run_workload"]

SHARD_COUNTS = (1, 2, 4)
#: (agents, ops per agent, rounds) — quick / full
SIZES = {True: (4, 300, 2), False: (4, 1_500, 3)}


def run_workload(
    runtime: Runtime,
    *,
    shards: int,
    agents: int,
    spec: WorkloadSpec,
    label: str,
    root: str,
    nodes: list[str] | None = None,
    timeout_s: float = 600.0,
) -> dict[str, Any]:
    """Spawn ``shards`` directory shards and ``agents`` team members, run ``spec``, stop them.

    ``nodes`` (Ray node ids) places actors round robin; ``label`` keeps the
    names of one configuration apart from the next.
    """
    shard_names = tuple(f"dir:{label}:{i}" for i in range(shards))
    agent_ids = [f"{label}-a{i}" for i in range(agents)]
    caches = tuple(cache_name(a) for a in agent_ids)
    spawned: list[str] = []

    def place(index: int) -> dict[str, Any]:
        return {} if not nodes else {"placement": nodes[index % len(nodes)]}

    try:
        for i, name in enumerate(shard_names):
            runtime.spawn(name, ShardRecipe(name, os.path.join(root, label), caches=caches), **place(i))
            spawned.append(name)
        for i, agent in enumerate(agent_ids):
            member = functools.partial(TeamMember, agent, shard_names)
            runtime.spawn(cache_name(agent), member, **place(i + 1))
            spawned.append(cache_name(agent))
        cpu_before = _cpu_seconds(runtime, spawned)
        started = time.perf_counter()
        futures = [runtime.lookup(c).ask({"t": "run", "workload": _spec_dict(spec)}) for c in caches]
        reports = [future.get(timeout_s) for future in futures]
        elapsed = time.perf_counter() - started
        cpu = _cpu_seconds(runtime, spawned) - cpu_before
    finally:
        for name in reversed(spawned):
            runtime.stop(name)
    ops = sum(r["ops"] for r in reports)
    hits = sum(r["hits"] for r in reports)
    return {
        "ops": ops,
        "ops_per_s": ops / elapsed,
        "hit_ratio": hits / ops,
        "errors": sum(r["errors"] for r in reports),
        "miss_p50_us": _median([r["miss_us"] for r in reports]),
        "write_p50_us": _median([r["write_us"] for r in reports]),
        "cpu_ms_per_op": 1000.0 * cpu / ops,
    }


def _spec_dict(spec: WorkloadSpec) -> dict[str, Any]:
    return {"ops": spec.ops, "lines": spec.lines, "read_fraction": spec.read_fraction, "seed": spec.seed}


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 1) if present else None


def _cpu_seconds(runtime: Runtime, names: list[str]) -> float:
    """CPU seconds used so far: each actor's own process, summed, where they run on nodes (Ray); else this process."""
    status = getattr(runtime, "status", None)
    if runtime.node_ids() and status is not None:
        return sum(float(status(name)["cpu_s"]) for name in names)
    return time.process_time()


def _rtt_p50_us(call: Any, samples: int) -> float:
    for _ in range(20):
        call({"t": "ping"})
    timings = []
    for _ in range(samples):
        start = time.perf_counter_ns()
        call({"t": "ping"})
        timings.append(time.perf_counter_ns() - start)
    return round(statistics.median(timings) / 1000.0, 1)


def _sweep(runtime: Runtime, kind: str, agents: int, spec: WorkloadSpec, rounds: int, root: str, nodes: Any) -> Any:
    results: dict[str, Any] = {}
    for shards in SHARD_COUNTS:
        runs = [
            run_workload(
                runtime, shards=shards, agents=agents, spec=spec, label=f"{kind}{shards}r{r}", root=root, nodes=nodes
            )
            for r in range(rounds)
        ]
        median_run = sorted(runs, key=lambda x: x["ops_per_s"])[len(runs) // 2]
        results[str(shards)] = {
            **{k: (round(v, 3) if isinstance(v, float) else v) for k, v in median_run.items()},
            "ops_per_s_rounds": [round(x["ops_per_s"], 1) for x in runs],
        }
    return results


def _projection(ray_results: dict[str, Any], cores_here: int) -> dict[str, Any]:
    """docs/SCALING.md's arithmetic: CPU per op bounds throughput once cores are many."""
    cpu_ms = statistics.median(float(v["cpu_ms_per_op"]) for v in ray_results.values())
    nodes, cores_per_node = 100, cores_here
    return {
        "nodes": nodes,
        "cores_per_node": cores_per_node,
        "cpu_ms_per_op": round(cpu_ms, 3),
        "ops_per_s_per_core": round(1000.0 / cpu_ms, 1),
        "ops_per_s": round(nodes * cores_per_node * 1000.0 / cpu_ms),
        "assumes": [
            "directory and L0 shards = nodes (hash partitioned: one line's ops touch one shard)",
            "agents spread evenly; each op costs the CPU measured here, wherever it runs",
            "no hot line: a line's writes serialise at its one shard",
            "L2's graph is off this path (one service; docs/SCALING.md gives its limit)",
        ],
    }


def run(quick: bool = False, *, address: str | None = None) -> dict[str, Any]:
    agents, ops, rounds = SIZES[quick]
    spec = WorkloadSpec(ops=ops, lines=200, read_fraction=0.9, seed=7)
    root = tempfile.mkdtemp(prefix="gliding-scaling-")
    report: dict[str, Any] = {
        "suite": "scaling",
        "workload": {"agents": agents, **_spec_dict(spec), "rounds": rounds},
        "shard_counts": list(SHARD_COUNTS),
    }
    try:
        threads = ThreadsRuntime(ask_timeout_s=120.0)
        try:
            report["threads"] = _sweep(threads, "threads", agents, spec, rounds, root, None)
        finally:
            threads.shutdown()
        raw_ask, raw_stop = raw_pykka_echo()
        try:
            report["pykka_ask_rtt_p50_us"] = _rtt_p50_us(raw_ask, 2_000)
        finally:
            raw_stop()
        report.update(_on_ray(address, agents, spec, rounds, root))
        for shards, figures in report["ray"].items():
            # the same workload, same shard count: what crossing processes costs
            figures["vs_threads"] = round(figures["ops_per_s"] / report["threads"][shards]["ops_per_s"], 3)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report["command"] = "gliding-actors bench scaling --json" + (" --quick" if quick else "")
    return report


def _on_ray(address: str | None, agents: int, spec: WorkloadSpec, rounds: int, root: str) -> dict[str, Any]:
    from gliding_actors.bench._tools import import_tool
    from gliding_actors.runtime._ray import RayRuntime

    out: dict[str, Any] = {}
    # without an address: two nodes on loopback, from the checkout's tools/ (a test rig)
    cluster = import_tool("ray_cluster").LocalRayCluster(nodes=2) if address is None else None
    try:
        if cluster is not None:
            cluster.__enter__()
            address = cluster.address
        runtime = RayRuntime(address, ask_timeout_s=120.0)
        try:
            nodes = runtime.node_ids()
            out["ray_nodes"] = len(nodes)
            call, stop = raw_ray_echo(nodes[-1])
            try:
                out["ray_call_rtt_p50_us"] = _rtt_p50_us(call, 500)
            finally:
                stop()
            out["ray"] = _sweep(runtime, "ray", agents, spec, rounds, root, nodes)
        finally:
            runtime.shutdown()
    finally:
        if cluster is not None:
            cluster.__exit__(None, None, None)
    out["projection"] = _projection(out["ray"], len(os.sched_getaffinity(0)))
    return out
