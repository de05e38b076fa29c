"""``bench runtime``: what our runtime costs over raw Pykka, and simulator speed.

* ``ask_rtt_p50_us`` — median round trip of ``ref.ask(msg).get()`` to an echo
  actor on the threads runtime; ``pykka_ask_rtt_p50_us`` — the same on a bare
  Pykka actor, measured in the same process, in alternating blocks so both see
  the same machine load (ask by ask); ``ask_rtt_ratio`` = ours / Pykka (target <= 1.3).
* ``sim_msgs_per_s`` — messages delivered per second by the simulator on a
  ping-pong + fan-out actor set, the log hash on (target >= 100,000).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from gliding_actors.bench._baselines import raw_pykka_echo
from gliding_actors.runtime import Context, Simulator, ThreadsRuntime

__all__ = ["run"]


class _Echo:
    def receive(self, message: Any, ctx: Context) -> Any:
        return message


class _Pinger:
    """Sends ``n`` pings to a ponger and fans each pong out to listeners."""

    def __init__(self, peer: str, listeners: list[str]) -> None:
        self.peer = peer
        self.listeners = listeners

    def receive(self, message: Any, ctx: Context) -> Any:
        left = message["n"]
        if left > 0:
            ctx.send(self.peer, {"t": "ping", "n": left - 1})
            for listener in self.listeners:
                ctx.send(listener, {"t": "note", "n": left})
        return None


class _Ponger:
    def receive(self, message: Any, ctx: Context) -> Any:
        assert ctx.sender is not None
        ctx.send(ctx.sender, {"t": "pong", "n": message["n"]})
        return None


class _Listener:
    def __init__(self) -> None:
        self.seen = 0

    def receive(self, message: Any, ctx: Context) -> Any:
        self.seen += 1
        return None


def _p50_us(samples: list[int]) -> float:
    return statistics.median(samples) / 1000.0


def _ask_rtts(quick: bool) -> dict[str, Any]:
    blocks, per_block = (6, 200) if quick else (20, 500)
    runtime = ThreadsRuntime()
    echo = runtime.spawn("echo", _Echo)
    raw_ask, raw_stop = raw_pykka_echo()
    ours: list[int] = []
    raw: list[int] = []
    message = {"t": "ping", "n": 1}
    clock = time.perf_counter_ns
    try:
        for _ in range(200):  # warm both up
            echo.ask(message).get(10.0)
            raw_ask(message)
        # Alternate ours and raw ask by ask, so drift in machine load hits both alike.
        for _ in range(blocks * per_block):
            start = clock()
            echo.ask(message).get(10.0)
            middle = clock()
            raw_ask(message)
            ours.append(middle - start)
            raw.append(clock() - middle)
    finally:
        runtime.shutdown()
        raw_stop()
    ours_p50, raw_p50 = _p50_us(ours), _p50_us(raw)
    return {
        "ask_rtt_p50_us": round(ours_p50, 2),
        "pykka_ask_rtt_p50_us": round(raw_p50, 2),
        "ask_rtt_ratio": round(ours_p50 / raw_p50, 3),
        "ask_samples": len(ours),
    }


def _sim_rate(quick: bool) -> dict[str, Any]:
    rounds = 3 if quick else 5
    pings = 4_000 if quick else 20_000
    rates = []
    delivered = 0
    for seed in range(rounds):
        sim = Simulator(seed, keep_log=False)
        listeners = [f"listener-{i}" for i in range(3)]
        for name in listeners:
            sim.spawn(name, _Listener)
        sim.spawn("ponger", _Ponger)
        sim.spawn("pinger", lambda: _Pinger("ponger", listeners))
        sim.lookup("pinger").tell({"t": "start", "n": pings})
        start = time.perf_counter()
        delivered = sim.run_until_quiescent()
        elapsed = time.perf_counter() - start
        rates.append(delivered / elapsed)
        sim.shutdown()
    return {
        "sim_msgs_per_s": round(statistics.median(rates)),
        "sim_messages_per_round": delivered,
        "sim_rounds": rounds,
    }


def run(quick: bool = False) -> dict[str, Any]:
    report: dict[str, Any] = {"suite": "runtime"}
    report.update(_ask_rtts(quick))
    report.update(_sim_rate(quick))
    report["targets"] = {"ask_rtt_ratio": "<= 1.3", "sim_msgs_per_s": ">= 100000"}
    report["command"] = "gliding-actors bench runtime --json" + (" --quick" if quick else "")
    return report
