"""``gliding-actors bench l3``: the report has its figures, measured on what they claim.

No timing assertion (shared, noisy machines): the suite runs once at its
smallest size through the command line, and the test checks the keys, that
every figure is a positive number, and that the ratios are the ratios of the
figures reported beside them.
"""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from gliding_actors.bench import SUITES
from gliding_actors.cli import main


@pytest.mark.bench
def test_bench_l3_quick_reports_every_figure() -> None:
    assert SUITES["l3"] == "gliding_actors.bench._l3"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["bench", "l3", "--json", "--quick"])
    assert code == 0
    report = json.loads(out.getvalue())
    for key in ("cold_p50_ms", "cached_p50_us", "hit_vs_cold", "invalidate_flatness", "pool_speedup",
                "invalidate_us_100", "pool_throughput_1_per_s", "pool_throughput_2_per_s"):
        assert isinstance(report[key], (int, float)) and report[key] > 0, key
    assert report["counter"] == "estimate-v1"
    assert report["hit_vs_cold"] == pytest.approx(report["cold_p50_ms"] * 1000 / report["cached_p50_us"], rel=0.01)
    small, large = report["invalidate_us"]["100"], report["invalidate_us"]["10000"]
    assert report["invalidate_flatness"] == pytest.approx(large / small, rel=0.01)
    assert report["pool_speedup"] == pytest.approx(
        report["pool_throughput_2_per_s"] / report["pool_throughput_1_per_s"], rel=0.02)
    assert report["cold_lines_read"] > 10  # the cold figure gathered a real task
