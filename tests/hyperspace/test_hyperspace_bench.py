"""``gliding-actors bench hyperspace --quick``: every figure is reported and consistent (no timing targets)."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from gliding_actors.bench import SUITES
from gliding_actors.cli import main


@pytest.mark.bench
def test_bench_hyperspace_quick_reports_every_figure() -> None:
    assert SUITES["hyperspace"] == "gliding_actors.bench._hyperspace"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["bench", "hyperspace", "--json", "--quick"])
    assert code == 0
    report = json.loads(out.getvalue())
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
