"""``Agent.modify``: a read-modify-write applied where the line is owned, once, with nothing lost.

The controller-level tests drive two or three caches through seeded random
schedules with the harness, which checks after every completion that a
modify made ``fn`` of the latest completed value (no write fell between).
The memory-level tests check the handle: exactly one call of ``fn`` per
modify under contention, typed errors that change nothing, rights, the
write-through policy, the async twin, and that no lent function is kept.
"""

from __future__ import annotations

import asyncio
import random
import threading
from typing import Any

import pytest
from coherence_harness import Net

from gliding_actors import MemorySystem
from gliding_actors.coherence._hosting import cache_name
from gliding_actors.errors import InvalidInput, ModifyFailed, PermissionDenied

X = "plan:counter"


def _bump(value: dict[str, Any] | None) -> dict[str, Any]:
    return {"count": (value or {}).get("count", 0) + 1}


def _drain_randomly(net: Net, rnd: random.Random) -> None:
    while chans := net.pending_channels():
        net.deliver(rnd.choice(chans))


@pytest.mark.parametrize("seed", range(12))
def test_contending_modifies_each_see_the_latest_value_under_any_schedule(seed: int) -> None:
    rnd = random.Random(seed)
    agents = ["a", "b", "c"]
    net = Net(agents, capacity=2)
    issued = 0
    for _ in range(10):
        for _ in range(rnd.randint(1, 4)):
            agent = rnd.choice(agents)
            kind = rnd.choice(("modify", "modify", "modify", "load", "store", "evict"))
            if kind == "modify":
                net.issue(agent, {"t": "modify", "iri": X, "fn": _bump, "tags": [], "graph": None})
                issued += 1
            elif kind == "store":
                net.issue(agent, {"t": "store", "iri": "plan:other", "value": {"n": 1}, "tags": []})
            elif kind == "load":
                net.load(agent, X)
            else:
                net.issue(agent, {"t": "evict", "iri": X})
            # deliver a few messages between issues, so ops overlap
            for _ in range(rnd.randint(0, 3)):
                if chans := net.pending_channels():
                    net.deliver(rnd.choice(chans))
        _drain_randomly(net, rnd)
    net.check_quiescent()
    assert net.latest(X) == ({"count": issued}, issued)


