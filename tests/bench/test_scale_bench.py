"""``bench scale``: the figures it reports, its texts, and its refusal without data (tiny sizes here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gliding_actors.bench import SUITES, load_suite
from gliding_actors.bench import _scale as scale
from gliding_actors.errors import InvalidInput


def locomo_file(tmp_path: Path) -> Path:
    turns = [
        {"speaker": "Ana" if n % 2 else "Ben", "dia_id": f"D1:{n}", "text": text}
        for n, text in enumerate(
            ["I adopted a grey cat named Pixel.", "I started learning the cello.", "Pixel sleeps on my keyboard.",
             "My cello teacher moved to Oslo.", "I ran my first marathon in Berlin.", "The marathon was hot."],
            start=1,
        )
    ]
    questions = ["What pet did Ana adopt?", "Where did the teacher move?", "What does Ben play?",
                 "Where was the marathon?", "Where does Pixel sleep?", "What is the cat's name?"]
    item = {
        "sample_id": "conv-test",
        "conversation": {"speaker_a": "Ana", "speaker_b": "Ben", "session_1_date_time": "1:00 pm on 2 May, 2023",
                         "session_1": turns},
        "qa": [{"question": q, "answer": "x", "evidence": ["D1:1"], "category": 1} for q in questions],
    }
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([item]), encoding="utf-8")
    return path


def test_line_texts_use_each_turn_then_pairs_and_never_repeat() -> None:
    texts = scale.line_texts(["a", "b", "c"], 9)
    assert texts[:3] == ["a", "b", "c"] and texts[3:6] == ["a b", "b c", "c a"]
    assert len(set(texts)) == 9


def test_the_report_has_every_ratio_of_the_targets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(scale.SIZES, True, (20, 60, 6, 18))
    monkeypatch.setattr(scale, "WRITES_BEFORE_FIRST_SEARCH", 30)
    assert SUITES["scale"] == "gliding_actors.bench._scale"
    report = load_suite("scale")(True, data=str(locomo_file(tmp_path)), embedder="hash")
    assert report["lines"]["60"]["lines"] == 60 and report["turns"]["18"]["turns"] == 18
    assert report["first_search"]["writes"] == 30
    for key in ("search_p50_ratio_60_vs_20", "context_p50_ratio_60_vs_20", "context_p50_ratio_18_turns_vs_6",
                "reopen_s_60", "reopen_ratio_60_vs_20", "rss_kb_per_line_60", "rss_kb_per_line_after_queries_60",
                "first_search_after_1k_writes_s"):
        assert isinstance(report[key], float) and report[key] >= 0, key
    small, large = report["lines"]["20"], report["lines"]["60"]
    assert report["search_p50_ratio_60_vs_20"] == round(large["search_p50_ms"] / small["search_p50_ms"], 2)
    assert large["reopen_s"] >= large["open_s"] > 0


def test_without_data_the_suite_says_where_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="snap-research/locomo"):
        scale.run(True)
    with pytest.raises(InvalidInput, match="no file at"):
        scale.run(True, data=str(tmp_path / "none.json"))
    cli = subprocess.run(
        [sys.executable, "-m", "gliding_actors.cli", "bench", "scale", "--quick"], check=False, capture_output=True, text=True,
        timeout=120,
    )
    assert cli.returncode == 2 and "bench scale needs LoCoMo data" in cli.stderr


def test_settling_waits_in_proportion_to_the_documents_and_says_how_far_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gliding_actors import MemorySystem
    from gliding_actors.errors import Timeout

    with MemorySystem.open(tmp_path, runtime="threads", config={"hyperspace": {"embedder": "hash"}}) as memory:
        for n in range(200):
            memory.agent("pa", "PA").write(f"note:{n}", {"text": f"note {n}"}, graph="plan")
        monkeypatch.setattr(scale, "SETTLE_S_MIN", 0.0)
        with pytest.raises(Timeout):
            scale._settle(memory, "200 lines", 0)  # no documents, no time
        monkeypatch.setattr(scale, "PROGRESS_EVERY_S", 0.001)
        scale._settle(memory, "200 lines", 200)  # 10 s for 200: plenty
    assert "200 lines: " in capsys.readouterr().err
