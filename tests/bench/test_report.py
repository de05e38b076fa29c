"""The BENCHMARKS.md renderer: targets judged honestly, skipped and failed suites shown, images real.

The fixture report is small and hand-made, so each verdict in it is known in
advance: a figure within its target must render ``yes``, one outside it
``**no**``, a suite that raised ``error``, one that could not run ``skipped``,
one absent ``not in this run`` — and every declared target must appear in the
summary whatever happened to its suite.
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gliding_actors.bench._all import ENTRIES, FORMAT, REPO_ROOT
from gliding_actors.bench._report import image_links, judge, load_report, lookup, render, write_docs
from gliding_actors.bench._targets import FIGURES, SECTIONS, TARGETS, Target
from gliding_actors.cli import main
from gliding_actors.errors import InvalidInput

DOC = REPO_ROOT / "docs" / "BENCHMARKS.md"


def _report(**suites: Any) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "command": "gliding-actors bench all --json --out fixture.json",
        "started_at": "2026-12-01T10:00:00+00:00",
        "finished_at": "2026-12-01T10:05:00+00:00",
        "wall_s": 300.0,
        "quick": False,
        "only": None,
        "machine": {
            "cpu_count": 2, "cpu_affinity": 2, "cpu_model": "Fixture CPU 9000", "memory_total_gib": 24.0,
            "memory_available_gib": 20.0, "python": "3.11.7", "python_implementation": "CPython",
            "platform": "Linux-fixture", "load_average_start": [1.0, 0.5, 0.25], "load_average_end": [2.0, 1.0, 0.5],
            "packages": {"pykka": "4.5.0", "matplotlib": None}, "git": {"commit": "a" * 40, "modified_files": 0},
        },
        "suites": suites,
    }


def _ran(result: dict[str, Any], wall: float = 1.5) -> dict[str, Any]:
    return {"suite": "x", "quick": False, "options": {}, "wall_s": wall, "load_average_after": [1, 1, 1],
            "result": result}


FIXTURE = _report(
    runtime=_ran({"ask_rtt_p50_us": 40.0, "pykka_ask_rtt_p50_us": 36.0, "ask_rtt_ratio": 1.111,
                  "sim_msgs_per_s": 90_000}),
    coherence=_ran({"hit_p50_us": 1.0, "locked_dict_p50_us": 0.5, "hit_ratio": 2.0,
                    "msgs_per_write": {"1": {"messages": 3}, "4": {"messages": 11}, "16": {"messages": 34}},
                    "throughput_ops_per_s": 2000, "lock_baseline_ops_per_s": 50_000, "throughput_vs_lock": 0.04}),
    hyperspace=_ran({"real": {"recall_at_10": 0.97}, "poincare_map": 0.6, "gensim_map": 0.7}),
    l0={"suite": "l0", "quick": False, "options": {}, "wall_s": 0.2, "error": "RuntimeError: disk on fire",
        "traceback": "Traceback (most recent call last):\nRuntimeError: disk on fire\n"},
    reliability={"skipped": "no fork on this platform"},
)


def _glance(text: str) -> dict[tuple[str, str], str]:
    """Summary rows as (suite, target key) -> met cell."""
    section = text.split("## Targets at a glance", 1)[1].split("\n## ", 1)[0]
    rows: dict[tuple[str, str], str] = {}
    for line in section.splitlines():
        found = re.match(r"\| ([\w-]+) \| .*\(`([^`]+)`\) \| .* \| ([^|]+) \|$", line)
        if found:
            assert (found.group(1), found.group(2)) not in rows, line
            rows[(found.group(1), found.group(2))] = found.group(3).strip()
    return rows


def _section(text: str, title: str) -> str:
    return text.split(f"\n## {title} — ", 1)[1].split("\n## ", 1)[0]


def test_targets_are_judged_by_their_own_comparison() -> None:
    glance = _glance(render(FIXTURE, docs_path=DOC))
    assert glance[("runtime", "ask_rtt_ratio")] == "yes"  # 1.111 <= 1.3
    assert glance[("runtime", "sim_msgs_per_s")] == "**no**"  # 90,000 < 100,000
    assert glance[("coherence", "hit_ratio")] == "yes"
    assert glance[("coherence", "msgs_per_write.1.messages")] == "yes"  # 3 <= 2k+2 = 4
    assert glance[("coherence", "msgs_per_write.4.messages")] == "**no**"  # 11 > 10
    assert glance[("coherence", "msgs_per_write.16.messages")] == "yes"  # 34 <= 34: the bound itself is met
    assert glance[("coherence", "throughput_vs_lock")] == "**no**"
    assert glance[("coherence", "miss_rtts")] == "not measured"  # the suite ran, the figure is absent
    assert glance[("hyperspace", "real.recall_at_10")] == "yes"  # a nested figure, by its dotted key
    assert glance[("hyperspace", "poincare_map")] == "**no**"  # 0.6 < gensim's 0.7, a target against a same-run figure


def test_every_target_of_every_issue_is_in_the_summary_whatever_its_suite_did() -> None:
    text = render(FIXTURE, docs_path=DOC)
    glance = _glance(text)
    expected = {(entry, key) for entry, targets in TARGETS.items() for key in targets}
    assert set(glance) == expected
    assert glance[("l0", "put_ratio")] == "not measured (error)"
    assert glance[("reliability", "lost_writes")] == "not measured (skipped)"
    assert glance[("l3", "pool_speedup")] == "not measured (not in this run)"
    assert glance[("replay", "sim.events_per_s")] == "not measured (not in this run)"


def test_errored_skipped_and_missing_suites_are_shown_as_such() -> None:
    text = render(FIXTURE, docs_path=DOC)
    assert "| l0 | **error**: RuntimeError: disk on fire | full | 0.2 s |" in text
    assert "RuntimeError: disk on fire" in _section(text, "l0")
    assert "| reliability | skipped: no fork on this platform | — | — |" in text
    assert "*Skipped: no fork on this platform*" in _section(text, "reliability")
    assert "| l1 | skipped: not in this run | — | — |" in text
    assert "*Skipped: not in this run.*" in _section(text, "l1")
    # a suite that did not produce figures still lists its targets, unmeasured
    assert ("| put, ratio to raw plyvel write_batch + msgpack | — | ≥ 0.6 (two tags per node) | not measured |"
            in _section(text, "l0"))


def test_a_suite_table_puts_each_figure_beside_its_same_run_baseline_and_ratio() -> None:
    runtime = _section(render(FIXTURE, docs_path=DOC), "runtime")
    assert ("| ask round trip p50 (threads runtime, echo actor) | 40 µs | raw Pykka ask to an echo actor: 36 µs"
            " | 1.11 | ≤ 1.3 | yes |") in runtime
    assert "| simulator throughput (ping-pong + fan-out, log hash on) | 90,000 msgs/s | — | — | ≥ 100,000 | **no** |" in runtime
    coherence = _section(render(FIXTURE, docs_path=DOC), "coherence")
    # no ratio of its own in the result: value / baseline, computed
    assert "| 16 threads, 90 % reads / 10 % writes, 1,000 IRIs | 2,000 ops/s" in coherence


def test_the_header_records_the_machine_and_the_exact_command() -> None:
    text = render(FIXTURE, docs_path=DOC, report_path=REPO_ROOT / "docs" / "benchmarks.json")
    head = text.split("## Targets at a glance", 1)[0]
    assert "`gliding-actors bench all --json --out fixture.json`" in head
    assert "Fixture CPU 9000; 2 cores (2 usable by the process); 24 GiB memory" in head
    assert "1 / 0.5 / 0.25 at the start, 2 / 1 / 0.5 at the end" in head
    assert f"`{'a' * 12}`" in head and "not installed: matplotlib" in head
    assert "; at the end" not in head  # the tree did not change during the run
    moved = {**FIXTURE, "machine": {**FIXTURE["machine"], "git_end": {"commit": "b" * 40, "modified_files": 2}}}
    assert f"; at the end `{'b' * 12}` with 2 modified files" in render(moved, docs_path=DOC)
    assert "gliding-actors bench render docs/benchmarks.json" in head
    assert "(PROFILE.md)" in head  # the profile page, linked from the intro note


def test_notes_are_included_per_suite(tmp_path: Path) -> None:
    (tmp_path / "runtime.md").write_text("Why the simulator is slow here: a fixture note.\n", encoding="utf-8")
    text = render(FIXTURE, docs_path=DOC, notes_dir=tmp_path)
    assert "Why the simulator is slow here: a fixture note." in _section(text, "runtime")
    assert "fixture note" not in _section(text, "coherence")


def test_declarations_cover_every_entry_and_every_target_has_a_row() -> None:
    names = [entry.name for entry in ENTRIES]
    assert set(SECTIONS) == set(TARGETS) == set(FIGURES) == set(names)
    for entry, targets in TARGETS.items():
        keys = {k for figure in FIGURES[entry] for k in (figure.key, figure.ratio) if k}
        assert set(targets) <= keys, entry


@settings(max_examples=60, deadline=None)
@given(value=st.floats(allow_nan=False, allow_infinity=False, width=32),
       bound=st.floats(allow_nan=False, allow_infinity=False, width=32))
def test_judge_is_the_plain_comparison(value: float, bound: float) -> None:
    assert judge(Target(">=", bound), value, {}) is (value >= bound)
    assert judge(Target("<=", bound), value, {}) is (value <= bound)
    assert judge(Target(">=", None, ref="other"), value, {"other": bound}) is (value >= bound)


def test_judge_says_not_measured_rather_than_guessing() -> None:
    assert judge(Target(">=", 1), None, {}) is None
    assert judge(Target(">=", 1), float("nan"), {}) is None
    assert judge(Target(">=", 1), "fast", {}) is None
    assert judge(Target(">=", None, ref="gensim_map"), 0.5, {"gensim_map": None}) is None  # gensim absent
    assert judge(Target("==", True), True, {}) is True
    assert judge(Target("==", True), 1, {}) is False  # 1 is not the boolean the issue asks for
    assert judge(Target("==", 0), 0, {}) is True


def test_lookup_follows_dotted_paths_and_alternatives() -> None:
    result = {"budgets": {"1000": {"any": 0.8}}, "invalidate_us_10000": 2.0}
    assert lookup(result, "budgets.1000.any") == 0.8
    assert lookup(result, "invalidate_us_100000|invalidate_us_10000") == 2.0
    assert lookup(result, "budgets.2000.any") is not None  # the missing marker, not a value
    assert judge(Target(">=", 0.5), lookup(result, "budgets.2000.any"), result) is None


@pytest.mark.parametrize(
    "bad",
    [[], {"format": 99}, {**FIXTURE, "suites": []}, {**FIXTURE, "suites": {"l0": {"result": {}, "error": "x"}}},
     {**FIXTURE, "machine": None}],
)
def test_a_report_that_is_not_one_is_refused_and_the_page_is_left_as_it_was(tmp_path: Path, bad: Any) -> None:
    page = tmp_path / "BENCHMARKS.md"
    page.write_text("the old page\n", encoding="utf-8")
    with pytest.raises(InvalidInput):
        write_docs(bad, page)
    assert page.read_text(encoding="utf-8") == "the old page\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["BENCHMARKS.md"]


def test_bench_render_rebuilds_the_page_from_a_saved_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(FIXTURE), encoding="utf-8")
    page = tmp_path / "out" / "BENCHMARKS.md"
    assert main(["bench", "render", str(saved), "--docs", str(page)]) == 0
    assert page.read_text(encoding="utf-8") == render(load_report(saved), docs_path=page, report_path=saved)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    before = page.read_bytes()
    assert main(["bench", "render", str(broken), "--docs", str(page)]) == 2
    assert "broken.json:1:2: not JSON" in capsys.readouterr().err
    assert page.read_bytes() == before
    assert main(["bench", "render", "--docs", str(page)]) == 2  # no report given


def _is_png(path: Path) -> bool:
    """Signature, IHDR first, every chunk's CRC right, IEND last: a PNG a viewer will open, not just a name."""
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return False
    at, kinds = 8, []
    while at + 12 <= len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length : at + 12 + length])
        if zlib.crc32(kind + body) != crc:
            return False
        kinds.append(kind)
        at += 12 + length
    return bool(kinds) and kinds[0] == b"IHDR" and kinds[-1] == b"IEND" and b"IDAT" in kinds


