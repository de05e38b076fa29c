"""L0: the "disk" of the memory hierarchy.

Every JSON-LD node ever written, addressed by IRI, with tag / named-graph /
type / importance indexes, in LevelDB. Upper layers pull details from it by
IRI; it is never shown to an LLM directly. See ``docs/L0.md``.

:class:`L0Store` is the store and the one owner of its files: every writer
of the memory calls the same instance, which orders them itself, and readers
use it from any thread.
"""

from gliding_actors.l0._entry import MESI_STATES, L0Entry, importance_of, is_importance
from gliding_actors.l0._keys import FORMAT_VERSION, SHARDS_DIR, is_valid_iri, is_valid_label
from gliding_actors.l0._store import UNSET, L0Store

__all__ = [
    "FORMAT_VERSION",
    "MESI_STATES",
    "SHARDS_DIR",
    "UNSET",
    "L0Entry",
    "L0Store",
    "importance_of",
    "is_importance",
    "is_valid_iri",
    "is_valid_label",
]
