"""MESI with the agents' caches in the driver and the directory shards on the cluster.

The placement the Ray backend uses when the agents are the orchestrator's own:
each cache runs in the agents' process (``placement=IN_DRIVER``), so a read
that hits is a lookup in this process's snapshot board, while the directory
shards (each over its own L0) run on the two nodes. Invalidations and
forwarded requests come from the cluster through the caches' relays; data
between two caches in the driver never leaves the process.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray")

from loopback_audit import foreign_sockets

from gliding_actors.coherence._cache import CacheController
from gliding_actors.coherence._distributed import ShardRecipe
from gliding_actors.coherence._hosting import CacheActor, SnapshotBoard, cache_name, unpack_value
from gliding_actors.coherence._messages import directory_shard
from gliding_actors.runtime import IN_DRIVER
from gliding_actors.runtime._ray import RayRuntime
from tools.ray_cluster import LocalRayCluster

pytestmark = pytest.mark.ray

SHARDS = ("dir:0", "dir:1")
AGENTS = ("a", "b", "c")


def cache_in_driver(agent: str, board: SnapshotBoard) -> CacheActor:
    controller = CacheController(
        cache_name(agent), functools.partial(directory_shard, shards=SHARDS), 64
    )
    return CacheActor(agent, controller, board)


def store(rt: RayRuntime, agent: str, iri: str, value: Any) -> dict[str, Any]:
    request = {"t": "store", "iri": iri, "value": value, "tags": [], "graph": "execution"}
    result: dict[str, Any] = rt.lookup(cache_name(agent)).ask(request).get(30)
    return result


def load(rt: RayRuntime, agent: str, iri: str) -> dict[str, Any]:
    result: dict[str, Any] = rt.lookup(cache_name(agent)).ask({"t": "load", "iri": iri}).get(30)
    return result


def test_caches_in_the_driver_stay_coherent_through_shards_on_two_nodes(
    ray_cluster: LocalRayCluster, tmp_path: Path
) -> None:
    rt = RayRuntime(ray_cluster.address, ask_timeout_s=30.0)
    try:
        nodes = ray_cluster.node_ids()
        caches = tuple(cache_name(a) for a in AGENTS)
        for name, node in zip(SHARDS, nodes, strict=True):
            rt.spawn(name, ShardRecipe(name, str(tmp_path), caches=caches), placement=node)
        board = SnapshotBoard()
        for agent in AGENTS:
            rt.spawn(
                cache_name(agent),
                functools.partial(cache_in_driver, agent, board),
                placement=IN_DRIVER,
            )
        lines = [f"urn:line:{i}" for i in range(8)]
        assert {directory_shard(iri, SHARDS) for iri in lines} == set(SHARDS)

        for i, iri in enumerate(lines):
            store(rt, "a", iri, {"n": i})
        # b's miss: the shard forwards to a's cache (cluster -> relay -> driver), a answers b in-process
        for i, iri in enumerate(lines):
            assert load(rt, "b", iri)["value"] == {"n": i}
        # now a hit for b: a lookup in this process, no message at all
        for i, iri in enumerate(lines):
            hit = board.lookup("b", iri)
            assert hit is not None and unpack_value(hit[1]) == {"n": i}

        # c writes: the shards invalidate a's and b's copies in the driver
        versions = {
            iri: store(rt, "c", iri, {"n": 100 + i})["version"] for i, iri in enumerate(lines)
        }
        for iri in lines:
            assert board.lookup("a", iri) is None and board.lookup("b", iri) is None
        for i, iri in enumerate(lines):
            seen = load(rt, "a", iri)
            assert seen["value"] == {"n": 100 + i} and seen["version"] == versions[iri]

        # single writer or many readers, line by line, across the three caches
        holders: dict[str, list[str]] = {}
        for agent in AGENTS:
            for iri, state in rt.lookup(cache_name(agent)).ask({"t": "states"}).get(30).items():
                holders.setdefault(iri, []).append(state)
        for iri, states in holders.items():
            exclusive = [s for s in states if s in ("E", "M")]
            assert not exclusive or len(states) == 1, f"{iri}: {states}"
        assert all(rt.status(cache_name(a))["held"] == 0 for a in AGENTS)
        assert foreign_sockets(ray_cluster.pids()) == []
    finally:
        rt.shutdown()


def test_a_driver_cache_hears_its_shard_lost_its_process(
    ray_cluster: LocalRayCluster, tmp_path: Path, eventually: Callable[..., None]
) -> None:
    """The monitor's peer.lost reaches a cache in the driver as it reaches one on the cluster."""
    rt = RayRuntime(ray_cluster.address, ask_timeout_s=30.0, monitor_s=0.5)
    try:
        heard: list[str] = []

        class Listening(CacheActor):
            receives_peer_lost = True

            def receive(self, message: Any, ctx: Any) -> Any:
                if isinstance(message, dict) and message.get("t") == "peer.lost":
                    heard.append(message["actor"])
                    return None
                return super().receive(message, ctx)

        board = SnapshotBoard()
        for name in SHARDS:
            rt.spawn(name, ShardRecipe(name, str(tmp_path), caches=(cache_name("a"),)))

        def build() -> CacheActor:
            controller = CacheController(
                cache_name("a"), functools.partial(directory_shard, shards=SHARDS), 64
            )
            return Listening("a", controller, board)

        rt.spawn(cache_name("a"), build, placement=IN_DRIVER)
        store(rt, "a", "urn:line:1", {"n": 1})
        ray.kill(ray.get_actor("dir:1", namespace=rt.namespace), no_restart=True)
        eventually(lambda: heard == ["dir:1"])
    finally:
        rt.shutdown()
