"""The example team (examples/pdca_team): it runs, and its recorded trace replays identically.

The issue's done-when: the team runs on threads with recording on, the trace
converts with the library's converter, and the scenario replays on the
simulator under every seed 0..19.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from gliding_actors import InvalidInput, MemorySystem, VirtualClock
from gliding_actors.cli import main
from gliding_actors.scenario import load_scenario

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pdca_team"


def _team_module() -> ModuleType:
    """Import examples/pdca_team/team.py by path (examples/ is not an installed package)."""
    name = "pdca_team_example"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, EXAMPLE / "team.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


team = _team_module()


def test_the_team_runs_two_pdca_rounds_and_records_a_trace_that_replays_under_20_seeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "team.jsonl"
    with MemorySystem.open(tmp_path / "mem", record=trace, clock=VirtualClock()) as memory:
        report = team.run_team(memory)
        aa = memory.agents()["aa"]
        assert aa.get("fact:rate-limit-contract")["task"] == "task:rate-limit"  # type: ignore[index]
    # the script steers the loop: CA fails round 1, AA revises, CA passes round 2, AA accepts
    assert report.rounds == 2
    assert report.verdicts == ["fail", "pass"] and report.decisions == ["revise", "accept"]
    assert report.decisions_seen_by_da == ["revise", "accept"]  # pub/sub reached DA
    assert report.review_requests_seen == 2
    # the task DAG: plan → do → check → act, each made ready by its predecessor's completion
    assert report.layers == [["task:rate-limit"]] + [[f"task:rate-limit/{p}"] for p in ("plan", "do", "check", "act")]
    assert report.ready_after == {
        "plan": ["task:rate-limit/do"], "do": ["task:rate-limit/check"],
        "check": ["task:rate-limit/act"], "act": [], "top": [],
    }
    assert report.lock_tokens == [1, 2]  # DA's two grants of repo:api, fenced in order
    # write-through: the confirmed fact is in L0 when the write returns; the ordinary artifact is not
    assert report.fact_version == report.fact_l0_version_after_write == 1
    assert report.artifact_version_after_write == 2 and report.artifact_l0_version_after_write < 2
    assert set(report.context_tokens) == {"sa", "pa", "da", "ca", "aa"}
    assert all(0 < t <= 400 for ts in report.context_tokens.values() for t in ts)

    out = tmp_path / "team.yaml"
    assert main(["convert", str(trace), "-o", str(out)]) == 0
    scenario = load_scenario(out)
    ops = [getattr(s, "op", None) for s in scenario.steps]
    for op in ("context", "turn", "lock", "unlock", "publish", "inbox", "subscribe",
               "task.create", "task.depend", "task.layers", "task.complete", "write", "advance"):
        assert op in ops, op
    assert ops.count("context") == ops.count("turn") == 9  # one context before every scripted LLM step
    critical = [s for s in scenario.steps if getattr(s, "op", None) == "write"
                and "confirmed_fact" in (s.args.get("tags") or [])]  # type: ignore[attr-defined]
    assert [s.args["iri"] for s in critical] == [  # type: ignore[attr-defined]
        "decision:rate-limiter/1", "decision:rate-limiter/2", "fact:rate-limit-contract"]
    assert all(s.expect.get("policy") == "write_through" for s in critical)  # type: ignore[attr-defined]
    capsys.readouterr()
    assert main(["replay", str(out), "--seeds", "0..19"]) == 0
    assert "20 passed, 0 failed" in capsys.readouterr().out


def test_the_example_runs_from_its_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert team.main(["--memory", str(tmp_path / "mem")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["decisions"] == ["revise", "accept"]


def _script(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(data))
    return path


def test_a_malformed_script_is_invalid_input_before_the_team_writes_anything(tmp_path: Path) -> None:
    good = json.loads((EXAMPLE / "script.json").read_text())
    bad_scripts = [
        {**good, "format": "other@1"},
        {**good, "responses": []},
        {**good, "responses": [{**good["responses"][0], "summary": ""}]},
        {**good, "responses": [{**good["responses"][0], "agent": "zz"}]},
        {**good, "responses": [{**good["responses"][0], "extra": "x"}]},
    ]
    trace = tmp_path / "t.jsonl"
    with MemorySystem.open(tmp_path / "mem", record=trace) as memory:
        for data in bad_scripts:
            with pytest.raises(InvalidInput):
                team.run_team(memory, _script(tmp_path, data))
        assert memory.agents() == {}  # no agent made, so nothing written or recorded
    assert [json.loads(line)["kind"] for line in trace.read_text().splitlines()[1:]] == []


def test_a_team_that_drifts_from_the_script_fails_loudly(tmp_path: Path) -> None:
    good = json.loads((EXAMPLE / "script.json").read_text())
    # without CA's first check in the script, the team's next step no longer matches the file's
    drifted = {**good, "responses": [r for r in good["responses"] if r["step"] != "check-1"]}
    with MemorySystem.open(tmp_path / "mem", clock=VirtualClock()) as memory:
        with pytest.raises(InvalidInput, match="expected aa act-1 next, the team asked for ca check-1"):
            team.run_team(memory, _script(tmp_path, drifted))


def test_demo_team_runs_records_converts_and_replays_the_team(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--team", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "team: 2 PDCA rounds, verdicts ['fail', 'pass'], decisions ['revise', 'accept']" in out
    assert "1 passed, 0 failed" in out
