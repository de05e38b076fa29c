"""Kill tests: SIGKILL a team of agents at random points; every promise survives.

The harness is :mod:`tools.reliability._kill` (also behind
``gliding-actors bench reliability``); its docstring lists what is checked
after each restart. Here the counts it reports must be zero, the kills must
have landed in a working team, and a child that breaks the promise on
purpose must be caught: the check can fail.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.reliability._kill import KillReport, run_kills

SEED = 20261130


def _assert_kept(report: KillReport) -> None:
    assert report.early_deaths == []
    assert report.lost_writes == []
    assert report.reused_versions == []
    assert report.disagreements == []
    assert report.not_serving == []
    # the kills landed in a working team: many promises of both kinds
    assert report.write_through > 50, "too few write-through writes were acknowledged"
    assert report.flushed > 50, "too few write-back lines were flushed"
    # and write-back writes a kill could lose, whose versions the next lives must not reuse
    assert report.acknowledged - report.write_through > 100


def test_sigkill_at_random_points_keeps_every_acknowledged_write(tmp_path: Path) -> None:
    report = run_kills(tmp_path, kills=12, seed=SEED)
    assert report.kills == 12
    _assert_kept(report)


def test_a_child_that_journals_unflushed_writes_is_caught(tmp_path: Path) -> None:
    """The 'lying' child promises write-back writes it never flushed: L0 lacks them after the kill."""
    report = run_kills(tmp_path, kills=3, seed=SEED + 7, max_delay_s=0.3, mode="lying")
    assert report.early_deaths == []
    assert report.lost_writes, "unflushed write-back writes were promised, and the check found nothing"
    assert any("< acknowledged" in line or "not in L0" in line for line in report.lost_writes)
    # losing unflushed data is the lie, not a broken store: L0 and the graph still agree
    assert report.disagreements == []


@pytest.mark.slow
def test_sigkill_at_a_hundred_random_points_keeps_every_acknowledged_write(tmp_path: Path) -> None:
    report = run_kills(tmp_path, kills=100, seed=SEED + 1)
    assert report.kills == 100
    _assert_kept(report)
