"""Killing a node mid-run: no caller hangs, flushed writes survive, the team serves again.

A two-node cluster of its own (the test kills one node). Directory shard 1
and agent 1 live on node 1; shard 0 and agent 0 on the head. What the
reliability contract (docs/RELIABILITY.md) promises, checked here on Ray:

* asks to the lost node's actors fail with ActorUnavailable as soon as Ray
  reports them dead — long before the ask timeout;
* the runtime's monitor notices the lost processes within seconds: their
  supervisor gets ``actor.failed``, and the surviving agent, whose op may
  wait on the lost shard for ever, stops its run with ActorUnavailable;
* what was flushed to a shard's L0 before the kill is there, at the same
  version, when the shard is rebuilt on a surviving node over that L0.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray")

from gliding_actors.bench._workload import TeamMember
from gliding_actors.coherence._distributed import ShardRecipe
from gliding_actors.coherence._hosting import cache_name
from gliding_actors.coherence._messages import directory_shard
from gliding_actors.errors import ActorUnavailable
from gliding_actors.runtime._ray import RayRuntime
from tools.ray_cluster import LocalRayCluster

pytestmark = pytest.mark.ray

SHARDS = ("dir:0", "dir:1")
AGENTS = ("a0", "a1")


class Notices:
    """A supervisor that keeps what it is told."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def receive(self, message: Any, ctx: Any) -> Any:
        if message == "seen":
            return list(self.seen)
        self.seen.append(message)
        return None


ray.cloudpickle.register_pickle_by_value(__import__(__name__))


def store(member: Any, iri: str, n: int) -> dict[str, Any]:
    request = {"t": "store", "iri": iri, "value": {"n": n}, "tags": [], "graph": "execution"}
    result: dict[str, Any] = member.ask(request).get(30)
    return result


def test_a_lost_node_fails_its_callers_fast_and_flushed_lines_survive(
    ray_cluster: LocalRayCluster, tmp_path: Path
) -> None:
    rt = RayRuntime(ray_cluster.address, ask_timeout_s=30.0)
    try:
        head = ray_cluster.node_ids()[0]
        other = ray_cluster.node_ids()[1]
        caches = tuple(cache_name(a) for a in AGENTS)
        supervisor = rt.spawn("sup", Notices, placement=head)
        for name, node in zip(SHARDS, (head, other), strict=True):
            rt.spawn(name, ShardRecipe(name, str(tmp_path), caches=caches), placement=node, supervisor="sup")
        for agent, node in zip(AGENTS, (head, other), strict=True):
            # A cache of four lines keeps missing on the workload's 50, so each run keeps talking
            # to both shards: it cannot finish on local hits before node 1 dies (on a loaded
            # machine the survivor's run once did, and answered instead of failing).
            member = functools.partial(TeamMember, agent, SHARDS, cache_lines=4)
            rt.spawn(cache_name(agent), member, placement=node, supervisor="sup")
        a0 = rt.lookup(cache_name("a0"))
        # Lines homed on each shard, written by the agent on the head and flushed to L0.
        lines = [f"urn:line:{i}" for i in range(12)]
        written = {iri: store(a0, iri, i)["version"] for i, iri in enumerate(lines)}
        homes = {directory_shard(iri, SHARDS) for iri in lines}
        assert homes == set(SHARDS), "the lines must be spread over both shards"
        for shard in SHARDS:
            rt.lookup(shard).ask({"t": "flush", "iris": None}).get(30)

        # Both agents run a long workload; node 1 dies in the middle of it.
        workload = {"ops": 100_000, "lines": 50, "read_fraction": 0.5, "seed": 1}
        runs = {agent: rt.lookup(cache_name(agent)).ask({"t": "run", "workload": workload}) for agent in AGENTS}
        time.sleep(1.0)
        killed_at = time.monotonic()
        ray_cluster.kill_node(1)

        with pytest.raises(ActorUnavailable):
            runs["a1"].get(60)
        lost_after = time.monotonic() - killed_at
        assert lost_after < 25.0, f"the lost agent's caller waited {lost_after:.1f} s"
        # The survivor's wait ends as well: answered, or a typed error within its bound.
        # The survivor's run stops too, told by the runtime's monitor that its
        # peers' processes died — not at its caller's 30 s timeout.
        with pytest.raises(ActorUnavailable, match="lost its process"):
            runs["a0"].get(30)
        survivor_after = time.monotonic() - killed_at
        assert survivor_after < 25.0, f"the survivor's caller waited {survivor_after:.1f} s"
        print(f"lost agent failed after {lost_after:.1f} s, the survivor's run after {survivor_after:.1f} s")
        lost = {"dir:1", cache_name("a1")}
        deadline = time.monotonic() + 20.0
        while not (lost <= set(rt.lost) and lost <= {n["actor"] for n in supervisor.ask("seen").get(30)}):
            assert time.monotonic() < deadline, f"lost so far: {rt.lost}"
            time.sleep(0.2)
        assert set(rt.lost) == lost  # nothing on the head was taken for lost
        seen = supervisor.ask("seen").get(30)
        assert all(n["type"] == "actor.failed" and n["restarted"] is False for n in seen)
        with pytest.raises(ActorUnavailable, match="process died"):  # later runs refused, not hung
            rt.lookup(cache_name("a0")).ask({"t": "run", "workload": {"ops": 5}}).get(30)
        with pytest.raises(ActorUnavailable):
            rt.lookup(cache_name("a1")).ask({"t": "states"}).get(30)

        # Rebuilt on the head over the same L0: every flushed line, same version.
        for agent in AGENTS:
            rt.stop(cache_name(agent))
        for shard in SHARDS:
            rt.stop(shard)
        reader = "r0"
        for name in SHARDS:
            rt.spawn(name, ShardRecipe(name, str(tmp_path), caches=(cache_name(reader),)), placement=head)
        member = rt.spawn(cache_name(reader), functools.partial(TeamMember, reader, SHARDS), placement=head)
        for iri, version in written.items():
            seen = member.ask({"t": "load", "iri": iri}).get(30)
            assert seen["version"] >= version, f"{iri}: flushed version {version}, read back {seen['version']}"
        assert member.ask({"t": "run", "workload": {"ops": 200, "lines": 20, "seed": 2}}).get(60)["errors"] == 0
    finally:
        rt.shutdown()
