"""The threads runtime delivers to an idle actor in the sender's thread, and keeps its promises.

Actors whose behaviour defines ``may_run_inline`` may be run by whichever
thread posts to them. These tests drive many threads through chains of such
actors (mixed with actors that never run inline, and with handlers that refuse
inline delivery of some messages) and check, for every message, what the
runtime promises on every backend: each actor handles one message at a time,
and messages from one sender to one receiver arrive in the order sent.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from typing import Any

import pytest

from gliding_actors.errors import ActorCrashed, ActorUnavailable
from gliding_actors.runtime import Context, ThreadsRuntime
from gliding_actors.runtime._threads import INLINE_DEPTH

ACTORS = 12
THREADS = 8
PER_THREAD = 400
HOPS = 5


class Hop:
    """Checks one-at-a-time and per-pair FIFO on every message, then passes the message on.

    A message names the route still to go; each hop numbers what it sends per
    receiver, and the receiver checks that each sender's numbers arrive in
    order with none missing.
    """

    def __init__(self) -> None:
        self.inside = False
        self.overlaps = 0
        self.out_of_order: list[tuple[Any, int, int]] = []
        self.next_from: dict[Any, int] = {}
        self.sent_to: dict[str, int] = {}
        self.handled = 0
        self.threads: set[int] = set()

    def receive(self, message: Any, ctx: Context) -> Any:
        if message == "report":
            return {
                "overlaps": self.overlaps,
                "out_of_order": list(self.out_of_order),
                "handled": self.handled,
                "threads": len(self.threads),
            }
        if self.inside:
            self.overlaps += 1
        self.inside = True
        try:
            self.threads.add(threading.get_ident())
            origin = ctx.sender if ctx.sender is not None else message["outside"]
            expected = self.next_from.get(origin, 0)
            if message["seq"] != expected:
                self.out_of_order.append((origin, expected, message["seq"]))
            self.next_from[origin] = message["seq"] + 1
            self.handled += 1
            route = message["route"]
            if route:
                to = route[0]
                n = self.sent_to.get(to, 0)
                self.sent_to[to] = n + 1
                ctx.send(to, {"route": route[1:], "seq": n, "outside": None})
            time.sleep(0)  # let another thread in while this handler runs
            return self.handled
        finally:
            self.inside = False


class InlineHop(Hop):
    """A hop a sender may run in its own thread, except for messages marked ``own_thread``."""

    def may_run_inline(self, message: Any) -> bool:
        return not (isinstance(message, dict) and message.get("own_thread"))


def _idle(rt: ThreadsRuntime, *names: str) -> None:
    """Wait until no thread holds these actors (their start has run), so the next post may run inline."""
    deadline = time.monotonic() + 5.0
    for name in names:
        while rt._hosts[name].busy:
            assert time.monotonic() < deadline, f"{name} still held"
            time.sleep(0.001)


def _names() -> list[str]:
    return [f"hop-{i}" for i in range(ACTORS)]


def _spawn_hops(rt: ThreadsRuntime) -> list[str]:
    names = _names()
    for i, name in enumerate(names):
        rt.spawn(name, InlineHop if i % 3 else Hop)  # a third never runs inline
    return names


def test_many_threads_through_inline_chains_keep_fifo_per_pair_and_one_message_at_a_time() -> None:
    rt = ThreadsRuntime(ask_timeout_s=30.0)
    try:
        names = _spawn_hops(rt)
        errors: list[BaseException] = []

        def drive(thread_no: int) -> None:
            rng = random.Random(thread_no)
            try:
                for seq in range(PER_THREAD):
                    first, *route = rng.choices(names, k=HOPS)
                    message = {"route": route, "seq": seq, "outside": f"t{thread_no}", "own_thread": seq % 7 == 0}
                    # Every message from this thread goes to one actor, so its numbers are one channel.
                    if seq % 2:
                        rt.lookup(names[thread_no % ACTORS]).ask({**message, "route": [first, *route]}).get(30.0)
                    else:
                        rt.lookup(names[thread_no % ACTORS]).tell({**message, "route": [first, *route]})
            except BaseException as exc:  # noqa: BLE001 - reported by the test below
                errors.append(exc)

        threads = [threading.Thread(target=drive, args=(n,)) for n in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120.0)
        assert not errors, errors
        rt.wait_quiescent(60.0)
        reports = {name: rt.lookup(name).ask("report").get(10.0) for name in names}
        assert all(r["overlaps"] == 0 for r in reports.values()), reports
        assert all(r["out_of_order"] == [] for r in reports.values()), reports
        # every message was handled at each of its hops: the first, then HOPS more
        assert sum(r["handled"] for r in reports.values()) == THREADS * PER_THREAD * (HOPS + 1)
        # the inline path really ran, and inline actors were run by more than one thread
        assert rt.inline_deliveries > THREADS * PER_THREAD
        inline_names = [name for i, name in enumerate(names) if i % 3]
        assert any(reports[name]["threads"] > 1 for name in inline_names)
        # an actor that never runs inline is only ever run by its own thread
        assert all(reports[name]["threads"] == 1 for i, name in enumerate(names) if i % 3 == 0)
    finally:
        rt.shutdown()


class Echo:
    """Answers with the thread it ran in; ``deep`` asks are passed down a chain of echoes first."""

    def __init__(self, below: str | None) -> None:
        self.below = below

    def may_run_inline(self, message: Any) -> bool:
        return True

    def receive(self, message: Any, ctx: Context) -> Any:
        if message.get("t") == "boom":
            raise RuntimeError("kaboom")
        if message.get("t") == "down" and self.below is not None:
            ctx.send(self.below, message)
        return threading.get_ident()


def test_an_idle_inline_actor_answers_in_the_askers_thread_and_chains_stop_at_the_depth_limit() -> None:
    rt = ThreadsRuntime(ask_timeout_s=10.0)
    try:
        chain = [f"echo-{i}" for i in range(INLINE_DEPTH + 4)]
        for i, name in enumerate(chain):
            below = chain[i + 1] if i + 1 < len(chain) else None
            rt.spawn(name, lambda below=below: Echo(below))
        _idle(rt, *chain)
        assert rt.lookup(chain[0]).ask({"t": "here"}).get(5.0) == threading.get_ident()
        _idle(rt, *chain)
        before = rt.inline_deliveries
        rt.lookup(chain[0]).tell({"t": "down"})
        # The first INLINE_DEPTH hops ran nested in this thread, the rest on the actors' threads.
        assert rt.inline_deliveries - before == INLINE_DEPTH
        rt.wait_quiescent(5.0)
    finally:
        rt.shutdown()


def test_a_crash_run_inline_fails_the_asker_and_leaves_the_sender_thread_unharmed() -> None:
    rt = ThreadsRuntime(ask_timeout_s=10.0)
    try:
        rt.spawn("echo", lambda: Echo(None), restart=True)
        _idle(rt, "echo")
        with pytest.raises(ActorCrashed):
            rt.lookup("echo").ask({"t": "boom"}).get(5.0)
        _idle(rt, "echo")
        assert rt.lookup("echo").ask({"t": "here"}).get(5.0) == threading.get_ident()
        rt.spawn("mortal", lambda: Echo(None))
        _idle(rt, "mortal")
        with pytest.raises(ActorCrashed):
            rt.lookup("mortal").ask({"t": "boom"}).get(5.0)
        with pytest.raises(ActorUnavailable):
            rt.lookup("mortal")
    finally:
        rt.shutdown()


class Slow:
    """Runs inline and takes a while: stop must wait for it to finish."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def may_run_inline(self, message: Any) -> bool:
        return True

    def receive(self, message: Any, ctx: Context) -> Any:
        self.log.append("begin")
        time.sleep(0.3)
        self.log.append("end")
        return None


