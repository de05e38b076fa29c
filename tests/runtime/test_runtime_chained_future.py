"""ChainedFuture (flatMap): a step that starts when the one before answers, on every backend.

What matters: the chain answers through ``get`` (which on the simulator
drives the simulation), through ``done`` polling and through callbacks (on
threads, from the actor thread that answers — nobody waits in between); the
next step starts exactly once; errors of either step are the chain's error.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from gliding_actors.clock import VirtualClock
from gliding_actors.errors import ConflictError, InvalidInput
from gliding_actors.runtime import BACKENDS, CompletedFuture, Context, Runtime, create_runtime
from gliding_actors.runtime._future import ChainedFuture


class Adder:
    """Answers ``n + 1``; refuses a negative ``n`` (a typed error)."""

    def receive(self, message: Any, ctx: Context) -> Any:
        if message["n"] < 0:
            raise ConflictError("negative")
        return message["n"] + 1


@pytest.fixture(params=BACKENDS)
def rt(request: pytest.FixtureRequest) -> Iterator[Runtime]:
    runtime = create_runtime(request.param, clock=VirtualClock(), ask_timeout_s=5.0)
    runtime.spawn("add", Adder)
    yield runtime
    runtime.shutdown()


def _chain(rt: Runtime, calls: list[int], n: int = 1) -> ChainedFuture[int]:
    ref = rt.lookup("add")

    def then(value: int) -> Any:
        calls.append(value)
        return ref.ask({"n": value})

    return ChainedFuture(ref.ask({"n": n}), then)


def test_get_runs_both_steps(rt: Runtime) -> None:
    calls: list[int] = []
    future = _chain(rt, calls)
    assert future.get(5.0) == 3  # 1 -> 2 -> 3
    assert calls == [2]
    assert future.done()
    assert future.get(5.0) == 3 and calls == [2]  # answered once, the step ran once


def test_chains_nest(rt: Runtime) -> None:
    ref = rt.lookup("add")
    future = ChainedFuture(
        ref.ask({"n": 0}), lambda a: ChainedFuture(ref.ask({"n": a}), lambda b: ref.ask({"n": b * 10}))
    )
    assert future.get(5.0) == 21  # 0 -> 1 -> 2 -> 21


def test_an_error_of_the_first_step_is_the_chains_and_the_next_never_starts(rt: Runtime) -> None:
    calls: list[int] = []
    future = _chain(rt, calls, n=-5)
    with pytest.raises(ConflictError):
        future.get(5.0)
    assert calls == []
    assert future.done()


def test_an_error_raised_by_fn_or_of_its_future_is_the_chains(rt: Runtime) -> None:
    ref = rt.lookup("add")

    def refuse(_value: int) -> Any:
        raise InvalidInput("refused by the step")

    with pytest.raises(InvalidInput, match="refused by the step"):
        ChainedFuture(ref.ask({"n": 1}), refuse).get(5.0)
    with pytest.raises(ConflictError):
        ChainedFuture(ref.ask({"n": 1}), lambda _v: ref.ask({"n": -1})).get(5.0)


def test_a_callback_fires_once_with_the_chain(rt: Runtime) -> None:
    calls: list[int] = []
    future = _chain(rt, calls)
    seen: list[Any] = []
    future.add_done_callback(seen.append)
    assert future.get(5.0) == 3
    if rt.kind == "threads":  # the callback may run just after the waiter wakes
        deadline = time.monotonic() + 5.0
        while not seen and time.monotonic() < deadline:
            time.sleep(0.001)
    assert seen == [future]
    assert calls == [2]
    late: list[Any] = []
    future.add_done_callback(late.append)  # already answered: at once
    assert late == [future]


def test_on_threads_the_chain_runs_from_callbacks_without_a_waiter() -> None:
    """Nobody calls get: the chain answers its own callbacks."""
    runtime = create_runtime("threads", ask_timeout_s=5.0)
    try:
        runtime.spawn("add", Adder)
        ref = runtime.lookup("add")
        started_on: list[str] = []
        answered = threading.Event()

        def then(value: int) -> Any:
            started_on.append(threading.current_thread().name)
            return ref.ask({"n": value})

        future: ChainedFuture[int] = ChainedFuture(ref.ask({"n": 1}), then)
        future.add_done_callback(lambda _f: answered.set())
        assert answered.wait(5.0), "the chain never answered without a waiter"
        assert future.done()
        assert len(started_on) == 1
        assert future.get(0) == 3
    finally:
        runtime.shutdown()


def test_on_threads_the_chain_goes_on_with_nobody_looking() -> None:
    """Fire and forget, like any ask: the second step is sent though no one waits or polls."""
    runtime = create_runtime("threads", ask_timeout_s=5.0)
    try:
        runtime.spawn("add", Adder)
        ref = runtime.lookup("add")
        sent = threading.Event()

        def then(value: int) -> Any:
            future = ref.ask({"n": value})
            sent.set()
            return future

        ChainedFuture(ref.ask({"n": 1}), then)  # dropped at once
        assert sent.wait(5.0)
    finally:
        runtime.shutdown()


def test_on_the_simulator_nothing_moves_until_someone_waits() -> None:
    runtime = create_runtime("sim", clock=VirtualClock(), ask_timeout_s=5.0)
    try:
        runtime.spawn("add", Adder)
        calls: list[int] = []
        future = _chain(runtime, calls)
        assert not future.done() and calls == []  # the simulator is driven by get
        assert future.get(5.0) == 3
    finally:
        runtime.shutdown()


def test_many_threads_racing_to_start_the_step_start_it_once() -> None:
    inner: CompletedFuture[int] = CompletedFuture(1)
    calls: list[int] = []
    gate = threading.Barrier(8)

    def then(value: int) -> CompletedFuture[int]:
        calls.append(value)
        time.sleep(0.01)  # widen the window in which others find the step claimed
        return CompletedFuture(value + 1)

    future: ChainedFuture[int] = ChainedFuture(inner, then)
    results: list[int] = []

    def racer() -> None:
        gate.wait()
        results.append(future.get(5.0))

    threads = [threading.Thread(target=racer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [1]
    assert results == [2] * 8
