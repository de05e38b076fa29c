"""Losing a node mid-run with the whole memory on Ray (``MemorySystem.open(runtime="ray")``).

A two-node cluster of its own (the test kills one node): directory shard
``dir:1`` runs on node 1, everything else on the head or in this driver. What
the reliability contract (docs/RELIABILITY.md) promises, checked here: callers
waiting on the lost shard get ``ActorUnavailable`` within seconds, not their
timeouts; every completed write-through write and every flushed line is there,
at its version, when the memory is reopened on the surviving node.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray")

from cluster_rig import RigCluster

from gliding_actors import ActorUnavailable, MemorySystem
from gliding_actors.errors import GlidingError
from gliding_actors.runtime._ray import RayRuntime

pytestmark = pytest.mark.ray

TWO_SHARDS: dict[str, Any] = {"coherence": {"directory_shards": 2, "critical_tags": ["confirmed_fact"]}}


def _runtime(memory: MemorySystem) -> RayRuntime:
    rt = memory.runtime
    assert isinstance(rt, RayRuntime)
    return rt


def test_losing_a_node_mid_run_keeps_the_reliability_contract(tmp_path: Path) -> None:
    """Node 1 (one directory shard) dies while two agents write. Callers get typed
    errors within seconds, not hangs; every completed write-through write and
    every flushed line is there when the memory is reopened on the survivor."""
    with RigCluster(nodes=2, cpus_per_node=1, timeout_s=120.0) as cluster:
        memory = MemorySystem.open(
            tmp_path, {**TWO_SHARDS, "runtime": {"ask_timeout_s": 30.0}}, runtime="ray", address=cluster.address
        )
        reopened: MemorySystem | None = None
        try:
            rt = _runtime(memory)
            victim = next(s for s in memory.directories if rt.status(s)["node"] == cluster.node_ids()[1])
            pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
            flushed = [f"plan:f{i}" for i in range(10)]
            for iri in flushed:
                pa.write(iri, {"v": 1})
            assert memory.flush() == len(flushed)
            durable: dict[str, int] = {}
            errors: list[BaseException] = []
            stop = threading.Event()

            def writer(agent: Any, prefix: str) -> None:
                n = 0
                while not stop.is_set():
                    iri = f"{prefix}:{n % 20}"
                    try:
                        version = agent.write(iri, {"n": n}, tags=["confirmed_fact"], timeout=30.0)["version"]
                    except GlidingError as exc:
                        errors.append(exc)
                        return
                    durable[iri] = version  # a completed write-through write
                    n += 1

            threads = [threading.Thread(target=writer, args=(a, p)) for a, p in ((pa, "plan:t"), (da, "exec:t"))]
            for t in threads:
                t.start()
            time.sleep(2.0)
            killed_at = time.monotonic()
            cluster.kill_node(1)
            deadline = killed_at + 25.0
            while not errors and time.monotonic() < deadline:
                time.sleep(0.1)
            stop.set()
            for t in threads:
                t.join(40.0)
            waited = time.monotonic() - killed_at
            assert errors, "no writer noticed the lost shard"
            assert all(isinstance(e, ActorUnavailable) for e in errors), errors
            assert waited < 40.0, f"the writers' callers waited {waited:.1f} s"
            assert victim in rt.lost
            assert memory.supervision()["actors"][victim]["status"] == "stopped"
            assert durable, "nothing was written before the kill"

            reopened = memory.crash_process(quiesce=False)
            assert {_runtime(reopened).status(s)["node"] for s in reopened.directories} == {cluster.node_ids()[0]}
            reader = reopened.agent("qa", "CA")
            for iri in flushed:
                assert reader.read(iri)["version"] == 1, iri
            for iri, version in durable.items():
                assert reader.read(iri)["version"] >= version, iri
        finally:
            (reopened or memory).close(flush=False)
