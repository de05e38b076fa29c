"""What L0 records of a line's coherence state when the line is written down (``L0Entry.mesi_state``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gliding_actors import MemorySystem


@pytest.mark.parametrize("runtime", ["sim", "threads"])
def test_l0_records_the_directorys_state_of_each_line_when_it_is_written_down(tmp_path: Path, runtime: str) -> None:
    with MemorySystem.open(tmp_path, runtime=runtime) as memory:
        pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
        pa.write("note:shared", {"text": "read by two"})
        da.read("note:shared")  # the owner's copy comes home; both now share it
        pa.write("note:owned", {"text": "kept by its writer"})
        pa.write("note:dropped", {"text": "evicted before the flush"})
        pa.evict("note:dropped")
        pa.write("note:urgent", {"text": "written through"}, tags=["user_intent"])
        memory.flush()
        recorded = {iri: memory.l0.retrieve(iri).mesi_state for iri in  # type: ignore[union-attr]
                    ("note:shared", "note:owned", "note:dropped", "note:urgent")}
        # A flush brings an owner's copy home and leaves it a sharer; an evicted line
        # is held by nobody; a write-through store is written while its writer owns it.
        assert recorded == {"note:shared": "S", "note:owned": "S", "note:dropped": "I", "note:urgent": "M"}


def test_the_recorded_state_is_the_last_known_one_across_a_reopen(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path, runtime="sim") as memory:
        memory.agent("pa", "PA").write("note:a", {"text": "v1"})
    with MemorySystem.open(tmp_path, runtime="sim") as memory:
        assert memory.l0.retrieve("note:a").mesi_state == "S"  # type: ignore[union-attr]  # as the close's flush left it
        memory.agent("da", "DA").write("note:a", {"text": "v2"}, tags=["user_intent"])
        assert memory.l0.retrieve("note:a").mesi_state == "M"  # type: ignore[union-attr]
