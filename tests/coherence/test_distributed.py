"""Team members (an agent beside its cache) and directory shards built where they run.

These are the actors ``bench scaling`` places on a Ray cluster; here they run
on the threads runtime, which must give the same answers (tests/ray runs
them on Ray).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from gliding_actors.bench._workload import TeamMember, WorkloadSpec
from gliding_actors.coherence._distributed import ShardRecipe
from gliding_actors.coherence._hosting import cache_name
from gliding_actors.errors import ActorCrashed, InvalidInput
from gliding_actors.runtime import ThreadsRuntime


def start_team(rt: ThreadsRuntime, root: Path, shards: int, agents: int) -> tuple[tuple[str, ...], list[str]]:
    shard_names = tuple(f"dir:{i}" for i in range(shards))
    ids = [f"agent{i}" for i in range(agents)]
    caches = tuple(cache_name(a) for a in ids)
    for name in shard_names:
        rt.spawn(name, ShardRecipe(name, str(root), caches=caches), restart=True)
    for agent in ids:
        rt.spawn(cache_name(agent), functools.partial(TeamMember, agent, shard_names))
    return shard_names, ids


@pytest.fixture
def rt() -> Any:
    runtime = ThreadsRuntime(ask_timeout_s=30.0)
    yield runtime
    runtime.shutdown()


def single_writer_or_many_readers(rt: ThreadsRuntime, ids: list[str]) -> dict[str, list[str]]:
    """Every line's holders: at most one in E/M, and then nobody else holds it."""
    holders: dict[str, list[str]] = {}
    for agent in ids:
        for iri, state in rt.lookup(cache_name(agent)).ask({"t": "states"}).get(10).items():
            holders.setdefault(iri, []).append(state)
    for iri, states in holders.items():
        exclusive = [s for s in states if s in ("E", "M")]
        assert not exclusive or len(states) == 1, f"{iri}: {states} breaks single-writer/many-readers"
    return holders


def test_a_team_runs_its_workload_coherently_over_two_shards(rt: ThreadsRuntime, tmp_path: Path) -> None:
    _shards, ids = start_team(rt, tmp_path, shards=2, agents=3)
    spec = {"ops": 400, "lines": 40, "read_fraction": 0.7, "seed": 3}
    futures = [rt.lookup(cache_name(a)).ask({"t": "run", "workload": spec}) for a in ids]
    reports = [f.get(60) for f in futures]
    for report in reports:
        assert report["ops"] == 400 and report["errors"] == 0
        assert report["hits"] + report["misses"] + report["writes"] == 400
        assert report["hits"] > 0 and report["writes"] > 0
    holders = single_writer_or_many_readers(rt, ids)
    assert holders, "the run left nothing cached"
    # Every agent reads the same newest value of every line, wherever it is home.
    for iri in sorted(holders)[:10]:
        answers = [rt.lookup(cache_name(a)).ask({"t": "load", "iri": iri}).get(10) for a in ids]
        assert len({(repr(r["value"]), r["version"]) for r in answers}) == 1, answers


def test_the_plan_is_the_same_on_every_runtime_and_differs_per_agent() -> None:
    spec = WorkloadSpec(ops=50, lines=10, seed=1)
    assert spec.plan("a") == WorkloadSpec(ops=50, lines=10, seed=1).plan("a")
    assert spec.plan("a") != spec.plan("b")
    assert {kind for kind, _ in spec.plan("a")} == {"read", "write"}
    for bad in ({"ops": 0}, {"lines": 0}, {"read_fraction": 1.5}):
        with pytest.raises(InvalidInput):
            WorkloadSpec(**bad)  # type: ignore[arg-type]


def test_a_second_run_while_one_is_going_is_refused_and_changes_nothing(rt: ThreadsRuntime, tmp_path: Path) -> None:
    _shards, ids = start_team(rt, tmp_path, shards=1, agents=1)
    member = rt.lookup(cache_name(ids[0]))
    first = member.ask({"t": "run", "workload": {"ops": 3000, "lines": 500, "read_fraction": 0.0}})
    second = member.ask({"t": "run", "workload": {"ops": 5}})
    with pytest.raises(InvalidInput, match="already running"):
        second.get(10)
    assert first.get(60)["ops"] == 3000  # the refused run did not disturb the first
    with pytest.raises(InvalidInput):
        member.ask({"t": "run", "workload": {"ops": -1}}).get(10)
    assert member.ask({"t": "run", "workload": {"ops": 5}}).get(10)["ops"] == 5


def test_a_crashed_shard_comes_back_over_the_same_home(rt: ThreadsRuntime, tmp_path: Path) -> None:
    """The recipe keeps the home (L0 + graph) in the hosting process: a shard
    rebuilt after a crash takes a census and serves the same data."""
    (shard,), ids = start_team(rt, tmp_path, shards=1, agents=2)
    writer, reader = (rt.lookup(cache_name(a)) for a in ids)
    done = writer.ask({"t": "store", "iri": "urn:line:x", "value": {"n": 1}, "tags": [], "graph": "execution"}).get(10)
    with pytest.raises(ActorCrashed):
        rt.lookup(shard).ask({"t": "crash"}).get(10)
    assert rt.lookup(shard).ask({"t": "ready"}).get(10) is not None
    seen = reader.ask({"t": "load", "iri": "urn:line:x"}).get(10)
    assert (seen["value"], seen["version"]) == ({"n": 1}, done["version"])
