"""``bench agents``: a write beside idle agents, timed against the writer alone in the same process."""

from __future__ import annotations

import json

import pytest

from gliding_actors.bench import SUITES, _agents, load_suite
from gliding_actors.cli import main


def test_the_suite_reports_both_medians_and_their_ratio(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert SUITES["agents"] == "gliding_actors.bench._agents" and load_suite("agents") is _agents.run
    monkeypatch.setattr(_agents, "AGENTS", (6, 6))
    monkeypatch.setattr(_agents, "SLICES", 2)
    monkeypatch.setattr(_agents, "PER_SLICE", 5)
    assert main(["bench", "agents", "--quick", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["agents"] == 6 and report["writes_per_memory"] == 10
    one, many = report["write_p50_ms_1"], report["write_p50_ms_6"]
    assert one > 0 and many > 0
    assert report["write_p50_ratio_6_vs_1"] == pytest.approx(many / one, rel=0.01)