def test_every_image_the_benchmarks_page_links_exists_and_is_a_valid_png() -> None:
    links = image_links(DOC.read_text(encoding="utf-8"))
    assert {Path(link).name for link in links} >= {"team_throughput.png", "team_latency.png", "team_messages.png",
                                                    "team_memory.png"}
    for link in links:
        assert _is_png(DOC.parent / link), link


def test_team_plots_are_linked_relative_to_wherever_the_page_is_written(tmp_path: Path) -> None:
    team = _ran({"sizes": [{"agents": 1, "roles": {"DA": 1}, "ops": 10, "throughput_ops_s": 100.0,
                            "messages_per_op": 0.5, "hit_rate": 0.0, "memory_per_agent_kib": 10.0,
                            "latency": {"context": {"count": 2, "p50_us": 1500.0, "p99_us": 3000.0}}}],
                 "peak_throughput_ops_s": 100.0, "peak_at_agents": 1, "median_messages_per_op": 0.5})
    page = tmp_path / "deep" / "BENCHMARKS.md"
    write_docs(_report(team=team), page)
    text = page.read_text(encoding="utf-8")
    links = image_links(text)
    assert links, "the team section embeds its plots"
    for link in links:
        assert _is_png(page.parent / link), link
    assert "| 1 | 1/0/0/0/0 | 10 | 100 | 0.5 | — | 1.5 / 3 |" in text


def test_the_png_check_can_fail(tmp_path: Path) -> None:
    real = REPO_ROOT / "docs" / "img" / "team_throughput.png"
    broken = tmp_path / "broken.png"
    data = bytearray(real.read_bytes())
    data[40] ^= 0xFF  # one flipped byte inside a chunk
    broken.write_bytes(bytes(data))
    assert _is_png(real) and not _is_png(broken)
