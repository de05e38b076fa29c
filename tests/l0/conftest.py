"""Fixtures of the L0 tests: a real LevelDB store in tmp_path on a virtual clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gliding_actors.clock import VirtualClock
from gliding_actors.config import L0Config
from gliding_actors.l0 import L0Store


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(1_000.0)


@pytest.fixture
def open_store(tmp_path: Path, clock: VirtualClock) -> Iterator[Callable[..., L0Store]]:
    """``open_store(**kwargs)`` opens (or reopens) the store at ``tmp_path/l0``;
    every store it opened is closed at teardown."""
    opened: list[L0Store] = []

    def open_(path: Path | None = None, config: L0Config | None = None, **kwargs: Any) -> L0Store:
        store = L0Store(path or tmp_path / "l0", clock=clock, config=config, **kwargs)
        opened.append(store)
        return store

    yield open_
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store: Callable[..., L0Store]) -> L0Store:
    return open_store()
