"""``bench peers``: the report's keys, and correctness checks that catch a stale read and a lost update."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pytest

from gliding_actors.bench import SUITES, load_suite
from gliding_actors.bench import _peers as peers

pytestmark = pytest.mark.bench


def test_the_ledger_flags_a_read_older_than_an_acknowledged_write() -> None:
    ledger = peers._Ledger()
    first = ledger.begin()
    ledger.acknowledged("k", first)
    second = ledger.begin()
    ledger.acknowledged("k", second)
    floor = ledger.floor("k")
    ledger.check(floor, second)  # the latest: fine
    assert ledger.stale == 0
    ledger.check(floor, first)  # ended before the second began, which was acknowledged: stale
    ledger.check(floor, 0)  # the seeded value: stale too
    assert ledger.stale == 2


def test_a_write_still_in_flight_or_overlapping_is_not_stale() -> None:
    ledger = peers._Ledger()
    a, b = ledger.begin(), ledger.begin()  # two writes of one key overlap
    ledger.acknowledged("k", b)
    ledger.acknowledged("k", a)  # a ended after b began: either order is a valid outcome
    floor = ledger.floor("k")
    ledger.check(floor, a)
    in_flight = ledger.begin()
    ledger.check(floor, in_flight)  # not acknowledged yet: concurrent with the read
    assert ledger.stale == 0


class _StaleCopies:
    """A broken shared memory: each agent keeps the first copy it read, forever."""

    def __init__(self, agents: int, keys: list[str], root: Path) -> None:
        self._data = {k: peers._value(k, 0, -1) for k in keys}
        self._copies: list[dict[str, Any]] = [{} for _ in range(agents)]

    def read(self, agent: int, key: str) -> dict[str, Any]:
        return self._copies[agent].setdefault(key, self._data[key])

    def write(self, agent: int, key: str, value: dict[str, Any]) -> None:
        self._data[key] = value

    def settle(self, timeout: float) -> None:
        pass

    def close(self) -> None:
        pass


class _UnlockedCounter(_StaleCopies):
    """A counter incremented by a read and a later write, with no lock between them."""

    def __init__(self, agents: int, keys: list[str], root: Path) -> None:
        super().__init__(agents, keys, root)
        self._count = 0

    def increment(self, agent: int) -> int:
        seen = self._count
        time.sleep(0.0005)
        self._count = seen + 1
        return 0

    def count(self) -> int:
        return self._count


def test_the_checks_catch_a_memory_that_serves_stale_copies_and_loses_increments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = [f"k{i}" for i in range(4)]
    broken = _StaleCopies(3, keys, tmp_path)
    tally = peers._Tally()
    peers._slice(peers._operation(broken, keys, 0.5, tally.ledger), broken.settle, tally, 3, 0.2, seed=1)
    assert tally.ledger.stale > 0 and tally.errors == 0

    monkeypatch.setattr(peers, "_factory", lambda name: _UnlockedCounter if name == "dict_lock" else "not here")
    monkeypatch.setitem(peers.SLICE_S, True, 0.1)
    cell = peers._cell("hot_key", 4, True, tmp_path / "cell")
    assert cell["dict_lock"]["lost_updates"] > 0
    assert cell["gliding_actors"] == {"skipped": "not here"}


def test_a_slice_is_charged_the_work_its_system_left_behind(tmp_path: Path) -> None:
    """A system that defers work past its slice pays for it in its own ops/s, not in the next system's slice."""
    keys = [f"k{i}" for i in range(4)]
    behind = peers._DictLock(2, keys, tmp_path)
    tally = peers._Tally()
    peers._slice(peers._operation(behind, keys, 0.5, tally.ledger), lambda _timeout: time.sleep(0.4), tally, 2, 0.1, seed=1)
    assert tally.done / tally.rates[0] >= 0.5  # the slice's time: 0.1 s of operations + 0.4 s of settling


def test_the_report_has_every_key_and_gliding_actors_is_correct(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peers, "AGENTS", (2, 3))
    monkeypatch.setitem(peers.KEYS, True, 20)
    monkeypatch.setitem(peers.SLICE_S, True, 0.05)
    assert SUITES["peers"] == "gliding_actors.bench._peers"
    report = load_suite("peers")(True)
    for workload in ("90_10", "50_50", "hot_key"):
        for n in ("2", "3"):
            cell = report["peers"][workload][n]
            assert set(cell) == set(peers.SYSTEMS)
            for system, row in cell.items():
                if "skipped" in row:
                    assert workload == "hot_key" and system.startswith("langgraph"), (workload, system, row)
                    continue
                assert row["ops_per_s"] > 0 and row["errors"] == 0, (workload, n, system, row)
                assert row["stale_reads"] == 0 and row["lost_updates"] == 0, (workload, n, system, row)
                assert row["vs_agent_coherence"] == round(row["ops_per_s"] / cell["agent_coherence"]["ops_per_s"], 3)
            if workload == "hot_key":
                assert cell["gliding_actors"]["increments"] > 0


def test_operations_are_reproducible_per_seed() -> None:
    keys = [f"k{i}" for i in range(50)]
    seen: list[list[str]] = []

    class Recorder(_StaleCopies):
        def read(self, agent: int, key: str) -> dict[str, Any]:
            picked.append(key)
            return self._data[key]

        def write(self, agent: int, key: str, value: dict[str, Any]) -> None:
            picked.append(key)
            self._data[key] = value

    for _ in range(2):
        picked: list[str] = []
        op = peers._operation(Recorder(1, keys, Path(".")), keys, 0.9, peers._Ledger())
        rng = random.Random(7)
        for _ in range(30):
            op(0, rng)
        seen.append(picked)
    assert seen[0] == seen[1] and len(set(seen[0])) > 5