def test_a_failing_function_leaves_the_line_as_it_was_and_the_next_op_runs() -> None:
    net = Net(["a", "b"])
    first = net.issue("a", {"t": "modify", "iri": X, "fn": _bump, "tags": [], "graph": None})
    net.drain()
    boom = net.issue("b", {"t": "modify", "iri": X, "fn": lambda v: {"count": 1 // 0}, "tags": [], "graph": None})
    after = net.issue("b", {"t": "modify", "iri": X, "fn": _bump, "tags": [], "graph": None})
    net.drain()
    net.check_quiescent()
    assert net.ops[first].result is not None and net.ops[first].result["result"]["value"] == {"count": 1}
    failed = net.ops[boom].result
    assert failed is not None and failed["t"] == "failed" and failed["error"] == "ModifyFailed"
    assert "ZeroDivisionError" in failed["message"]
    assert net.latest(X) == ({"count": 2}, 2)  # the failed modify made no version
    assert net.ops[after].result is not None and net.ops[after].result["result"]["version"] == 2


@pytest.mark.parametrize("runtime", ["threads", "sim"])
def test_every_concurrent_modify_counts_and_calls_its_function_once(runtime: str) -> None:
    calls = 0
    lock = threading.Lock()

    def bump(value: dict[str, Any] | None) -> dict[str, Any]:
        nonlocal calls
        with lock:
            calls += 1
        return _bump(value)

    with MemorySystem.open(runtime=runtime) as memory:
        agents = [memory.agent(f"a{i}", "PA") for i in range(4)]
        if runtime == "threads":
            def work(agent: Any) -> None:
                for _ in range(40):
                    agent.modify(X, bump)

            threads = [threading.Thread(target=work, args=(a,)) for a in agents]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
        else:  # every modify in flight at once; the simulator interleaves them
            futures = [a.submit_modify(X, bump) for _ in range(40) for a in agents]
            for f in futures:
                f.get(30)
        assert agents[0].read(X)["value"] == {"count": 160}
        assert calls == 160
        assert len(memory.modify_functions) == 0  # every lent function was taken back


def test_a_function_runs_in_the_thread_that_called_modify_or_the_cache_actors_never_another_agents() -> None:
    """The threads runtime may run a cache in another agent's thread (delivery in the sender's
    thread); a modify's function is kept out of that: it may take locks its own caller knows of."""
    ran_in: list[tuple[int, int]] = []  # (caller, where fn ran)
    callers: set[int] = set()

    def work(agent: Any, n: int) -> None:
        me = threading.get_ident()
        callers.add(me)

        def bump(value: dict[str, Any] | None) -> dict[str, Any]:
            ran_in.append((me, threading.get_ident()))
            return _bump(value)

        for i in range(60):
            if i % 3 == 0:
                agent.write(f"plan:side-{(n + i) % 5}", {"by": n, "i": i})
            elif i % 3 == 1:
                agent.read(f"plan:side-{(n + i + 1) % 5}")
            agent.modify(X, bump)

    with MemorySystem.open(runtime="threads") as memory:
        agents = [memory.agent(f"a{i}", "PA") for i in range(4)]
        threads = [threading.Thread(target=work, args=(a, n)) for n, a in enumerate(agents)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert agents[0].read(X)["value"] == {"count": 240}
    assert len(ran_in) == 240
    assert [(caller, ran) for caller, ran in ran_in if ran != caller and ran in callers] == []


def test_a_modify_that_fails_changes_nothing_for_any_reader() -> None:
    with MemorySystem.open(runtime="threads") as memory:
        pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
        pa.write(X, {"count": 3, "items": ["a"]}, graph="plan")
        before = da.read(X)

        def mutate_then_raise(value: dict[str, Any] | None) -> dict[str, Any]:
            assert value is not None
            value["items"].append("b")  # its own copy: the line must not see this
            raise RuntimeError("changed my mind")

        bad_results: list[Any] = [
            lambda v: ["not", "an", "object"],
            lambda v: {"@id": "plan:elsewhere", "count": 1},  # L0 would refuse another node's @id
            lambda v: {"x": {1, 2}},  # not JSON
            lambda v: {"text": "x" * 6_000_000},  # over l0.max_node_bytes (5 MiB by default)
        ]
        with pytest.raises(ModifyFailed, match="RuntimeError: changed my mind"):
            pa.modify(X, mutate_then_raise)
        for fn in bad_results:
            with pytest.raises(InvalidInput):
                pa.modify(X, fn)
        with pytest.raises(InvalidInput):
            pa.modify(X, "not a function")  # type: ignore[arg-type]
        assert pa.read(X)["value"] == {"count": 3, "items": ["a"]}
        assert da.read(X) == before
        assert memory.inspect(X)["l2"] in (None, {"value": {"count": 3, "items": ["a"]}, "version": 1})
        assert len(memory.modify_functions) == 0
        assert pa.modify(X, lambda v: {**(v or {}), "count": 4})["version"] == 2  # the cache still serves


def test_modify_needs_the_rights_a_write_needs_and_never_calls_a_refused_function() -> None:
    called: list[Any] = []
    with MemorySystem.open(runtime="threads") as memory:
        pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
        pa.write(X, {"count": 1}, graph="plan")
        with pytest.raises(PermissionDenied):
            da.modify(X, lambda v: called.append(v) or {"count": 99})  # DA may not update plan
        assert called == [] and da.read(X)["value"] == {"count": 1}


def test_modify_with_a_critical_tag_is_durable_when_it_completes_and_returns_its_value() -> None:
    config = {"coherence": {"critical_tags": ["confirmed_fact"]}}
    with MemorySystem.open(runtime="threads", config=config) as memory:
        pa = memory.agent("pa", "PA")
        done = pa.modify(X, _bump, tags=["confirmed_fact"], graph="plan", importance=0.9)
        assert done["policy"] == "write_through" and done["value"] == {"count": 1} and done["graph"] == "plan"
        assert memory.inspect(X)["l0"] == {"value": {"count": 1}, "version": done["version"]}


def test_the_async_twin_modifies_alike() -> None:
    with MemorySystem.open(runtime="threads") as memory:
        agents = [memory.agent(f"a{i}", "PA").aio for i in range(3)]

        async def run() -> list[int]:
            done = await asyncio.gather(*(a.modify(X, _bump, timeout=30) for a in agents for _ in range(10)))
            return sorted(d["value"]["count"] for d in done)

        assert asyncio.run(run()) == list(range(1, 31))


def test_a_cache_mailbox_refuses_a_modify_without_a_lent_function_and_keeps_serving() -> None:
    with MemorySystem.open(runtime="threads") as memory:
        pa = memory.agent("pa", "PA")
        cache = memory.runtime.lookup(cache_name("pa"))
        for token in (12345, "fn", None):
            with pytest.raises(InvalidInput, match="no function was lent"):
                cache.ask({"t": "modify", "iri": X, "fn": token, "tags": [], "graph": None}).get(5)
        assert pa.read(X)["version"] == 0  # nothing written
        assert pa.modify(X, _bump)["value"] == {"count": 1}
        assert memory.supervision()["actors"][cache_name("pa")]["restarts"] == 0
