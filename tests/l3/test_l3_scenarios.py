"""The L3 scenario files replay: on the simulator under several seeds (same seed, same log), and on threads.

The full sweep (``--seeds 0..49`` on both runtimes) is the command in
docs/L3.md; the default run keeps a few seeds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gliding_actors.scenario._replay import load_and_replay

REPO = Path(__file__).resolve().parents[2]

FILES = sorted((REPO / "scenarios" / "projection").glob("*.yaml"))


def test_the_four_files_exist() -> None:
    assert [f.name for f in FILES] == ["budgets.yaml", "cache_hit.yaml", "invalidation.yaml", "role_contents.yaml"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_replays_on_the_simulator(path: Path) -> None:
    hashes = set()
    for seed in (0, 1, 2, 17):
        result = load_and_replay(path, seed=seed)
        assert result.ok, result.failure
        assert any(o.step.op == "project" for o in result.outcomes)
        hashes.add(result.log_hash)
    again = load_and_replay(path, seed=17)
    assert again.log_hash in hashes  # deterministic


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_replays_on_threads(path: Path) -> None:
    result = load_and_replay(path, runtime="threads")
    assert result.ok, result.failure


@pytest.mark.slow
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_replays_under_fifty_seeds(path: Path) -> None:
    for seed in range(50):
        result = load_and_replay(path, seed=seed)
        assert result.ok, (seed, result.failure)


def test_the_format_example_replays_with_its_projection_in_budget() -> None:
    """pdca_auth_refactor.yaml, the format's worked example, uses most ops; its
    `project` is ca_review within 300 tokens."""
    result = load_and_replay(REPO / "scenarios" / "examples" / "pdca_auth_refactor.yaml")
    assert result.ok, result.failure
    projected = [o for o in result.outcomes if o.step.op == "project"]
    assert len(projected) == 1 and projected[0].error is None
    assert projected[0].result is not None and projected[0].result["tokens"] <= 300