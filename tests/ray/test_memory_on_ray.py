"""The whole memory on Ray: ``MemorySystem.open(runtime="ray")`` on a real two-node cluster.

The directory shards run on the cluster's nodes, one per node, each over its
own LevelDB; every other actor runs in this process (the driver), the caches,
the graph writer and the supervisor behind relays the shards send to. The
scenario suites replay through it with ``--runtime ray``; losing a node mid-run
keeps what the reliability contract promises (test_memory_node_loss.py). Ray
is told about loopback only, and the ``ss`` check runs after the suites.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray")

from loopback_audit import foreign_sockets

from gliding_actors import MemorySystem
from gliding_actors.cli import main
from gliding_actors.clock import SystemClock
from gliding_actors.coherence._messages import directory_shard
from gliding_actors.l0 import L0Store
from gliding_actors.runtime._ray import RayRuntime
from gliding_actors.runtime._ray_connect import RayConnection
from tools.ray_cluster import LocalRayCluster

pytestmark = pytest.mark.ray

REPO = Path(__file__).resolve().parents[2]
TWO_SHARDS: dict[str, Any] = {"coherence": {"directory_shards": 2, "critical_tags": ["confirmed_fact"]}}


def _runtime(memory: MemorySystem) -> RayRuntime:
    rt = memory.runtime
    assert isinstance(rt, RayRuntime)
    return rt


def test_the_shards_run_one_per_node_and_the_memory_serves(
    ray_cluster: LocalRayCluster, ray_driver: RayConnection, tmp_path: Path
) -> None:
    with MemorySystem.open(tmp_path, TWO_SHARDS, runtime="ray") as memory:
        rt = _runtime(memory)
        assert memory.config.l0.sharded  # implied on Ray
        nodes = {rt.status(shard)["node"] for shard in memory.directories}
        assert nodes == set(ray_cluster.node_ids())
        pa, da, ca = memory.agent("pa", "PA"), memory.agent("da", "DA"), memory.agent("ca", "CA")
        lines = [f"plan:{i}" for i in range(8)]
        assert {directory_shard(iri, memory.directories) for iri in lines} == set(memory.directories)
        for n, iri in enumerate(lines):
            tags = ["confirmed_fact"] if n % 2 else []
            pa.write(iri, {"@id": iri, "status": f"s{n}"}, tags=tags)
        assert [da.read(iri)["value"]["status"] for iri in lines] == [f"s{n}" for n in range(8)]
        # SPARQL over the driver's graph sees the write-back lines once recalled home
        rows = ca.query("SELECT ?s WHERE { ?x ga:status ?s }")["rows"]
        assert sorted(r["s"] for r in rows) == sorted(f"s{n}" for n in range(8))
        assert memory.flush() == 4  # the write-back half
        inspected = memory.inspect("plan:0")
        assert inspected["l0"] == {"value": {"@id": "plan:0", "status": "s0"}, "version": 1}
        stats = memory.stats()
        assert stats["l0"]["records"] == 8
        # the shards count what they send in their own processes; stats() asks them
        assert stats["coherence"]["messages"].get("WT-Ack", 0) >= 4  # a directory's answer to each write-through
        assert memory.crash("dir:1")["lost"] == []  # rebuilt in its own process, on its node
        assert memory.supervision()["actors"]["dir:1"]["restarts"] == 1
        assert ca.read("plan:1")["value"]["status"] == "s1"
        # L3's framers run on the nodes too; a framer whose process is lost leaves its worker framing alone
        assert {rt.status(framer)["node"] for framer in memory.l3.framers} == set(ray_cluster.node_ids())
        pa.create_task("task:t")
        pa.write("task:t", {"@type": "Task", "summary": "the plan", "status": "open"}, graph="plan")
        framed = [pa.project(task="task:t", max_tokens=n)["jsonld"] for n in (None, 500)]
        assert framed[0] and framed[0] == framed[1]
        ray.kill(ray.get_actor(memory.l3.framers[1], namespace=rt.namespace), no_restart=True)
        deadline = time.monotonic() + 20.0
        while memory.l3.framers[1] not in rt.lost:
            assert time.monotonic() < deadline, "the lost framer was never noticed"
            time.sleep(0.1)
        alone = [pa.project(task="task:t", max_tokens=n)["jsonld"] for n in (400, 300)]
        assert alone == [framed[0], framed[0]]  # both workers answer, one framing by itself
    # each line is in its own shard's LevelDB on disk
    for iri in lines:
        store = L0Store(str(tmp_path / "l0-shards" / directory_shard(iri, ("dir:0", "dir:1")).replace(":", "-")), clock=SystemClock())
        try:
            assert store.retrieve_version(iri) == 1
        finally:
            store.close()
    # reopened on Ray, the graph is rebuilt from the shards
    with MemorySystem.open(tmp_path, TWO_SHARDS, runtime="ray") as memory:
        assert memory.graph.count() == 9  # the eight lines and the task's
        assert memory.agent("qa", "CA").read("plan:5")["value"]["status"] == "s5"
        qa = memory.agent("qa2", "PA").aio  # the async face works on Ray as on threads

        async def plan_and_check() -> tuple[int, Any]:
            written = await qa.write("plan:async", {"status": "from a coroutine"}, timeout=30.0)
            return written["version"], await qa.get("plan:async", timeout=30.0)

        # the second open is each shard's epoch 1: its writes number from 1 << 32
        assert asyncio.run(plan_and_check()) == ((1 << 32) + 1, {"status": "from a coroutine"})


def test_modify_runs_its_function_in_the_agents_process_unpickled(
    ray_cluster: LocalRayCluster, ray_driver: RayConnection, tmp_path: Path
) -> None:
    """The function holds a lock (no pickler takes one): it is lent by token, never shipped."""
    lock, calls = threading.Lock(), []

    def bump(value: dict[str, Any] | None) -> dict[str, Any]:
        with lock:
            calls.append(1)
        return {"count": (value or {}).get("count", 0) + 1}

    with MemorySystem.open(tmp_path, TWO_SHARDS, runtime="ray") as memory:
        agents = [memory.agent(f"m{i}", "PA") for i in range(3)]
        workers = [threading.Thread(target=lambda a=a: [a.modify("plan:count", bump) for _ in range(20)]) for a in agents]
        for w in workers:
            w.start()
        for w in workers:
            w.join(timeout=120)
        assert agents[0].read("plan:count")["value"] == {"count": 60} and len(calls) == 60
        assert len(memory.modify_functions) == 0


@pytest.mark.parametrize("suite", ["coherence", "blackboard", "projection"])
def test_the_scenario_suite_passes_with_runtime_ray(
    ray_cluster: LocalRayCluster, ray_driver: RayConnection, suite: str
) -> None:
    files = sorted(str(p) for p in (REPO / "scenarios" / suite).glob("*.yaml"))
    assert files
    assert main(["replay", *files, "--runtime", "ray"]) == 0


def test_no_socket_left_loopback_after_the_suites(ray_cluster: LocalRayCluster, ray_driver: RayConnection) -> None:
    assert foreign_sockets(ray_cluster.pids()) == []


def test_the_cli_joins_a_cluster_by_address_in_a_fresh_process(ray_cluster: LocalRayCluster) -> None:
    """``replay --runtime ray --ray-address`` as a user runs it: its own interpreter, its own
    driver connection (this test process already has one), joined to the module's cluster."""
    scenario = REPO / "scenarios" / "coherence" / "three_writers.yaml"
    command = [sys.executable, "-m", "gliding_actors.cli", "replay", str(scenario), "--runtime", "ray"]
    command += ["--ray-address", ray_cluster.address, "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["ok"] and [run["runtime"] for run in report["runs"]] == ["ray"]
