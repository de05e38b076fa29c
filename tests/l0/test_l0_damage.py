"""L0 never creates a new database over existing data, and a damaged one can be repaired on a copy.

LevelDB's ``create_if_missing`` makes a fresh, empty database when CURRENT is
missing, even in a directory full of tables, and its cleanup then deletes them
as obsolete: one lost file would silently become an empty memory. L0 writes a
marker when it creates a database and opens with ``create_if_missing`` only a
directory that holds no LevelDB files.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gliding_actors import MemorySystem, StorageError
from gliding_actors.cli import main
from gliding_actors.clock import VirtualClock
from gliding_actors.l0 import L0Store
from gliding_actors.l0._repair import MARKER, repair_l0


def _filled(path: Path, n: int = 200) -> None:
    with L0Store(path, clock=VirtualClock()) as store:
        for i in range(n):
            store.store_jsonld_node({"@id": f"note:{i}", "text": "x" * 200, "n": i}, tags=["t"], named_graph="shared")
        store.compact()  # into tables, not only the write-ahead log


def crash_image(store: L0Store, to: Path) -> None:
    """What a crash of ``store``'s process leaves on disk: its files as they are now, synced writes
    still in LevelDB's write-ahead log (a close would write them down as a table)."""
    shutil.copytree(store.path, to)


def _listing(path: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in sorted(path.iterdir())}


def test_a_missing_current_is_refused_and_every_table_stays(tmp_path: Path) -> None:
    where = tmp_path / "l0"
    _filled(where)
    assert (where / MARKER).exists()
    (where / "CURRENT").unlink()
    before = _listing(where)
    with pytest.raises(StorageError, match="CURRENT") as refused:
        L0Store(where, clock=VirtualClock())
    assert "gliding-actors repair" in str(refused.value) and str(where) in str(refused.value)
    assert _listing(where) == before  # nothing created, nothing deleted


def test_a_store_made_before_the_marker_opens_and_gets_one(tmp_path: Path) -> None:
    where = tmp_path / "l0"
    _filled(where, 5)
    (where / MARKER).unlink()
    with L0Store(where, clock=VirtualClock()) as store:
        assert store.retrieve("note:3") is not None
    assert (where / MARKER).exists()


def test_a_directory_with_tables_but_no_marker_or_current_is_refused(tmp_path: Path) -> None:
    where = tmp_path / "l0"
    _filled(where, 5)
    (where / MARKER).unlink()
    (where / "CURRENT").unlink()
    before = _listing(where)
    with pytest.raises(StorageError, match="CURRENT"):
        L0Store(where, clock=VirtualClock())
    assert _listing(where) == before


def test_repair_rebuilds_a_store_without_current_on_a_copy_and_reports_it(tmp_path: Path) -> None:
    where = tmp_path / "l0"
    _filled(where)
    (where / "CURRENT").unlink()
    before = _listing(where)
    report = repair_l0(where)
    assert _listing(where) == before  # the original is untouched without in_place
    repaired = Path(report["repaired"])
    assert repaired != where and report["nodes"] == 200 and report["dropped"] == [] and report["problems"] == []
    with L0Store(repaired, clock=VirtualClock()) as store:
        assert store.retrieve("note:7").content == {"@id": "note:7", "text": "x" * 200, "n": 7}
        assert len(store.query_by_tags(["t"])) == 200 and store.verify() == []


def test_repair_in_place_drops_a_record_that_does_not_decode_and_names_it(tmp_path: Path) -> None:
    where = tmp_path / "l0"
    _filled(where, 20)
    import plyvel

    db = plyvel.DB(str(where))
    db.put(b"n:note:5", b"\xc1 not msgpack")
    db.close()
    with L0Store(where, clock=VirtualClock()) as store:
        assert store.verify() != []
    report = repair_l0(where, in_place=True)
    assert report["repaired"] == str(where)
    assert report["nodes"] == 19 and report["dropped"] == ["n:note:5"] and report["problems"] == []
    with L0Store(where, clock=VirtualClock()) as store:
        assert store.retrieve("note:5") is None and store.verify() == []
        assert len(store.query_by_tags(["t"])) == 19


