"""Where a session's turns and closed sessions live in L0.

Each turn's full record — thought, content, summary and everything the chain
knows about it — is an immutable L0 node at
``memory:session-<agent>/block-<n>``; each closed session is one at
``memory:session-<agent>/session-<k>``. ``<agent>`` is the agent id with
every character outside ``[A-Za-z0-9._~-]`` percent-encoded (so ``team/pa``
cannot collide with ``team``), ``n`` and ``k`` count from 1 per agent.

Why straight to L0 and not through coherence: these nodes are written once and
never change, so there is nothing to keep coherent; they are not lines (an
agent's ``write`` refuses the prefix, see ``Agent._check_iri``) and they are
not loaded into the L2 graph when a memory reopens (``MemorySystem``), so an
archived thought never shows up in a SPARQL answer. Writes are
compare-and-set against "absent" (``expect_version=0``): an archive can never
be overwritten, and numbering resumes after the highest block in L0 when an
agent's session actor starts again (a restart or a reopened memory).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any

from gliding_actors.errors import InvalidInput, show
from gliding_actors.l0 import L0Entry, L0Store

__all__ = [
    "ARCHIVE_GRAPH",
    "ARCHIVE_PREFIX",
    "JOURNAL_KEY",
    "SessionArchive",
    "block_iri",
    "is_archive_iri",
    "reload_turn",
    "searchable",
    "session_prefix",
]

#: Every L1 archive node's IRI starts with this.
ARCHIVE_PREFIX = "memory:session-"
#: The L0 named graph of archive nodes (an L0 index only; never an L2 graph).
ARCHIVE_GRAPH = "sessions"
_BLOCK = "/block-"
_SESSION = "/session-"


def session_prefix(agent: str) -> str:
    """``memory:session-<agent>``, the agent id percent-encoded."""
    return ARCHIVE_PREFIX + urllib.parse.quote(agent, safe="-._~")


def block_iri(agent: str, n: int) -> str:
    return f"{session_prefix(agent)}{_BLOCK}{n}"


def is_archive_iri(iri: object) -> bool:
    return isinstance(iri, str) and iri.startswith(ARCHIVE_PREFIX)


#: A block's record of what changed in its session before it (docs/L1.md, "Resuming a session"):
#: bookkeeping for a reopen, not what the turn says, so search does not index it.
JOURNAL_KEY = "journal"


def searchable(node: dict[str, Any]) -> dict[str, Any]:
    """An archived node as search should read it: without its journal."""
    return node if JOURNAL_KEY not in node else {k: v for k, v in node.items() if k != JOURNAL_KEY}


def _highest(store: L0Store, prefix: str) -> int:
    """The highest ``n`` of the nodes ``prefix<n>`` in L0 (0 when none)."""
    best = 0
    for iri in store.query_iris(prefix=prefix):
        tail = iri[len(prefix) :]
        if tail.isdigit() and tail.isascii():
            best = max(best, int(tail))
    return best


class SessionArchive:
    """One agent's archive in L0 (which orders concurrent writers itself: the store is their one owner)."""

    def __init__(self, store: L0Store, agent: str) -> None:
        self._store = store
        self.agent = agent
        self.prefix = session_prefix(agent)
        self._next_block = _highest(store, self.prefix + _BLOCK) + 1
        self._next_session = _highest(store, self.prefix + _SESSION) + 1

    @property
    def next_block(self) -> int:
        """The number the next turn's block will get."""
        return self._next_block

    def next_block_iri(self) -> str:
        return f"{self.prefix}{_BLOCK}{self._next_block}"

    def next_session_iri(self) -> str:
        return self.session_iri(self._next_session)

    def session_iri(self, k: int) -> str:
        """The IRI of this agent's ``k``-th session (the ``session`` its blocks name)."""
        return f"{self.prefix}{_SESSION}{k}"

    def open_blocks(self) -> list[dict[str, Any]]:
        """The blocks of the session still open (not yet closed into a session node), oldest first.

        Each block names the session it belongs to (the next session IRI when
        it was written), so they are the newest blocks naming the next session.
        Each is its node, with ``@id``.
        """
        wanted = self.next_session_iri()
        found: list[dict[str, Any]] = []
        for n in range(self._next_block - 1, 0, -1):
            iri = f"{self.prefix}{_BLOCK}{n}"
            entry = self._store.retrieve(iri, touch=False)
            if entry is None:
                continue  # a number a crash skipped
            if not isinstance(entry.content, dict) or entry.content.get("session") != wanted:
                break
            found.append({**entry.content, "@id": iri})
        found.reverse()
        return found

    def _write(self, iri: str, node: dict[str, Any], node_type: str) -> None:
        entry = L0Entry(iri, node, named_graph=ARCHIVE_GRAPH, jsonld_types=(node_type,))
        self._store.store(entry, merge=False, expect_version=0)

    def write_block(self, record: Mapping[str, Any]) -> str:
        """Archive one turn under the next block IRI; returns it. Raises having written nothing."""
        iri = self.next_block_iri()
        self._write(iri, {"@type": "SessionTurn", **record}, "SessionTurn")
        self._next_block += 1
        return iri

    def write_session(self, record: Mapping[str, Any]) -> str:
        """Archive a closed session's node; returns its IRI."""
        iri = self.next_session_iri()
        self._write(iri, {"@type": "Session", **record}, "Session")
        self._next_session += 1
        return iri


def reload_turn(store: L0Store, iri: str) -> dict[str, Any]:
    """The full archived node at ``iri`` (a turn or a closed session); InvalidInput if there is none.

    Reading L0 needs no lock and no actor: archive nodes never change.
    """
    if not is_archive_iri(iri):
        raise InvalidInput(f"{show(iri)} is not an L1 archive IRI (they start with {ARCHIVE_PREFIX})")
    entry = store.retrieve(iri, touch=False)
    if entry is None:
        raise InvalidInput(f"no archived turn or session at {iri}")
    node = dict(entry.content)
    node["@id"] = iri
    return node
