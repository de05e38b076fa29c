"""Recording a live run (``MemorySystem.open(record=...)``) and converting it to a scenario."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from gliding_actors import InvalidInput, MemorySystem, VirtualClock
from gliding_actors.cli import main
from gliding_actors.scenario import load_scenario, replay
from gliding_actors.scenario._record import TRACE_FORMAT


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _ops(path: Path) -> list[dict[str, Any]]:
    return [line for line in _lines(path)[1:] if line["kind"] == "op"]


def test_every_op_is_recorded_once_with_its_result(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    with MemorySystem.open(tmp_path / "mem", record=trace) as memory:
        pa, ca = memory.agent("pa", "PA"), memory.agent("ca", "CA")
        pa.write("task:x", {"goal": "g"})
        ca.read("task:x")
        ca.read("task:x")  # a hit: no message, still an op
        with pytest.raises(InvalidInput):
            pa.write("task:y", ["not an object"])  # type: ignore[arg-type]
        pa.create_task("task:t")
        pa.submit_task({"t": "task.complete", "task": "task:t", "status": "completed"}).get()  # nested: one op
        asyncio.run(_async_ops(ca))
        memory.inspect("task:x")
        memory.flush()
        memory.team()
    header, *rest = _lines(trace)
    assert header["format"] == TRACE_FORMAT and header["runtime"] == "threads" and header["clock"] == "system"
    assert [(r["id"], r["role"]) for r in rest if r["kind"] == "agent"] == [("pa", "PA"), ("ca", "CA")]
    ops = sorted(_ops(trace), key=lambda r: r["issued"])
    assert [r["op"] for r in ops] == [
        "write", "read", "read", "write", "task.create", "task.complete", "subscribe", "inbox",
        "inspect", "flush", "agents",
    ]  # the closing flush is not recorded
    assert ops[2]["result"]["messages"] == 0 and ops[2]["result"]["value"] == {"goal": "g"}
    assert ops[3]["error"]["name"] == "InvalidInput" and "result" not in ops[3]
    assert ops[5]["args"] == {"task": "task:t", "status": "completed"} and ops[5]["result"]["ready"] == []
    assert all(r["issued"] < r["completed"] for r in ops)
    assert len({r["completed"] for r in ops}) == len(ops)


async def _async_ops(agent: Any) -> None:
    await agent.aio.subscribe("news")
    await agent.aio.inbox()


def _team_run(memory: MemorySystem) -> None:
    """Five agents at once on threads: shared and own lines, a bus, locks, tasks, L1 turns."""
    names = [("sa", "SA"), ("pa", "PA"), ("da", "DA"), ("ca", "CA"), ("aa", "AA")]
    agents = {n: memory.agent(n, r) for n, r in names}
    agents["sa"].subscribe("progress")
    agents["pa"].create_task("task:auth")
    agents["pa"].write("plan:auth", {"steps": 3}, tags=["user_intent"])

    def work(name: str) -> None:
        agent = agents[name]
        agent.heartbeat("working", "auth")
        agent.read("plan:auth")
        agent.write(f"note:{name}", {"by": name, "n": 1})
        agent.read(f"note:{name}")
        agent.publish("progress", {"from": name})
        agent.turn(f"{name} read the plan", thought="...", content="...", relevance=0.7)
        token = agent.lock("file:auth.py", "write", timeout_s=5.0)
        if token is not None:
            agent.unlock("file:auth.py")
        agent.read("note:pa")

    threads = [threading.Thread(target=work, args=(n,)) for n, _r in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    agents["sa"].inbox()
    agents["aa"].query("SELECT ?s WHERE { ?s <https://gliding-actors.dev/ns#by> ?who }")
    agents["pa"].complete_task("task:auth")
    agents["ca"].session()
    memory.quiesce(5)
    memory.inspect("plan:auth")


def test_a_threads_trace_converts_and_replays_on_sim_under_20_seeds_and_on_threads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "team.jsonl"
    with MemorySystem.open(tmp_path / "mem", record=trace) as memory:
        _team_run(memory)
    out = tmp_path / "team.yaml"
    assert main(["convert", str(trace), "-o", str(out)]) == 0
    scenario = load_scenario(out)
    assert [a.id for a in scenario.agents] == ["sa", "pa", "da", "ca", "aa"]
    text = out.read_text()
    assert "messages: " not in text.replace("expect: {messages:", "")  # no protocol counts expected
    assert main(["replay", str(out), "--seeds", "0..19"]) == 0
    assert main(["replay", str(out), "--runtime", "threads"]) == 0
    assert "21 passed" not in capsys.readouterr().out  # two separate reports: 20 and 1
    steps = [s for s in scenario.steps if getattr(s, "op", None) == "read"]
    assert steps and all("messages" not in (s.expect or {}) for s in steps)  # type: ignore[union-attr]


def test_a_lock_that_waited_is_replayed_after_the_unlock_that_freed_it(tmp_path: Path) -> None:
    trace = tmp_path / "locks.jsonl"
    with MemorySystem.open(record=trace) as memory:
        a, b = memory.agent("a", "DA"), memory.agent("b", "DA")
        assert a.lock("r") is not None
        waiting = b.submit_lock("r", "write", 10.0)
        memory.quiesce(5)
        a.unlock("r")
        assert waiting.get(5)["granted"] is True
        b.unlock("r")
    by_completion = sorted(_ops(trace), key=lambda r: r["completed"])
    # the blackboard answers the waiter before the unlock that freed it ...
    assert [(r["op"], r["agent"]) for r in by_completion][1:3] == [("lock", "b"), ("unlock", "a")]
    out = tmp_path / "locks.yaml"
    assert main(["convert", str(trace), "-o", str(out)]) == 0
    steps = load_scenario(out).steps
    # ... and the scenario replays it after
    assert [(s.op, s.agent) for s in steps] == [("lock", "a"), ("unlock", "a"), ("lock", "b"), ("unlock", "b")]  # type: ignore[union-attr]
    assert all(replay(load_scenario(out), seed=seed).ok for seed in range(5))


def test_a_virtual_clock_trace_replays_its_time_exactly(tmp_path: Path) -> None:
    trace = tmp_path / "clock.jsonl"
    clock = VirtualClock()
    with MemorySystem.open(record=trace, clock=clock, config={"agents": {"heartbeat_timeout_s": 30}}) as memory:
        sa, da = memory.agent("sa", "SA"), memory.agent("da", "DA")
        sa.heartbeat("working")
        da.heartbeat("working")
        clock.advance(20)
        sa.heartbeat("working")
        clock.advance(15)  # da last beat 35 s ago: stale
        team = memory.team()
        assert team["da"]["stale"] is True and team["sa"]["stale"] is False
    out = tmp_path / "clock.yaml"
    assert main(["convert", str(trace), "-o", str(out)]) == 0
    scenario = load_scenario(out)
    advances = [s.args["seconds"] for s in scenario.steps if s.op == "advance"]  # type: ignore[union-attr]
    assert advances == [20, 15]
    agents_step = scenario.steps[-1]
    assert agents_step.expect == {"agents": {"sa": {"role": "SA", "status": "working", "stale": False},  # type: ignore[union-attr]
                                             "da": {"role": "DA", "status": "working", "stale": True}}}
    assert all(replay(scenario, seed=seed).ok for seed in range(5))


def test_ops_without_a_scenario_op_are_named_in_the_description(tmp_path: Path) -> None:
    trace = tmp_path / "misc.jsonl"
    with MemorySystem.open(record=trace) as memory:
        pa = memory.agent("pa", "PA")
        turn = pa.turn("planned", thought="t", content="c")
        pa.reload(turn["archive_iri"])
        pa.messages("news")
        pa.handoff()
    out = tmp_path / "misc.yaml"
    assert main(["convert", str(trace), "-o", str(out)]) == 0
    scenario = load_scenario(out)
    assert [s.op for s in scenario.steps] == ["turn"]  # type: ignore[union-attr]
    assert scenario.description is not None
    for name in ("reload", "messages", "handoff"):
        assert f"1 × {name} (no scenario op)" in scenario.description
    assert replay(scenario).ok


def test_convert_refuses_what_is_not_a_trace_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    out = tmp_path / "out.yaml"
    for text in ("", "not json\n", json.dumps({"format": "something/else@1"}) + "\n",
                 json.dumps({"format": TRACE_FORMAT}) + "\n" + json.dumps({"kind": "weird"}) + "\n"):
        bad.write_text(text)
        assert main(["convert", str(bad), "-o", str(out)]) == 2
        assert not out.exists()
    assert "not a trace" in capsys.readouterr().err


def test_recording_to_an_unusable_path_is_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="cannot record"):
        MemorySystem.open(record=tmp_path / "no" / "such" / "dir" / "t.jsonl")
