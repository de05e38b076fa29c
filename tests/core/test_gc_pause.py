"""Opening a memory holds Python's cyclic collector off, and gives it back as it found it."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gliding_actors import MemorySystem, Progress
from gliding_actors._gc_pause import collection_paused
from gliding_actors.errors import CorruptRecord

HASH = {"hyperspace": {"embedder": "hash", "fallback": []}}


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_collector_is_off_while_a_memory_opens_and_on_after(tmp_path: Path, collector_on: None) -> None:
    seen: list[bool] = []

    def watch(progress: Progress) -> None:
        if progress.stage == "lines":  # reported on the opening thread, as the lines are put back
            seen.append(gc.isenabled())

    with MemorySystem.open(tmp_path, config=HASH) as memory:
        memory.agent("pa", "PA").write("note:1", {"text": "one"}, graph="plan")
    assert gc.isenabled()
    with MemorySystem.open(tmp_path, config=HASH, progress=watch):
        assert gc.isenabled()
    assert seen and not any(seen)


def test_a_failed_open_gives_the_collector_back(
    tmp_path: Path, collector_on: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def damaged(*_args: object, **_kwargs: object) -> None:
        raise CorruptRecord("a damaged node")

    monkeypatch.setattr("gliding_actors.system.open_lines", damaged)
    with pytest.raises(CorruptRecord):
        MemorySystem.open(tmp_path, config=HASH)
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off(collector_on: None) -> None:
    gc.disable()
    with collection_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_overlapping_pauses_resume_once_the_last_ends(collector_on: None) -> None:
    first_in, second_done = threading.Event(), threading.Event()
    states: list[bool] = []

    def second() -> None:
        first_in.wait(5)
        with collection_paused():
            states.append(gc.isenabled())
        second_done.set()

    worker = threading.Thread(target=second)
    worker.start()
    with collection_paused():
        first_in.set()
        assert second_done.wait(5)
        states.append(gc.isenabled())  # the other pause ended; this one still holds it off
    worker.join(5)
    assert states == [False, False]
    assert gc.isenabled()
