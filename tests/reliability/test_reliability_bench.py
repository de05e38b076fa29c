"""``gliding-actors bench reliability``: the suite runs every harness and prints the issue's figures.

The real sizes take minutes (docs/RELIABILITY.md has the figures); here the
sizes are shrunk so the wiring — every harness called, every headline figure
present and of the right kind, ``ok`` computed from them — is checked in
seconds.
"""

from __future__ import annotations

import json

import pytest

from gliding_actors.bench import SUITES, load_suite
from gliding_actors.cli import main

HEADLINE = {
    "kills": int,
    "lost_writes": int,
    "reused_versions": int,
    "faults_injected": int,
    "invariant_violations": int,
    "fuzz_inputs": int,
    "untyped_errors": int,
    "linearizable": bool,
}


def test_the_suite_is_registered() -> None:
    assert SUITES["reliability"] == "gliding_actors.bench._reliability"


def test_bench_reliability_prints_every_headline_figure(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from gliding_actors.bench import _reliability as suite

    monkeypatch.setattr(suite, "KILLS", (2, 2))
    monkeypatch.setattr(suite, "FAULT_SEEDS", (2, 2))
    monkeypatch.setattr(suite, "FAULT_STEPS", (150, 150))
    monkeypatch.setattr(suite, "FUZZ_EXAMPLES", (60, 60))
    monkeypatch.setattr(suite, "LOAD", ({"agents": 3, "ops_per_agent": 40, "lines": 8},) * 2)
    assert main(["bench", "reliability", "--quick", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    for key, kind in HEADLINE.items():
        assert isinstance(report[key], kind), (key, report.get(key))
    assert report["kills"] == 2
    assert report["fuzz_inputs"] >= 60
    assert report["faults_injected"] > 0
    assert (report["lost_writes"], report["reused_versions"]) == (0, 0)
    assert (report["invariant_violations"], report["untyped_errors"]) == (0, 0)
    assert report["linearizable"] is True
    assert report["ok"] is True
    assert list(report)[:2] == ["ok", "kills"]  # the headline comes first
    assert load_suite("reliability") is suite.run
