"""Progress of the long steps of opening a memory: what is reported, when, and what a failing watcher changes."""

from __future__ import annotations

import io
import shutil
import time
from pathlib import Path

import pytest
from rich.console import Console

from gliding_actors import InvalidInput, MemorySystem, Progress
from gliding_actors._progress import ProgressReporter, progress_bar

HASH = {"hyperspace": {"embedder": "hash", "fallback": []}}


def _memory_of(path: Path, lines: int) -> None:
    with MemorySystem.open(path, runtime="sim", config=HASH) as memory:
        pa = memory.agent("pa", "PA")
        for n in range(lines):
            pa.write(f"note:{n}", {"text": f"note number {n} about the cache"}, graph="plan")
        pa.search("cache", k=1)  # indexed, so the close saves the engine and its keyword index


def test_a_reopen_reports_the_lines_it_puts_back_and_ends_at_the_total(tmp_path: Path) -> None:
    _memory_of(tmp_path / "m", 300)
    seen: list[Progress] = []
    with MemorySystem.open(tmp_path / "m", runtime="sim", config=HASH, progress=seen.append) as memory:
        assert memory.agent("da", "DA").read("note:7")["value"]["text"] == "note number 7 about the cache"
    lines = [p for p in seen if p.stage == "lines"]
    assert lines[-1].finished and lines[-1].done == lines[-1].total and lines[-1].done >= 300
    assert [p.done for p in lines] == sorted(p.done for p in lines)
    assert 2 <= len(lines) <= 102  # thinned to about every hundredth, not once per line
    assert not [p for p in seen if p.stage == "keywords"]  # the saved keyword index was reused


def test_a_keyword_index_rebuilt_on_open_is_reported(tmp_path: Path) -> None:
    _memory_of(tmp_path / "m", 120)
    shutil.rmtree(tmp_path / "m" / "hyperspace" / "keywords")  # lost: rebuilt from the saved documents
    seen: list[Progress] = []
    with MemorySystem.open(tmp_path / "m", runtime="sim", config=HASH, progress=seen.append) as memory:
        assert memory.hyperspace.stats()["keyword_index"] == "rebuilt"
        assert "note:5" in memory.agent("da", "DA").search("number 5", k=3)["iris"]
    keywords = [p for p in seen if p.stage == "keywords"]
    assert keywords and keywords[-1].finished and keywords[-1].total is not None and keywords[-1].total >= 120


def test_embeddings_in_the_background_are_reported_until_the_backlog_is_done(tmp_path: Path) -> None:
    seen: list[Progress] = []
    with MemorySystem.open(tmp_path / "m", runtime="threads", config=HASH, progress=seen.append) as memory:
        pa = memory.agent("pa", "PA")
        for n in range(200):
            pa.write(f"note:{n}", {"text": f"note number {n} about the cache"}, graph="plan")
        memory.hyperspace.wait_indexed(60)
        deadline = time.monotonic() + 10  # the worker reports just after it hands its last batch over
        while time.monotonic() < deadline and not any(p.stage == "embeddings" and p.finished for p in seen):
            time.sleep(0.01)
    embeddings = [p for p in seen if p.stage == "embeddings"]
    assert embeddings and embeddings[-1].finished and embeddings[-1].done >= 200


def test_a_watcher_that_raises_is_dropped_and_the_open_goes_on(tmp_path: Path) -> None:
    _memory_of(tmp_path / "m", 50)
    calls: list[Progress] = []

    def broken(progress: Progress) -> None:
        calls.append(progress)
        raise RuntimeError("the watcher's own bug")

    with MemorySystem.open(tmp_path / "m", runtime="sim", config=HASH, progress=broken) as memory:
        assert memory.agent("da", "DA").read("note:3")["value"] is not None
        assert isinstance(memory.progress.error, RuntimeError)
    assert len(calls) == 1


def test_a_progress_that_is_not_a_function_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="progress"):
        MemorySystem.open(tmp_path / "m", progress="every second")  # type: ignore[arg-type]
    assert not (tmp_path / "m").exists()


def test_reports_are_thinned_to_a_hundredth_of_the_total_and_the_end_always_passes() -> None:
    seen: list[Progress] = []
    reporter = ProgressReporter(seen.append, every=1000)
    for done in range(0, 10_001):
        reporter.report("lines", done, 10_000)
    assert [p.done for p in seen] == list(range(0, 10_001, 100))
    reporter.report("lines", 10_000, 10_000)  # the same again: nothing new to say
    assert len(seen) == 101
    unknown: list[Progress] = []
    reporter = ProgressReporter(unknown.append, every=50)
    for done in range(1, 201):
        reporter.report("embeddings", done, None)
    assert [p.done for p in unknown] == [1, 51, 101, 151]


def test_the_bar_draws_on_a_terminal_and_stays_silent_elsewhere() -> None:
    screen = io.StringIO()
    with progress_bar(Console(file=screen, force_terminal=True, width=100)) as draw:
        draw(Progress("lines", 50, 100))
        draw(Progress("lines", 100, 100))
    assert "lines put back into the graph from L0" in screen.getvalue()
    draw(Progress("lines", 100, 100))  # after the block: dropped, no error
    piped = io.StringIO()
    with progress_bar(Console(file=piped, force_terminal=False)) as draw:
        draw(Progress("lines", 1, 2))
    assert piped.getvalue() == ""
