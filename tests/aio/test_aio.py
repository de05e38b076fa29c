"""The asyncio face of an agent (gliding_actors/_aio.py): twins, no blocked loop, timeouts, cancels."""

from __future__ import annotations

import asyncio
import gc
import inspect
import linecache
import logging
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from gliding_actors import (
    Agent,
    AsyncAgent,
    ConflictError,
    InvalidInput,
    MemorySystem,
    Timeout,
    VirtualClock,
)
from gliding_actors._operation import Operation

N_AGENTS = 50


@pytest.fixture
def memory() -> Iterator[MemorySystem]:
    with MemorySystem.open() as system:
        yield system


def _members(kind: type) -> dict[str, Any]:
    """Every attribute ``kind`` defines or inherits, as its class body holds it."""
    return {name: member for cls in reversed(kind.__mro__) for name, member in vars(cls).items()}


def _public_blocking_methods() -> list[str]:
    return sorted(
        name
        for name, member in _members(Agent).items()
        if not name.startswith(("_", "submit_")) and (isinstance(member, Operation) or inspect.isfunction(member))
    )


def test_every_blocking_method_has_an_awaitable_twin_with_the_same_parameters(memory: MemorySystem) -> None:
    # A blocking method added to Agent without its twin fails here.
    agent = memory.agent("pa", "PA")
    names = _public_blocking_methods()
    assert {"read", "write", "cas", "lock", "turn", "project", "query", "publish", "get", "reload"} <= set(names)
    missing = [n for n in names if not inspect.iscoroutinefunction(getattr(agent.aio, n, None))]
    assert missing == []
    for name in names:
        blocking = list(inspect.signature(getattr(agent, name)).parameters)
        twin = list(inspect.signature(getattr(agent.aio, name)).parameters)
        assert twin == blocking, name


def test_each_operation_is_defined_once_and_its_faces_are_derived(memory: MemorySystem) -> None:
    # the future face and the awaitable face of an operation are its definition's, not a copy
    agent = memory.agent("pa", "PA")
    members = _members(Agent)
    operations = [name for name, member in members.items() if isinstance(member, Operation)]
    assert len(operations) >= 25
    for name in operations:
        op = members[name]
        assert vars(AsyncAgent)[name] is op.awaitable, name
        if op.recorded:  # the few built on another operation have no future face of their own
            assert members[op.submit_name] is op.submit, name
    with pytest.raises(InvalidInput):
        agent.write("not an iri", {"n": 1})
    with pytest.raises(InvalidInput):
        agent.submit_write("not an iri", {"n": 1})

    async def bad() -> None:
        await agent.aio.write("not an iri", {"n": 1})

    with pytest.raises(InvalidInput):
        asyncio.run(bad())


def test_sim_runtime_is_refused_with_a_clear_invalid_input() -> None:
    with MemorySystem.open(runtime="sim") as memory:
        agent = memory.agent("pa", "PA")
        with pytest.raises(InvalidInput, match="threads runtime"):
            agent.aio  # noqa: B018 - the property is the check


