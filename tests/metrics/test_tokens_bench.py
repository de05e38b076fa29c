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


def test_agent_coherences_own_sequences_replay_as_it_publishes_them() -> None:
    # its planning, code-review and high-churn graphs: hits / misses per its published result files, and the
    # re-send baseline of every read (12, 15, 8 reads of 323, 282-283, 257 tokens)
    report = load_suite("tokens")(quick=True, rounds=2)
    published = {"ac_planning": (9, 3, 3876), "ac_code_review": (9, 6, 4236), "ac_high_churn": (4, 4, 2056)}
    for name, (hits, misses, resend) in published.items():
        entry = report["workloads"][name]
        assert (entry["agent_coherence_lazy_hits"], entry["reads"] - entry["agent_coherence_lazy_hits"]) == (hits, misses)
        assert entry["resend_tokens"] == resend and entry["stale_reads"] == 0
        # an invalidation protocol, either way: the same read-by-read hits, so the same tokens
        assert entry["hits"] == hits and entry["saved_full"] == entry["saved_agent_coherence_lazy"]
    assert report["workloads"]["ac_planning"]["saved_full"] == 0.75  # 3 misses of 323 tokens out of 3,876
    # eager pushes every write to the whole team: where writes outnumber re-reads it sends more than re-sending
    assert report["workloads"]["ac_high_churn"]["saved_agent_coherence_eager"] < 0
    assert report["workloads"]["ac_high_churn"]["agent_coherence_eager_pushes"] == 5 * 4


def test_every_workload_is_compared_on_one_sequence_with_no_stale_read() -> None:
    report = load_suite("tokens")(quick=True, rounds=4)
    assert set(report["workloads"]) == {
        "ac_planning", "ac_code_review", "ac_high_churn", "planning", "reviewing", "high_churn"
    }
    for name in ("planning", "reviewing", "high_churn"):
        entry = report["workloads"][name]
        assert entry["reads"] == report[name]["reads"] and entry["stale_reads"] == 0
        assert entry["hits"] == report[name]["hits"]  # the estimator differs from stats(), the misses do not
        for key in ("saved_full", "saved_agent_coherence_lazy", "saved_agent_coherence_eager"):
            assert -10.0 < entry[key] < 1.0


def test_a_revision_is_one_edit_of_the_last_one_and_leaves_it_as_it_was() -> None:
    import copy
    import random

    from gliding_actors.bench._tokens import changed_share, make_artifact, revise

    rng = random.Random(3)
    value = make_artifact(rng, 0, 0)
    kinds = set()
    for _ in range(300):
        kept = copy.deepcopy(value)
        revised, kind = revise(rng, value)
        kinds.add(kind)
        assert value == kept  # earlier revisions stay what they were: a sequence holds every one
        assert revised["revision"] == value["revision"] + 1 and 4 <= len(revised["hasPart"]) <= 12
        assert 0.0 < changed_share(value, revised) < 1.0
        value = revised
    assert kinds == {"status", "step_text", "add_step", "remove_step", "description"}
