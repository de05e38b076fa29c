"""bench team on tiny sizes: every figure is computed from a real threads run, and the plots are wired."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from gliding_actors.bench import SUITES, load_suite
from gliding_actors.bench._team import ROLE_ORDER, _run_size_in_child, role_of, run_size
from gliding_actors.errors import InvalidInput


def test_roles_follow_the_pdca_mix() -> None:
    assert [role_of(i) for i in range(7)] == ["DA", "CA", "PA", "AA", "SA", "DA", "CA"]
    assert set(ROLE_ORDER) == {"SA", "PA", "DA", "CA", "AA"}


def test_one_size_reports_figures_that_add_up() -> None:
    figures = run_size(5, 2)
    assert figures["roles"] == {"DA": 1, "CA": 1, "PA": 1, "AA": 1, "SA": 1}
    latency = figures["latency"]
    # each role's cycle, twice: DA 7 ops, CA 6, PA 4, AA 6, SA 7
    assert figures["ops"] == sum(op["count"] for op in latency.values()) == 2 * (7 + 6 + 4 + 6 + 7)
    assert latency["context"]["count"] == latency["turn"]["count"] == 10
    assert latency["lock"]["count"] == latency["unlock"]["count"] == 2
    assert all(0 < op["p50_us"] <= op["p99_us"] for op in latency.values())
    # wall_s is rounded to the millisecond: the rate lies within what that rounding allows
    wall = figures["wall_s"]
    assert figures["ops"] / (wall + 0.0005) - 0.05 <= figures["throughput_ops_s"] <= figures["ops"] / (wall - 0.0005) + 0.05
    # CA and AA read lines DA and CA keep rewriting: misses, so protocol messages
    assert figures["messages"] > 0
    assert figures["messages_per_op"] == round(figures["messages"] / figures["ops"], 2)
    assert figures["memory_per_agent_kib"] == round(figures["rss_delta_bytes"] / 5 / 1024, 1)


def test_suite_runs_each_size_in_its_own_process_and_saves_the_figures(tmp_path: Path) -> None:
    assert SUITES["team"] == "gliding_actors.bench._team"
    report = load_suite("team")(quick=True, sizes=(1, 2), total_cycles=2, out_dir=tmp_path)
    assert [s["agents"] for s in report["sizes"]] == [1, 2]
    assert report["sizes"][0]["roles"]["DA"] == 1 and report["sizes"][1]["roles"]["CA"] == 1
    assert report["sizes"][0]["cycles_per_agent"] == 3  # at least MIN_CYCLES each
    assert report["peak_throughput_ops_s"] == max(s["throughput_ops_s"] for s in report["sizes"])
    one, two = report["sizes"]
    assert report["memory_marginal_kib_per_agent"] == round((two["rss_delta_bytes"] - one["rss_delta_bytes"]) / 1024, 1)
    saved = json.loads((tmp_path / "team.json").read_text(encoding="utf-8"))
    assert saved["sizes"] == report["sizes"]
    if importlib.util.find_spec("matplotlib") is None:
        assert report["plots"] == [] and "gliding-actors[bench]" in report["plots_missing"]
    else:
        assert sorted(Path(p).name for p in report["plots"]) == [
            "team_latency.png", "team_memory.png", "team_messages.png", "team_throughput.png"]
        assert all(Path(p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in report["plots"])


def test_bad_sizes_are_refused_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput):
        run_size(0, 1)
    with pytest.raises(InvalidInput):
        load_suite("team")(sizes=(2, 0), out_dir=tmp_path)
    with pytest.raises(InvalidInput):
        load_suite("team")(sizes=(), out_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []  # no figures file written


def test_a_failing_child_is_reported_not_swallowed() -> None:
    with pytest.raises(RuntimeError, match="the child failed"):
        _run_size_in_child(0, 1)  # run_size refuses n=0 in the child
