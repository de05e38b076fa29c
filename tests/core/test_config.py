"""Config: nested, typed, unknown keys rejected with their path."""

from __future__ import annotations

from pathlib import Path

import pytest

from gliding_actors import Config, ConfigError, InvalidInput


def test_defaults_are_the_documented_ones() -> None:
    cfg = Config()
    assert cfg.coherence.critical_tags == ("user_intent", "confirmed_fact", "emphasis")
    assert cfg.l1.token_budget == 2000
    assert cfg.l1.relevance_threshold == 0.3
    assert cfg.l1.safe_window_s == 300.0
    assert (cfg.l1.beta, cfg.l1.w_recency, cfg.l1.w_cost) == (0.6, 0.5, 0.5)
    assert cfg.agents.heartbeat_timeout_s == 30.0
    assert cfg.l0.max_node_bytes == 5 * 1024 * 1024


def test_from_dict_overrides_only_what_it_names() -> None:
    cfg = Config.from_dict({"l1": {"token_budget": 200}, "coherence": {"critical_tags": ["a"]}})
    assert cfg.l1.token_budget == 200
    assert cfg.l1.beta == 0.6
    assert cfg.coherence.critical_tags == ("a",)
    assert Config.from_dict({"l1": {"safe_window_s": 10}}).l1.safe_window_s == 10.0


@pytest.mark.parametrize(
    ("data", "path", "words"),
    [
        ({"l9": {}}, ("l9",), "unknown config key 'l9'"),
        ({"l1": {"budget": 3}}, ("l1", "budget"), "unknown config key 'l1.budget'"),
        ({"hyperspace": {"n_trees": 16}}, ("hyperspace", "n_trees"), "'hyperspace.n_trees' was retired: the vector"),
        ({"hyperspace": {"rebuilds": "thread"}}, ("hyperspace", "rebuilds"), "renamed hyperspace.indexing"),
        (
            {"hyperspace": {"search_k_per_result": 8}},
            ("hyperspace", "search_k_per_result"),
            "its search breadth is hyperspace.hnsw_expansion_search",
        ),
        ({"l1": {"token_budget": "many"}}, ("l1", "token_budget"), "must be an integer"),
        ({"l1": {"token_budget": True}}, ("l1", "token_budget"), "must be an integer"),
        ({"l1": {"token_budget": 2.5}}, ("l1", "token_budget"), "must be an integer"),
        ({"l1": {"beta": 1.5}}, ("l1", "beta"), "outside"),
        ({"l1": 3}, ("l1",), "must be a mapping"),
        ({"coherence": {"critical_tags": "user_intent"}}, ("coherence", "critical_tags"), "must be a list"),
        ({"coherence": {"critical_tags": [1]}}, ("coherence", "critical_tags", "0"), "must be a string"),
        ({"l0": {"sync_all_writes": "yes"}}, ("l0", "sync_all_writes"), "true or false"),
    ],
)
def test_bad_config_names_the_key(data: dict[str, object], path: tuple[str, ...], words: str) -> None:
    with pytest.raises(ConfigError) as info:
        Config.from_dict(data)
    assert info.value.path == path
    assert words in str(info.value)
    assert isinstance(info.value, InvalidInput)


def test_merged_keeps_the_base() -> None:
    base = Config.from_dict({"l1": {"token_budget": 100}})
    merged = base.merged({"l1": {"beta": 0.2}})
    assert (merged.l1.token_budget, merged.l1.beta) == (100, 0.2)
    assert base.l1.beta == 0.6


def test_from_yaml_reads_yaml_1_2(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("l1:\n  token_budget: 300\ncoherence:\n  critical_tags: [no, on]\n")
    cfg = Config.from_yaml(path)
    assert cfg.l1.token_budget == 300
    # YAML 1.2: 'no' and 'on' are strings, not booleans.
    assert cfg.coherence.critical_tags == ("no", "on")
    path.write_text("- a list\n")
    with pytest.raises(ConfigError, match="must be a mapping"):
        Config.from_yaml(path)
    with pytest.raises(ConfigError, match="cannot read"):
        Config.from_yaml(tmp_path / "missing.yaml")


def test_to_dict_round_trips() -> None:
    cfg = Config.from_dict({"l1": {"token_budget": 123}})
    assert Config.from_dict(cfg.to_dict()) == cfg
