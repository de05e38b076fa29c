"""bench replay on a small trace: the figures come from a real recording, a real conversion and real replays."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gliding_actors.bench import SUITES, load_suite
from gliding_actors.bench._team import record_team
from gliding_actors.errors import InvalidInput
from gliding_actors.scenario import replay
from gliding_actors.scenario._convert import read_trace


def test_the_recorded_trace_has_the_team_op_mix_and_exactly_the_asked_number_of_events(tmp_path: Path) -> None:
    trace = tmp_path / "team.jsonl"
    assert record_team(trace, 90) == 90
    header, lines = read_trace(trace)
    assert header["clock"] == "virtual" and header["runtime"] == "threads"
    ops = [line["op"] for line in lines if line["kind"] == "op"]
    assert len(ops) == 90
    for op in ("write", "read", "context", "turn", "lock", "unlock", "publish", "inbox", "subscribe",
               "heartbeat", "task.create", "task.complete"):
        assert op in ops, op
    assert not [line for line in lines if line["kind"] == "op" and "error" in line]  # a clean team run


def test_suite_is_registered_and_replays_the_converted_trace_on_both_runtimes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert SUITES["replay"] == "gliding_actors.bench._replay"
    report = load_suite("replay")(quick=True, events=120, repeats=1, threads_repeats=1)
    assert report["embedder"] == "onnx"  # the library's default, as a user's memory would have
    # minutes at full size: each step says so on stderr while stdout keeps the report alone
    captured = capsys.readouterr()
    steps = captured.err.splitlines()
    assert captured.out == ""
    assert steps[0] == "bench replay: recording the team on threads until the trace holds 120 ops"
    assert "bench replay: replaying 120 events on sim (seed 0), run 1 of 1" in steps
    assert "bench replay: replaying 120 events on threads (seed 0), run 1 of 1" in steps
    assert any(line.startswith("bench replay: sim: ") and line.endswith(" events/s") for line in steps)
    assert steps[-1] == "bench replay: one more sim replay under cProfile (where the time goes)"
    assert report["trace_events"] == 120
    for runtime in ("sim", "threads"):
        figures = report[runtime]
        # every recorded op is replayed (the converter left none out) and each run passed its checks
        assert figures["events"] == 120
        assert figures["events_per_s"] > 0
        low, high = figures["events_per_s_range"]
        assert low <= figures["events_per_s"] <= high
    assert report["sim"]["protocol_messages"] > 0
    assert report["sim_messages_per_event"] == round(report["sim"]["protocol_messages"] / 120, 1)
    assert report["sim_target_met"] == (report["sim"]["events_per_s"] >= 20_000)
    assert report["sim_share_of_target"] == round(report["sim"]["events_per_s"] / 20_000, 4)
    # the same-run baseline: every line inspected after every step, the same ops replayed and checked
    baseline = report["sim_full_agreement"]
    assert baseline["events"] == 120 and baseline["events_per_s"] > 0
    assert report["agreement_speedup"] == round(report["sim"]["events_per_s"] / baseline["events_per_s"], 2)
    shares = report["where_time_goes_sim"]["share_of_time"]
    assert set(shares) == {"invariant_checks", "agreement_check", "hyperspace_service", "context_assembly",
                           "simulator_delivery", "text_embedding"}
    assert all(0 < share <= 1.0 for share in shares.values())  # each part ran, under one replay call
    for runtime in ("sim", "threads"):
        figures = report[runtime]
        assert figures["first_1k_events_per_s"] > 0 and figures["last_1k_events_per_s"] > 0
        assert figures["last_1k_vs_first_1k"] == round(
            figures["last_1k_events_per_s"] / figures["first_1k_events_per_s"], 3
        )
    assert report["replay"]["last_1k_vs_first_1k"] == report["sim"]["last_1k_vs_first_1k"]
    json.dumps(report)  # the CLI prints it as JSON


def test_edge_rates_compare_the_first_and_the_last_events_of_a_replay() -> None:
    from gliding_actors.bench._replay import edge_rates

    # 10 steps of 2 events; the first 6 events took 1 s each step, the rest 2 s each step
    marks, t = [], 0.0
    for step in range(1, 11):
        t += 1.0 if step <= 3 else 2.0
        marks.append((2 * step, t))
    first, last = edge_rates([(0, 0.0), *marks], 6)
    assert first == pytest.approx(2.0) and last == pytest.approx(1.0)  # events per second
    assert edge_rates([(0, 0.0)], 6) == (0.0, 0.0)


def test_bad_sizes_are_refused_before_anything_is_recorded(tmp_path: Path) -> None:
    trace = tmp_path / "never.jsonl"
    with pytest.raises(InvalidInput):
        record_team(trace, 0)
    assert not trace.exists()
    with pytest.raises(InvalidInput):
        load_suite("replay")(quick=True, events=0)
    with pytest.raises(InvalidInput):
        load_suite("replay")(quick=True, events=10, repeats=0)


def test_the_scenario_replays_identically_under_two_seeds(tmp_path: Path) -> None:
    from gliding_actors.bench._replay import make_scenario

    scenario, info = make_scenario(60, tmp_path)
    assert info["trace_events"] == 60
    first, second = (replay(scenario, seed=s, runtime="sim") for s in (0, 1))
    assert first.ok and second.ok, (first.failure, second.failure)
    assert len(first.outcomes) == len(second.outcomes) == 60
    assert first.log_hash != second.log_hash  # two schedules, the same recorded results met by both


def test_a_chosen_embedder_is_recorded_into_the_scenario_and_replayed_with_it(tmp_path: Path) -> None:
    from gliding_actors.bench._replay import make_scenario

    scenario, _info = make_scenario(60, tmp_path, "hash")
    assert scenario.config is not None and scenario.config.hyperspace.embedder == "hash"
    result = replay(scenario, seed=0, runtime="sim")
    assert result.ok, result.failure
    assert len(result.outcomes) == 60


def test_a_flag_the_suite_does_not_take_is_refused_before_it_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from gliding_actors.cli import main

    assert main(["bench", "l1", "--quick", "--embedder", "hash", "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing ran
    assert "bench l1: this suite takes no --embedder" in captured.err
