"""`gliding-actors replay` and `demo`: exit codes, reports and determinism (spec, "Command line")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gliding_actors.cli import main
from gliding_actors.errors import ConflictError
from gliding_actors.runtime import DEFERRED, CompletedFuture, Context
from gliding_actors.scenario import load_scenario, replay
from gliding_actors.scenario._ops import ReplayWorld, implements
from gliding_actors.scenario._opspecs import OpSpec, register_op_spec

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "scenarios" / "demo" / "pdca_coordination.yaml"

GOOD = """\
format: gliding-actors/scenario@1
name: two agents talk
agents:
  - {id: pa, role: PA}
  - {id: ca, role: CA}
steps:
  - {op: subscribe, agent: ca, topic: t}
  - parallel:
      - {op: publish, agent: pa, topic: t, message: {n: 1}}
      - {op: publish, agent: pa, topic: t, message: {n: 2}}
  - {op: inbox, agent: ca, expect: {count: 2}}
"""


def write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_passing_file_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(write(tmp_path, GOOD)), "--seeds", "0..4"]) == 0
    out = capsys.readouterr().out
    assert "5 passed, 0 failed" in out


def test_same_seed_same_hash_across_invocations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(write(tmp_path, GOOD))
    hashes = []
    for _ in range(2):
        assert main(["replay", path, "--seeds", "0..3", "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        hashes.append([run["log_hash"] for run in report["runs"]])
    assert hashes[0] == hashes[1]
    assert all(h for h in hashes[0])


def test_a_failing_expectation_exits_1_and_says_where(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, GOOD.replace("expect: {count: 2}", "expect: {count: 3}"))
    assert main(["replay", str(path), "--seed", "5"]) == 1
    out = capsys.readouterr().out
    assert f"{path}:11: step 3, seed 5" in out
    assert "expected count: 3, got 2" in out
    assert 'expected: {"count": 3}' in out
    assert 'actual:   {"count": 2}' in out
    assert "last protocol messages:" in out


def test_an_unexpected_error_is_a_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = GOOD + "  - {op: publish, agent: pa, topic: t, message: {n: .nan}}\n"
    path = write(tmp_path, text)
    # NaN cannot be JSON: the loader refuses the file before anything runs.
    assert main(["replay", str(path)]) == 2


def _register_refusing_op() -> None:
    register_op_spec(
        OpSpec(
            name="test.refuse",
            takes_agent=True,
            args_schema={"type": "object", "properties": {}, "additionalProperties": False},
            results={},
        ),
        replace=True,
    )

    @implements("test.refuse")
    def _refuse(world: ReplayWorld, step: Any) -> Any:
        return CompletedFuture(error=ConflictError("someone moved first"))


def test_expected_errors_pass_and_unexpected_ones_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _register_refusing_op()
    run = replay(load_scenario(write(tmp_path, GOOD + "  - {op: test.refuse, agent: pa, expect: {error: ConflictError}}\n")))
    assert run.ok, run.failure
    run = replay(load_scenario(write(tmp_path, GOOD + "  - {op: test.refuse, agent: pa, expect: {error: CycleError}}\n")))
    assert run.failure is not None and "expected error: 'CycleError', got 'ConflictError'" in run.failure.what
    path = write(tmp_path, GOOD + "  - {op: test.refuse, agent: pa}\n")
    assert main(["replay", str(path)]) == 1
    assert "the op failed: someone moved first" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("mutate", "line", "col", "words"),
    [
        (lambda s: s.replace("name: two agents talk", "name: [not, a, string]"), 2, 7, "name"),
        (lambda s: s.replace("  - {op: subscribe, agent: ca, topic: t}", "  - {op: subscribe, agent: ca, topic: t, topik: u}"), 7, 42, "topik"),
        (lambda s: s.replace("op: subscribe", "op: subscrbe"), 7, 10, "subscribe"),
        (lambda s: s.replace("agents:\n", "agents: [\n"), None, None, ""),
    ],
    ids=["wrong-type", "unknown-key", "unknown-op", "bad-yaml"],
)
def test_a_malformed_file_exits_2_with_file_line_col(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mutate: Any, line: int | None, col: int | None, words: str
) -> None:
    path = write(tmp_path, mutate(GOOD))
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{path}:")
    file_part, line_part, col_part, message = err.split(":", 3)
    assert int(line_part) >= 1 and int(col_part) >= 1
    if line is not None:
        assert (int(line_part), int(col_part)) == (line, col), err
    assert words in message


def test_an_op_this_build_lacks_is_reported_not_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An op the format knows but no layer implements fails the run by name
    (an op registered here with a spec and no implementation, so the check
    does not depend on which layers are built yet)."""
    from gliding_actors.scenario._ops import implementation

    register_op_spec(
        OpSpec(
            name="test.unbuilt",
            takes_agent=True,
            args_schema={"type": "object", "properties": {}, "additionalProperties": False},
            results={},
        ),
        replace=True,
    )
    assert implementation("test.unbuilt") is None
    path = write(tmp_path, GOOD + "  - {op: test.unbuilt, agent: pa}\n")
    assert main(["replay", str(path)]) == 1
    out = capsys.readouterr().out
    assert "'test.unbuilt' is part of format v1 but this build does not implement it yet" in out


