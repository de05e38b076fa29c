"""bench profile on a tiny team workload: a real profile of real layers, the hot spots named, the doc written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gliding_actors.bench import SUITES, load_suite
from gliding_actors.bench._profile import VERDICTS, render, setup_ops
from gliding_actors.errors import InvalidInput


def test_the_suite_profiles_the_team_workload_and_writes_the_hot_spots(tmp_path: Path) -> None:
    assert SUITES["profile"] == "gliding_actors.bench._profile"
    out = tmp_path / "PROFILE.md"
    report = load_suite("profile")(quick=True, agents=5, ops=90, out=out, top=8)
    for key in ("suite", "agents", "ops", "ops_per_s", "profiler", "profiled_wall_s", "hot_spots",
                "before_s", "after_s", "structure_fix_speedup", "machine", "written"):
        assert key in report, key
    assert report["agents"] == 5 and report["ops"] == 90
    assert report["profiler"].startswith(("pyinstrument", "cProfile"))
    spots = report["hot_spots"]
    assert len(spots) == 8
    owns = [spot["own_share"] for spot in spots]
    assert owns == sorted(owns, reverse=True) and 0 < owns[0] <= 1  # ranked by own time, shares of the run
    for spot in spots:
        assert spot["cum_share"] >= spot["own_share"] - 1e-9
        assert spot["verdict"] in ("fixed", "explained", "not yet looked at")
        assert spot["where"] == "built-in" or ":" in spot["where"]
    # the workload ran through the memory's own layers: some hot spot is in the package, with a verdict
    ours = [s for s in spots if s["where"].startswith("gliding_actors/")]
    assert ours
    assert any(s["verdict"] != "not yet looked at" for s in ours)
    text = out.read_text(encoding="utf-8")
    for spot in spots:  # the doc names every hot spot the profile found, where it is and its verdict
        assert f"`{spot['function']}`" in text and f"`{spot['where']}`" in text
    assert report["profiler"] in text
    assert report["before_s"] > 0 and report["after_s"] > 0
    # the ratio of the two unrounded wall times; the rounded ones shown beside it give it within rounding
    assert report["structure_fix_speedup"] == pytest.approx(report["before_s"] / report["after_s"], rel=0.02, abs=0.01)
    json.dumps(report)  # the CLI prints it as JSON


def test_every_verdict_names_a_kind_and_a_reason() -> None:
    for (suffix, name), (verdict, why) in VERDICTS.items():
        assert (suffix.endswith(".py") or suffix in ("~", "<built-in>")) and name  # ours, or a built-in (cProfile: ~)
        assert verdict in ("fixed", "explained") and len(why) > 20


def test_render_is_the_report_as_a_table() -> None:
    report = {"agents": 2, "ops": 50, "ops_per_s": 10.0, "profiler": "cProfile", "profiled_wall_s": 1.0,
              "machine": "m", "before_s": 2.0, "after_s": 1.0, "structure_fix_speedup": 2.0,
              "hot_spots": [{"function": "f", "where": "gliding_actors/x.py:3", "calls": 7, "own_share": 0.5,
                             "cum_share": 0.75, "verdict": "explained", "why": "because"}]}
    text = render(report)
    assert "| 1 | `f` | `gliding_actors/x.py:3` | 7 | 50.0 % | 75.0 % | explained | because |" in text
    assert "**2.0×**" in text


def test_bad_sizes_are_refused_before_anything_runs(tmp_path: Path) -> None:
    out = tmp_path / "never.md"
    run = load_suite("profile")
    for bad in ({"agents": 0}, {"ops": 3}, {"ops": setup_ops(5)}, {"top": 0}, {"agents": True}, {"agents": 1000}):
        with pytest.raises(InvalidInput):
            run(quick=True, out=out, **bad)
    assert not out.exists()


def test_pyinstrument_rows_are_real_functions_whose_own_times_add_up() -> None:
    """pyinstrument keeps self time in synthetic "[self]" children; counted as a
    function of their own they once made one row of 100 % own time."""
    module = pytest.importorskip("pyinstrument")
    from gliding_actors.bench._profile import _rows_pyinstrument

    _wall, rows = _rows_pyinstrument(module, 3, 60)
    assert rows and not any(row["function"].startswith("[") for row in rows)
    # the self times add up to the whole run, spread over the functions that spent them (the
    # bug made one synthetic row of 100 %); a native call such as the embedder's may dominate
    assert sum(row["own_share"] for row in rows) == pytest.approx(1.0, abs=1e-6)
    assert sum(1 for row in rows if row["own_share"] > 0.001) >= 5
