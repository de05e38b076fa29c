"""The runtime interface behaves the same on every backend (threads, sim)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from gliding_actors.clock import VirtualClock
from gliding_actors.errors import (
    ActorCrashed,
    ActorUnavailable,
    ConflictError,
    InvalidInput,
    Timeout,
)
from gliding_actors.runtime import (
    DEFERRED,
    IN_DRIVER,
    Context,
    ReplyToken,
    Runtime,
    ThreadsRuntime,
)


class Counter:
    """Adds to a total; refuses negatives (a refusal must change nothing)."""

    def __init__(self) -> None:
        self.total = 0

    def receive(self, message: Any, ctx: Context) -> Any:
        if message["t"] == "add":
            if message["n"] < 0:
                raise ConflictError("negative")
            self.total += message["n"]
            return self.total
        if message["t"] == "get":
            return self.total
        if message["t"] == "boom":
            self.total = -999  # a crash mid-update: the actor must not be trusted after
            raise RuntimeError("kaboom")
        raise InvalidInput(f"unknown {message['t']}")


class Recorder:
    """A supervisor that remembers every notice it gets."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def receive(self, message: Any, ctx: Context) -> Any:
        if message == "seen":
            return list(self.seen)
        self.seen.append(message)
        return None


class Deferring:
    """Answers 'wait' asks only when a 'release' arrives: replies from later messages."""

    def __init__(self) -> None:
        self.waiting: list[int] = []

    def receive(self, message: Any, ctx: Context) -> Any:
        if message["t"] == "wait":
            self.waiting.append(ctx.defer_reply().request_id)
            return DEFERRED
        if message["t"] == "release":
            for rid in self.waiting:
                ctx.resolve(ReplyToken(rid), f"released {rid}")
            count = len(self.waiting)
            self.waiting = []
            return count
        if message["t"] == "boom":
            raise KeyError("lost")
        return None


class Timed:
    def __init__(self) -> None:
        self.fired: list[str] = []

    def receive(self, message: Any, ctx: Context) -> Any:
        if message["t"] == "arm":
            ctx.schedule(message["delay"], {"t": "fire", "tag": message["tag"]})
            return None
        if message["t"] == "fire":
            self.fired.append(message["tag"])
            return None
        return list(self.fired)


def settle(rt: Runtime) -> None:
    """Let every in-flight message be handled (the protocol's own quiescence, one call for every backend)."""
    rt.wait_quiescent(5.0)


def test_quiescence_and_placement_are_part_of_every_backend(runtime: Runtime) -> None:
    made: list[Counter] = []

    def counter() -> Counter:
        made.append(Counter())
        return made[-1]

    ref = runtime.spawn("counter", counter)
    for n in range(1, 6):
        ref.tell({"t": "add", "n": n})
    runtime.wait_quiescent(5.0)
    assert made[-1].total == 15  # every tell handled, seen without asking (an ask would drive sim itself)
    assert runtime.node_ids() == []  # one process: no node to place an actor on


def test_ask_returns_the_reply(runtime: Runtime) -> None:
    ref = runtime.spawn("counter", Counter)
    assert ref.ask({"t": "add", "n": 2}).get(2.0) == 2
    assert ref.ask({"t": "add", "n": 3}).get(2.0) == 5
    assert runtime.lookup("counter").ask({"t": "get"}).get(2.0) == 5


def test_refusal_reaches_the_asker_and_changes_nothing(runtime: Runtime) -> None:
    ref = runtime.spawn("counter", Counter)
    ref.ask({"t": "add", "n": 4}).get(2.0)
    with pytest.raises(ConflictError):
        ref.ask({"t": "add", "n": -1}).get(2.0)
    assert ref.is_alive()
    assert ref.ask({"t": "get"}).get(2.0) == 4


def test_crash_fails_the_asker_notifies_the_supervisor_and_stops_the_actor(runtime: Runtime) -> None:
    supervisor = runtime.spawn("sup", Recorder)
    ref = runtime.spawn("counter", Counter, supervisor="sup")
    ref.ask({"t": "add", "n": 1}).get(2.0)
    with pytest.raises(ActorCrashed) as info:
        ref.ask({"t": "boom"}).get(2.0)
    assert info.value.actor == "counter"
    assert "RuntimeError: kaboom" in info.value.cause
    settle(runtime)
    notices = supervisor.ask("seen").get(2.0)
    assert notices == [
        {"type": "actor.failed", "actor": "counter", "error": "RuntimeError: kaboom", "restarted": False}
    ]
    # Never a hang: the crashed actor refuses at once.
    started = time.monotonic()
    with pytest.raises(ActorUnavailable):
        ref.ask({"t": "get"}).get(2.0)
    with pytest.raises(ActorUnavailable):
        runtime.lookup("counter")
    assert time.monotonic() - started < 1.0


def test_restart_rebuilds_state_from_the_factory(runtime: Runtime) -> None:
    supervisor = runtime.spawn("sup", Recorder)
    ref = runtime.spawn("counter", Counter, supervisor="sup", restart=True)
    ref.ask({"t": "add", "n": 7}).get(2.0)
    with pytest.raises(ActorCrashed):
        ref.ask({"t": "boom"}).get(2.0)
    assert ref.ask({"t": "get"}).get(2.0) == 0  # fresh state, not the corrupted -999
    settle(runtime)
    (notice,) = supervisor.ask("seen").get(2.0)
    assert notice["restarted"] is True


