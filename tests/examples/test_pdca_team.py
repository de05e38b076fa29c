"""The example team (examples/pdca_team): it runs, and its recorded trace replays identically.

The issue's done-when: the team runs on threads with recording on, the trace
converts with the library's converter, and the scenario replays on the
simulator under every seed 0..19.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

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


# -- gliding-actors demo --team [--out DIR] ---------------------------------------

TEAM_FILES = ("team.jsonl", "team.yaml", "team.html")  # trace, scenario, diagram


def _printed_paths(text: str) -> list[Path]:
    """Every absolute path the command printed (the demo prints them absolute)."""
    return [Path(p) for p in re.findall(r"(?<![\w/.])(/[^\s:]+)", text)]


def _snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file and folder under root, with the files' bytes."""
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


@dataclass
class DemoRun:
    code: int
    out: str
    err: str
    folder: Path


@pytest.fixture(scope="module")
def team_demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """One run of ``demo --team --out DIR`` (DIR and its parent not there yet), shared by the tests below."""
    folder = tmp_path_factory.mktemp("demo") / "nested" / "out"
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(["demo", "--team", "--seed", "3", "--out", str(folder)])
    return DemoRun(code, stdout.getvalue(), stderr.getvalue(), folder)


def test_demo_team_runs_records_converts_and_replays_the_team(team_demo: DemoRun) -> None:
    assert team_demo.code == 0, team_demo.out + team_demo.err
    assert "team: 2 PDCA rounds, verdicts ['fail', 'pass'], decisions ['revise', 'accept']" in team_demo.out
    assert "1 passed, 0 failed" in team_demo.out


def test_demo_team_keeps_every_file_it_names_in_out_and_the_scenario_replays(
    team_demo: DemoRun, capsys: pytest.CaptureFixture[str]
) -> None:
    printed = _printed_paths(team_demo.out)
    assert printed and all(path.exists() for path in printed), team_demo.out  # after the command returned
    kept = [team_demo.folder / name for name in TEAM_FILES]
    assert set(kept) <= set(printed)
    assert sorted(p.name for p in team_demo.folder.iterdir()) == sorted(TEAM_FILES)  # the memory is scratch
    assert "<html" in kept[2].read_text(encoding="utf-8").lower()  # the sequence diagram
    capsys.readouterr()
    assert main(["replay", str(kept[1]), "--seeds", "0..1"]) == 0
    assert "2 passed, 0 failed" in capsys.readouterr().out


def test_demo_team_refuses_to_overwrite_its_files_in_an_existing_out(
    team_demo: DemoRun, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _snapshot(team_demo.folder.parent)
    assert main(["demo", "--team", "--out", str(team_demo.folder)]) == 2
    err = capsys.readouterr().err
    assert "already holds team.jsonl, team.yaml, team.html" in err and "nothing was written" in err
    assert _snapshot(team_demo.folder.parent) == before


def test_demo_team_without_out_makes_a_new_folder_in_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "mine.txt").write_text("keep me")
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--team", "--seed", "0"]) == 0
    out = capsys.readouterr().out
    made = [p for p in tmp_path.iterdir() if p.name != "mine.txt"]
    assert len(made) == 1 and made[0].is_dir() and made[0].name.startswith("gliding-team-")
    assert sorted(p.name for p in made[0].iterdir()) == sorted(TEAM_FILES)
    printed = _printed_paths(out)
    assert {made[0] / name for name in TEAM_FILES} <= set(printed)
    assert all(path.exists() and path.is_relative_to(made[0]) for path in printed), out
    assert (tmp_path / "mine.txt").read_text() == "keep me"


def test_the_default_folder_never_reuses_an_existing_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gliding_actors.cli import _OutDir

    monkeypatch.chdir(tmp_path)
    (tmp_path / "gliding-team-X").mkdir()
    (tmp_path / "gliding-team-X" / "team.yaml").write_text("theirs")
    (tmp_path / "gliding-team-X-2").write_text("a file")
    out = _OutDir.default("X")
    assert out.path == tmp_path / "gliding-team-X-3" and out.path.is_dir()
    assert (tmp_path / "gliding-team-X" / "team.yaml").read_text() == "theirs"


@pytest.mark.parametrize("where", ["a-file", "a-file/sub"])
def test_demo_team_refuses_an_out_that_is_a_file_and_changes_nothing(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a-file").write_text("precious")
    before = _snapshot(tmp_path)
    assert main(["demo", "--team", "--out", str(tmp_path / where)]) == 2
    assert f"{tmp_path / 'a-file'} is not a folder" in capsys.readouterr().err
    assert _snapshot(tmp_path) == before


def test_demo_team_refuses_an_out_it_cannot_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    if os.geteuid() == 0:  # root may write anywhere: make the check see what another user would
        real_access = os.access
        monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != locked and real_access(path, mode))
    try:
        assert main(["demo", "--team", "--out", str(locked)]) == 2
        assert main(["demo", "--team", "--out", str(locked / "sub")]) == 2
        err = capsys.readouterr().err
        assert f"{locked} is not writable" in err and f"cannot create a folder in {locked}" in err
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o755)


def test_demo_team_leaves_no_half_made_folder_when_creating_it_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real_mkdir = Path.mkdir

    def mkdir(self: Path, *args: Any, **kwargs: Any) -> None:
        if self.name == "c":
            raise PermissionError(13, "Permission denied")
        real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    assert main(["demo", "--team", "--out", str(tmp_path / "a" / "b" / "c")]) == 2
    assert "cannot create" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_demo_team_removes_what_it_made_when_the_team_run_breaks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_open(*args: Any, record: Path, **kwargs: Any) -> None:
        Path(record).write_text("half a trace")
        raise InvalidInput("the team broke")

    monkeypatch.setattr(MemorySystem, "open", broken_open)
    with pytest.raises(InvalidInput, match="the team broke"):
        main(["demo", "--team", "--out", str(tmp_path / "new" / "out")])
    assert list(tmp_path.iterdir()) == []


def test_demo_out_without_team_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--out", "kept"]) == 2
    assert "--out needs --team" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
