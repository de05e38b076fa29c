"""bench tokens on small sizes: measured from the real system, consistent, deterministic."""

from __future__ import annotations

from gliding_actors.bench import SUITES, load_suite
from gliding_actors.bench._tokens import run_workload


def test_suite_is_registered_and_reports_every_workload_beside_the_published_figure() -> None:
    assert SUITES["tokens"] == "gliding_actors.bench._tokens"
    report = load_suite("tokens")(quick=True, rounds=4)
    for name, published in (("planning", 69.0), ("reviewing", 47.0), ("high_churn", 29.0)):
        figures = report[name]
        assert figures["published_pct"] == published
        assert figures["consistent"] is True  # bench's own baseline == stats() saved + fetched
        assert 0 < figures["ours_tokens"] < figures["baseline_tokens"]
        assert figures["hits"] + figures["misses"] == figures["reads"]
        # every agent's first read of an artifact is a miss: at least one per reader/artifact pair seen
        assert figures["misses"] >= 1
        assert report["summary"][name] == {"ours_pct": figures["saved_pct"], "published_pct": published}


def test_more_churn_saves_less_and_runs_are_deterministic() -> None:
    first = {name: run_workload(name, rounds=6, seed=11) for name in ("planning", "high_churn")}
    again = run_workload("planning", rounds=6, seed=11)
    assert again == first["planning"]
    assert first["planning"]["saved_pct"] > first["high_churn"]["saved_pct"]
    other_seed = run_workload("planning", rounds=6, seed=12)
    assert other_seed["baseline_tokens"] != first["planning"]["baseline_tokens"]