def test_stop_waits_for_a_handler_another_thread_runs_inline() -> None:
    rt = ThreadsRuntime(ask_timeout_s=10.0)
    log: list[str] = []
    try:
        rt.spawn("slow", lambda: Slow(log))
        _idle(rt, "slow")
        sender = threading.Thread(target=lambda: rt.lookup("slow").tell({"t": "work"}))
        sender.start()
        deadline = time.monotonic() + 5.0
        while not log and time.monotonic() < deadline:
            time.sleep(0.001)
        assert log == ["begin"]
        rt.stop("slow")
        assert log == ["begin", "end"]  # no handler of a stopped actor is still running
        sender.join(5.0)
    finally:
        rt.shutdown()


def test_a_thread_running_an_event_loop_never_runs_an_actor_inline() -> None:
    rt = ThreadsRuntime(ask_timeout_s=10.0)
    try:
        rt.spawn("echo", lambda: Echo(None))
        _idle(rt, "echo")

        async def ask_from_the_loop() -> int:
            answer: int = rt.lookup("echo").ask({"t": "here"}).get(5.0)
            return answer

        assert asyncio.run(ask_from_the_loop()) != threading.get_ident()
        _idle(rt, "echo")
        assert rt.lookup("echo").ask({"t": "here"}).get(5.0) == threading.get_ident()  # outside a loop: inline
    finally:
        rt.shutdown()
