"""Which layout a memory's L0 was made with (one LevelDB, or one per directory shard), kept and checked.

A line's shard is a hash of its IRI over the shard count, so a memory is only
ever reopened in the layout it was created with; the façade checks before it
opens any store and records the layout of a new sharded one.
"""

from __future__ import annotations

import json
from pathlib import Path

from gliding_actors.config import Config
from gliding_actors.errors import InvalidInput, StorageError
from gliding_actors.l0 import SHARDS_DIR, L0Store
from gliding_actors.l1 import is_archive_iri

__all__ = ["check_l0_layout", "record_l0_layout"]

#: where a sharded L0 records how many shards it was made with
_LAYOUT = "LAYOUT.json"


def _recorded_shards(path: Path) -> int | None:
    """The shard count a sharded L0 at ``path`` was created with; None for one L0 (or a new memory)."""
    layout = path / SHARDS_DIR / _LAYOUT
    if not layout.exists():
        return None
    try:
        return int(json.loads(layout.read_text())["shards"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StorageError(f"cannot read the L0 layout {layout}: {exc}") from exc


def check_l0_layout(path: Path, config: Config) -> int | None:
    """Refuse to open a sharded L0 in another layout than it was created with; the recorded shard count.

    A line's shard is a hash of its IRI over the shard count, so a sharded L0
    reopened with another count, or as one L0, would not find its lines.
    Checked before any store is opened: a refusal changes nothing.
    """
    recorded = _recorded_shards(path)
    if recorded is None:
        return None
    if not config.l0.sharded:
        raise InvalidInput(
            f"{path} keeps its lines in a sharded L0 ({recorded} shards): open it with "
            f"l0.sharded true and coherence.directory_shards {recorded}"
        )
    if recorded != config.coherence.directory_shards:
        raise InvalidInput(
            f"{path} keeps its lines in {recorded} L0 shards, not {config.coherence.directory_shards}: open it "
            f"with coherence.directory_shards {recorded} (a line's shard is a hash of its IRI)"
        )
    return recorded


def record_l0_layout(path: Path, config: Config, l0: L0Store, recorded: int | None) -> None:
    """A new sharded L0 records its shard count; one L0 that holds lines is not opened sharded."""
    if not config.l0.sharded or recorded is not None:
        return
    if any(not is_archive_iri(iri) for iri in l0.query_iris()):
        raise InvalidInput(f"{path} keeps its lines in one L0: open it with l0.sharded false")
    layout = path / SHARDS_DIR / _LAYOUT
    layout.parent.mkdir(parents=True, exist_ok=True)
    layout.write_text(json.dumps({"shards": config.coherence.directory_shards}) + "\n")
