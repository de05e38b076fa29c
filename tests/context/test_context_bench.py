"""The LoCoMo evaluation: loading, scoring, and proof that answers and evidence never reach retrieval."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gliding_actors.bench._all import run_all
from gliding_actors.bench._context import evaluate, load_locomo, normalise_evidence, run
from gliding_actors.cli import main
from gliding_actors.errors import InvalidInput

#: what a user must be told to find LoCoMo, which the project does not ship
WHERE_TO_GET_LOCOMO = ("snap-research/locomo", "data/locomo10.json", "CC BY-NC 4.0", "arXiv:2402.17753")


def conversation(answers: list[str], evidence: list[list[str]]) -> dict[str, Any]:
    return {
        "sample_id": "conv-test",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:00 pm on 2 May, 2023",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a grey cat named Pixel last week."},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Lovely! I started learning the cello.", "blip_caption": "a photo of a cello"},
                {"speaker": "Ana", "dia_id": "D1:3", "text": "Pixel loves sleeping on my keyboard."},
            ],
            "session_2_date_time": "9:00 am on 20 June, 2023",
            "session_2": [
                {"speaker": "Ben", "dia_id": "D2:1", "text": "My cello teacher moved to Oslo."},
                {"speaker": "Ana", "dia_id": "D2:2", "text": "I ran my first marathon in Berlin!"},
            ],
        },
        "observation": {
            "session_1_observation": {"Ana": [["Ana adopted a cat called Pixel.", "D1:1"]], "Ben": [["Ben plays the cello.", ["D1:2"]]]},
            "session_2_observation": {"Ana": [["Ana ran a marathon in Berlin.", "D2:2"]]},
        },
        "qa": [
            {"question": "What pet did Ana adopt?", "answer": answers[0], "evidence": evidence[0], "category": 4},
            {"question": "Where did Ben's teacher move?", "answer": answers[1], "evidence": evidence[1], "category": 1},
            {"question": "What does Ben play?", "adversarial_answer": "x", "evidence": ["D1:2"], "category": 5},
            {"question": "No evidence here", "answer": "y", "evidence": [], "category": 2},
        ],
    }


def write(tmp_path: Path, name: str, item: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps([item]), encoding="utf-8")
    return path


def test_evidence_ids_are_normalised() -> None:
    assert normalise_evidence(["D8:6; D9:17"]) == ["D8:6", "D9:17"]
    assert normalise_evidence(["D:11:26", "D30:05", "D30:5"]) == ["D11:26", "D30:5"]
    assert normalise_evidence(["nonsense", 3]) == []


def test_loading_keeps_scored_questions_only(tmp_path: Path) -> None:
    [conv] = load_locomo(write(tmp_path, "a.json", conversation(["a cat", "Oslo"], [["D1:1"], ["D2:1"]])))
    assert [q.category for q in conv.questions] == [4, 1]  # category 5 and the one without evidence are skipped
    assert conv.memory.turns[1].text.endswith("[shares a photo: a photo of a cello]")
    assert [o.cites for o in conv.memory.observations] == [("D1:1",), ("D1:2",), ("D2:2",)]
    assert not hasattr(conv.memory, "questions")  # ingestion cannot see them


def test_a_bad_file_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a list"}', encoding="utf-8")
    with pytest.raises(InvalidInput):
        load_locomo(bad)
    with pytest.raises(InvalidInput):
        load_locomo(tmp_path / "missing.json")


def test_answers_and_evidence_never_reach_retrieval(tmp_path: Path) -> None:
    """Two files differing only in answers and evidence give identical retrieval inputs and contexts."""
    one = conversation(["a grey cat", "Oslo"], [["D1:1"], ["D2:1"]])
    two = copy.deepcopy(one)
    two["qa"][0].update(answer="SENTINEL-ANSWER-1", evidence=["D2:2"])
    two["qa"][1].update(answer="SENTINEL-ANSWER-2", evidence=["D1:3", "D1:1"])
    traces: list[list[tuple[str, Any]]] = []
    reports = []
    for item, name in ((one, "one.json"), (two, "two.json")):
        seen: list[tuple[str, Any]] = []
        reports.append(evaluate(load_locomo(write(tmp_path, name, item)), (40, 200), trace=lambda k, p: seen.append((k, p))))
        traces.append(seen)
    assert traces[0] == traces[1]
    dumped = json.dumps(traces[1])
    assert "SENTINEL" not in dumped
    assert [p for k, p in traces[1] if k == "query"] == ["What pet did Ana adopt?", "Where did Ben's teacher move?"]
    # the contexts were the same, so were their sizes; only the scoring read the evidence
    assert reports[0]["budgets"]["40"]["tokens_mean"] == reports[1]["budgets"]["40"]["tokens_mean"]


def test_scoring_through_a_summary_and_the_report_keys(tmp_path: Path) -> None:
    report = evaluate(load_locomo(write(tmp_path, "a.json", conversation(["cat", "Oslo"], [["D1:1"], ["D2:1"]]))), (40, 200))
    assert report["questions"] == 2 and report["embedder"] == "onnx/all-MiniLM-L6-v2-int8" and report["counter"]
    for budget in ("40", "200"):
        entry = report["budgets"][budget]
        for key in ("any", "all", "tokens_mean", "full_history_tokens_mean", "latency_p50_ms", "latency_p95_ms"):
            assert isinstance(entry[key], float)
        assert set(entry["baselines"]) == {"bm25", "fusion"}
        for name in ("bm25", "fusion"):
            assert 0.0 <= entry["baselines"][name]["any"] <= 1.0 and 0.0 <= entry["baselines"][name]["all"] <= 1.0
        assert set(entry["by_category"]) == {"1", "4"}
        assert entry["tokens_mean"] <= int(budget)
    # with room for everything every question is found
    assert report["budgets"]["200"]["any"] == 1.0 and report["budgets"]["200"]["all"] == 1.0


def test_without_data_the_context_bench_is_refused_and_says_where_to_get_locomo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(InvalidInput) as refused:
        run(quick=True)  # no default: LoCoMo is not shipped, and nothing outside the checkout is read
    assert "--data FILE" in str(refused.value)
    for part in WHERE_TO_GET_LOCOMO:
        assert part in str(refused.value), part
    with pytest.raises(InvalidInput, match="no file at .*none.json") as missing:
        run(quick=True, data=str(tmp_path / "none.json"))
    assert all(part in str(missing.value) for part in WHERE_TO_GET_LOCOMO)
    # the command line: exit 2 with the same message; --help says where too
    assert main(["bench", "context"]) == 2
    err = capsys.readouterr().err
    assert all(part in " ".join(err.split()) for part in WHERE_TO_GET_LOCOMO), err
    monkeypatch.setenv("COLUMNS", "400")  # argparse would otherwise break the URL at its hyphen
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    helped = " ".join(capsys.readouterr().out.split())
    assert all(part in helped for part in WHERE_TO_GET_LOCOMO), helped


def test_bench_all_without_data_skips_the_context_entries_saying_why() -> None:
    report = run_all(only=["context", "context-hash"])
    for entry in ("context", "context-hash"):
        reason = report["suites"][entry]["skipped"]
        assert "--data FILE" in reason and all(part in reason for part in WHERE_TO_GET_LOCOMO), reason
    assert report["errors"] == []