def test_deferred_replies_are_answered_by_a_later_message(runtime: Runtime) -> None:
    ref = runtime.spawn("deferring", Deferring)
    first = ref.ask({"t": "wait"})
    second = ref.ask({"t": "wait"})
    settle(runtime)
    assert not first.done() and not second.done()
    assert ref.ask({"t": "release"}).get(2.0) == 2
    assert first.get(2.0).startswith("released ")
    assert second.get(2.0).startswith("released ")


def test_a_crash_fails_every_deferred_ask(runtime: Runtime) -> None:
    ref = runtime.spawn("deferring", Deferring)
    pending = [ref.ask({"t": "wait"}) for _ in range(3)]
    settle(runtime)
    with pytest.raises(ActorCrashed):
        ref.ask({"t": "boom"}).get(2.0)
    for future in pending:
        with pytest.raises(ActorCrashed):
            future.get(2.0)


def test_an_unanswered_ask_times_out_instead_of_hanging(runtime: Runtime) -> None:
    ref = runtime.spawn("deferring", Deferring)
    future = ref.ask({"t": "wait"})
    started = time.monotonic()
    with pytest.raises(Timeout):
        future.get(0.2)
    assert time.monotonic() - started < 2.0


def test_stop_fails_pending_asks(runtime: Runtime) -> None:
    ref = runtime.spawn("deferring", Deferring)
    future = ref.ask({"t": "wait"})
    settle(runtime)
    runtime.stop("deferring")
    with pytest.raises(ActorUnavailable):
        future.get(2.0)
    with pytest.raises(ActorUnavailable):
        ref.ask({"t": "wait"}).get(2.0)


def test_unknown_actor_and_bad_names(runtime: Runtime) -> None:
    with pytest.raises(ActorUnavailable):
        runtime.lookup("nobody")
    with pytest.raises(InvalidInput):
        runtime.spawn("@driver", Counter)
    runtime.spawn("counter", Counter)
    with pytest.raises(InvalidInput):
        runtime.spawn("counter", Counter)


def test_timers_fire_when_the_virtual_clock_moves(runtime: Runtime) -> None:
    clock = runtime.clock
    assert isinstance(clock, VirtualClock)
    ref = runtime.spawn("timed", Timed)
    ref.ask({"t": "arm", "delay": 5.0, "tag": "late"}).get(2.0)
    ref.ask({"t": "arm", "delay": 1.0, "tag": "early"}).get(2.0)
    settle(runtime)
    assert ref.ask({"t": "list"}).get(2.0) == []
    clock.advance(2.0)
    settle(runtime)
    assert ref.ask({"t": "list"}).get(2.0) == ["early"]
    clock.advance(10.0)
    settle(runtime)
    assert ref.ask({"t": "list"}).get(2.0) == ["early", "late"]


def test_threads_timers_run_on_a_real_clock() -> None:
    rt = ThreadsRuntime(ask_timeout_s=5.0)
    try:
        ref = rt.spawn("timed", Timed)
        ref.ask({"t": "arm", "delay": 0.05, "tag": "x"}).get(2.0)
        deadline = time.monotonic() + 3.0
        while ref.ask({"t": "list"}).get(2.0) != ["x"]:
            assert time.monotonic() < deadline, "timer never fired"
            time.sleep(0.01)
    finally:
        rt.shutdown()


def test_done_callbacks_run_once_answered(runtime: Runtime) -> None:
    ref = runtime.spawn("counter", Counter)
    seen: list[Any] = []
    future = ref.ask({"t": "add", "n": 5})
    future.add_done_callback(lambda f: seen.append(f.get(0)))
    future.get(2.0)
    assert seen == [5]
    future.add_done_callback(lambda f: seen.append("again"))
    assert seen == [5, "again"]


def test_shutdown_is_idempotent_and_refuses_new_actors(runtime: Runtime) -> None:
    runtime.spawn("counter", Counter)
    runtime.shutdown()
    runtime.shutdown()
    with pytest.raises(ActorUnavailable):
        runtime.spawn("other", Counter)


def test_in_driver_placement_is_honoured_and_a_node_is_refused_with_nothing_started(runtime: Runtime) -> None:
    """Every actor of threads and sim runs in this process: IN_DRIVER is what
    they do anyway; a node id cannot be honoured, so it is refused, not ignored."""
    ref = runtime.spawn("counter", Counter, placement=IN_DRIVER)
    assert ref.ask({"t": "add", "n": 1}).get(2.0) == 1
    with pytest.raises(InvalidInput, match="runtime='ray'"):
        runtime.spawn("placed", Counter, placement="4c1f0e9a-node")
    with pytest.raises(ActorUnavailable):
        runtime.lookup("placed")
    assert runtime.spawn("placed", Counter).ask({"t": "add", "n": 2}).get(2.0) == 2  # the name stayed free


def test_what_a_backend_records_and_knows_is_asked_through_the_protocol(runtime: Runtime) -> None:
    ref = runtime.spawn("counter", Counter)
    ref.ask({"t": "add", "n": 1}).get(2.0)
    runtime.wait_quiescent(5.0)
    assert runtime.known_quiescent()
    log = runtime.message_log()
    if runtime.deterministic:  # the simulator: a complete record that makes replays comparable
        assert log is not None and log.delivered >= 1 and len(log.log_hash()) == 64
        assert any("counter" in line for line in runtime.recent_messages())
    else:
        assert log is None
