"""``gliding-actors bench l2``: the report has its figures, and they measure what they say.

No timing assertion (machines are shared and noisy): the suite runs once at
its smallest size (``--quick``) through the command line, and the tests check
the keys, that every latency is a positive number, and the evidence the suite
records alongside the timings — that each 100-dirty query really recalled 100
lines and saw their newest values, and that the 0-dirty queries had nothing
dirty to recall.
"""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

import pytest

from gliding_actors.bench import SUITES, load_suite
from gliding_actors.bench._l2 import DIRTY, _queries
from gliding_actors.cli import main
from gliding_actors.errors import InvalidInput
from gliding_actors.system import MemorySystem

LATENCIES = (
    "write_p50_us",
    "write_held_m_p50_us",
    "pykka_ask_p50_us",
    "coherent_query_p50_us_0_dirty",
    "coherent_query_p50_us_100_dirty",
    "raw_oxigraph_query_p50_us",
    "raw_oxigraph_confined_query_p50_us",
    "recall_p50_us_0_dirty",
)
RATIOS = (
    "write_rtts",
    "confinement_ratio",
    "coherent_query_overhead_ratio",
    "coherent_query_100_dirty_ratio",
)


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    """One quick run through the CLI, as a reader would rerun it."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["bench", "l2", "--json", "--quick"])
    assert code == 0
    parsed: dict[str, Any] = json.loads(out.getvalue())
    return parsed


def test_l2_suite_is_registered() -> None:
    assert "l2" in SUITES
    assert load_suite("l2").__module__ == "gliding_actors.bench._l2"


def test_l2_report_has_every_figure_as_a_positive_number(report: dict[str, Any]) -> None:
    assert report["suite"] == "l2"
    for key in LATENCIES + RATIOS:
        value = report[key]
        assert isinstance(value, float | int) and not isinstance(value, bool), key
        assert value > 0, key
    # The ratios are the ratios of the reported medians (up to rounding).
    raw = report["raw_oxigraph_query_p50_us"]
    assert report["coherent_query_overhead_ratio"] == pytest.approx(
        report["coherent_query_p50_us_0_dirty"] / raw, rel=0.01
    )
    assert report["coherent_query_100_dirty_ratio"] == pytest.approx(
        report["coherent_query_p50_us_100_dirty"] / raw, rel=0.01
    )
    assert report["command"] == "gliding-actors bench l2 --json --quick"


def test_l2_report_records_the_data_sizes(report: dict[str, Any]) -> None:
    assert report["nodes"] == 200
    assert report["rows"] == report["nodes"] // 2  # the open half
    assert report["quads"] == 5 * report["nodes"]  # type + four properties per node
    assert report["dirty_lines"] == DIRTY == 100
    assert report["rounds"] > 0 and report["writes"] > 0


def test_l2_each_dirty_query_really_recalled_every_dirty_line(report: dict[str, Any]) -> None:
    # Fewest lines seen going M -> S across one timed query: all 100, every round.
    assert report["recalled_lines_min_100_dirty"] == DIRTY
    # ... while the 0-dirty rounds started with nothing in M.
    assert report["dirty_lines_max_0_dirty"] == 0
    # Every query saw every row, and each 100-dirty query the newest revisions.
    assert report["coherent_results_ok"] is True


def test_l2_writes_measure_what_they_say(report: dict[str, Any]) -> None:
    # A new node is a write miss (the protocol ran); a rewrite of a line held
    # in M is served by the writer's own cache with no protocol message.
    assert report["write_messages_max"] >= 1
    assert report["write_held_m_messages_max"] == 0
    assert report["write_policies"] == ["write_back"]


def test_l2_bench_refuses_too_few_nodes_and_changes_nothing() -> None:
    with MemorySystem.open(runtime="threads") as memory:
        with pytest.raises(InvalidInput, match="at least 200 nodes"):
            _queries(memory, 2 * DIRTY - 1, rounds=1)
        assert memory.agents() == {}
        assert memory.graph.quad_count() == 0
