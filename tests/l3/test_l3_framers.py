"""L3's framers (``l3.framers``): the framing half of a projection in its own actor.

What lets the worker pool run on a Ray cluster's nodes (docs/L3.md,
"Framers"): the worker gathers, the framer frames the scope it is sent as
N-Quads. Pinned here on the in-process runtimes: the answers are exactly the
ones a worker computes by itself, views are kept and invalidated the same way,
a failure comes back typed, a malformed job is refused, and a framer that
crashes between jobs is rebuilt. Real pyoxigraph, real pyld.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from team import AGENTS, OTHER, SUBTASK, TASK, build_team

from gliding_actors import MemorySystem
from gliding_actors.errors import ActorCrashed, ConflictError, InvalidInput
from gliding_actors.l3._framer import FRAME, FRAMED, decode_failure
from gliding_actors.l3._frames import BUILTIN_FRAMES
from gliding_actors.runtime import BACKENDS, Context

BASE: dict[str, Any] = {"l3": {"counter": "estimate-v1"}}
FRAMERS: dict[str, Any] = {"l3": {"counter": "estimate-v1", "framers": True}}


def _open(runtime: str, config: dict[str, Any]) -> MemorySystem:
    return MemorySystem.open(runtime=runtime, config=config)


@pytest.fixture(params=BACKENDS)
def runtime(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _all_projections(memory: MemorySystem) -> dict[tuple[str, str, str | None, int | None], Any]:
    agents = build_team(memory)
    by_role = {role: agents[a] for a, role in AGENTS.items()}
    out: dict[tuple[str, str, str | None, int | None], Any] = {}
    for role, agent in sorted(by_role.items()):
        for frame in sorted(BUILTIN_FRAMES):
            for task in (TASK, SUBTASK, OTHER, None):
                for budget in (None, 60):
                    try:
                        found = agent.project(frame, task, budget, timeout=30.0)
                    except InvalidInput as exc:
                        out[(role, frame, task, budget)] = ("InvalidInput", str(exc))
                        continue
                    out[(role, frame, task, budget)] = {k: v for k, v in found.items() if k != "cached"}
    return out


def test_framed_by_a_framer_every_projection_is_the_one_a_worker_computes(runtime: str) -> None:
    with _open(runtime, BASE) as alone, _open(runtime, FRAMERS) as framed:
        assert framed.l3.framers and not alone.l3.framers
        expected = _all_projections(alone)
        got = _all_projections(framed)
        assert got == expected
        assert any(isinstance(v, dict) and v["jsonld"] for v in got.values())  # not vacuous


def test_views_are_kept_and_invalidated_as_without_framers(runtime: str) -> None:
    with _open(runtime, FRAMERS) as memory:
        agents = build_team(memory)
        da = agents["da"]
        first = da.project(task=TASK)
        assert first["cached"] is False
        assert da.project(task=TASK)["cached"] is True
        agents["pa"].write(TASK, {"@type": "Task", "summary": "now with refresh tokens", "status": "open"}, graph="plan")
        again = da.project(task=TASK)
        assert again["cached"] is False and again != first


def test_a_malformed_job_is_refused_and_a_bad_scope_answered_typed() -> None:
    with _open("sim", FRAMERS) as memory:
        rt = memory.runtime
        framer = memory.l3.framers[0]
        with pytest.raises(InvalidInput, match="jobs from its worker"):
            rt.lookup(framer).ask({"t": FRAME, "id": 1}).get(10.0)  # from outside: no worker to answer

        class Probe:
            def __init__(self) -> None:
                self.got: list[Any] = []

            def receive(self, message: Any, ctx: Context) -> Any:
                if message == "got":
                    return self.got
                if ctx.sender is None:
                    ctx.send(framer, message)
                    return None
                self.got.append(message)
                return None

        rt.spawn("probe", Probe)
        plain = {"name": "x", "sparql": "CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }", "frame": {}, "priority": [], "drop": []}
        rt.lookup("probe").tell({"t": FRAME, "id": 7, "frame": plain, "nquads": b"<not n-quads", "graphs": [], "max_tokens": None})
        rt.lookup("probe").tell({"t": FRAME, "id": 8, "frame": {"name": "x"}, "nquads": b"", "graphs": [], "max_tokens": None})
        memory.quiesce()
        got = rt.lookup("probe").ask("got").get(10.0)
        assert [(m["t"], m["id"], m["ok"], m["error"][0]) for m in got] == [
            (FRAMED, 7, False, "InvalidInput"),
            (FRAMED, 8, False, "InvalidInput"),
        ]
        assert memory.supervision()["crashes"] == 0  # answered, not crashed


def test_a_failure_answer_becomes_the_same_typed_error() -> None:
    assert isinstance(decode_failure(["InvalidInput", "frame 'x' failed"], "l3:framer:0"), InvalidInput)
    assert isinstance(decode_failure(["ConflictError", "no"], "l3:framer:0"), ConflictError)
    crashed = decode_failure(["KeyError", "'boom'"], "l3:framer:0")
    assert isinstance(crashed, ActorCrashed) and "KeyError" in str(crashed)
    assert isinstance(decode_failure("garbage", "l3:framer:0"), ActorCrashed)


def test_a_framer_crashed_between_jobs_is_rebuilt_and_frames_again(runtime: str) -> None:
    with _open(runtime, FRAMERS) as memory:
        agents = build_team(memory)
        before = agents["ca"].project(task=TASK)
        assert memory.crash("l3")["lost"] == []
        assert memory.supervision()["actors"]["l3:framer:0"]["restarts"] == 1
        agents["pa"].write(TASK, {"@type": "Task", "summary": "after the crash", "status": "open"}, graph="plan")
        after = agents["ca"].project(task=TASK)
        assert after["cached"] is False and after["jsonld"] != before["jsonld"]


def test_the_projection_suite_passes_with_framers(replay_suites: Callable[..., None]) -> None:
    replay_suites("projection", {"l3": {"framers": True}}, seeds=2)