class _Never:
    def receive(self, message: Any, ctx: Context) -> Any:
        ctx.defer_reply()
        return DEFERRED


def test_an_op_that_never_completes_fails_the_run_listing_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    register_op_spec(
        OpSpec(
            name="test.never",
            takes_agent=True,
            args_schema={"type": "object", "properties": {}, "additionalProperties": False},
            results={},
        ),
        replace=True,
    )

    @implements("test.never")
    def _never(world: ReplayWorld, step: Any) -> Any:
        rt = world.system.runtime
        try:
            ref = rt.lookup("never")
        except Exception:
            ref = rt.spawn("never", _Never)
        return ref.ask({"t": "wait"})

    path = write(tmp_path, GOOD + "  - {op: test.never, agent: pa}\n")
    assert main(["replay", str(path), "--timeout", "0.5"]) == 1
    out = capsys.readouterr().out
    assert "ops did not complete (hang): step 4 (test.never by pa, line 12)" in out
    assert main(["replay", str(path), "--timeout", "0.5", "--runtime", "threads"]) == 1


def test_record_writes_one_json_line_per_op(tmp_path: Path) -> None:
    out = tmp_path / "trace.jsonl"
    assert main(["replay", str(write(tmp_path, GOOD)), "--record", str(out)]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["op"] for line in lines] == ["subscribe", "publish", "publish", "inbox"]
    assert lines[-1]["result"]["messages"] in ([{"n": 1}, {"n": 2}], [{"n": 2}, {"n": 1}])


def test_threads_runtime_replays_the_same_file(tmp_path: Path) -> None:
    assert main(["replay", str(write(tmp_path, GOOD)), "--runtime", "threads", "--seeds", "0..2"]) == 0


def test_a_ray_address_without_the_ray_runtime_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(write(tmp_path, GOOD)), "--ray-address", "127.0.0.1:6379"]) == 2
    assert "--ray-address needs --runtime ray" in capsys.readouterr().err


def test_demo_scenario_passes_on_many_seeds_and_both_runtimes() -> None:
    assert main(["replay", str(DEMO), "--seeds", "0..49"]) == 0
    assert main(["replay", str(DEMO), "--runtime", "threads"]) == 0


def test_the_console_script_runs_the_demo() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gliding_actors.cli", "demo"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "demo summary" in done.stdout
    assert "passed" in done.stdout


def test_every_bundled_scenario_passes() -> None:
    files = sorted(str(p) for p in (REPO / "scenarios").rglob("*.yaml"))
    assert files
    assert main(["replay", *files, "--seeds", "0..9"]) == 0
