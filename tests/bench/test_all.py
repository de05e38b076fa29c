"""``bench all``: one report for every suite, the machine it ran on, failures recorded and the run going on.

Only the runtime suite runs for real here (quick, a couple of seconds); the
full run is ``gliding-actors bench all --json --out docs/benchmarks.json``.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gliding_actors.bench import SUITES, _all
from gliding_actors.bench._all import ENTRIES, Entry, machine_info, parse_only, run_all
from gliding_actors.cli import main
from gliding_actors.errors import InvalidInput


def test_bench_all_only_runtime_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, docs = tmp_path / "report.json", tmp_path / "docs" / "BENCHMARKS.md"
    argv = ["bench", "all", "--only", "runtime", "--quick", "--json", "--out", str(out), "--docs", str(docs)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    report = json.loads(out.read_text(encoding="utf-8"))
    assert json.loads(captured.out) == report  # --json prints the very report it saved
    assert report["command"] == "gliding-actors " + " ".join(argv)
    assert report["quick"] is True and report["only"] == ["runtime"] and report["errors"] == []
    assert list(report["suites"]) == ["runtime"]
    runtime = report["suites"]["runtime"]
    assert runtime["quick"] is True and runtime["wall_s"] > 0 and len(runtime["load_average_after"]) == 3
    result = runtime["result"]
    assert result["ask_rtt_ratio"] == pytest.approx(result["ask_rtt_p50_us"] / result["pykka_ask_rtt_p50_us"], rel=0.01)
    assert report["wall_s"] >= runtime["wall_s"]
    assert re.search(r"\[1/1\] runtime\s+done in \d+\.\d s", captured.err)
    page = docs.read_text(encoding="utf-8")
    assert "| runtime | ran | quick |" in page
    assert "| l0 | skipped: not in this run | — | — |" in page
    assert f"{result['ask_rtt_ratio']:.3g} | ≤ 1.3 |" in page  # the page shows the report's figure


def test_machine_info_has_what_a_reader_needs() -> None:
    info = machine_info()
    assert info["cpu_count"] >= 1 and 1 <= info["cpu_affinity"] <= info["cpu_count"]
    assert info["memory_total_gib"] > 0 and 0 < info["memory_available_gib"] <= info["memory_total_gib"]
    assert info["cpu_model"] and info["python"].count(".") == 2 and info["platform"]
    assert len(info["load_average_start"]) == 3
    packages = info["packages"]
    assert packages["gliding-actors"] is not None
    for name in ("pykka", "plyvel", "pyoxigraph", "msgpack", "numpy"):  # main requirements, from our metadata
        assert packages[name], name
    assert "ray" in packages and "matplotlib" in packages  # optional ones, present or None
    git = info["git"]
    assert git["commit"] is None or re.fullmatch(r"[0-9a-f]{40}", git["commit"])


def test_machine_info_reads_proc_as_written(tmp_path: Path) -> None:
    (tmp_path / "meminfo").write_text("MemTotal:       25165824 kB\nMemFree: 1 kB\nMemAvailable:   12582912 kB\n")
    (tmp_path / "cpuinfo").write_text("processor\t: 0\nmodel name\t: Example CPU @ 3.0GHz\nflags\t: fpu\n")
    info = machine_info(loadavg=lambda: (3.14159, 2.0, 1.0), proc=tmp_path, root=tmp_path)
    assert info["memory_total_gib"] == 24.0 and info["memory_available_gib"] == 12.0
    assert info["cpu_model"] == "Example CPU @ 3.0GHz"
    assert info["load_average_start"] == [3.14, 2.0, 1.0]
    assert info["git"]["commit"] is None and "not a git checkout" in info["git"]["reason"]


def test_a_failing_suite_is_recorded_and_the_run_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    # a real suite called wrongly raises TypeError before measuring anything: a genuine failure
    broken = Entry("broken", "runtime", options={"no_such_option": 1})
    skipped = Entry("absent", "absent", skip_reason=lambda _options: "not on this machine")
    unregistered = Entry("ghost", "ghost-suite")
    ticks = iter(range(100))
    report = run_all(
        entries=(broken, skipped, unregistered),
        timer=lambda: float(next(ticks)),
        now=lambda: datetime(2026, 12, 1, 12, 0, tzinfo=UTC),
        loadavg=lambda: (0.5, 0.25, 0.125),
        command="gliding-actors bench all --fixture",
    )
    record = report["suites"]["broken"]
    assert record["error"].startswith("TypeError:") and "no_such_option" in record["error"]
    assert "Traceback" in record["traceback"] and "result" not in record
    assert record["wall_s"] == 1.0 and record["load_average_after"] == [0.5, 0.25, 0.12]
    assert report["suites"]["absent"] == {"skipped": "not on this machine"}
    assert "ghost-suite" in report["suites"]["ghost"]["skipped"]
    assert report["errors"] == ["broken"]
    assert report["started_at"] == report["finished_at"] == "2026-12-01T12:00:00+00:00"
    assert report["machine"]["load_average_start"] == report["machine"]["load_average_end"] == [0.5, 0.25, 0.12]
    assert "commit" in report["machine"]["git_end"]  # the tree can change under a long run: checked again at the end
    json.dumps(report)  # the report is JSON as it stands


def test_the_cli_exits_1_when_a_suite_failed_and_still_writes_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_all, "ENTRIES", (Entry("runtime", "runtime", options={"no_such_option": 1}),))
    out = tmp_path / "report.json"
    assert main(["bench", "all", "--only", "runtime", "--out", str(out)]) == 1
    report: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    assert report["errors"] == ["runtime"] and "TypeError" in report["suites"]["runtime"]["error"]


def test_unknown_only_names_are_refused_before_anything_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report.json"
    assert main(["bench", "all", "--only", "runtime,warp-drive", "--out", str(out)]) == 2
    assert "unknown: warp-drive" in capsys.readouterr().err
    assert not out.exists()
    with pytest.raises(InvalidInput):
        parse_only(" , ")
    assert parse_only("replay,runtime") == ["runtime", "replay"]  # run order, not typing order


def test_every_benchmark_suite_is_an_entry_and_reliability_is_always_quick() -> None:
    names = [entry.name for entry in ENTRIES]
    for suite in ("runtime", "l0", "l1", "l2", "l3", "coherence", "hyperspace", "context", "reliability", "tokens",
                  "team", "agents", "replay", "scaling"):
        assert suite in names, suite
    assert {entry.name for entry in ENTRIES if entry.always_quick} == {"reliability"}


def test_entries_that_cannot_run_here_say_why(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delitem(SUITES, "scaling", raising=False)
    report = run_all(only=["context", "context-hash", "scaling"], options={"data": str(tmp_path / "none.json")})
    suites = report["suites"]
    assert "no LoCoMo data at" in suites["context"]["skipped"] and "none.json" in suites["context"]["skipped"]
    assert "no LoCoMo data at" in suites["context-hash"]["skipped"]
    assert "no 'scaling' suite is registered" in suites["scaling"]["skipped"]
    assert report["errors"] == []


def test_context_hash_is_skipped_when_the_context_entry_already_uses_hash(tmp_path: Path) -> None:
    data = tmp_path / "locomo.json"
    data.write_text("[]", encoding="utf-8")
    report = run_all(only=["context-hash"], options={"data": str(data), "embedder": "hash"})
    assert report["suites"]["context-hash"] == {"skipped": "the context entry already runs with --embedder hash"}
