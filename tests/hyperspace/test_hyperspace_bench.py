"""``gliding-actors bench hyperspace --quick``: every figure is reported and consistent (no timing targets)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from gliding_actors.bench import SUITES
from gliding_actors.cli import main
from gliding_actors.config import HyperspaceConfig


@pytest.mark.bench
def test_bench_hyperspace_quick_reports_every_figure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert SUITES["hyperspace"] == "gliding_actors.bench._hyperspace"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # the real corpus' vectors: never in the user's cache
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["bench", "hyperspace", "--json", "--quick", "--embedder", "hash"])
    assert code == 0
    report = json.loads(out.getvalue())
    real = report["real"]
    assert real["corpus_size"] == 2000 and real["queries"] == 50 and real["embedder"] == "hash"
    assert real["embedded_now"] == 2050 and (tmp_path / "gliding-actors" / "bench-hyperspace").is_dir()
    assert 0.0 < real["recall_at_10"] <= 1.0 and real["qps_vs_exact"] > 0
    assert real["qps_vs_exact"] == pytest.approx(real["exact_ms"] / real["index_ms"], rel=0.05)
    ours = {point["setting"]: point["recall_at_10"] for point in real["curve"]}
    assert ours[HyperspaceConfig().hnsw_expansion_search] == real["recall_at_10"]  # the default is on the curve
    assert [ours[s] for s in sorted(ours)] == sorted(ours.values())  # a wider search never finds less
    assert max(ours.values()) >= 0.99  # the widest graph search reaches the exact answer
    for name in ("hnswlib", "usearch"):
        peer = real["peers"][name]
        if "missing" in peer:
            continue  # the bench extra is not installed: said, not hidden
        assert peer["recall_at_setting"] is None or peer["recall_at_setting"] >= real["matched_recall"]
        assert peer["qps_at_recall"] is None or peer["qps_at_recall"] > 0
    assert "plot" not in real  # a quick run draws nothing into the docs
    assert report["vectors"] == 5000 and report["dim"] == 384
    for part in (report, report["structured"]):
        for key in ("recall_at_10", "filtered_recall_at_10"):
            assert 0.0 <= part[key] <= 1.0
        for key in ("qps_vs_exact", "exact_ms", "index_ms", "build_s"):
            assert part[key] > 0
        assert part["qps_vs_exact"] == pytest.approx(part["exact_ms"] / part["index_ms"], rel=0.05)
        # an allow-list of 10% is answered exactly: its recall is exact by construction
        assert part["filtered_recall_at_10"] == 1.0
        recalls = [row["recall_at_10"] for row in part["sweep"]]
        assert recalls == sorted(recalls)  # a wider search never finds less
    assert "poincare_map" in report and "gensim_map" in report or "poincare" in report
