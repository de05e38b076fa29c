"""``gliding-actors bench l1``: the report has its figures, and they measure what they say.

One quick run (300 turns) through the command line. No timing assertion
(shared, noisy machines); the token figures are deterministic for a given
counter, so the savings target is checked, as is the evidence the suite
records: both paths ended with the same chain, evicted turns reloaded in full.
"""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

import pytest

from gliding_actors.bench import SUITES, load_suite
from gliding_actors.cli import main
from gliding_actors.l1 import default_counter


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["bench", "l1", "--json", "--quick"]) == 0
    parsed: dict[str, Any] = json.loads(out.getvalue())
    return parsed


def test_l1_suite_is_registered() -> None:
    assert "l1" in SUITES
    assert load_suite("l1").__module__ == "gliding_actors.bench._l1"


def test_the_report_names_its_counter_and_meets_the_savings_target(report: dict[str, Any]) -> None:
    assert report["counter"] == default_counter().name
    assert report["turns"] == 300 and report["budget"] == 2000
    assert 0 < report["tokens_in_chain"] <= report["budget"]
    assert report["tokens_full_history"] > 10 * report["tokens_in_chain"]
    assert report["savings"] == pytest.approx(1 - report["tokens_in_chain"] / report["tokens_full_history"], abs=1e-4)
    assert report["savings"] >= 0.9
    assert report["chain_turns"] + report["evicted"] == report["turns"]
    # realistic sizes: a summary is a small fraction of its turn
    assert report["avg_summary_tokens"] * 5 < report["avg_thought_tokens"] < report["avg_content_tokens"]


def test_the_evidence_holds_and_latencies_are_positive(report: dict[str, Any]) -> None:
    assert report["chains_agree"] is True and report["reloads_ok"] is True
    for key in ("add_turn_p50_us", "add_turn_p99_us", "agent_turn_p50_us", "reload_p50_us"):
        assert isinstance(report[key], float) and report[key] > 0, key