async def _work_async(agent: AsyncAgent, i: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    await agent.heartbeat("working", f"item {i}")
    out["write"] = (await agent.write(f"item:{i}", {"n": i}))["version"]
    out["read"] = (await agent.read(f"item:{i}"))["value"]
    while True:  # a counter shared by ten agents, by compare-and-set
        seen = await agent.read(f"counter:{i % 5}")
        count = (seen["value"] or {"n": 0})["n"]
        try:
            await agent.cas(f"counter:{i % 5}", seen["version"], {"n": count + 1})
            break
        except ConflictError:
            continue
    await agent.publish("done", {"agent": i})
    out["turn"] = (await agent.turn(f"agent {i} wrote item {i}", thought="t", content="c", tokens=7))["tokens"]
    token = await agent.lock(f"res:{i % 5}", "write", timeout_s=30.0)
    await agent.unlock(f"res:{i % 5}")
    out["locked"] = token is not None
    out["session"] = (await agent.session())["summaries"]
    return out


def _work_blocking(agent: Agent, i: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    agent.heartbeat("working", f"item {i}")
    out["write"] = agent.write(f"item:{i}", {"n": i})["version"]
    out["read"] = agent.read(f"item:{i}")["value"]
    while True:
        seen = agent.read(f"counter:{i % 5}")
        count = (seen["value"] or {"n": 0})["n"]
        try:
            agent.cas(f"counter:{i % 5}", seen["version"], {"n": count + 1})
            break
        except ConflictError:
            continue
    agent.publish("done", {"agent": i})
    out["turn"] = agent.turn(f"agent {i} wrote item {i}", thought="t", content="c", tokens=7)["tokens"]
    token = agent.lock(f"res:{i % 5}", "write", timeout_s=30.0)
    agent.unlock(f"res:{i % 5}")
    out["locked"] = token is not None
    out["session"] = agent.session()["summaries"]
    return out


def _team(memory: MemorySystem) -> tuple[list[Agent], Agent]:
    workers = [memory.agent(f"w{i}", "DA") for i in range(N_AGENTS)]
    watcher = memory.agent("sa", "SA")
    watcher.subscribe("done")
    return workers, watcher


def _final(memory: MemorySystem, watcher: Agent) -> dict[str, Any]:
    events = watcher.inbox()
    return {
        "counters": [watcher.read(f"counter:{g}")["value"] for g in range(5)],
        "published": sorted(e["message"]["agent"] for e in events),
        "items": [watcher.read(f"item:{i}")["value"] for i in range(N_AGENTS)],
    }


def _run_async(workers: list[Agent], memory: MemorySystem, watcher: Agent) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    async def main() -> list[dict[str, Any]]:
        loop = asyncio.get_running_loop()
        assert loop.get_debug()
        loop.slow_callback_duration = 0.1  # asyncio's default; see the test
        return await asyncio.gather(*(_work_async(w.aio, i) for i, w in enumerate(workers)))

    results = asyncio.run(main(), debug=True)
    return results, _final(memory, watcher)


def test_fifty_agent_tasks_on_one_loop_never_block_it_and_match_the_threaded_api(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="asyncio")
    # Debug mode records where every future and callback was made, and for that
    # stats each source file on the stack that linecache holds (checkcache). A
    # stat releases the GIL, which a hundred busy actor threads on two cores can
    # keep for milliseconds: the instrumentation would be measuring itself. An
    # empty cache has nothing to stat; nothing else changes. Even so, a task step
    # that does a few microseconds of work now and then waits 50-60 ms for the
    # GIL or a core (two cores, ~100 actor threads busy with 50 agents): the
    # threshold is asyncio's own default, 0.1 s, which a blocking wait on an
    # actor's answer (milliseconds to seconds, 50 times over) would exceed.
    linecache.clearcache()
    # The same wait comes from the GIL's round robin: a thread wanting the GIL
    # waits a switch interval (5 ms) per runnable holder ahead of it, so behind
    # a few dozen busy actor threads an idle loop can wait 0.1 s without any
    # code of ours running. A shorter interval makes the hand-over fairer for
    # the duration of the test; what is left above the threshold is real work.
    # And from the cyclic garbage collector: debug mode keeps a traceback for
    # every future and callback, and a full collection over that heap can take
    # 0.1 s inside whichever step happens to trigger it. Collections are put off
    # for the run (the memory is small) and done after it.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)
    gc.collect()
    gc.disable()
    try:
        with MemorySystem.open() as memory:
            workers, watcher = _team(memory)
            async_results, async_final = _run_async(workers, memory, watcher)
    finally:
        gc.enable()
        sys.setswitchinterval(interval)

    with MemorySystem.open() as memory:
        workers, watcher = _team(memory)
        threaded_results: list[dict[str, Any]] = [{} for _ in workers]

        def run(i: int) -> None:
            threaded_results[i] = _work_blocking(workers[i], i)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(N_AGENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        threaded_final = _final(memory, watcher)

    slow = [r.getMessage() for r in caplog.records if "Executing" in r.getMessage() and "took" in r.getMessage()]
    assert slow == []
    assert async_results == threaded_results
    assert async_final == threaded_final
    assert async_final["counters"] == [{"n": N_AGENTS // 5}] * 5  # every cas landed exactly once
    assert async_final["published"] == list(range(N_AGENTS))
    assert all(r == {"write": 1, "read": {"n": i}, "turn": 7, "locked": True, "session": [f"agent {i} wrote item {i}"]}
               for i, r in enumerate(async_results))


def test_bad_input_raises_at_the_await_and_changes_nothing(memory: MemorySystem) -> None:
    agent = memory.agent("pa", "PA")

    async def main() -> None:
        with pytest.raises(InvalidInput):
            await agent.aio.write("task:x", ["not", "an", "object"])  # type: ignore[arg-type]
        with pytest.raises(InvalidInput):
            await agent.aio.write("not an iri", {"a": 1})
        with pytest.raises(InvalidInput):
            await agent.aio.publish("", {"a": 1})

    asyncio.run(main())
    assert memory.inspect("task:x")["l2"] is None
    assert agent.read("task:x")["version"] == 0
    assert agent.messages("t") == []


def test_an_op_error_is_raised_by_the_await(memory: MemorySystem) -> None:
    agent = memory.agent("pa", "PA")

    async def main() -> None:
        await agent.aio.write("task:x", {"a": 1})
        with pytest.raises(ConflictError):
            await agent.aio.cas("task:x", 0, {"a": 2})

    asyncio.run(main())
    assert agent.read("task:x") == {"value": {"a": 1}, "version": 1, "state": "M", "messages": 0}


def test_timeout_raises_gliding_timeout_and_a_lock_granted_after_it_is_held() -> None:
    # On a virtual clock nobody moves, a lock wait is only ended by the holder's unlock.
    with MemorySystem.open(clock=VirtualClock()) as memory:
        holder, waiter, third = memory.agent("a", "DA"), memory.agent("b", "DA"), memory.agent("c", "DA")
        fourth = memory.agent("d", "DA")
        assert holder.lock("res") is not None

        async def main() -> None:
            with pytest.raises(Timeout) as caught:
                await waiter.aio.lock("res", "write", timeout_s=1.0, timeout=0.2)
            assert isinstance(caught.value, TimeoutError)  # asyncio users catch it as such
            with pytest.raises(TimeoutError):  # an outer asyncio.wait_for behaves as usual
                await asyncio.wait_for(third.aio.lock("res", "write", timeout_s=1.0), 0.05)

        asyncio.run(main())
        # Both waits ended on the loop, and both are still queued at the blackboard:
        # cancelling an await never withdraws the request.
        with pytest.raises(InvalidInput, match="already waiting"):
            third.lock("res", "write", timeout_s=1.0)
        holder.unlock("res")
        memory.quiesce(5)
        assert fourth.lock("res") is None  # b's cancelled wait was granted: b holds it
        waiter.unlock("res")
        memory.quiesce(5)
        assert fourth.lock("res") is None  # then c's
        third.unlock("res")
        assert fourth.lock("res") is not None


def test_a_cancelled_write_still_completes_and_is_seen(memory: MemorySystem) -> None:
    writer, reader = memory.agent("pa", "PA"), memory.agent("ca", "CA")
    reader.read("task:x")  # a sharer to invalidate: the write needs a round trip

    async def main() -> None:
        task = asyncio.ensure_future(writer.aio.write("task:x", {"goal": "g"}, tags=["user_intent"]))
        await asyncio.sleep(0)  # the request is sent on the task's first step
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.to_thread(memory.quiesce, 5.0)
        seen = await reader.aio.read("task:x")
        assert seen["value"] == {"goal": "g"} and seen["version"] == 1

    asyncio.run(main())
    assert memory.inspect("task:x")["l0"] == {"value": {"goal": "g"}, "version": 1}  # write-through, durable


def test_every_twin_runs(memory: MemorySystem) -> None:
    """One call of each twin, checked against what the blocking call says afterwards."""
    pa, ca = memory.agent("ops", "system"), memory.agent("ca", "CA")

    async def main() -> None:
        a, c = pa.aio, ca.aio
        assert (await a.write("task:x", {"goal": "g"}))["version"] == 1
        assert await c.get("task:x") == {"goal": "g"}
        assert (await a.cas("task:x", 1, {"goal": "h"}))["version"] == 2
        await c.evict("task:x")
        assert await a.delete("task:x") == 3
        assert (await a.query("ASK { ?s ?p ?o }"))["boolean"] in (True, False)
        await a.heartbeat("working")
        assert await a.lock("r") is not None
        await a.unlock("r")
        await a.create_task("t1")
        await a.create_task("t2")
        await a.depend("t2", "t1")
        assert await a.task_layers() == [["t1"], ["t2"]]
        await a.attach_to_task("t1", ["task:y"])
        assert await a.complete_task("t1") == ["t2"]
        await c.subscribe("topic")
        seq = await a.publish("topic", {"n": 1})
        assert [e["seq"] for e in await c.inbox()] == [seq]
        assert [e["seq"] for e in await c.messages("topic")] == [seq]
        await c.unsubscribe("topic")
        turn = await a.turn("planned", thought="why", content="what")
        assert (await a.reload(turn["archive_iri"]))["thought"] == "why"
        assert (await a.session())["summaries"] == ["planned"]
        assert (await a.session_messages())[-1]["content"].startswith("planned")
        assert "planned" in (await a.handoff())["text"]
        assert await a.set_query(None) == []
        assert (await a.close_session())["blocks"] == [turn["archive_iri"]]
        projected = await a.project("pa_init", max_tokens=500)
        assert projected["tokens"] <= 500
        await a.set_task("task:t2")
        assembled = await a.context(max_tokens=300)
        assert assembled["tokens"] <= 300
        await a.intent(["task:x"])
        assert (await a.search("goal", 3))["iris"] is not None

    asyncio.run(main())
    assert pa.read("task:x")["value"] is None
    assert ca.inbox() == []


def test_the_loop_keeps_turning_while_an_op_is_pending() -> None:
    """Schedule-independent: a lock wait no clock will end is pending, and other tasks run meanwhile.

    A bridge that waited on the runtime future inside the coroutine would hang
    here until the op's time-out; this one lets the loop run 200 other steps,
    then the unlock (from another thread) answers the wait.
    """
    with MemorySystem.open(clock=VirtualClock()) as memory:
        holder, waiter = memory.agent("a", "DA"), memory.agent("b", "DA")
        assert holder.lock("res") is not None

        async def main() -> int | None:
            pending = asyncio.ensure_future(waiter.aio.lock("res", "write", timeout_s=60.0, timeout=5.0))
            for _ in range(200):
                await asyncio.sleep(0)
            assert not pending.done()
            await asyncio.to_thread(holder.unlock, "res")
            return await pending

        assert asyncio.run(main()) is not None