def test_the_repair_command_repairs_a_memorys_l0_and_says_what_it_did(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = tmp_path / "memory"
    with MemorySystem.open(where, runtime="sim") as memory:
        memory.agent("pa", "PA").write("plan:p", {"goal": "g"}, tags=["confirmed_fact"])
    (where / "l0" / "CURRENT").unlink()
    with pytest.raises(StorageError, match="repair"):
        MemorySystem.open(where, runtime="sim")
    assert main(["repair", str(where)]) == 0
    out = capsys.readouterr().out
    assert "1 node" in out and "--in-place" in out
    assert (where / "l0" / "CURRENT").exists() is False  # the original is untouched
    assert main(["repair", str(where), "--in-place"]) == 0
    with MemorySystem.open(where, runtime="sim") as memory:
        assert memory.agent("pa", "PA").read("plan:p")["value"] == {"goal": "g"}
    assert main(["repair", str(tmp_path / "nothing-here")]) == 2  # nothing to repair there
    assert not (tmp_path / "nothing-here").exists()


def test_a_damaged_table_is_a_storage_error_from_every_read_and_repair_recovers(tmp_path: Path) -> None:
    """A read meeting a damaged block raised plyvel's own CorruptionError; it is a StorageError naming
    the database and the repair command now."""
    where = tmp_path / "l0"
    _filled(where, 500)
    table = max((p for p in where.iterdir() if p.suffix == ".ldb"), key=lambda p: p.stat().st_size)
    data = bytearray(table.read_bytes())
    for offset in range(1000, 1100):
        data[offset] ^= 0xFF
    table.write_bytes(bytes(data))
    with L0Store(where, clock=VirtualClock()) as store:
        for read in (
            lambda: [store.retrieve(f"note:{i}") for i in range(500)],
            lambda: store.query_by_tags(["t"]),
            store.query,
            store.verify,
        ):
            with pytest.raises(StorageError, match="gliding-actors repair"):
                read()
    report = repair_l0(where)
    assert report["problems"] == [] and report["nodes"] + len(report["dropped"]) <= 500
    with L0Store(report["repaired"], clock=VirtualClock()) as store:
        assert store.verify() == [] and len(store.query()) == report["nodes"]


def test_a_lost_write_ahead_log_is_reported_not_opened_as_a_smaller_database(tmp_path: Path) -> None:
    """Synced writes that LevelDB holds only in its write-ahead log vanished with the log, and the
    database opened without them, silently. The count of acknowledged synced batches, fsync'd beside
    the database, now tells: opening is refused, and repair says how many batches are missing."""
    _filled(tmp_path / "l0", 10)  # compacted into a table
    where = tmp_path / "crashed"
    with L0Store(tmp_path / "l0", clock=VirtualClock()) as store:
        for i in range(10, 15):
            store.store_jsonld_node({"@id": f"note:{i}", "n": i}, sync=True)  # acknowledged, in the log only
        crash_image(store, where)  # a close writes the log down as a table: the crash does not
    for log in where.glob("*.log"):
        if log.name[0].isdigit():
            log.unlink()
    tables = {name: size for name, size in _listing(where).items() if name.endswith(".ldb")}
    with pytest.raises(StorageError, match="lost acknowledged writes"):
        L0Store(where, clock=VirtualClock())
    # LevelDB's own open already wrote a new manifest and log; every table is still there
    assert {name: size for name, size in _listing(where).items() if name.endswith(".ldb")} == tables
    report = repair_l0(where)
    # the five stores
    assert report["nodes"] == 10 and report["lost_synced_batches"] == 5 and report["problems"] == []
    with L0Store(report["repaired"], clock=VirtualClock()) as store:
        assert store.retrieve("note:9") is not None and store.retrieve("note:12") is None


def test_a_store_that_crashed_mid_batch_opens(tmp_path: Path) -> None:
    """The side count is written after the batch it counts: a crash between the two leaves it behind
    the database, which is fine (nothing acknowledged was lost); the next open catches it up."""
    from gliding_actors.l0._base import HIGH_WATER, write_high_water

    where = tmp_path / "l0"
    with L0Store(where, clock=VirtualClock()) as store:
        for i in range(3):
            store.store_jsonld_node({"@id": f"note:{i}", "n": i}, sync=True)
    write_high_water(str(where), 1)  # as if the process died before recording the later batches
    with L0Store(where, clock=VirtualClock()) as store:
        assert store.retrieve("note:2") is not None
    import msgpack
    import plyvel

    db = plyvel.DB(str(where))
    held = msgpack.unpackb(db.get(b"\x00meta:high-water"))
    db.close()
    assert int((where / HIGH_WATER).read_text()) == held > 3
