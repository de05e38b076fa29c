"""The classic races as scenario files (scenarios/coherence/), under many schedules."""

from __future__ import annotations

from pathlib import Path

from gliding_actors.cli import main

REPO = Path(__file__).resolve().parents[2]
FILES = sorted(str(p) for p in (REPO / "scenarios" / "coherence").glob("*.yaml"))


def test_there_is_a_file_for_each_race() -> None:
    names = {Path(f).stem for f in FILES}
    assert {
        "acks_before_data",
        "two_sharers_upgrade",
        "three_writers",
        "putm_races_fwd_getm",
        "puts_races_inv",
        "inv_before_data",
        "fwd_to_collecting_writer",
        "silent_e_to_m",
        "pute_races_gets",
        "write_policies_and_flush",
    } <= names


def test_every_race_passes_under_200_seeds_on_the_simulator() -> None:
    assert main(["replay", *FILES, "--seeds", "0..199"]) == 0


def test_every_race_passes_on_real_threads() -> None:
    assert main(["replay", *FILES, "--runtime", "threads", "--seeds", "0..4"]) == 0
