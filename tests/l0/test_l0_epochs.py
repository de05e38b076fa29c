"""Epochs: the durable counter that keeps a crash's lost versions from ever being numbered again.

Versions are numbered per epoch (``epoch << 32`` and up); L0 hands each epoch
out once, durably, across every life of the database and its repair.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import msgpack
import pytest

from gliding_actors import MemorySystem
from gliding_actors.clock import VirtualClock
from gliding_actors.coherence._home import LayeredHome
from gliding_actors.coherence._states import epoch_floor
from gliding_actors.errors import CorruptRecord, StorageError
from gliding_actors.l0 import L0Store
from gliding_actors.l0 import _keys as K
from gliding_actors.l0._base import _read_high_water
from gliding_actors.l0._repair import repair_l0


def test_a_new_database_starts_at_epoch_0_and_never_hands_one_out_twice(tmp_path: Path) -> None:
    where = tmp_path / "l0"
    with L0Store(where, clock=VirtualClock()) as store:
        batches = _read_high_water(str(where))
        assert [store.reserve_epoch() for _ in range(3)] == [0, 1, 2]
        assert _read_high_water(str(where)) == batches + 3  # each one synced before it returned
    with L0Store(where, clock=VirtualClock()) as store:
        assert store.reserve_epoch() == 3


def test_a_database_with_data_but_no_epoch_record_starts_above_its_earlier_lives(tmp_path: Path) -> None:
    where = tmp_path / "l0"
    with L0Store(where, clock=VirtualClock()) as store:
        store.store_jsonld_node({"@id": "note:1", "n": 1}, sync=True)
    with L0Store(where, clock=VirtualClock()) as store:
        assert store.reserve_epoch() == 1


def test_a_damaged_epoch_record_is_a_typed_error_and_is_left_as_it_was(tmp_path: Path) -> None:
    where = tmp_path / "l0"
    with L0Store(where, clock=VirtualClock()) as store:
        store.reserve_epoch()
        store._db.put(K.META_EPOCH, b"\xc1", sync=True)  # not msgpack
        with pytest.raises(CorruptRecord, match="epoch"):
            store.reserve_epoch()
        assert store._db.get(K.META_EPOCH) == b"\xc1"
        store._db.put(K.META_EPOCH, msgpack.packb(-4), sync=True)
        with pytest.raises(StorageError, match="not an epoch"):  # CorruptRecord is a StorageError
            store.reserve_epoch()


def test_each_open_of_a_memory_takes_a_new_epoch_and_writes_number_from_it(tmp_path: Path) -> None:
    where = tmp_path / "memory"
    for life in range(3):
        with MemorySystem.open(where) as memory:
            agent = memory.agent("pa", "PA")
            assert agent.write(f"plan:{life}", {"life": life})["version"] == epoch_floor(life) + 1
            # a line written in an earlier life goes on above this life's floor too
            assert agent.write("plan:0", {"again": life})["version"] == epoch_floor(life) + 1 + (life == 0)


def test_a_fence_holds_the_value_durably_at_a_new_epochs_first_version(tmp_path: Path) -> None:
    with L0Store(tmp_path / "l0", clock=VirtualClock()) as store:
        home = LayeredHome(store)
        assert home.epoch == 0
        home.store("plan:a", {"v": 3}, 3, False, {"tags": [], "graph": "shared"})  # dirty: only at home
        fenced = home.fence("plan:a")
        assert fenced == epoch_floor(1)
        assert home.load("plan:a") == ({"v": 3}, fenced)
        entry = store.retrieve("plan:a", touch=False)
        assert entry is not None and (entry.content, entry.version) == ({"v": 3}, fenced)
        # a line home never held is fenced too: its lost writes had versions as well
        assert home.fence("plan:never") == epoch_floor(2)
        assert home.load("plan:never") == (None, epoch_floor(2))
        assert store.retrieve_version("plan:never") == epoch_floor(2)


def test_a_fence_l0_refuses_keeps_the_version_and_is_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with L0Store(tmp_path / "l0", clock=VirtualClock()) as store:
        home = LayeredHome(store)
        home.store("plan:a", {"v": 1}, 1, True, {"tags": [], "graph": "shared"})

        def full(self: L0Store) -> int:
            raise StorageError("no space left on device")

        monkeypatch.setattr(L0Store, "reserve_epoch", full)  # the disk refuses the epoch
        assert home.fence("plan:a") == 1  # recovery goes on; the line keeps its version
        assert home.fence_failures == 1
        assert home.load("plan:a") == ({"v": 1}, 1)
        assert store.retrieve_version("plan:a") == 1


def test_repair_skips_every_epoch_a_lost_log_may_have_handed_out(tmp_path: Path) -> None:
    where = tmp_path / "crashed"
    with L0Store(tmp_path / "l0", clock=VirtualClock()) as store:
        for i in range(10):
            store.store_jsonld_node({"@id": f"note:{i}", "n": i})
        store.compact()
        assert [store.reserve_epoch() for _ in range(4)] == [0, 1, 2, 3]  # in the log only
        shutil.copytree(store.path, where)  # what a crash leaves (a close writes the log down as a table)
    for log in where.glob("*.log"):
        if log.name[0].isdigit():
            log.unlink()
    report = repair_l0(where)
    lost = report["lost_synced_batches"]
    assert lost >= 4
    with L0Store(report["repaired"], clock=VirtualClock()) as store:
        assert store.reserve_epoch() > 3  # never one the lost log handed out
